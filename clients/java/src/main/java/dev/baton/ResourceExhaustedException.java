package dev.baton;

/** ResourceExhaustedException: a limit of the cluster refused the request (too many sessions, waiters, holds, pending requests; a full disk; OVERLOADED after the client's retries): nothing was changed. */
public class ResourceExhaustedException extends BatonException {
    private static final long serialVersionUID = 1L;

    public ResourceExhaustedException(int code, String reason, String message, Throwable cause) {
        super(code, reason, message, cause);
    }
}
