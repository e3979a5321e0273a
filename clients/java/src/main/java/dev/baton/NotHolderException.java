package dev.baton;

/** NotHolderException: the session does not hold the lock under that token (NOT_HOLDER, TOKEN_MISMATCH, HOLD_LOST): released already, or its hold ended. */
public class NotHolderException extends BatonException {
    private static final long serialVersionUID = 1L;

    public NotHolderException(int code, String reason, String message, Throwable cause) {
        super(code, reason, message, cause);
    }
}
