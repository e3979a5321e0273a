package dev.baton;

import java.time.Duration;
import java.time.Instant;

/**
 * Revocation is a revoke's request that a hold end ({@link BatonClient#revokeLock}):
 * the lock, the hold's owner key and fencing token, the grace its holder
 * had from the revoke to let go, and the deadline when the leader ends the
 * hold unless it is released first. The deadline is the revoking leader's
 * wall clock plus the grace, for people (a new leader gives the hold its
 * full grace again from its election); null if the member sent none.
 */
public record Revocation(String name, String ownerKey, long token, Duration grace, Instant deadline) {
    @Override
    public String toString() {
        return "Revocation{" + name + (ownerKey.isEmpty() ? "" : ", key " + ownerKey) + ", token "
                + Long.toUnsignedString(token) + ", grace " + grace + ", deadline " + deadline + "}";
    }
}
