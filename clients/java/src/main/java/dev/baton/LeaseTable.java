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
 * when the member pushes HoldLost (an operator's CasRelease), or when the
 * list of holds that follows a resume lacks it (it ended while the stream
 * was down). Every method is called with the session's lock held; each
 * returns LeaseNotices, which the caller tells after letting go of the
 * lock (they run the user's code).
 */
final class LeaseTable {
    record HoldKey(String name, String ownerKey) {}

    private final Map<HoldKey, List<Lease>> holds = new LinkedHashMap<>();
    // A resume's list of holds, gathered until its last message; null between lists.
    private Map<HoldKey, Long> serverHolds;

    /**
     * add notes a granted Lease. Leases of the same hold key with another
     * token belong to a hold that ended on the member: they are lost.
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
        return n;
    }

    /**
     * push takes a push of the member about the session's holds (HoldLost,
     * a resume's SessionHolds); null for any other message.
     */
    LeaseNotices push(SessionResponse resp) {
        return switch (resp.getKindCase()) {
            case HOLD_LOST -> holdLost(resp.getHoldLost());
            case HOLDS -> serverHolds(resp.getHolds());
            default -> null;
        };
    }

    /** holdLost: the member ended the hold h names; its Leases are lost. */
    private LeaseNotices holdLost(HoldLost h) {
        LeaseNotices n = new LeaseNotices();
        HoldKey k = new HoldKey(h.getName(), h.getOwnerKey());
        List<Lease> ls = holds.get(k);
        if (ls == null || ls.get(0).token() != h.getToken()) {
            return n; // released meanwhile, or a newer hold
        }
        holds.remove(k);
        String hold = "hold of " + h.getName() + " (token " + Long.toUnsignedString(h.getToken()) + ")";
        n.loseAll(ls, new NotHolderException(0, "", hold + " ended by the server: an operator's CasRelease", null));
        return n;
    }

    /** resumed starts a new list of the member's holds (a partial one from a stream that broke is dropped). */
    void resumed() {
        serverHolds = null;
    }

    /**
     * serverHolds takes one message of a resumed session's holds. Once the
     * list is whole (done), every Lease of a hold granted at or before its
     * index (its token is at most index) that the list lacks is lost: its
     * hold ended while the session's stream was down.
     */
    private LeaseNotices serverHolds(SessionHolds h) {
        LeaseNotices n = new LeaseNotices();
        if (serverHolds == null) {
            serverHolds = new HashMap<>();
        }
        for (HoldLost x : h.getHoldsList()) {
            serverHolds.put(new HoldKey(x.getName(), x.getOwnerKey()), x.getToken());
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
