package dev.baton;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * LeaseNotices are what the session decided about its Leases under its lock
 * (which are lost, and why), to tell them once the lock is let go: telling
 * runs the user's code (onLost callbacks). Not safe for concurrent use;
 * each belongs to the one thread that made it.
 */
final class LeaseNotices {
    private final List<Lease> lost = new ArrayList<>();
    private final List<BatonException> causes = new ArrayList<>();

    /** lose: l is lost, for cause. */
    void lose(Lease l, BatonException cause) {
        lost.add(l);
        causes.add(cause);
    }

    /** loseAll: every Lease of ls is lost, for cause. */
    void loseAll(Collection<Lease> ls, BatonException cause) {
        for (Lease l : ls) {
            lose(l, cause);
        }
    }

    /** add takes o's notices after this one's; it returns this. */
    LeaseNotices add(LeaseNotices o) {
        lost.addAll(o.lost);
        causes.addAll(o.causes);
        return this;
    }

    /** tell tells the Leases; call it without the session's lock. */
    void tell() {
        for (int i = 0; i < lost.size(); i++) {
            lost.get(i).lose(causes.get(i));
        }
    }
}
