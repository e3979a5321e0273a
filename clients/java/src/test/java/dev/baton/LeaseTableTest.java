package dev.baton;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import baton.v1.BatonOuterClass.HoldLost;
import baton.v1.BatonOuterClass.RevokeRequested;
import baton.v1.BatonOuterClass.SessionHolds;
import baton.v1.BatonOuterClass.SessionResponse;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * The Lease table's decisions about revokes, message by message, without
 * a server: which Leases a RevokeRequested push (or a resume's list of
 * holds being revoked) tells, which it leaves alone, and what it keeps for
 * a grant whose answer is still to come. Its Leases belong to no session:
 * the table never reaches one.
 */
class LeaseTableTest {
    private static final Instant DEADLINE = Instant.parse("2026-11-26T10:00:00.123456789Z");

    private static Lease lease(String name, long token) {
        return new Lease(null, name, "", token);
    }

    private static Revocation rev(String name, long token, Duration grace) {
        return new Revocation(name, "", token, grace, DEADLINE);
    }

    private static SessionResponse push(Revocation r) {
        return SessionResponse.newBuilder().setRevokeRequested(wire(r)).build();
    }

    private static RevokeRequested wire(Revocation r) {
        return RevokeRequested.newBuilder().setName(r.name()).setOwnerKey(r.ownerKey()).setToken(r.token())
                .setGrace(Wire.proto(r.grace()))
                .setDeadline(com.google.protobuf.Timestamp.newBuilder().setSeconds(r.deadline().getEpochSecond())
                        .setNanos(r.deadline().getNano()))
                .build();
    }

    private static SessionResponse holdLost(String name, long token) {
        return SessionResponse.newBuilder()
                .setHoldLost(HoldLost.newBuilder().setName(name).setToken(token)).build();
    }

    @Test
    void aPushTellsEveryLeaseOfItsHoldOnce() throws Exception {
        LeaseTable t = new LeaseTable();
        Lease a = lease("x", 7);
        Lease b = lease("x", 7); // reentrant
        t.add(a).tell();
        t.add(b).tell();
        Revocation r = rev("x", 7, Duration.ofSeconds(5));
        t.push(push(r)).tell();
        assertEquals(r, a.revocation().orElseThrow(), "the push's fields, deadline to the nanosecond");
        assertEquals(r, b.revocation().orElseThrow());
        assertTrue(a.revokeRequested().isDone());
        assertEquals(r, a.revokeRequested().get());
        // A second push for the same hold changes nothing.
        t.push(push(rev("x", 7, Duration.ofSeconds(1)))).tell();
        assertEquals(r, a.revocation().orElseThrow());
        // A Lease that re-enters a revoked hold starts revoked.
        Lease c = lease("x", 7);
        t.add(c).tell();
        assertEquals(r, c.revocation().orElseThrow());
        assertTrue(c.revokeRequested().isDone());
        // The end of the hold then names the revoke as the cause.
        t.push(holdLost("x", 7)).tell();
        for (Lease l : new Lease[] {a, b, c}) {
            assertFalse(l.isValid());
            RevokedException e = assertInstanceOf(RevokedException.class, l.lostCause());
            assertEquals(r, e.revocation());
        }
    }

    @Test
    void aPushAboutAnOlderHoldChangesNothing() {
        LeaseTable t = new LeaseTable();
        Lease l = lease("x", 9);
        t.add(l).tell();
        t.push(push(rev("x", 8, Duration.ofSeconds(5)))).tell();
        t.push(push(rev("y", 9, Duration.ofSeconds(5)))).tell();
        assertEquals(Optional.empty(), l.revocation());
        assertFalse(l.revokeRequested().isDone());
        t.push(holdLost("x", 9)).tell();
        NotHolderException e = assertInstanceOf(NotHolderException.class, l.lostCause());
        assertFalse(e instanceof RevokedException, "a hold nobody revoked was not lost to a revoke: " + e);
    }

    @Test
    void aRevokeBeforeTheGrantsAnswerRevokesTheLeaseItMakes() {
        LeaseTable t = new LeaseTable();
        Revocation r = rev("x", 12, Duration.ofMinutes(1));
        t.push(push(r)).tell(); // no Lease of x yet
        Lease l = lease("x", 12);
        t.add(l).tell();
        assertEquals(r, l.revocation().orElseThrow());
        assertTrue(l.revokeRequested().isDone());
        // Used once: a later hold of x is not revoked by it.
        t.remove(l);
        Lease next = lease("x", 13);
        t.add(next).tell();
        assertEquals(Optional.empty(), next.revocation());
    }

    @Test
    void anEarlyRevokeIsKeptForItsOwnHoldOnly() {
        LeaseTable t = new LeaseTable();
        Revocation r = rev("x", 20, Duration.ofMinutes(1));
        t.push(push(r)).tell();
        t.push(push(rev("x", 15, Duration.ofSeconds(3)))).tell(); // older: the newer stays
        Lease older = lease("x", 10); // an older grant's late answer
        t.add(older).tell();
        assertEquals(Optional.empty(), older.revocation());
        Lease own = lease("x", 20); // ends the older hold's Lease, and starts revoked
        t.add(own).tell();
        assertInstanceOf(NotHolderException.class, older.lostCause());
        assertEquals(r, own.revocation().orElseThrow());
    }

    @Test
    void theHoldsListedAfterAResumeTellOfTheirRevokes() {
        LeaseTable t = new LeaseTable();
        Lease held = lease("x", 4);
        t.add(held).tell();
        Revocation rx = rev("x", 4, Duration.ofSeconds(30));
        Revocation ry = rev("y", 5, Duration.ofSeconds(30)); // a grant whose answer is still to come
        t.resumed();
        t.push(SessionResponse.newBuilder().setHolds(SessionHolds.newBuilder()
                .addHolds(HoldLost.newBuilder().setName("x").setToken(4))
                .addHolds(HoldLost.newBuilder().setName("y").setToken(5))
                .addRevoking(wire(rx)).addRevoking(wire(ry)).setIndex(5).setDone(true)).build()).tell();
        assertEquals(rx, held.revocation().orElseThrow());
        assertNull(held.lostCause(), "a listed hold is kept");
        Lease y = lease("y", 5);
        t.add(y).tell();
        assertEquals(ry, y.revocation().orElseThrow());
    }

    /**
     * Early revokes are bounded: past MAX_REVOKED_EARLY the oldest is
     * dropped (its Lease learns of the revoke only when the leader ends the
     * hold), the newest kept.
     */
    @Test
    void earlyRevokesAreBounded() {
        LeaseTable t = new LeaseTable();
        int n = LeaseTable.MAX_REVOKED_EARLY + 1;
        for (int i = 0; i < n; i++) {
            t.push(push(rev("lock/" + i, 100 + i, Duration.ofSeconds(30)))).tell();
        }
        Lease oldest = lease("lock/0", 100);
        Lease second = lease("lock/1", 101);
        Lease newest = lease("lock/" + (n - 1), 100 + n - 1);
        t.add(oldest).tell();
        t.add(second).tell();
        t.add(newest).tell();
        assertEquals(Optional.empty(), oldest.revocation(), "the oldest was dropped");
        assertTrue(second.revocation().isPresent());
        assertTrue(newest.revocation().isPresent());
    }
}
