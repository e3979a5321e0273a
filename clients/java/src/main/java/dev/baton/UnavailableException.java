package dev.baton;

/**
 * UnavailableException: no member answered as the leader within the
 * client's attempts (members down, an election longer than the attempts,
 * a partition), for a call that belongs to no session (opening one, a
 * read). A session's own requests are retried, each with its sequence
 * number, until they are answered or the session is lost.
 */
public class UnavailableException extends BatonException {
    private static final long serialVersionUID = 1L;

    public UnavailableException(int code, String reason, String message, Throwable cause) {
        super(code, reason, message, cause);
    }
}
