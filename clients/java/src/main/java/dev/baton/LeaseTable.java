package dev.baton;

import baton.v1.BatonOuterClass.HoldLost;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * LeaseTable is a session's unreleased Leases by hold (lock name, owner
 * key), oldest first: where the client decides which Leases a message of
 * the member ends. A hold ends without the session asking when the member
 * pushes HoldLost (an operator's CasRelease, a hold limit), or when the
 * list of holds that follows a resume lacks it (it ended while the stream
 * was down). Every method is called with the session's lock held; each
 * returns the Leases to declare lost, which the caller does after letting
 * go of the lock (their onLost callbacks are the user's code).
 */
final class LeaseTable {
    record HoldKey(String name, String ownerKey) {}

    private final Map<HoldKey, List<Lease>> holds = new LinkedHashMap<>();
    // A resume's list of holds, gathered until its last message; null between lists.
    private Map<HoldKey, Long> serverHolds;

    /**
     * add notes a granted Lease. Leases of the same hold key with another
     * token belong to a hold that ended on the member: they are returned, lost.
     */
    List<Lease> add(Lease l) {
        HoldKey k = new HoldKey(l.name(), l.ownerKey());
        List<Lease> ls = holds.computeIfAbsent(k, x -> new ArrayList<>());
        List<Lease> ended = List.of();
        if (!ls.isEmpty() && ls.get(0).token() != l.token()) {
            ended = new ArrayList<>(ls);
            ls.clear();
        }
        ls.add(l);
        return ended;
    }

    /** remove forgets a released Lease. */
    void remove(Lease l) {
        HoldKey k = new HoldKey(l.name(), l.ownerKey());
        List<Lease> ls = holds.get(k);
        if (ls != null && ls.remove(l) && ls.isEmpty()) {
            holds.remove(k);
        }
    }

    /** all is every Lease; the table keeps them, so that a release still asks the member. */
    List<Lease> all() {
        List<Lease> out = new ArrayList<>();
        holds.values().forEach(out::addAll);
        return out;
    }

    /** clear forgets every Lease (the session ended) and returns them. */
    List<Lease> clear() {
        List<Lease> out = all();
        holds.clear();
        serverHolds = null;
        return out;
    }

    /** holdLost: the member ended the hold (name, ownerKey, token); its Leases are lost. */
    List<Lease> holdLost(String name, String ownerKey, long token) {
        HoldKey k = new HoldKey(name, ownerKey);
        List<Lease> ls = holds.get(k);
        if (ls == null || ls.get(0).token() != token) {
            return List.of(); // released meanwhile, or a newer hold
        }
        holds.remove(k);
        return ls;
    }

    /** resumed starts a new list of the member's holds (a partial one from a stream that broke is dropped). */
    void resumed() {
        serverHolds = null;
    }

    /**
     * serverHolds takes one message of a resumed session's holds. Once the
     * list is whole (done), every Lease of a hold granted at or before index
     * (its token is at most index) that the list lacks is returned, lost:
     * its hold ended while the session's stream was down.
     */
    List<Lease> serverHolds(List<HoldLost> part, long index, boolean done) {
        if (serverHolds == null) {
            serverHolds = new HashMap<>();
        }
        for (HoldLost h : part) {
            serverHolds.put(new HoldKey(h.getName(), h.getOwnerKey()), h.getToken());
        }
        if (!done) {
            return List.of();
        }
        Map<HoldKey, Long> have = serverHolds;
        serverHolds = null;
        List<Lease> lost = new ArrayList<>();
        var it = holds.entrySet().iterator();
        while (it.hasNext()) {
            var e = it.next();
            long token = e.getValue().get(0).token();
            if (Long.compareUnsigned(token, index) > 0 || Long.valueOf(token).equals(have.get(e.getKey()))) {
                continue;
            }
            lost.addAll(e.getValue());
            it.remove();
        }
        return lost;
    }
}
