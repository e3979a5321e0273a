package dev.baton;

import baton.v1.BatonOuterClass.AcquireResponse;
import baton.v1.BatonOuterClass.ChannelRequest;
import baton.v1.BatonOuterClass.Grant;
import baton.v1.BatonOuterClass.ReleaseRequest;
import baton.v1.BatonOuterClass.RequestHeader;
import baton.v1.BatonOuterClass.SessionRequest;
import baton.v1.BatonOuterClass.SessionResponse;
import baton.v1.BatonOuterClass.SessionsRequest;
import baton.v1.BatonOuterClass.WaitEnded;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * Requests is a session's request plumbing (docs/PROTOCOL.md, sections 4
 * and 7): the sequence numbers of its mutating requests, which a request
 * keeps for every send, the stream ids that match an answer to its send,
 * and the lowest number without a final answer (min_unacked_seq), below
 * which the member may forget its answers; the pushes that are a queued
 * acquire's final answer; and the release of what an acquire its caller
 * abandoned was granted. Guarded by the session's lock.
 */
final class Requests {
    // Sends again, after a backoff, a request the member answered OVERLOADED or OUTCOME_UNKNOWN.
    private static final ScheduledExecutorService RETRIES = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "baton-retries");
        t.setDaemon(true);
        return t;
    });

    private Framing stream; // the session's stream; null while it reconnects
    private long sessionId;
    private long lastSeq;
    private long lastId;
    private final Map<Long, Call> byId = new HashMap<>(); // sent on the current stream, unanswered
    private final TreeMap<Long, Call> bySeq = new TreeMap<>(); // mutating, without a final answer

    /** newCall makes a call of req; a mutating one gets the next sequence number. */
    Call newCall(SessionRequest req, boolean mutating, boolean keepAlive) {
        Call c = new Call(req, mutating ? ++lastSeq : 0, keepAlive);
        if (c.seq != 0) {
            bySeq.put(c.seq, c);
        }
        return c;
    }

    /** attach makes s (null: none, reconnecting) the stream requests go on, for session id. */
    void attach(Framing s, long id) {
        stream = s;
        sessionId = id;
        byId.clear(); // the answers to sends on another stream cannot come
    }

    /** start makes a call of req, lets setup fill in what its answer needs, and sends it. */
    Call start(SessionRequest req, boolean mutating, Consumer<Call> setup) {
        Call c = newCall(req, mutating, false);
        if (setup != null) {
            setup.accept(c);
        }
        send(c);
        return c;
    }

    /** nextId is a stream id no send of this session used. */
    long nextId() {
        return ++lastId;
    }

    /**
     * send writes c on the stream with a new stream id and, when mutating, its
     * sequence number and min_unacked_seq. Nothing is sent once c is
     * answered, or while there is no stream (the reconnect sends it).
     */
    void send(Call c) {
        if (stream == null || c.isFinal) {
            return;
        }
        c.id = ++lastId;
        byId.put(c.id, c);
        SessionRequest.Builder r = c.request.toBuilder().setId(c.id);
        if (c.seq != 0) {
            RequestHeader h = RequestHeader.newBuilder().setSessionId(sessionId).setSeq(c.seq)
                    .setMinUnackedSeq(bySeq.isEmpty() ? lastSeq + 1 : bySeq.firstKey()).build();
            switch (r.getKindCase()) {
                case ACQUIRE -> r.getAcquireBuilder().setHeader(h);
                case RELEASE -> r.getReleaseBuilder().setHeader(h);
                case CANCEL -> r.getCancelBuilder().setHeader(h);
                case CLOSE -> r.getCloseBuilder().setSessionId(sessionId).setSeq(c.seq);
                default -> throw new IllegalStateException("a mutating request of kind " + r.getKindCase());
            }
        }
        stream.send(SessionsRequest.newBuilder()
                .addRequests(ChannelRequest.newBuilder().setChannel(Session.CHANNEL).setRequest(r)).build());
    }

    /** answered is the call whose send had stream id id, now answered; null when none. */
    Call answered(long id) {
        return byId.remove(id);
    }

    /** bySeq is the mutating call of seq without a final answer; null when none. */
    Call bySeq(long seq) {
        return bySeq.get(seq);
    }

    /** finish gives c its final answer; an abandoned acquire's grant is released. */
    void finish(Call c, SessionResponse resp, BatonException err) {
        if (!c.finish(resp, err)) {
            return;
        }
        if (c.seq != 0 && bySeq.get(c.seq) == c) {
            bySeq.remove(c.seq);
        }
        if (c.abandoned) {
            cleanup(c);
        }
    }

    /** cleanup releases what an abandoned acquire was granted. */
    void cleanup(Call c) {
        if (c.error != null || c.response == null || !c.response.hasAcquire()) {
            return;
        }
        AcquireResponse a = c.response.getAcquire();
        if (a.getAcquired() && c.cleanup == null) {
            c.cleanup = start(release(c.name, c.ownerKey, a.getToken()), true, null);
        }
    }

    /** granted: the member pushed the grant of a queued acquire, its final answer. */
    void granted(Grant g) {
        Call c = bySeq.get(g.getSeq());
        if (c != null) {
            finish(c, SessionResponse.newBuilder().setAcquire(AcquireResponse.newBuilder().setName(g.getName())
                    .setAcquired(true).setToken(g.getToken()).setCount(1).setSeq(g.getSeq())).build(), null);
        }
    }

    /**
     * waitEnded: the member pushed the end of a queued acquire's wait (timed
     * out, cancelled, session gone, or left deadlocked by a grant or a
     * cancel: a DeadlockException with the push's cycle).
     */
    void waitEnded(WaitEnded w) {
        Call c = bySeq.get(w.getSeq());
        if (c != null && c.waits) {
            String reason = Wire.reasonName(w.getReason());
            String why = w.getDeadlockCycleCount() > 0 ? DeadlockException.describe(w.getDeadlockCycleList()) : reason;
            finish(c, null, Wire.error(9, reason, "wait for lock " + w.getName() + " ended: " + why, "",
                    w.getDeadlockCycleList()));
        }
    }

    /** resendLater sends c again, with its sequence number, after a backoff, unless the session ended (live). */
    void resendLater(Call c, Object mu, BooleanSupplier live) {
        Duration d = Transport.pause(c.retries++);
        RETRIES.schedule(() -> {
            synchronized (mu) {
                if (live.getAsBoolean()) {
                    send(c);
                }
            }
        }, d.toNanos(), TimeUnit.NANOSECONDS);
    }

    /** release is the request that gives back one entry of the hold (name, ownerKey, token). */
    static SessionRequest release(String name, String ownerKey, long token) {
        return SessionRequest.newBuilder()
                .setRelease(ReleaseRequest.newBuilder().setName(name).setOwnerKey(ownerKey).setToken(token)).build();
    }

    /** unanswered is every mutating call without a final answer, in sequence order. */
    List<Call> unanswered() {
        return new ArrayList<>(bySeq.values());
    }

    /** failAll ends every call with cause: the session ended. */
    void failAll(BatonException cause) {
        for (Call c : bySeq.values()) {
            c.finish(null, cause);
        }
        for (Call c : byId.values()) {
            c.finish(null, cause);
        }
        bySeq.clear();
        byId.clear();
    }
}
