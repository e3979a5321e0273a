package dev.baton;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import baton.v1.BatonOuterClass.DeadlockEdge;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Deadlocks against a real server: a wait that would close a cycle is
 * refused at once, and a wait that a grant leaves deadlocked is ended by
 * the server's WaitEnded push; either way a DeadlockException names the
 * cycle, the refused or ended wait first.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DeadlockTest {
    // Each wait below is bounded by WAIT; a deadlock the server failed to
    // see would end as a WaitTimeoutException instead, and fail the test.
    private static final Duration WAIT = Duration.ofSeconds(20);
    private static TestCluster cluster;
    private static BatonClient client;
    private static final ExecutorService pool = Executors.newCachedThreadPool();

    @BeforeAll
    static void start() throws Exception {
        cluster = TestCluster.shared();
        client = BatonClient.connect(cluster.endpoints());
    }

    @AfterAll
    static void stop() throws Exception {
        pool.shutdownNow();
        client.close();
        cluster.close();
    }

    private static String name(String what) {
        return "java-test/deadlock/" + what + "/" + UUID.randomUUID();
    }

    private static DeadlockEdge edge(long session, String ownerKey, String lock, long blocker, String blockerKey) {
        return DeadlockEdge.newBuilder().setSessionId(session).setOwnerKey(ownerKey).setLock(lock)
                .setBlockerSessionId(blocker).setBlockerOwnerKey(blockerKey).build();
    }

    /** The sessions waiting for name, in queue order; null if interrupted (for TestCluster.await). */
    private static List<Long> waiting(String name) {
        try {
            return client.describe(name).waitingSessions();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    /**
     * A holds x, B holds y, A waits for y: B's wait for x would close the
     * cycle, so the server refuses it at once, naming both waits, and
     * queues nothing. A's wait goes on, and is granted y when B lets go.
     */
    @Test
    void aWaitThatWouldCloseACycleIsRefusedWithTheCycle() throws Exception {
        String x = name("x");
        String y = name("y");
        try (Session a = client.newSession(Duration.ofSeconds(10), "java-a");
                Session b = client.newSession(Duration.ofSeconds(10), "java-b")) {
            a.mutex(x).lock(WAIT);
            Lease by = b.mutex(y).lock(WAIT);
            Future<Lease> ay = pool.submit(() -> a.mutex(y).lock(WAIT));
            TestCluster.await("a to queue for y", WAIT, () -> List.of(a.id()).equals(waiting(y)));

            DeadlockException e = assertThrows(DeadlockException.class, () -> b.mutex(x).lock(WAIT));
            assertEquals("DEADLOCK", e.reason());
            assertEquals(List.of(edge(b.id(), "", x, a.id(), ""), edge(a.id(), "", y, b.id(), "")), e.cycle());
            assertThrows(UnsupportedOperationException.class, () -> e.cycle().clear());
            String msg = e.getMessage();
            assertFalse(msg.contains("\n"), "one line: " + msg);
            assertTrue(msg.contains("waits for lock \"" + x + "\" held by session " + a.id()), msg);
            assertEquals(List.of(), waiting(x), "the refused wait queued nothing");

            assertFalse(ay.isDone(), "a's wait for y goes on");
            assertEquals(List.of(a.id()), waiting(y));
            by.release();
            Lease got = ay.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertEquals(a.id(), got.session().id());
            assertTrue(got.token() > by.token());
        }
    }

    /**
     * The Go client's TestDeadlockAtAGrant: z holds x, b holds y; a (key
     * "k") waits for x and for y, then b waits for x behind a. When z lets
     * go of x, a is granted x, and now a's wait for y (held by b, who waits
     * for x, held by a) is a deadlock: the server ends it with a WaitEnded
     * push naming the cycle. b is granted x when a lets go of it.
     */
    @Test
    void aWaitAGrantLeavesDeadlockedEndsWithTheCycle() throws Exception {
        String x = name("x");
        String y = name("y");
        try (Session a = client.newSession(Duration.ofSeconds(10), "java-a");
                Session b = client.newSession(Duration.ofSeconds(10), "java-b");
                Session z = client.newSession(Duration.ofSeconds(10), "java-z")) {
            Lease zx = z.mutex(x).lock(WAIT);
            b.mutex(y).lock(WAIT);
            Future<Lease> ax = pool.submit(() -> a.mutex(x).withOwnerKey("k").lock(WAIT));
            TestCluster.await("a to queue for x", WAIT, () -> List.of(a.id()).equals(waiting(x)));
            Future<Lease> ay = pool.submit(() -> a.mutex(y).withOwnerKey("k").lock(WAIT));
            TestCluster.await("a to queue for y", WAIT, () -> List.of(a.id()).equals(waiting(y)));
            Future<Lease> bx = pool.submit(() -> b.mutex(x).lock(WAIT));
            TestCluster.await("b to queue for x", WAIT, () -> List.of(a.id(), b.id()).equals(waiting(x)));

            zx.release();
            Lease got = ax.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertEquals(a.id(), got.session().id());
            ExecutionException ended = assertThrows(ExecutionException.class,
                    () -> ay.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            DeadlockException e = assertInstanceOf(DeadlockException.class, ended.getCause());
            assertEquals("DEADLOCK", e.reason());
            assertEquals(List.of(edge(a.id(), "k", y, b.id(), ""), edge(b.id(), "", x, a.id(), "k")), e.cycle());
            assertFalse(e.getMessage().contains("\n"), "one line: " + e.getMessage());
            assertTrue(e.getMessage().contains("session " + a.id() + " key \"k\" waits for lock \"" + y + "\" held by session " + b.id()),
                    e.getMessage());
            assertEquals(List.of(), waiting(y), "the ended wait left the queue");

            assertFalse(bx.isDone(), "b waits while a holds x");
            got.release();
            Lease bGot = bx.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertEquals(b.id(), bGot.session().id());
            assertTrue(bGot.token() > got.token());
        }
    }
}
