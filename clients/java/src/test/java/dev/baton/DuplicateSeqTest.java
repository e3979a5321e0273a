package dev.baton;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import baton.v1.BatonOuterClass.AcquireRequest;
import baton.v1.BatonOuterClass.ChannelRequest;
import baton.v1.BatonOuterClass.ChannelResponse;
import baton.v1.BatonOuterClass.OpenSessionRequest;
import baton.v1.BatonOuterClass.ReleaseRequest;
import baton.v1.BatonOuterClass.RequestHeader;
import baton.v1.BatonOuterClass.SessionRequest;
import baton.v1.BatonOuterClass.SessionResponse;
import baton.v1.BatonOuterClass.SessionsRequest;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The same (session, seq) sent twice while the first send is in flight,
 * as a client does when it resends after a reconnect or a NOT_LEADER that
 * crossed the answer: the member answers both sends, with the same answer,
 * and applies the request once. Raw frames, so that the two sends really
 * are in flight together (in one message, and in two back to back).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DuplicateSeqTest {
    private static final Duration WAIT = Duration.ofSeconds(10);
    private static final int ROUNDS = 50;
    private static final SecureRandom RANDOM = new SecureRandom();
    private static TestCluster cluster;
    private static String leader;

    @BeforeAll
    static void start() throws Exception {
        cluster = TestCluster.shared();
        TestCluster.await("a leader", WAIT, () -> cluster.leaderAddr() != null);
        leader = cluster.leaderAddr();
    }

    @AfterAll
    static void stop() throws Exception {
        cluster.close();
    }

    private static SessionsRequest batch(SessionRequest... rs) {
        SessionsRequest.Builder b = SessionsRequest.newBuilder();
        for (SessionRequest r : rs) {
            b.addRequests(ChannelRequest.newBuilder().setChannel(1).setRequest(r));
        }
        return b.build();
    }

    /** open opens a session of 30 s as the stream's first request (id 1, channel 1); its id. */
    private static long open(Framing f) throws Exception {
        byte[] secret = new byte[32];
        RANDOM.nextBytes(secret);
        f.send(batch(SessionRequest.newBuilder().setId(1).setOpen(OpenSessionRequest.newBuilder()
                .setTtl(Wire.proto(Duration.ofSeconds(30))).setOwner("dup-test").setNonce(RANDOM.nextLong() | 1)
                .setSecret(Base64.getUrlEncoder().withoutPadding().encodeToString(secret))).build()));
        return answers(f, 1).get(1L).getOpen().getSessionId();
    }

    /** answers reads the stream until every id in want has its answer; the answers by id. */
    private static Map<Long, SessionResponse> answers(Framing f, long... want) throws Exception {
        Map<Long, SessionResponse> got = new HashMap<>();
        while (true) {
            boolean all = true;
            for (long id : want) {
                all &= got.containsKey(id);
            }
            if (all) {
                return got;
            }
            for (ChannelResponse cr : f.receive().getResponsesList()) {
                if (cr.hasResponse() && cr.getResponse().getId() != 0) {
                    got.put(cr.getResponse().getId(), cr.getResponse());
                }
            }
        }
    }

    @Test
    void bothSendsOfOneSeqAreAnswered() throws Exception {
        try (Framing f = Framing.dial(leader, WAIT, null)) {
            long session = open(f);
            String name = "java-test/dup/" + UUID.randomUUID();
            long id = 1;
            long seq = 0;
            for (int round = 0; round < ROUNDS; round++) {
                boolean oneMessage = round % 2 == 0;
                seq++;
                RequestHeader h = RequestHeader.newBuilder().setSessionId(session).setSeq(seq).setMinUnackedSeq(seq)
                        .build();
                SessionRequest acq = SessionRequest.newBuilder().setAcquire(AcquireRequest.newBuilder().setHeader(h)
                        .setName(name)).build();
                long a1 = ++id;
                long a2 = ++id;
                send(f, oneMessage, acq.toBuilder().setId(a1).build(), acq.toBuilder().setId(a2).build());
                Map<Long, SessionResponse> got = answers(f, a1, a2);
                assertTrue(got.get(a1).getAcquire().getAcquired(), "round " + round + ": " + got.get(a1));
                assertEquals(got.get(a1).getAcquire(), got.get(a2).getAcquire(), "round " + round);
                long token = got.get(a1).getAcquire().getToken();
                assertEquals(1, got.get(a1).getAcquire().getCount(), "entered once");

                seq++;
                h = h.toBuilder().setSeq(seq).setMinUnackedSeq(seq).build();
                SessionRequest rel = SessionRequest.newBuilder().setRelease(ReleaseRequest.newBuilder().setHeader(h)
                        .setName(name).setToken(token)).build();
                long r1 = ++id;
                long r2 = ++id;
                send(f, oneMessage, rel.toBuilder().setId(r1).build(), rel.toBuilder().setId(r2).build());
                got = answers(f, r1, r2);
                assertTrue(!got.get(r1).hasError() && !got.get(r2).hasError(), "round " + round + ": " + got);
            }
        }
    }

    /**
     * A waiting acquire sent twice while the lock is held elsewhere: both
     * sends are answered (queued), the grant is pushed once when the holder
     * lets go, and a third send of the seq after the grant is answered with
     * the grant.
     */
    @Test
    void bothSendsOfAQueuedAcquireAreAnswered() throws Exception {
        try (BatonClient client = BatonClient.connect(leader);
                Session holder = client.newSession(Duration.ofSeconds(30));
                Framing f = Framing.dial(leader, WAIT, null)) {
            long session = open(f);
            long id = 1;
            for (int round = 0; round < 10; round++) {
                String name = "java-test/dup-queued/" + UUID.randomUUID();
                Lease held = holder.mutex(name).lock(WAIT);
                long seq = 2 * round + 1;
                RequestHeader h = RequestHeader.newBuilder().setSessionId(session).setSeq(seq).setMinUnackedSeq(seq)
                        .build();
                SessionRequest acq = SessionRequest.newBuilder().setAcquire(AcquireRequest.newBuilder().setHeader(h)
                        .setName(name).setWait(true)).build();
                long a1 = ++id;
                long a2 = ++id;
                send(f, round % 2 == 0, acq.toBuilder().setId(a1).build(), acq.toBuilder().setId(a2).build());
                Map<Long, SessionResponse> got = answers(f, a1, a2);
                assertTrue(got.get(a1).getAcquire().getQueued(), "round " + round + ": " + got.get(a1));
                assertTrue(got.get(a2).getAcquire().getQueued(), "round " + round + ": " + got.get(a2));
                held.release();
                long a3 = ++id;
                long granted = 0;
                // The grant is pushed; a send of the seq after it is answered with it.
                while (granted == 0) {
                    for (ChannelResponse cr : f.receive().getResponsesList()) {
                        if (cr.hasResponse() && cr.getResponse().hasGrant()) {
                            assertEquals(seq, cr.getResponse().getGrant().getSeq());
                            granted = cr.getResponse().getGrant().getToken();
                        }
                    }
                }
                send(f, true, acq.toBuilder().setId(a3).build());
                SessionResponse again = answers(f, a3).get(a3);
                assertTrue(again.getAcquire().getAcquired(), "round " + round + ": " + again);
                assertEquals(granted, again.getAcquire().getToken());
                assertEquals(1, again.getAcquire().getCount(), "entered once");
                SessionRequest rel = SessionRequest.newBuilder().setId(++id).setRelease(ReleaseRequest.newBuilder()
                        .setHeader(h.toBuilder().setSeq(seq + 1).setMinUnackedSeq(seq + 1)).setName(name)
                        .setToken(granted)).build();
                send(f, true, rel);
                assertTrue(!answers(f, rel.getId()).get(rel.getId()).hasError());
            }
        }
    }

    private static void send(Framing f, boolean oneMessage, SessionRequest... rs) {
        if (oneMessage) {
            f.send(batch(rs));
        } else {
            for (SessionRequest r : rs) {
                f.send(batch(r));
            }
        }
    }
}
