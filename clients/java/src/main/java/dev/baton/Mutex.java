package dev.baton;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;

/**
 * Mutex is a handle on one lock for one (session, owner key): one holder
 * at a time, waiters served in FIFO order by the server. It holds no state
 * beyond its name: every Mutex of the same session, name and key shares one
 * hold, and locking it again while it is held re-enters the hold (same
 * token, a count the server keeps; each Lease releases one). A Mutex is
 * safe for concurrent use. The same class is a semaphore's permit and a
 * read/write lock's reader or writer, which differ only in their mode.
 */
public final class Mutex {
    private final Session session;
    private final String name;
    private final String ownerKey;
    private final boolean shared;
    private final int limit;

    Mutex(Session session, String name, String ownerKey, boolean shared, int limit) {
        this.session = session;
        this.name = name;
        this.ownerKey = ownerKey;
        this.shared = shared;
        this.limit = limit;
    }

    /** The lock's name. */
    public String name() {
        return name;
    }

    /** The owner key: holds of one session under different keys are different holds. */
    public String ownerKey() {
        return ownerKey;
    }

    /** withOwnerKey is a handle on the same lock under another owner key (default ""). */
    public Mutex withOwnerKey(String key) {
        return new Mutex(session, name, key, shared, limit);
    }

    /**
     * lock acquires the lock, waiting in its FIFO queue as long as it takes.
     * An interrupt ends the wait: the call's connection closes and the
     * server drops the wait (and releases a grant that crossed it).
     *
     * @throws SessionLostException when the session ends first
     */
    public Lease lock() throws InterruptedException {
        return acquire(true, null);
    }

    /**
     * lock acquires the lock, waiting up to timeout (which bounds the wait,
     * never the hold).
     *
     * @throws WaitTimeoutException when the wait ran out; nothing is held
     */
    public Lease lock(Duration timeout) throws InterruptedException {
        if (timeout.isZero() || timeout.isNegative()) {
            throw new InvalidArgumentException(3, "INVALID_ARGUMENT", "wait timeout " + timeout + " is not positive", null);
        }
        return acquire(true, timeout);
    }

    /**
     * tryLock acquires the lock if it is free (or, for a shared hold, has
     * room and no waiter ahead), and answers at once.
     *
     * @throws LockBusyException when it is not, naming a holder
     */
    public Lease tryLock() throws InterruptedException {
        return acquire(false, null);
    }

    private Lease acquire(boolean wait, Duration timeout) throws InterruptedException {
        long start = System.nanoTime();
        while (true) {
            ObjectNode body = Wire.object().put("name", name).put("owner_key", ownerKey).put("wait", wait)
                    .put("shared", shared).put("limit", limit);
            Duration attempt = session.requestTimeout();
            if (wait && timeout == null) {
                attempt = null; // the grant may take as long as the holders do
            } else if (wait) {
                Duration left = timeout.minusNanos(System.nanoTime() - start);
                if (left.isNegative() || left.isZero()) {
                    throw new WaitTimeoutException(4, "WAIT_TIMED_OUT", "wait for lock " + name + " ran out", null);
                }
                body.put("wait_timeout", Wire.duration(left));
                // The server ends the wait at the timeout; the attempt gives
                // its answer the time a request takes besides.
                attempt = left.plus(session.requestTimeout());
            }
            Transport.Answer a;
            try {
                a = session.mutate("/v1/locks/acquire", body, attempt, 0);
            } catch (BatonException e) {
                if (wait && "WAIT_CANCELLED".equals(e.reason())) {
                    // The member saw an attempt's connection break and dropped
                    // the wait (one entry, a crossing grant released in it):
                    // nothing is held or queued, so queue again.
                    continue;
                }
                throw e;
            }
            JsonNode r = a.body();
            if (r.path("acquired").asBoolean()) {
                return session.register(this, Wire.uint64(r, "token"));
            }
            throw new LockBusyException(name, Wire.holder(r.get("holder")));
        }
    }

    @Override
    public String toString() {
        return "Mutex{" + name + (ownerKey.isEmpty() ? "" : ", key " + ownerKey) + ", session "
                + Long.toUnsignedString(session.id()) + "}";
    }
}
