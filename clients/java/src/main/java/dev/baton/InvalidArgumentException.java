package dev.baton;

/** InvalidArgumentException: the request breaks a rule (a name, a TTL, a limit, a token): nothing was changed. Also a lock whose every user must state the same limit (LIMIT_MISMATCH). */
public class InvalidArgumentException extends BatonException {
    private static final long serialVersionUID = 1L;

    public InvalidArgumentException(int code, String reason, String message, Throwable cause) {
        super(code, reason, message, cause);
    }
}
