package dev.baton;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** A leader change in a cluster of three members started here: the Lease is kept. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class ClusterTest {
    private static final Duration WAIT = Duration.ofSeconds(30);

    /**
     * The leader is killed (SIGKILL) while a session holds a lock. The
     * client's keepalives find the new leader, which gives the session a
     * full TTL from its election, so the Lease stays valid throughout; the
     * release goes to the new leader, and the next holder's token is larger.
     */
    @Test
    void aLeaderChangeKeepsTheLease() throws Exception {
        try (TestCluster cluster = TestCluster.start(3);
                BatonClient client = BatonClient.connect(cluster.endpoints());
                Session s = client.newSession(Duration.ofSeconds(10))) {
            Lease lease = s.mutex("java-test/failover").lock(WAIT);
            AtomicBoolean lost = new AtomicBoolean();
            lease.onLost(() -> lost.set(true));
            String old = cluster.leaderAddr();
            cluster.kill(old);
            long killed = System.nanoTime();
            TestCluster.await("a new leader", WAIT, () -> {
                String l = cluster.leaderAddr();
                return l != null && !l.equals(old);
            });
            // A keepalive sent after the kill was answered (by the new leader).
            TestCluster.await("a keepalive after the kill answered", WAIT,
                    () -> s.deadlineNanos() - (killed + Duration.ofSeconds(9).toNanos()) > 0);
            assertTrue(lease.isValid(), "the Lease is valid after the leader change");
            assertFalse(lost.get(), "onLost did not run");
            assertEquals(Session.State.HEALTHY, s.state());
            assertEquals(lease.token(), client.describe("java-test/failover").holders().get(0).token());
            lease.release();
            try (Lease next = s.mutex("java-test/failover").tryLock()) {
                assertTrue(next.token() > lease.token());
            }
            assertNotEquals(old, cluster.leaderAddr());
        }
    }
}
