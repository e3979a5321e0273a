package dev.baton;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The client's safety rules against a real server, through a proxy that
 * misbehaves on purpose: loss declared before the server can hand the lock
 * on, exactly-once retries.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SafetyTest {
    private static final Duration WAIT = Duration.ofSeconds(20);
    private static TestCluster cluster;
    private static String leader;
    private static final ExecutorService pool = Executors.newCachedThreadPool();

    @BeforeAll
    static void start() throws Exception {
        cluster = TestCluster.shared();
        TestCluster.await("a leader", WAIT, () -> cluster.leaderAddr() != null);
        leader = cluster.leaderAddr();
    }

    @AfterAll
    static void stop() throws Exception {
        pool.shutdownNow();
        cluster.close();
    }

    /**
     * Every answer reaches the holder a second after the member sent it, and
     * then the holder's keepalives stop. The member ends the session a TTL
     * after the last keepalive arrived, and grants the lock to the waiter.
     * The client counts its deadline from the send of the last answered
     * keepalive, less the margin (110 ms for a 6 s TTL), so it declares the
     * Lease lost before that grant. A client that counted from the answer
     * would hold on for the answer's second of delay longer: its Lease would
     * still be valid when the waiter gets the lock, and this test fails.
     */
    @Test
    void lossIsDeclaredBeforeTheServerHandsTheLockOn() throws Exception {
        String name = "java-test/deadline/" + UUID.randomUUID();
        try (TestProxy proxy = new TestProxy(leader);
                BatonClient slow = BatonClient.builder().endpoints(proxy.addr()).build();
                BatonClient fast = BatonClient.connect(leader);
                Session waiterSession = fast.newSession(Duration.ofSeconds(10))) {
            proxy.answerDelayMillis = 1000;
            // A TTL of 6 s: keepalives every 2 s, each answered a second
            // later, well before the deadline (TTL - 110 ms).
            Session holder = slow.newSession(Duration.ofSeconds(6));
            Lease lease = holder.mutex(name).lock(WAIT);
            long locked = System.nanoTime();
            AtomicLong lostAt = new AtomicLong();
            lease.onLost(() -> lostAt.set(System.nanoTime()));
            AtomicBoolean validAtGrant = new AtomicBoolean(true);
            Future<Long> grantedAt = pool.submit(() -> {
                Lease l = waiterSession.mutex(name).lock(WAIT);
                validAtGrant.set(lease.isValid());
                long at = System.nanoTime();
                l.release();
                return at;
            });
            TestCluster.await("the waiter queued", WAIT, () -> waiters(fast, name) == 1);
            // Wait for a keepalive sent after the grant to be answered (its
            // answer moved the deadline past locked + TTL - margin), then
            // stop the keepalives.
            long moved = locked + holder.ttl().minus(Session.safetyMargin(holder.ttl())).toNanos();
            TestCluster.await("a keepalive answered", WAIT, () -> holder.deadlineNanos() - moved > 0);
            holder.keepAlivesPaused = true;
            long pausedAt = System.nanoTime();
            assertTrue(lease.isValid(), "valid when the keepalives stopped");
            long grant = grantedAt.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertNotEquals(0, lostAt.get(), "onLost ran before the waiter was granted the lock");
            assertTrue(lostAt.get() - pausedAt > 0, "onLost ran after the keepalives stopped, not before");
            assertTrue(lostAt.get() - grant < 0, "lost " + (grant - lostAt.get()) / 1_000_000 + " ms before the grant");
            assertFalse(validAtGrant.get(), "the Lease was valid when the server handed the lock on");
            assertFalse(lease.isValid());
            assertTrue(lease.lostCause().getMessage().contains("jeopardy"), "lost for " + lease.lostCause());
            holder.close();
        }
    }

    /**
     * The answer to an acquire is lost with its connection; the client sends
     * the acquire again with the same sequence number and the member answers
     * it from its exactly-once cache: the same hold, entered once. A retry
     * with a new number would re-enter the hold (count 2).
     */
    @Test
    void aRetriedAcquireTakesEffectOnce() throws Exception {
        String name = "java-test/once/" + UUID.randomUUID();
        try (TestProxy proxy = new TestProxy(leader);
                BatonClient client = BatonClient.builder().endpoints(proxy.addr()).build();
                Session s = client.newSession(Duration.ofSeconds(60))) {
            proxy.answersToLose.set(1);
            Lease l = s.mutex(name).lock(WAIT);
            assertEquals(2, proxy.acquiresForwarded.get(), "the acquire was sent twice");
            assertEquals(0, proxy.answersToLose.get());
            LockInfo info = client.describe(name);
            assertEquals(1, info.holders().size());
            assertEquals(1, info.holders().get(0).count(), "entered once");
            assertEquals(l.token(), info.holders().get(0).token());
            l.release();
            assertTrue(client.describe(name).holders().isEmpty(), "one release frees it");
        }
    }

    private static int waiters(BatonClient c, String name) {
        try {
            return c.describe(name).waitingSessions().size();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return -1;
        }
    }
}
