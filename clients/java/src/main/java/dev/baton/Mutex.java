package dev.baton;

import baton.v1.BatonOuterClass.AcquireRequest;
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
     * lock acquires the lock, waiting in its FIFO queue as long as it takes:
     * the member pushes the grant, which ends the wait at once. An interrupt
     * ends the wait: the client cancels it on the server (and releases a
     * grant that crossed the cancel).
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
        AcquireRequest.Builder a = AcquireRequest.newBuilder().setName(name).setOwnerKey(ownerKey).setWait(wait)
                .setShared(shared).setLimit(limit);
        if (timeout != null) {
            a.setWaitTimeout(Wire.proto(timeout));
        }
        return session.acquire(this, a.build(), timeout);
    }

    @Override
    public String toString() {
        return "Mutex{" + name + (ownerKey.isEmpty() ? "" : ", key " + ownerKey) + ", session "
                + Long.toUnsignedString(session.id()) + "}";
    }
}
