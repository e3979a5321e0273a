package dev.baton;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.Future;

/**
 * InFlight is a session's HTTP exchanges under way, so that the session's
 * end cancels them (a waiting acquire holds its call open until its grant):
 * a call then fails with the session's error at once.
 */
final class InFlight {
    private final Set<Future<?>> calls = new HashSet<>();
    private boolean closed;

    /** add notes f; false once closed (the caller cancels f). */
    synchronized boolean add(Future<?> f) {
        if (closed) {
            return false;
        }
        calls.add(f);
        return true;
    }

    synchronized void remove(Future<?> f) {
        calls.remove(f);
    }

    /** close cancels every exchange under way, and every later one. */
    void close() {
        Set<Future<?>> fs;
        synchronized (this) {
            closed = true;
            fs = new HashSet<>(calls);
            calls.clear();
        }
        for (Future<?> f : fs) {
            f.cancel(true);
        }
    }
}
