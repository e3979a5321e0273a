package dev.baton;

import java.net.http.HttpRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * Lease is one granted hold of a lock: its fencing token, and whether the
 * client may still act as its holder. A Lease is valid until it is
 * released, its session ends, or the session's conservative deadline passes
 * with no keepalive answered: the client then declares it lost (isValid()
 * turns false and the onLost callbacks run) before the server can hand the
 * lock on. A lock can be lost at any time; work under it should stop when
 * onLost runs, and write through the token ({@link Fencing}). Close it
 * (try-with-resources) to release the hold.
 *
 * <p>An operator may ask the holder to let go ({@link BatonClient#revokeLock}):
 * {@link #revokeRequested} completes then, and the holder should finish the
 * step under way and release before the revoke's grace passes. The Lease
 * stays valid until then; a hold still there at the grace is ended by the
 * leader, and the Lease is lost with a {@link RevokedException}.
 */
public final class Lease implements AutoCloseable {
    private final Session session;
    private final String name;
    private final String ownerKey;
    private final long token;

    // The revoke that asked the hold to end, or null: written by the
    // session's LeaseTable, under the session's lock, once.
    private volatile Revocation revocation;
    private final CompletableFuture<Revocation> revoked = new CompletableFuture<>();

    private final Object mu = new Object();
    private boolean lost; // guarded by mu
    private BatonException lostCause; // guarded by mu
    private boolean released; // guarded by mu
    private List<Runnable> onLost = new ArrayList<>(); // guarded by mu; null once they ran

    Lease(Session session, String name, String ownerKey, long token) {
        this.session = session;
        this.name = name;
        this.ownerKey = ownerKey;
        this.token = token;
    }

    /** The lock's name. */
    public String name() {
        return name;
    }

    /** The owner key the hold belongs to within its session ("" unless a Mutex said otherwise). */
    public String ownerKey() {
        return ownerKey;
    }

    /**
     * The hold's fencing token: the index of the log entry that granted it,
     * larger than every earlier holder's of this lock. Storage that keeps the
     * largest token it saw and refuses smaller ones shuts out a holder that
     * lost the lock without knowing (a pause, a partition).
     */
    public long token() {
        return token;
    }

    /** The session the hold belongs to. */
    public Session session() {
        return session;
    }

    /**
     * isValid reports whether the client may still act as the holder: not
     * released, not lost, and the session's conservative deadline ahead. It
     * turns false at the deadline itself, whatever the threads are doing.
     */
    public boolean isValid() {
        synchronized (mu) {
            if (lost || released) {
                return false;
            }
        }
        return session.deadlineAhead();
    }

    /** The time until the session's conservative deadline while valid; zero otherwise. */
    public Duration remaining() {
        return isValid() ? session.remaining() : Duration.ZERO;
    }

    /**
     * revokeRequested completes with the {@link Revocation} once a revoke
     * asked the hold to end: finish the step under way, then release,
     * before the revocation's grace passes. It completes on the client's
     * thread that learned it (what it runs should be quick), or at once if
     * the Lease already knows. The client learns of a revoke when the leader
     * pushes it or, if the session's stream was down, when it resumes. It
     * never completes for a hold nobody revoked. Each call returns a new future,
     * completed with the Lease's: completing or cancelling it changes nothing
     * for the Lease.
     */
    public CompletableFuture<Revocation> revokeRequested() {
        return revoked.copy();
    }

    /** revocation is the revoke that asked the hold to end, once the Lease knows it; empty before. */
    public Optional<Revocation> revocation() {
        return Optional.ofNullable(revocation);
    }

    /**
     * lostCause says why the Lease was lost: a {@link RevokedException} when
     * the leader ended the hold at the end of a revoke's grace, a
     * {@link NotHolderException} when the hold ended otherwise (an operator's
     * CasRelease, or it ended while the session's stream was down), the
     * session's end cause when the session ended, a BatonException when its
     * deadline passed with no keepalive answered. Null while the Lease is
     * not lost (a release is not a loss).
     */
    public BatonException lostCause() {
        synchronized (mu) {
            return lostCause;
        }
    }

    /**
     * onLost runs r once when the Lease is lost (the deadline passed
     * unanswered, the session ended or was closed, the member ended the
     * hold: an operator's CasRelease, a revoke's grace; lostCause says
     * which), on the client's thread that decided it, before the server can
     * hand the lock on; at once, on this thread, if it is lost already. A release is not a loss. r should
     * be quick: stop the work, do not wait for it.
     */
    public void onLost(Runnable r) {
        synchronized (mu) {
            if (!lost) {
                if (!released) {
                    onLost.add(r);
                }
                return;
            }
        }
        r.run();
    }

    /** revokedBy notes the revoke that asked the hold to end; LeaseTable calls it under the session's lock. */
    void revokedBy(Revocation r) {
        revocation = r;
    }

    /** tellRevoked completes revokeRequested; called without the session's lock, as it runs the user's code. */
    void tellRevoked() {
        revoked.complete(revocation);
    }

    /** lose declares the Lease lost for cause and runs its callbacks. */
    void lose(BatonException cause) {
        List<Runnable> rs;
        synchronized (mu) {
            if (lost || released) {
                return;
            }
            lost = true;
            lostCause = cause;
            rs = onLost;
            onLost = null;
        }
        for (Runnable r : rs) {
            try {
                r.run();
            } catch (RuntimeException e) {
                // A callback's failure is its own; the others still run.
            }
        }
    }

    /**
     * release gives the hold back (one entry of it, for a reentrant hold).
     * Releasing twice does nothing. A Lease lost to the deadline may still
     * be held on the server (the session may come back): release asks
     * anyway, and a hold already gone is no error.
     *
     * @throws BatonException when the server refused otherwise; interrupted,
     *     it returns with the thread's interrupt flag set and the session's
     *     end or TTL frees the hold
     */
    public void release() {
        synchronized (mu) {
            if (released) {
                return;
            }
            released = true;
            onLost = null;
        }
        session.forget(this);
        if (session.ended()) {
            return;
        }
        try {
            session.release(name, ownerKey, token);
        } catch (NotHolderException | SessionLostException e) {
            // Gone already: what release wants.
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** close releases the hold (release). */
    @Override
    public void close() {
        release();
    }

    /** fence puts the Lease's fencing claim on an outgoing HTTP request (Fencing.headers). */
    public HttpRequest.Builder fence(HttpRequest.Builder b) {
        return Fencing.headers(b, this);
    }

    /** The lock, token and session; never the session's secret. */
    @Override
    public String toString() {
        return "Lease{" + name + (ownerKey.isEmpty() ? "" : ", key " + ownerKey) + ", token " + token + ", session "
                + Long.toUnsignedString(session.id()) + "}";
    }
}
