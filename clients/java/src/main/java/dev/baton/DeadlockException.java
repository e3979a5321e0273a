package dev.baton;

/**
 * DeadlockException: a lock's wait would have closed a deadlock, and the
 * server refused it at once, queueing nothing (Reason DEADLOCK). The
 * message names the cycle in one line. Release what the session holds and
 * start again.
 */
public class DeadlockException extends BatonException {
    private static final long serialVersionUID = 1L;

    public DeadlockException(int code, String reason, String message, Throwable cause) {
        super(code, reason, message, cause);
    }
}
