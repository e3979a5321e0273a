package dev.baton;

/**
 * RevokedException is why a Lease was lost when a revoke asked its hold to
 * end and the leader ended it as the grace passed, its holder still
 * holding ({@link Lease#lostCause}). It is a NotHolderException: the hold
 * is gone, and the next holder's token is larger.
 */
public class RevokedException extends NotHolderException {
    private static final long serialVersionUID = 1L;

    private final transient Revocation revocation;

    public RevokedException(Revocation revocation, String message) {
        super(0, "", message, null);
        this.revocation = revocation;
    }

    /** The revoke that asked the hold to end. */
    public Revocation revocation() {
        return revocation;
    }
}
