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

    private final String leaderAddr;

    public UnavailableException(int code, String reason, String message, Throwable cause) {
        this(code, reason, message, cause, "");
    }

    public UnavailableException(int code, String reason, String message, Throwable cause, String leaderAddr) {
        super(code, reason, message, cause);
        this.leaderAddr = leaderAddr == null ? "" : leaderAddr;
    }

    /** The leader's client address a member named with NOT_LEADER, "" when none. */
    public String leaderAddr() {
        return leaderAddr;
    }
}
