package dev.baton;

import baton.v1.BatonOuterClass.HoldLost;
import baton.v1.BatonOuterClass.SessionHolds;
import baton.v1.BatonOuterClass.SessionResponse;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * LeaseTable is a session's unreleased Leases by hold (lock name, owner
 * key), oldest first: where the client decides what the member's messages
 * about holds do to its Leases. A hold ends without the session asking
 * when the member pushes HoldLost (an operator's CasRelease, a revoke's
 * grace that passed), or when the list of holds that follows a resume
 * lacks it (it ended while the stream was down); a revoke's request to let
 * go is pushed (RevokeRequested) or listed after a resume. Every method is
 * called with the session's lock held; each returns LeaseNotices, which the
 * caller tells after letting go of the lock (they run the user's code).
 */
final class LeaseTable {
    record HoldKey(String name, String ownerKey) {}

    /**
     * The most revokes kept for holds the session has no Lease of yet
     * (revokedEarly): one per hold the session may be granted, which the
     * server's limits bound; past it the oldest is dropped (its Lease then
     * learns of the revoke only from the leader's end of the hold).
     */
    static final int MAX_REVOKED_EARLY = 1024;

    private final Map<HoldKey, List<Lease>> holds = new LinkedHashMap<>();
    // A resume's list of holds, gathered until its last message; null between lists.
    private Map<HoldKey, Long> serverHolds;
    // A revoke the session was told of for a hold it has no Lease of yet:
    // the grant's answer is still to come (the acquiring thread has yet to
    // register it, or a retry after a lost answer is answered after the
    // resume listed the hold as being revoked). The Lease that answer makes
    // starts revoked. Oldest first, bounded by MAX_REVOKED_EARLY.
    private final Map<HoldKey, Revocation> revokedEarly = new LinkedHashMap<>() {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<HoldKey, Revocation> eldest) {
            return size() > MAX_REVOKED_EARLY;
        }
    };

    /**
     * add notes a granted Lease. Leases of the same hold key with another
     * token belong to a hold that ended on the member: they are lost. The
     * new Lease starts revoked if its hold is: another Lease of it (a
     * reentrant acquire) knows, or a revoke of it came before the grant's
     * answer.
     */
    LeaseNotices add(Lease l) {
        HoldKey k = new HoldKey(l.name(), l.ownerKey());
        List<Lease> ls = holds.computeIfAbsent(k, x -> new ArrayList<>());
        LeaseNotices n = new LeaseNotices();
        if (!ls.isEmpty() && ls.get(0).token() != l.token()) {
            n.loseAll(ls, new NotHolderException(0, "", "hold of " + l.name() + " (token "
                    + Long.toUnsignedString(ls.get(0).token()) + ") ended on the server before the grant of token "
                    + Long.toUnsignedString(l.token()), null));
            ls.clear();
        }
        Revocation r = null;
        if (!ls.isEmpty()) {
            r = ls.get(0).revocation().orElse(null);
        } else {
            Revocation early = revokedEarly.get(k);
            if (early != null && Long.compareUnsigned(early.token(), l.token()) <= 0) {
                // This grant's revoke, or an older hold's, which no Lease will need.
                revokedEarly.remove(k);
                r = early.token() == l.token() ? early : null;
            }
        }
        if (r != null) {
            l.revokedBy(r);
            n.revoked(l);
        }
        ls.add(l);
        return n;
    }

    /** remove forgets a released Lease. */
    void remove(Lease l) {
        HoldKey k = new HoldKey(l.name(), l.ownerKey());
        List<Lease> ls = holds.get(k);
        if (ls != null && ls.remove(l) && ls.isEmpty()) {
            holds.remove(k);
        }
    }

    /**
     * jeopardy: the session's deadline passed unanswered; every Lease is
     * lost for cause. The table keeps them, so that a release still asks the
     * member.
     */
    LeaseNotices jeopardy(BatonException cause) {
        LeaseNotices n = new LeaseNotices();
        holds.values().forEach(ls -> n.loseAll(ls, cause));
        return n;
    }

    /** clear forgets every Lease (the session ended for cause): they are lost. */
    LeaseNotices clear(BatonException cause) {
        LeaseNotices n = jeopardy(cause);
        holds.clear();
        serverHolds = null;
        revokedEarly.clear();
        return n;
    }

    /**
     * push takes a push of the member about the session's holds (HoldLost,
     * RevokeRequested, a resume's SessionHolds); null for any other message.
     */
    LeaseNotices push(SessionResponse resp) {
        return switch (resp.getKindCase()) {
            case HOLD_LOST -> holdLost(resp.getHoldLost());
            case REVOKE_REQUESTED -> revokeRequested(Wire.revocation(resp.getRevokeRequested()));
            case HOLDS -> serverHolds(resp.getHolds());
            default -> null;
        };
    }

    /**
     * holdLost: the member ended the hold h names; its Leases are lost, with
     * a RevokedException if a revoke had asked it to end (the leader ended it
     * when the grace passed).
     */
    private LeaseNotices holdLost(HoldLost h) {
        LeaseNotices n = new LeaseNotices();
        HoldKey k = new HoldKey(h.getName(), h.getOwnerKey());
        List<Lease> ls = holds.get(k);
        if (ls == null || ls.get(0).token() != h.getToken()) {
            return n; // released meanwhile, or a newer hold
        }
        holds.remove(k);
        String hold = "hold of " + h.getName() + " (token " + Long.toUnsignedString(h.getToken()) + ")";
        Revocation r = ls.get(0).revocation().orElse(null);
        n.loseAll(ls, r != null
                ? new RevokedException(r, hold + " ended by the leader when the revoke's grace (" + r.grace() + ") passed")
                : new NotHolderException(0, "", hold + " ended by the server: an operator's CasRelease", null));
        return n;
    }

    /**
     * revokeRequested tells the Leases of the hold r names that a revoke
     * asked it to end. A push about another (older) hold, or one they were
     * told already, changes nothing; one about a hold with no Lease yet (or
     * a newer hold than the Leases') is kept for the Lease its grant's
     * answer makes.
     */
    LeaseNotices revokeRequested(Revocation r) {
        LeaseNotices n = new LeaseNotices();
        HoldKey k = new HoldKey(r.name(), r.ownerKey());
        List<Lease> ls = holds.get(k);
        if (ls == null || Long.compareUnsigned(ls.get(0).token(), r.token()) < 0) {
            Revocation old = revokedEarly.get(k);
            if (old == null || Long.compareUnsigned(old.token(), r.token()) < 0) {
                revokedEarly.remove(k); // so that it counts as the newest
                revokedEarly.put(k, r);
            }
            return n;
        }
        if (ls.get(0).token() != r.token() || ls.get(0).revocation().isPresent()) {
            return n;
        }
        for (Lease l : ls) {
            l.revokedBy(r);
            n.revoked(l);
        }
        return n;
    }

    /** resumed starts a new list of the member's holds (a partial one from a stream that broke is dropped). */
    void resumed() {
        serverHolds = null;
    }

    /**
     * serverHolds takes one message of a resumed session's holds: the ones
     * it lists as being revoked are told so. Once the list is whole (done),
     * every Lease of a hold granted at or before its index (its token is at
     * most index) that the list lacks is lost: its hold ended while the
     * session's stream was down.
     */
    private LeaseNotices serverHolds(SessionHolds h) {
        LeaseNotices n = new LeaseNotices();
        if (serverHolds == null) {
            serverHolds = new HashMap<>();
        }
        for (HoldLost x : h.getHoldsList()) {
            serverHolds.put(new HoldKey(x.getName(), x.getOwnerKey()), x.getToken());
        }
        for (var r : h.getRevokingList()) {
            n.add(revokeRequested(Wire.revocation(r)));
        }
        if (!h.getDone()) {
            return n;
        }
        Map<HoldKey, Long> have = serverHolds;
        serverHolds = null;
        var it = holds.entrySet().iterator();
        while (it.hasNext()) {
            var e = it.next();
            long token = e.getValue().get(0).token();
            if (Long.compareUnsigned(token, h.getIndex()) > 0 || Long.valueOf(token).equals(have.get(e.getKey()))) {
                continue;
            }
            n.loseAll(e.getValue(), new NotHolderException(0, "", "hold of " + e.getKey().name() + " (token "
                    + Long.toUnsignedString(token) + ") ended while the session's stream was down", null));
            it.remove();
        }
        return n;
    }
}
