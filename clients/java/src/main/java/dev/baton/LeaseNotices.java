package dev.baton;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * LeaseNotices are what the session decided about its Leases under its lock
 * (which are lost, and why; which were asked by a revoke to let go), to
 * tell them once the lock is let go: telling runs the user's code (onLost
 * callbacks, what waits on Lease.revokeRequested). Not safe for concurrent
 * use; each belongs to the one thread that made it.
 */
final class LeaseNotices {
    private final List<Lease> revoked = new ArrayList<>();
    private final List<Lease> lost = new ArrayList<>();
    private final List<BatonException> causes = new ArrayList<>();

    /** revoked: l learned that a revoke asked its hold to end (its revocation is set). */
    void revoked(Lease l) {
        revoked.add(l);
    }

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
        revoked.addAll(o.revoked);
        lost.addAll(o.lost);
        causes.addAll(o.causes);
        return this;
    }

    /** tell tells the Leases, revokes first; call it without the session's lock. */
    void tell() {
        for (Lease l : revoked) {
            l.tellRevoked();
        }
        for (int i = 0; i < lost.size(); i++) {
            lost.get(i).lose(causes.get(i));
        }
    }
}
