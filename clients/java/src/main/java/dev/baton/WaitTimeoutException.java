package dev.baton;

/** WaitTimeoutException: a lock's wait ran out before it was granted; nothing is held (Reason WAIT_TIMED_OUT). */
public class WaitTimeoutException extends BatonException {
    private static final long serialVersionUID = 1L;

    public WaitTimeoutException(int code, String reason, String message, Throwable cause) {
        super(code, reason, message, cause);
    }
}
