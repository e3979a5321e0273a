package dev.baton;

/**
 * LockBusyException: a try-lock found the lock held (or, for a semaphore or
 * a read/write lock, without room for this hold). {@link #holder()} is who
 * holds it, when the server said.
 */
public class LockBusyException extends BatonException {
    private static final long serialVersionUID = 1L;

    private final transient Holder holder;

    public LockBusyException(String name, Holder holder) {
        super(0, "", "lock " + name + " is busy" + (holder == null ? "" : ", held by " + holder), null);
        this.holder = holder;
    }

    /** Who holds the lock (one of the holders when several do); null when the server did not say. */
    public Holder holder() {
        return holder;
    }
}
