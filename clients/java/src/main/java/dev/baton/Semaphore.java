package dev.baton;

import java.time.Duration;

/**
 * Semaphore is a handle on a lock that admits up to a number of holders at
 * once, each holding one permit: a pool of N connections, N concurrent jobs.
 * Every permit is a hold of its own, with its own fencing token and Lease,
 * granted in FIFO order. Like a Mutex, the handle belongs to one (session,
 * owner key): acquiring again under the same key re-enters the permit it
 * holds; a second permit for the same session needs another key
 * ({@link #withOwnerKey}). Every user of one name must state the same
 * number of permits while anyone holds or waits for it.
 */
public final class Semaphore {
    private final Mutex m;

    Semaphore(Mutex m) {
        this.m = m;
    }

    /** The lock's name. */
    public String name() {
        return m.name();
    }

    /** withOwnerKey is a handle on the same semaphore under another owner key. */
    public Semaphore withOwnerKey(String key) {
        return new Semaphore(m.withOwnerKey(key));
    }

    /** acquire takes a permit, waiting in the FIFO queue as long as it takes (as Mutex.lock). */
    public Lease acquire() throws InterruptedException {
        return m.lock();
    }

    /** acquire takes a permit, waiting up to timeout (as Mutex.lock(Duration)). */
    public Lease acquire(Duration timeout) throws InterruptedException {
        return m.lock(timeout);
    }

    /** tryAcquire takes a permit if one is free and nobody waits, else throws LockBusyException. */
    public Lease tryAcquire() throws InterruptedException {
        return m.tryLock();
    }

    @Override
    public String toString() {
        return "Semaphore{" + m.name() + "}";
    }
}
