package dev.baton;

/**
 * Holder is one hold of a lock as the server reports it: the session that
 * has it, that session's owner label, the hold's owner key, its fencing
 * token, how often it was entered, and whether it is shared (a semaphore's
 * permit, a reader).
 */
public record Holder(long sessionId, String owner, String ownerKey, long token, int count, boolean shared) {
    @Override
    public String toString() {
        return "session " + sessionId + " (" + owner + (ownerKey.isEmpty() ? "" : ", key " + ownerKey)
                + ") with token " + token;
    }
}
