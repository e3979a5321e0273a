package dev.baton;

import baton.v1.BatonOuterClass.ChannelRequest;
import baton.v1.BatonOuterClass.RequestHeader;
import baton.v1.BatonOuterClass.SessionRequest;
import baton.v1.BatonOuterClass.SessionsRequest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Requests is a session's request plumbing (docs/PROTOCOL.md, sections 4
 * and 7): the sequence numbers of its mutating requests, which a request
 * keeps for every send, the stream ids that match an answer to its send,
 * and the lowest number without a final answer (min_unacked_seq), below
 * which the member may forget its answers. Guarded by the session's lock.
 */
final class Requests {
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

    /** nextId is a stream id no send of this session used. */
    long nextId() {
        return ++lastId;
    }

    /**
     * send writes c on stream with a new stream id and, when mutating, its
     * sequence number and min_unacked_seq. Nothing is sent once c is answered.
     */
    void send(Call c, Framing stream, long sessionId) {
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

    /** finished forgets c's sequence number: c has its final answer. */
    void finished(Call c) {
        if (c.seq != 0 && bySeq.get(c.seq) == c) {
            bySeq.remove(c.seq);
        }
    }

    /** streamEnded forgets the sends of a stream that ended: their answers cannot come. */
    void streamEnded() {
        byId.clear();
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
