package dev.baton;

/** PermissionDeniedException: the server refused the request: not this session's secret (SECRET_MISMATCH), a blacklisted session (BLACKLISTED), a user without the permission (NOT_PERMITTED), or no credentials (NO_CREDENTIALS). */
public class PermissionDeniedException extends BatonException {
    private static final long serialVersionUID = 1L;

    public PermissionDeniedException(int code, String reason, String message, Throwable cause) {
        super(code, reason, message, cause);
    }
}
