package dev.baton;

/** SessionLostException: the session ended (expired, closed, blacklisted, or the client gave up reaching the cluster a TTL past its deadline); every Lease of it is lost and every call fails with it. */
public class SessionLostException extends BatonException {
    private static final long serialVersionUID = 1L;

    public SessionLostException(int code, String reason, String message, Throwable cause) {
        super(code, reason, message, cause);
    }
}
