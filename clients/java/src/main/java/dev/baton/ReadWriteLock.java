package dev.baton;

/**
 * ReadWriteLock is a handle on a lock that many readers hold at once (up to
 * its reader limit) or one writer alone. Readers and writers queue in one
 * FIFO: a reader behind a waiting writer waits for it, so writers are not
 * starved. Every user of one name must state the same reader limit while
 * anyone holds or waits for it.
 */
public final class ReadWriteLock {
    /** The reader limit unless stated: the most holders a lock may have (the Go client's DefaultMaxReaders). */
    public static final int DEFAULT_MAX_READERS = 10_000;

    private final Mutex reader;
    private final Mutex writer;

    ReadWriteLock(Session session, String name, int maxReaders) {
        this.reader = new Mutex(session, name, "", true, maxReaders);
        this.writer = new Mutex(session, name, "", false, maxReaders);
    }

    /** The lock's name. */
    public String name() {
        return reader.name();
    }

    /** readLock is the handle that takes the lock as one of its readers. */
    public Mutex readLock() {
        return reader;
    }

    /** writeLock is the handle that takes the lock as its one writer. */
    public Mutex writeLock() {
        return writer;
    }
}
