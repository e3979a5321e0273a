package dev.baton;

import baton.v1.BatonOuterClass.AcquireRequest;
import baton.v1.BatonOuterClass.AcquireResponse;
import baton.v1.BatonOuterClass.CancelRequest;
import baton.v1.BatonOuterClass.CloseSessionRequest;
import baton.v1.BatonOuterClass.KeepAliveRequest;
import baton.v1.BatonOuterClass.OpenSessionRequest;
import baton.v1.BatonOuterClass.OpenSessionResponse;
import baton.v1.BatonOuterClass.SessionRequest;
import baton.v1.BatonOuterClass.SessionResponse;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Base64;
import java.util.function.Consumer;

/**
 * Session is a client session: the liveness every hold and wait of it rides
 * on. It keeps one Sessions stream to the leader in Baton's own framing
 * (docs/PROTOCOL.md), which carries its keepalives, its requests and what
 * the leader pushes: a queued acquire's grant ends the waiting lock() at
 * once, a hold an operator ended (HoldLost) loses its Lease at once, a
 * revoke's request to let go reaches its Lease at once, the session's loss
 * ends it. Its deadline thread sends a keepalive every TTL/3
 * and ends every {@link Lease} at the session's conservative deadline when
 * no keepalive was answered in time (see {@link #safetyMargin}). Every
 * mutating request carries a sequence number it keeps for every send: when
 * the stream breaks, the session follows the leader, resumes, reconciles
 * its Leases with the holds the member lists, and sends every unanswered
 * request again with its number, so each takes effect exactly once. A
 * Session is safe for concurrent use; close it (try-with-resources) to
 * release everything it holds at once.
 *
 * <p>A lock can be lost at any time: a partition, a pause or an operator's
 * blacklist ends the session. Work under a lock should stop when its
 * Lease's {@link Lease#onLost onLost} callback runs, and write through
 * fencing tokens ({@link Fencing}).
 */
public final class Session implements AutoCloseable {
    /** The TTLs a member accepts. */
    public static final Duration MIN_TTL = Duration.ofSeconds(1);
    public static final Duration MAX_TTL = Duration.ofMinutes(10);

    /** The fraction of the TTL the client allows for a difference in clock rate with the leader. */
    public static final double CLOCK_RATE_ALLOWANCE = 0.01;
    /** The least clock margin, whatever the TTL. */
    public static final Duration MIN_CLOCK_MARGIN = Duration.ofMillis(50);
    /** The time the client may take to notice its deadline passed (scheduling, a GC pause). */
    public static final Duration SCHEDULING_ALLOWANCE = Duration.ofMillis(50);

    /** State is the session's state as the client sees it. */
    public enum State {
        /** The conservative deadline lies ahead: every Lease is valid. */
        HEALTHY,
        /**
         * The deadline passed with no keepalive answered: every Lease was lost
         * then. An answer in time makes the session healthy again; Leases lost
         * stay lost.
         */
        JEOPARDY,
        /** The server ended the session, or nothing answered for a TTL past the deadline. */
        EXPIRED,
        /** {@link Session#close} ended it. */
        CLOSED
    }

    /** The stream's one channel: each session has a connection of its own. */
    static final long CHANNEL = 1;
    /**
     * How long a lock() that gave up (interrupted, or past its timeout) waits
     * for its wait to leave the server's queue, and for a grant that won the
     * race to be released; the session goes on trying after that.
     */
    static final Duration CLEANUP_TIMEOUT = Duration.ofSeconds(5);
    /**
     * How long past its timeout a lock(timeout) waits for the member's
     * WAIT_TIMED_OUT before giving up on its own: the answer may be delayed
     * by a reconnect, and the member's answer is the one that says whether
     * the wait ended unserved.
     */
    static final Duration TIMEOUT_SLACK = Duration.ofSeconds(5);
    private static final SecureRandom RANDOM = new SecureRandom();
    private final BatonClient client;
    private final Transport transport;
    private final String secret; // proves the stream acts for this session; never printed
    private final Duration ttl;
    private final String owner;
    private final long marginNanos;
    private final Connector connector;
    private volatile long id; // written once, before the threads start
    private Thread streamThread;
    private Thread deadlineThread;
    volatile boolean keepAlivesPaused; // tests of the deadline stop the keepalives

    private final Object mu = new Object();
    // The client's conservative deadline, a System.nanoTime reading: every
    // Lease is valid until then. Written under mu.
    private volatile long deadline;
    // Guarded by mu:
    private State state = State.HEALTHY;
    private BatonException endCause; // why the session ended
    private Framing stream; // the stream to the leader; null while reconnecting
    private final Requests requests = new Requests();
    private Call closing;
    private final LeaseTable leases = new LeaseTable();

    private Session(BatonClient client, Duration ttl, String owner) {
        this.client = client;
        this.transport = client.transport();
        byte[] b = new byte[32];
        RANDOM.nextBytes(b);
        this.secret = Base64.getUrlEncoder().withoutPadding().encodeToString(b);
        this.ttl = ttl;
        this.owner = owner;
        this.marginNanos = safetyMargin(ttl).toNanos();
        this.connector = new Connector(this, transport, ttl);
    }

    /**
     * The margin the client subtracts from a session of the given TTL:
     * max(1% of TTL, 50 ms) + 50 ms, as the Go client does. A session stays
     * valid, in the client's eyes, until sendTime + TTL - margin, where
     * sendTime is when the client sent the newest keepalive that was
     * answered (read before the request is written). The server counts its
     * own deadline from when that keepalive arrived, so the client's
     * deadline passes first by the network delay plus the margin.
     */
    public static Duration safetyMargin(Duration ttl) {
        long clock = Math.max((long) (ttl.toNanos() * CLOCK_RATE_ALLOWANCE), MIN_CLOCK_MARGIN.toNanos());
        return Duration.ofNanos(clock + SCHEDULING_ALLOWANCE.toNanos());
    }

    /** open opens a session on the leader (BatonClient.newSession). */
    static Session open(BatonClient client, Duration ttl, String owner) throws InterruptedException {
        if (ttl.compareTo(MIN_TTL) < 0 || ttl.compareTo(MAX_TTL) > 0) {
            throw new InvalidArgumentException(3, "INVALID_ARGUMENT",
                    "session TTL " + ttl + " is outside " + MIN_TTL + ".." + MAX_TTL, null);
        }
        Session s = new Session(client, ttl, owner);
        // The nonce and the secret, both ours, make the open exactly-once
        // across attempts: a retry after a lost answer is answered with the
        // session the first attempt opened.
        SessionRequest req = SessionRequest.newBuilder().setId(1).setOpen(OpenSessionRequest.newBuilder()
                .setTtl(Wire.proto(ttl)).setOwner(owner).setNonce(RANDOM.nextLong() | 1).setSecret(s.secret)).build();
        // The deadline counts from before the first attempt: the answer may
        // be a retry's, naming a session whose TTL began when an earlier
        // attempt applied.
        long sent = System.nanoTime();
        Connector.Attached a = s.connector.connect(req, true);
        synchronized (s.mu) {
            s.id = a.open().getSessionId();
            s.requests.nextId(); // the open's
            s.attachLocked(a.stream());
            s.deadline = sent - 1;
            s.extendLocked(sent, a.open());
        }
        s.streamThread = daemon(() -> s.streamLoop(a.stream()), "baton-stream-" + Long.toUnsignedString(s.id));
        s.deadlineThread = daemon(s::deadlineLoop, "baton-deadline-" + Long.toUnsignedString(s.id));
        return s;
    }

    private static Thread daemon(Runnable r, String name) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    /** The session's id: unique forever in its cluster, and public. */
    public long id() {
        return id;
    }

    /** The session's TTL. */
    public Duration ttl() {
        return ttl;
    }

    /** The session's owner label, shown to operators beside its holds. */
    public String owner() {
        return owner;
    }

    /** The session's state now. */
    public State state() {
        synchronized (mu) {
            return state;
        }
    }

    /** Why the session ended, or null while it lives. */
    public BatonException endCause() {
        synchronized (mu) {
            return endCause;
        }
    }

    /** The time left until the client's conservative deadline; zero once it passed. */
    public Duration remaining() {
        return Duration.ofNanos(Math.max(0, deadline - System.nanoTime()));
    }

    /** mutex is a handle on the lock name, one holder at a time. Nothing is sent until it is locked. */
    public Mutex mutex(String name) {
        return new Mutex(this, name, "", false, 1);
    }

    /**
     * semaphore is a handle on the lock name as a semaphore of permits
     * holders, each holding one permit with its own token. Every user of the
     * name must state the same permits while anyone holds or waits for it.
     */
    public Semaphore semaphore(String name, int permits) {
        return new Semaphore(new Mutex(this, name, "", true, permits));
    }

    /** readWriteLock is a handle on name as a read/write lock of ReadWriteLock.DEFAULT_MAX_READERS readers. */
    public ReadWriteLock readWriteLock(String name) {
        return readWriteLock(name, ReadWriteLock.DEFAULT_MAX_READERS);
    }

    /**
     * readWriteLock is a handle on name as a read/write lock that admits
     * many readers at once (up to maxReaders, which every user of the name
     * must state alike) or one writer.
     */
    public ReadWriteLock readWriteLock(String name, int maxReaders) {
        return new ReadWriteLock(this, name, maxReaders);
    }

    /**
     * close ends the session on the server, which releases its holds and
     * drops its waits at once, and stops its threads. Every Lease is lost
     * (its onLost callbacks run). Closing an ended session does nothing. If
     * no member answers within the client's request timeout, the threads stop
     * anyway and the server ends the session after its TTL.
     */
    @Override
    public void close() {
        Call c;
        synchronized (mu) {
            if (endCause != null) {
                return;
            }
            if (closing == null) {
                closing = startLocked(SessionRequest.newBuilder().setClose(CloseSessionRequest.getDefaultInstance())
                        .build(), true, null);
            }
            c = closing;
        }
        try {
            c.await(client.requestTimeout().toNanos());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            end(new SessionLostException(0, "", "session " + Long.toUnsignedString(id) + " closed", null),
                    State.CLOSED);
            client.forget(this);
            join(streamThread);
            join(deadlineThread);
        }
    }

    private static void join(Thread t) {
        if (t == null || t == Thread.currentThread()) {
            return;
        }
        try {
            t.join(Duration.ofSeconds(5).toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The session's id, owner and TTL; never its secret. */
    @Override
    public String toString() {
        return "Session{id=" + Long.toUnsignedString(id) + ", owner=" + owner + ", ttl=" + ttl + "}";
    }

    // ---- locks ----

    /**
     * acquire sends the acquire a of m and waits for its final answer: at
     * once for a try or a free lock, else the grant or the end of the wait,
     * which the member pushes. timeout (null: none) bounds the wait; past it
     * and TIMEOUT_SLACK with no answer, or interrupted, the acquire is
     * abandoned: its wait is cancelled on the server and a grant that won the
     * race is released.
     */
    Lease acquire(Mutex m, AcquireRequest a, Duration timeout) throws InterruptedException {
        Call c;
        synchronized (mu) {
            c = startLocked(SessionRequest.newBuilder().setAcquire(a).build(), true, call -> {
                call.waits = a.getWait();
                call.name = a.getName();
                call.ownerKey = a.getOwnerKey();
            });
        }
        boolean answered;
        try {
            answered = c.await(timeout == null ? -1 : timeout.plus(TIMEOUT_SLACK).toNanos());
        } catch (InterruptedException e) {
            abandon(c);
            throw e;
        }
        if (!answered) {
            abandon(c);
            throw new WaitTimeoutException(4, "", "no answer to the acquire of " + a.getName() + " within "
                    + timeout.plus(TIMEOUT_SLACK), null);
        }
        if (c.error != null) {
            throw c.error;
        }
        AcquireResponse r = c.response.getAcquire();
        if (!r.getAcquired()) {
            throw new LockBusyException(a.getName(), r.hasHolder() ? Wire.holder(r.getHolder()) : null);
        }
        return register(m, r.getToken());
    }

    /**
     * register makes a Lease of a granted hold. A grant that comes in
     * jeopardy waits until the session is healthy again, or ends.
     */
    private Lease register(Mutex m, long token) throws InterruptedException {
        Lease l = new Lease(this, m.name(), m.ownerKey(), token);
        LeaseNotices n;
        synchronized (mu) {
            while (state == State.JEOPARDY) {
                mu.wait();
            }
            if (endCause != null) {
                throw endCause;
            }
            n = leases.add(l);
        }
        n.tell();
        return l;
    }

    /**
     * release gives back one entry of the hold (name, ownerKey, token), sent
     * until the member answers or the session ends: Lease.release.
     */
    void release(String name, String ownerKey, long token) throws InterruptedException {
        Call c;
        synchronized (mu) {
            if (endCause != null) {
                return;
            }
            c = startLocked(Requests.release(name, ownerKey, token), true, null);
        }
        c.await(-1);
        if (c.error != null && !(c.error instanceof SessionLostException)) {
            throw c.error;
        }
    }

    /** forget drops a released Lease from the ones the session's end and the member's messages end. */
    void forget(Lease l) {
        synchronized (mu) {
            leases.remove(l);
        }
    }

    /**
     * abandon gives up on an acquire whose caller stopped waiting: a queued
     * wait is cancelled on the server, a grant (now, or one that won the race
     * with the cancel) released. It waits up to CLEANUP_TIMEOUT for that, with
     * the caller's interrupt put aside and restored.
     */
    private void abandon(Call c) {
        boolean interrupted = Thread.interrupted();
        try {
            synchronized (mu) {
                c.abandoned = true;
                if (c.isFinal && endCause == null) {
                    requests.cleanup(c);
                } else if (c.waits && endCause == null) {
                    startLocked(SessionRequest.newBuilder().setCancel(CancelRequest.newBuilder().setName(c.name)
                            .setAcquireSeq(c.seq)).build(), true, null);
                }
            }
            if (c.await(CLEANUP_TIMEOUT.toNanos())) {
                Call rel;
                synchronized (mu) {
                    rel = c.cleanup;
                }
                if (rel != null) {
                    rel.await(CLEANUP_TIMEOUT.toNanos());
                }
            }
        } catch (InterruptedException e) {
            interrupted = true;
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    // ---- requests ----

    /** startLocked makes a request of the session (mutating: with the next sequence number) and sends it. */
    private Call startLocked(SessionRequest req, boolean mutating, Consumer<Call> setup) {
        if (endCause != null) {
            throw endCause;
        }
        return requests.start(req, mutating, setup);
    }

    /** attachLocked makes f (null: none, reconnecting) the session's stream. */
    private void attachLocked(Framing f) {
        stream = f;
        requests.attach(f, id);
    }

    /** deadlineAhead reports whether the conservative deadline lies ahead. */
    boolean deadlineAhead() {
        return System.nanoTime() - deadline < 0;
    }

    long deadlineNanos() {
        return deadline;
    }

    boolean ended() {
        synchronized (mu) {
            return endCause != null;
        }
    }

    /** The session's secret, which the open and resume show; never printed. */
    String secret() {
        return secret;
    }

    // ---- the stream ----

    /**
     * handle takes one answer of the stream: a push, matched to its acquire
     * by sequence number or to the Leases by hold, or an answer, matched by
     * stream id. A mutating request the member did not apply (UNAVAILABLE,
     * OVERLOADED) is sent again with its sequence number.
     */
    private LeaseNotices handleLocked(Framing from, SessionResponse resp) {
        if (stream != from || endCause != null) {
            return new LeaseNotices();
        }
        switch (resp.getKindCase()) {
            case GRANT -> {
                requests.granted(resp.getGrant());
                return new LeaseNotices();
            }
            case WAIT_ENDED -> {
                requests.waitEnded(resp.getWaitEnded());
                return new LeaseNotices();
            }
            case SESSION_LOST -> {
                return lostLocked(Wire.error(resp.getSessionLost()));
            }
            case HOLD_LOST, HOLDS, REVOKE_REQUESTED -> {
                return leases.push(resp);
            }
            default -> {
                // an answer
            }
        }
        Call c = requests.answered(resp.getId());
        if (c == null) {
            return new LeaseNotices();
        }
        BatonException err = resp.hasError() ? Wire.error(resp.getError()) : null;
        if (c.keepAlive) {
            return keepAliveAnsweredLocked(c, resp, err);
        }
        if (err != null) {
            if (c.seq != 0 && retryable(err)) {
                if (err instanceof UnavailableException u && "NOT_LEADER".equals(u.reason())) {
                    transport.follow(from.addr(), u.leaderAddr());
                    from.close(); // the reconnect sends c again, on the leader
                } else {
                    requests.resendLater(c, mu, () -> endCause == null);
                }
                return new LeaseNotices();
            }
            if (sessionGone(err)) {
                return lostLocked(err);
            }
            requests.finish(c, resp, err);
            return new LeaseNotices();
        }
        if (c.waits && resp.hasAcquire() && resp.getAcquire().getQueued()) {
            return new LeaseNotices(); // the grant, or the end of the wait, is its answer
        }
        requests.finish(c, resp, null);
        return new LeaseNotices();
    }

    /** retryable: not applied, or not known to be; send again with the same sequence number. */
    static boolean retryable(BatonException e) {
        return e.code() == 14 || "OVERLOADED".equals(e.reason());
    }

    /** sessionGone: the member no longer has the session, or refuses it for good. */
    private static boolean sessionGone(BatonException e) {
        return switch (e.reason()) {
            case "SESSION_NOT_FOUND", "SESSION_EXPIRED", "BLACKLISTED" -> true;
            default -> false;
        };
    }

    /**
     * streamLoop is the session's stream thread: it reads the stream, and
     * when it breaks resumes on the leader, until the session ends. Resumes
     * back off while streams keep breaking (a member that ends each at once
     * must not cost a core).
     */
    private void streamLoop(Framing s) {
        int breaks = 0;
        while (s != null) {
            long attached = System.nanoTime();
            read(s);
            s.close();
            synchronized (mu) {
                if (stream == s) {
                    attachLocked(null);
                }
                if (endCause != null || (closing != null && closing.isFinal)) {
                    return;
                }
            }
            if (System.nanoTime() - attached >= Transport.MAX_BACKOFF.toNanos()) {
                breaks = 0;
            }
            if (sleepUnlessEnded(Transport.pause(breaks))) {
                return;
            }
            breaks++;
            s = reconnect();
        }
    }

    /** read hands the stream's answers to handleLocked until the stream or the session's channel ends. */
    private void read(Framing s) {
        while (true) {
            baton.v1.BatonOuterClass.SessionsResponse msg;
            try {
                msg = s.receive();
            } catch (Framing.Ended e) {
                return;
            }
            for (var cr : msg.getResponsesList()) {
                if (take(s, cr)) {
                    return;
                }
            }
        }
    }

    /** take handles one message of the stream s for the session's channel; true when it ended the channel. */
    private boolean take(Framing s, baton.v1.BatonOuterClass.ChannelResponse cr) {
        if (cr.getChannel() != CHANNEL) {
            return false;
        }
        LeaseNotices n = new LeaseNotices();
        synchronized (mu) {
            if (cr.hasResponse()) {
                n.add(handleLocked(s, cr.getResponse()));
            }
            if (cr.hasEnd()) {
                BatonException err = cr.getEnd().hasError() ? Wire.error(cr.getEnd().getError()) : null;
                if (err != null && sessionGone(err) && stream == s) {
                    n.add(lostLocked(err));
                }
            }
        }
        n.tell();
        return cr.hasEnd();
    }

    /** sleepUnlessEnded waits d, or until the session ends; true when it ended. */
    boolean sleepUnlessEnded(Duration d) {
        long until = System.nanoTime() + d.toNanos();
        synchronized (mu) {
            try {
                for (long left; endCause == null && (left = until - System.nanoTime()) > 0;) {
                    waitNanos(left);
                }
            } catch (InterruptedException e) {
                return true;
            }
            return endCause != null;
        }
    }

    /**
     * reconnect attaches a new stream on the leader with a resume, then sends
     * every mutating request without a final answer again, in sequence
     * order, each with its number. Null when the session ended.
     */
    private Framing reconnect() {
        SessionRequest resume;
        synchronized (mu) {
            resume = SessionRequest.newBuilder().setId(requests.nextId()).setResume(
                    baton.v1.BatonOuterClass.ResumeSession.newBuilder().setSessionId(id).setSecret(secret)).build();
            leases.resumed();
        }
        Connector.Attached a;
        try {
            a = connector.connect(resume, false);
        } catch (BatonException e) {
            LeaseNotices lost;
            synchronized (mu) {
                lost = endCause == null ? lostLocked(e) : new LeaseNotices();
            }
            lost.tell();
            return null;
        }
        synchronized (mu) {
            if (endCause != null) {
                a.stream().close();
                return null;
            }
            attachLocked(a.stream());
            // A resume is a keepalive: the member extended the session from
            // when it received it.
            extendLocked(a.sent(), a.open());
            for (Call c : requests.unanswered()) {
                requests.send(c);
            }
        }
        for (var cr : a.rest()) {
            if (take(a.stream(), cr)) {
                a.stream().close();
                break;
            }
        }
        return a.stream();
    }

    // ---- keepalives and the deadline ----

    /**
     * extendLocked moves the deadline after a keepalive, resume or open sent
     * at sent (a nanoTime reading taken before the request was queued) was
     * answered: to sent + the granted TTL (the session's when unset) -
     * margin. The time of the answer plays no part. An answer in time after a
     * jeopardy makes the session healthy again.
     */
    private void extendLocked(long sent, OpenSessionResponse open) {
        extendLocked(sent, open.hasTtl() ? Wire.duration(open.getTtl()) : null);
    }

    private void extendLocked(long sent, Duration granted) {
        if (granted == null || granted.isZero() || granted.isNegative()) {
            granted = ttl;
        }
        long nd = sent + granted.toNanos() - marginNanos;
        if (nd - deadline > 0) {
            deadline = nd;
        }
        if (state == State.JEOPARDY && System.nanoTime() - nd < 0) {
            state = State.HEALTHY;
        }
        mu.notifyAll();
    }

    /** sendKeepAliveLocked queues a keepalive on the current stream, noting when; while reconnecting the resume is one. */
    private void sendKeepAliveLocked() {
        if (keepAlivesPaused || stream == null || endCause != null) {
            return;
        }
        Call c = requests.newCall(SessionRequest.newBuilder()
                .setKeepAlive(KeepAliveRequest.newBuilder().setSessionId(id)).build(), false, true);
        c.sent = System.nanoTime();
        requests.send(c);
    }

    /** keepAliveAnsweredLocked: the deadline moves, or the session follows the leader, or it is lost. */
    private LeaseNotices keepAliveAnsweredLocked(Call c, SessionResponse resp, BatonException err) {
        if (err == null) {
            var ka = resp.getKeepAlive();
            extendLocked(c.sent, ka.hasTtl() ? Wire.duration(ka.getTtl()) : null);
            return new LeaseNotices();
        }
        if (err instanceof UnavailableException u && "NOT_LEADER".equals(err.reason())) {
            transport.follow(stream.addr(), u.leaderAddr());
            stream.close();
        } else if (sessionGone(err)) {
            return lostLocked(err);
        }
        // Anything else (OVERLOADED) changes nothing: the next keepalive tries again.
        return new LeaseNotices();
    }

    /**
     * deadlineLoop is the session's deadline thread: a keepalive every TTL/3,
     * and where the client decides its Leases are lost. Once the deadline
     * passed with no keepalive answered, every Lease is lost and the session
     * is in jeopardy; once a TTL more passed, the client gives up and the
     * session is lost.
     */
    private void deadlineLoop() {
        long period = ttl.toNanos() / 3;
        long next = System.nanoTime() + period;
        while (true) {
            LeaseNotices lost = new LeaseNotices();
            synchronized (mu) {
                if (endCause != null) {
                    return;
                }
                long now = System.nanoTime();
                if (now - next >= 0) {
                    sendKeepAliveLocked();
                    next = Math.max(next + period, now);
                }
                if (state == State.HEALTHY && now - deadline >= 0) {
                    state = State.JEOPARDY;
                    lost = leases.jeopardy(new BatonException("session " + Long.toUnsignedString(id)
                            + " in jeopardy: no keepalive answered before the conservative deadline"));
                    mu.notifyAll();
                } else if (state == State.JEOPARDY && now - (deadline + ttl.toNanos()) >= 0) {
                    lost = lostLocked(new SessionLostException(0, "", "session " + Long.toUnsignedString(id)
                            + ": no answer from the cluster for a TTL (" + ttl + ") past the deadline", null));
                } else {
                    long due = state == State.HEALTHY ? deadline : deadline + ttl.toNanos();
                    long wait = Math.min(next, due) - now;
                    try {
                        if (wait > 0) {
                            waitNanos(wait);
                        }
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }
            lost.tell();
        }
    }

    /** waitNanos waits on mu (held) for n nanoseconds or more (rounded up to the millisecond), or until notified. */
    private void waitNanos(long n) throws InterruptedException {
        mu.wait(Math.max(1, (n + 999_999) / 1_000_000));
    }

    // ---- the end ----

    /**
     * lostLocked: the member no longer has the session, or refuses it. During
     * a close that is the close's end; otherwise the session is lost.
     */
    private LeaseNotices lostLocked(BatonException cause) {
        if (closing != null) {
            requests.finish(closing, null, null);
            return endLocked(new SessionLostException(0, "", "session " + Long.toUnsignedString(id) + " closed", null),
                    State.CLOSED);
        }
        if (!(cause instanceof SessionLostException) && !(cause instanceof PermissionDeniedException)) {
            cause = new SessionLostException(cause.code(), cause.reason(), "session lost: " + cause.getMessage(), cause);
        }
        return endLocked(cause, State.EXPIRED);
    }

    /** end ends the session locally: every Lease is lost, every call under way fails with cause. */
    void end(BatonException cause, State st) {
        LeaseNotices lost;
        synchronized (mu) {
            lost = endLocked(cause, st);
        }
        lost.tell();
    }

    private LeaseNotices endLocked(BatonException cause, State st) {
        if (endCause != null) {
            return new LeaseNotices();
        }
        endCause = cause;
        state = st;
        requests.failAll(cause);
        if (closing != null) {
            closing.finish(null, cause);
        }
        if (stream != null) {
            stream.close();
        }
        mu.notifyAll();
        return leases.clear(cause);
    }
}
