package dev.baton;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Cooperative revocation against a real server: a holder asked to let go
 * is told at once and, releasing, hands the lock on; one that ignores it
 * loses its Lease at the grace with the revoke as the cause; a refused
 * revoke changes nothing. Sessions have a TTL of a minute, so no deadline
 * and no keepalive falls inside a test: every wait here is on a push of
 * the member (the revoke's, or the end of its grace), each bounded by
 * WAIT.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RevokeTest {
    private static final Duration TTL = Duration.ofSeconds(60);
    private static final Duration WAIT = Duration.ofSeconds(10);
    private static TestCluster cluster;
    private static String leader;
    private static BatonClient operator;
    private static final ExecutorService pool = Executors.newCachedThreadPool();

    @BeforeAll
    static void start() throws Exception {
        cluster = TestCluster.shared();
        TestCluster.await("a leader", WAIT, () -> cluster.leaderAddr() != null);
        leader = cluster.leaderAddr();
        operator = BatonClient.connect(leader);
    }

    @AfterAll
    static void stop() throws Exception {
        pool.shutdownNow();
        operator.close();
        cluster.close();
    }

    private static String name(String what) {
        return "java-test/revoke/" + what + "/" + UUID.randomUUID();
    }

    private static int waiters(String name) {
        try {
            return operator.describe(name).waitingSessions().size();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return -1;
        }
    }

    private static Revocation told(Lease l) throws Exception {
        return l.revokeRequested().get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
    }

    @Test
    void aHolderToldOfARevokeReleasesAndTheWaiterGetsALargerToken() throws Exception {
        String name = name("honoured");
        try (BatonClient client = BatonClient.connect(leader);
                Session a = client.newSession(TTL);
                Session b = client.newSession(TTL)) {
            Lease held = a.mutex(name).lock(WAIT);
            assertFalse(held.revokeRequested().isDone(), "told before any revoke");
            assertTrue(held.revocation().isEmpty());
            Future<Lease> next = pool.submit(() -> b.mutex(name).lock(WAIT));
            TestCluster.await("the waiter queued", WAIT, () -> waiters(name) == 1);

            Instant asked = Instant.now();
            List<Revocation> revs = operator.revokeLock(name, Duration.ofSeconds(5));
            assertEquals(1, revs.size(), revs.toString());
            Revocation rev = revs.get(0);
            assertEquals(name, rev.name());
            assertEquals("", rev.ownerKey());
            assertEquals(held.token(), rev.token());
            assertEquals(Duration.ofSeconds(5), rev.grace());
            assertNotNull(rev.deadline());
            assertTrue(rev.deadline().isAfter(asked.plusSeconds(4)) && rev.deadline().isBefore(asked.plusSeconds(15)),
                    "deadline " + rev.deadline() + " for a revoke asked at " + asked);

            assertEquals(rev, told(held), "the push tells what the revoke answered");
            assertEquals(rev, held.revocation().orElseThrow());
            assertTrue(held.isValid(), "valid until the grace passes");
            assertNull(held.lostCause());
            // Asked again, with another grace: the first revocation stands,
            // and the holder is not told twice.
            assertEquals(List.of(rev), operator.revokeLock(name, Duration.ofSeconds(1)));
            assertEquals(rev, held.revocation().orElseThrow());

            held.release();
            Lease granted = next.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
            assertTrue(granted.token() > held.token(), granted.token() + " after " + held.token());
            assertTrue(granted.revocation().isEmpty(), "the next hold is not revoked");
            assertNull(held.lostCause(), "a release is not a loss");
            assertTrue(granted.isValid());
            granted.release();
        }
    }

    @Test
    void aHolderThatIgnoresTheRevokeLosesTheLeaseAtTheGrace() throws Exception {
        String name = name("ignored");
        try (BatonClient client = BatonClient.connect(leader);
                Session s = client.newSession(TTL);
                Lease other = s.mutex(name("kept")).lock(WAIT)) {
            Lease held = s.mutex(name).lock(WAIT);
            CountDownLatch lost = new CountDownLatch(1);
            held.onLost(lost::countDown);
            long before = System.nanoTime();
            List<Revocation> revs = operator.revokeLock(name, Duration.ofSeconds(1), held.token());
            assertEquals(1, revs.size(), revs.toString());
            assertEquals(revs.get(0), told(held));

            assertTrue(lost.await(WAIT.toMillis(), TimeUnit.MILLISECONDS), "the Lease was never lost");
            assertTrue(System.nanoTime() - before >= Duration.ofSeconds(1).toNanos(), "lost before the grace passed");
            assertFalse(held.isValid());
            RevokedException cause = assertInstanceOf(RevokedException.class, held.lostCause());
            assertEquals(revs.get(0), cause.revocation());
            assertTrue(cause.getMessage().contains("revoke's grace"), cause.getMessage());
            assertTrue(other.isValid(), "the session's other hold is untouched");
            assertEquals(Session.State.HEALTHY, s.state());
            try (Lease next = s.mutex(name).tryLock()) {
                assertTrue(next.token() > held.token(), "fenced: the next token is larger");
                assertTrue(next.revocation().isEmpty());
            }
            held.release(); // gone already: no error
        }
    }

    /**
     * A conditional revoke that names a token the lock does not have is
     * refused and changes nothing: the revoke after it, with another grace,
     * is the hold's first (a hold already revoked would keep the refused
     * one's grace), and the holder is told of that one only.
     */
    @Test
    void aConditionalRevokeWithAWrongTokenChangesNothing() throws Exception {
        String name = name("token");
        try (BatonClient client = BatonClient.connect(leader);
                Session s = client.newSession(TTL);
                Lease held = s.mutex(name).lock(WAIT)) {
            NotHolderException e = assertThrows(NotHolderException.class,
                    () -> operator.revokeLock(name, Duration.ofSeconds(7), held.token() + 1));
            assertEquals("TOKEN_MISMATCH", e.reason(), e.getMessage());
            assertTrue(held.revocation().isEmpty());

            List<Revocation> revs = operator.revokeLock(name, Duration.ofSeconds(50), held.token());
            assertEquals(1, revs.size(), revs.toString());
            assertEquals(Duration.ofSeconds(50), revs.get(0).grace(), "the refused revoke took effect");
            assertEquals(Duration.ofSeconds(50), told(held).grace());
            assertTrue(held.isValid());
        }
    }

    @Test
    void aRevokeOfAFreeLockIsNotFound() throws Exception {
        NotHolderException e = assertThrows(NotHolderException.class, () -> operator.revokeLock(name("free")));
        assertEquals("LOCK_NOT_FOUND", e.reason(), e.getMessage());
    }

    /**
     * Bad input is refused by the client before anything is sent: its member
     * is behind a proxy that refuses every connection by then, so a request
     * sent would end in UnavailableException instead.
     */
    @Test
    void badInputIsRefusedBeforeAnythingIsSent() throws Exception {
        try (TestProxy proxy = new TestProxy(leader);
                BatonClient client = BatonClient.builder().endpoints(proxy.addr()).maxAttempts(1).build()) {
            proxy.refusing = true;
            proxy.cut();
            String n = name("bad");
            record Case(String name, Duration grace, String says) {}
            for (Case c : List.of(
                    new Case("", Duration.ofSeconds(1), "lock name is empty"),
                    new Case("x".repeat(513), Duration.ofSeconds(1), "lock name is 513 bytes; the limit is 512"),
                    new Case("jobs/\u0007", Duration.ofSeconds(1), "has control character U+0007 at byte 5"),
                    new Case("jobs/\ud800", Duration.ofSeconds(1), "is not valid UTF-8"),
                    new Case(n, Duration.ofMillis(999), "revoke grace PT0.999S is outside PT1S..PT1H"),
                    new Case(n, Duration.ZERO, "is outside PT1S..PT1H"),
                    new Case(n, Duration.ofSeconds(-1), "is outside PT1S..PT1H"),
                    new Case(n, Duration.ofHours(1).plusMillis(1), "is outside PT1S..PT1H"),
                    new Case(n, Duration.ofMillis(1500).plusNanos(1000), "is not a whole number of milliseconds"),
                    new Case(n, null, "revoke grace is null"))) {
                InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                        () -> client.revokeLock(c.name(), c.grace()), c.toString());
                assertTrue(e.getMessage().contains(c.says()), c + ": " + e.getMessage());
                assertEquals("INVALID_ARGUMENT", e.reason());
            }
            // The bounds themselves are good input: the request is sent.
            assertThrows(UnavailableException.class, () -> client.revokeLock(n, Duration.ofSeconds(1)));
            assertThrows(UnavailableException.class, () -> client.revokeLock(n, Duration.ofHours(1)));
            assertThrows(UnavailableException.class, () -> client.revokeLock("x".repeat(512)));
        }
    }

    /** A holder whose stream is down when the revoke is pushed learns it from the holds its resume is sent. */
    @Test
    void aHolderReconnectingWhenRevokedLearnsItAtItsResume() throws Exception {
        String name = name("resume");
        try (TestProxy proxy = new TestProxy(leader);
                BatonClient client = BatonClient.builder().endpoints(proxy.addr()).build();
                Session s = client.newSession(TTL);
                Lease held = s.mutex(name).lock(WAIT)) {
            proxy.refusing = true;
            proxy.cut();
            List<Revocation> revs = operator.revokeLock(name, Duration.ofMinutes(1));
            assertEquals(1, revs.size(), revs.toString());
            assertTrue(held.revocation().isEmpty(), "no push can reach the client while it is cut off");
            proxy.refusing = false;
            assertEquals(revs.get(0), told(held));
            assertTrue(held.isValid(), "valid until the grace passes");
            assertNull(held.lostCause());
        }
    }

    /**
     * A waiter whose stream is down when it is granted the lock, and when
     * that hold is revoked, learns both at its resume: the holds the member
     * lists after the resume name the hold as being revoked before the
     * retried wait is answered, and the Lease that answer makes starts
     * revoked. A reentrant Lease of a revoked hold is revoked too.
     */
    @Test
    void aRevokeLearnedBeforeTheGrantsAnswerRevokesTheLeaseItMakes() throws Exception {
        String name = name("early");
        try (TestProxy proxy = new TestProxy(leader);
                BatonClient direct = BatonClient.connect(leader);
                BatonClient viaProxy = BatonClient.builder().endpoints(proxy.addr()).build();
                Session holder = direct.newSession(TTL);
                Session waiter = viaProxy.newSession(TTL)) {
            Lease first = holder.mutex(name).lock(WAIT);
            Future<Lease> granted = pool.submit(() -> waiter.mutex(name).lock(WAIT));
            TestCluster.await("the waiter queued", WAIT, () -> waiters(name) == 1);
            proxy.refusing = true;
            proxy.cut();
            first.release();
            List<Revocation> revs = operator.revokeLock(name, Duration.ofMinutes(1));
            assertEquals(1, revs.size(), revs.toString());
            assertEquals(waiter.id(), operator.describe(name).holders().get(0).sessionId());
            assertTrue(revs.get(0).token() > first.token(), "the revoke is of the waiter's new hold");
            proxy.refusing = false;

            Lease l = granted.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
            assertEquals(revs.get(0).token(), l.token());
            assertTrue(l.revokeRequested().isDone(), "the Lease of a hold revoked before its grant's answer does not know it");
            assertEquals(revs.get(0), l.revocation().orElseThrow());
            assertTrue(l.isValid());
            try (Lease again = waiter.mutex(name).lock(WAIT)) {
                assertEquals(l.token(), again.token());
                assertEquals(revs.get(0), again.revocation().orElseThrow(), "a reentrant Lease of a revoked hold");
                assertTrue(again.revokeRequested().isDone());
            }
            l.release();
        }
    }
}
