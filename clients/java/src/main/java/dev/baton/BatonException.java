package dev.baton;

/**
 * BatonException is every error the client reports: the root of one
 * hierarchy, so that {@code catch (BatonException e)} catches them all.
 * {@link #reason()} is the server's Reason (its enum name in baton.proto,
 * such as {@code "NOT_HOLDER"}), or "" when the client decided alone;
 * {@link #code()} the gRPC status code the server answered (0 when none).
 * Messages never carry a session's secret.
 */
public class BatonException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int code;
    private final String reason;

    public BatonException(String message) {
        this(0, "", message, null);
    }

    public BatonException(int code, String reason, String message, Throwable cause) {
        super(message, cause);
        this.code = code;
        this.reason = reason == null ? "" : reason;
    }

    /** The gRPC status code of the server's answer, 0 when the client decided alone. */
    public int code() {
        return code;
    }

    /** The server's Reason (baton.proto's enum name), "" when there was none. */
    public String reason() {
        return reason;
    }
}
