package dev.baton;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The locks' rules against a real server: tokens, try-lock, FIFO, semaphores, read/write locks. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LockTest {
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

    /** A lock name of this run alone, so that an external cluster's other users do not matter. */
    private static String name(String what) {
        return "java-test/" + what + "/" + UUID.randomUUID();
    }

    @Test
    void lockAndReleaseGiveIncreasingTokens() throws Exception {
        String name = name("tokens");
        try (Session s = client.newSession(Duration.ofSeconds(10))) {
            long last = 0;
            for (int i = 0; i < 3; i++) {
                try (Lease l = s.mutex(name).lock(WAIT)) {
                    assertTrue(l.isValid());
                    assertTrue(l.token() > last, "token " + l.token() + " after " + last);
                    assertTrue(l.remaining().compareTo(Duration.ZERO) > 0);
                    assertEquals(1, client.describe(name).holders().size());
                    last = l.token();
                }
            }
            assertTrue(client.describe(name).holders().isEmpty(), "released");
        }
    }

    @Test
    void tryLockOnAHeldLockNamesTheHolder() throws Exception {
        String name = name("try");
        try (Session a = client.newSession(Duration.ofSeconds(10), "java-holder");
                Session b = client.newSession(Duration.ofSeconds(10));
                Lease held = a.mutex(name).tryLock()) {
            LockBusyException e = assertThrows(LockBusyException.class, () -> b.mutex(name).tryLock());
            assertNotNull(e.holder());
            assertEquals(a.id(), e.holder().sessionId());
            assertEquals("java-holder", e.holder().owner());
            assertEquals(held.token(), e.holder().token());
            assertThrows(WaitTimeoutException.class, () -> b.mutex(name).lock(Duration.ofMillis(300)));
        }
    }

    @Test
    void threeWaitersAreGrantedInFifoOrder() throws Exception {
        String name = name("fifo");
        List<Session> sessions = new ArrayList<>();
        try (Session holder = client.newSession(Duration.ofSeconds(10))) {
            Lease first = holder.mutex(name).lock(WAIT);
            List<Long> order = new ArrayList<>();
            List<Future<Lease>> waits = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                Session s = client.newSession(Duration.ofSeconds(10));
                sessions.add(s);
                waits.add(pool.submit(() -> {
                    Lease l = s.mutex(name).lock(WAIT);
                    synchronized (order) {
                        order.add(s.id());
                    }
                    return l;
                }));
                int queued = i + 1;
                // Each waiter is queued before the next one asks.
                TestCluster.await(queued + " waiters", WAIT, () -> waiters(name) == queued);
            }
            assertEquals(sessions.stream().map(Session::id).toList(), client.describe(name).waitingSessions());
            long token = first.token();
            first.release();
            for (int i = 0; i < 3; i++) {
                Lease l = waits.get(i).get(WAIT.toSeconds(), TimeUnit.SECONDS);
                assertEquals(sessions.get(i).id(), l.session().id(), "grant " + i);
                assertTrue(l.token() > token, "tokens increase");
                token = l.token();
                l.release();
            }
            assertEquals(sessions.stream().map(Session::id).toList(), order);
        } finally {
            sessions.forEach(Session::close);
        }
    }

    @Test
    void aSemaphoreAdmitsItsPermitsAndQueuesTheRest() throws Exception {
        String name = name("sem");
        try (Session a = client.newSession(Duration.ofSeconds(10));
                Session b = client.newSession(Duration.ofSeconds(10));
                Session c = client.newSession(Duration.ofSeconds(10))) {
            Lease la = a.semaphore(name, 2).tryAcquire();
            Lease lb = b.semaphore(name, 2).tryAcquire();
            assertTrue(lb.token() > la.token());
            assertEquals(2, client.describe(name).holders().size());
            assertThrows(LockBusyException.class, () -> c.semaphore(name, 2).tryAcquire());
            InvalidArgumentException mismatch = assertThrows(InvalidArgumentException.class,
                    () -> c.semaphore(name, 3).tryAcquire());
            assertEquals("LIMIT_MISMATCH", mismatch.reason());
            Future<Lease> third = pool.submit(() -> c.semaphore(name, 2).acquire(WAIT));
            TestCluster.await("the third permit queued", WAIT, () -> waiters(name) == 1);
            la.release();
            Lease lc = third.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertTrue(lc.token() > lb.token());
            lb.release();
            lc.release();
        }
    }

    @Test
    void readersShareAndAWriterWaitsForThemAlone() throws Exception {
        String name = name("rw");
        try (Session r1 = client.newSession(Duration.ofSeconds(10));
                Session r2 = client.newSession(Duration.ofSeconds(10));
                Session w = client.newSession(Duration.ofSeconds(10));
                Session r3 = client.newSession(Duration.ofSeconds(10))) {
            Lease a = r1.readWriteLock(name).readLock().tryLock();
            Lease b = r2.readWriteLock(name).readLock().tryLock();
            assertEquals(2, client.describe(name).holders().size());
            assertThrows(LockBusyException.class, () -> w.readWriteLock(name).writeLock().tryLock());
            Future<Lease> writer = pool.submit(() -> w.readWriteLock(name).writeLock().lock(WAIT));
            TestCluster.await("the writer queued", WAIT, () -> waiters(name) == 1);
            // A reader behind a waiting writer waits for it (one FIFO).
            assertThrows(LockBusyException.class, () -> r3.readWriteLock(name).readLock().tryLock());
            Future<Lease> reader = pool.submit(() -> r3.readWriteLock(name).readLock().lock(WAIT));
            TestCluster.await("the reader queued behind the writer", WAIT, () -> waiters(name) == 2);
            a.release();
            assertFalse(writer.isDone(), "a writer beside a reader");
            b.release();
            Lease wl = writer.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertEquals(1, client.describe(name).holders().size());
            assertFalse(reader.isDone(), "a reader beside the writer");
            wl.release();
            Lease rl = reader.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertTrue(rl.token() > wl.token());
            rl.release();
        }
    }

    @Test
    void closingTheSessionLosesItsLeasesAndFreesTheLock() throws Exception {
        String name = name("close");
        AtomicBoolean lost = new AtomicBoolean();
        Lease l;
        try (Session s = client.newSession(Duration.ofSeconds(10))) {
            l = s.mutex(name).lock(WAIT);
            l.onLost(() -> lost.set(true));
        }
        assertTrue(lost.get(), "onLost ran at close");
        assertFalse(l.isValid());
        assertEquals(Duration.ZERO, l.remaining());
        assertTrue(client.describe(name).holders().isEmpty());
        assertThrows(SessionLostException.class, () -> l.session().mutex(name).tryLock());
    }

    @Test
    void theSecretIsNeverPrinted() throws Exception {
        String name = name("secret");
        try (Session s = client.newSession(Duration.ofSeconds(10));
                Session other = client.newSession(Duration.ofSeconds(10));
                Lease l = s.mutex(name).lock(WAIT)) {
            String secret = s.secret();
            assertTrue(secret.length() >= 22);
            LockBusyException busy = assertThrows(LockBusyException.class, () -> other.mutex(name).tryLock());
            for (Object o : List.of(s, l, s.mutex(name), busy, busy.holder())) {
                assertFalse(o.toString().contains(secret), o.getClass().getSimpleName() + " prints the secret");
            }
        }
    }

    private static int waiters(String name) {
        try {
            return client.describe(name).waitingSessions().size();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return -1;
        }
    }
}
