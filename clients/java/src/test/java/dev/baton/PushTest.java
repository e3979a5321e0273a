package dev.baton;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What the leader tells a session reaches the client long before any
 * deadline could have told it: a hold an operator ended (pushed at once),
 * a blacklist (the next keepalive's refusal), and after a resume the list
 * of holds that ended while the stream was down. Sessions here have a TTL
 * of a minute unless a test says otherwise, so a loss seen within the
 * test's bounds came from the member's message, not from a deadline.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PushTest {
    private static final Duration TTL = Duration.ofSeconds(60);
    private static final Duration WAIT = Duration.ofSeconds(20);
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

    private static String name(String what) {
        return "java-test/push/" + what + "/" + UUID.randomUUID();
    }

    private static void casRelease(String name, Session s, Lease l) throws Exception {
        TestCluster.post(leader, "/v1/locks/cas-release", "{\"name\":\"" + name + "\",\"session_id\":\""
                + Long.toUnsignedString(s.id()) + "\",\"token\":\"" + l.token() + "\"}");
    }

    @Test
    void anOperatorsCasReleaseLosesTheLeaseAtOnce() throws Exception {
        String name = name("cas");
        try (BatonClient client = BatonClient.connect(leader);
                Session s = client.newSession(TTL);
                Lease other = s.mutex(name("kept")).lock(WAIT)) {
            Lease lease = s.mutex(name).lock(WAIT);
            AtomicLong lostAt = new AtomicLong();
            lease.onLost(() -> lostAt.set(System.nanoTime()));
            long before = System.nanoTime();
            casRelease(name, s, lease);
            TestCluster.await("onLost after the CasRelease", WAIT, () -> lostAt.get() != 0);
            assertTrue(lostAt.get() - before > 0);
            assertFalse(lease.isValid(), "a Lease whose hold the operator ended is not valid");
            NotHolderException cause = assertInstanceOf(NotHolderException.class, lease.lostCause());
            assertTrue(cause.getMessage().contains("CasRelease"), cause.getMessage());
            assertTrue(other.isValid(), "the session's other Lease is untouched");
            assertEquals(Session.State.HEALTHY, s.state());
            // The lock is free for the next holder, with a larger token.
            try (Lease next = s.mutex(name).tryLock()) {
                assertTrue(next.token() > lease.token());
            }
            lease.release(); // its hold is gone already: no error
        }
    }

    /**
     * A blacklist pushes nothing: the member refuses the session's next
     * keepalive, a third of its TTL later at most, and the client ends the
     * session then with the refusal's reason. (A session that merely ran
     * past its deadline would end with no reason.) This one session has a
     * short TTL so that its keepalives come well inside the test's bound.
     */
    @Test
    void aBlacklistEndsTheSessionAtItsNextKeepalive() throws Exception {
        String name = name("blacklist");
        try (BatonClient client = BatonClient.connect(leader);
                Session s = client.newSession(Duration.ofSeconds(6))) {
            Lease lease = s.mutex(name).lock(WAIT);
            AtomicLong lostAt = new AtomicLong();
            lease.onLost(() -> lostAt.set(System.nanoTime()));
            TestCluster.post(leader, "/v1/sessions/" + Long.toUnsignedString(s.id()) + "/blacklist", "{}");
            TestCluster.await("the session ended", WAIT, () -> s.state() == Session.State.EXPIRED);
            assertTrue(lostAt.get() != 0, "onLost ran");
            assertFalse(lease.isValid());
            assertEquals("BLACKLISTED", lease.lostCause().reason(), "lost for " + lease.lostCause());
            assertEquals("BLACKLISTED", s.endCause().reason(), s.endCause().getMessage());
            assertThrows(BatonException.class, () -> s.mutex(name("after")).tryLock());
        }
    }

    /**
     * The stream is cut and reconnects refused while an operator ends one of
     * two holds: no push can reach the client. When it resumes, the member
     * lists the session's holds; the one that ended is missing, so its Lease
     * is lost then, and the other is kept.
     */
    @Test
    void theHoldsListedAfterAResumeLoseTheLeasesThatEnded() throws Exception {
        String name = name("resume");
        try (TestProxy proxy = new TestProxy(leader);
                BatonClient client = BatonClient.builder().endpoints(proxy.addr()).build();
                Session s = client.newSession(TTL);
                Lease kept = s.mutex(name("kept")).lock(WAIT)) {
            Lease lease = s.mutex(name).lock(WAIT);
            AtomicLong lostAt = new AtomicLong();
            lease.onLost(() -> lostAt.set(System.nanoTime()));
            proxy.refusing = true;
            proxy.cut();
            casRelease(name, s, lease);
            assertEquals(0, lostAt.get(), "no push can reach the client while it is cut off");
            long reopened = System.nanoTime();
            proxy.refusing = false;
            TestCluster.await("onLost after the resume", WAIT, () -> lostAt.get() != 0);
            assertTrue(lostAt.get() - reopened > 0, "lost once the session resumed, not before");
            assertFalse(lease.isValid());
            NotHolderException cause = assertInstanceOf(NotHolderException.class, lease.lostCause());
            assertTrue(cause.getMessage().contains("stream was down"), cause.getMessage());
            assertTrue(kept.isValid(), "the hold the member listed is kept");
            assertEquals(Session.State.HEALTHY, s.state());
        }
    }
}
