package dev.baton;

import baton.v1.BatonOuterClass.DeadlockEdge;
import java.util.List;

/**
 * DeadlockException: a lock's wait would have closed a deadlock (Reason
 * DEADLOCK). Either the server refused the acquire at once, queueing
 * nothing, or (log version 14 on) a grant or a cancel left a queued wait
 * deadlocked and the server ended it with a pushed WaitEnded. The message
 * is one line; {@link #cycle()} is the deadlock itself. Release what the
 * session holds and start again.
 */
public class DeadlockException extends BatonException {
    private static final long serialVersionUID = 2L;

    private final List<DeadlockEdge> cycle;

    public DeadlockException(int code, String reason, String message, Throwable cause) {
        this(code, reason, message, cause, List.of());
    }

    /** A DeadlockException naming cycle (null: none), the refused or ended wait first. */
    public DeadlockException(int code, String reason, String message, Throwable cause, List<DeadlockEdge> cycle) {
        super(code, reason, message, cause);
        this.cycle = cycle == null ? List.of() : List.copyOf(cycle);
    }

    /**
     * The deadlock, as the server named it (baton.proto's
     * {@code Error.deadlock_cycle}, or {@code WaitEnded.deadlock_cycle} for a
     * wait the server ended): one edge per wait, the refused (or ended)
     * wait first. Each edge's waiter ({@code session_id}, {@code owner_key})
     * waits for {@code lock}, which the edge's blocker
     * ({@code blocker_session_id}, {@code blocker_owner_key}) holds, or, with
     * {@code queued_ahead}, waits for ahead of it in its FIFO queue. Each
     * edge's blocker is the next edge's waiter, and the last edge's blocker
     * the first's (or an earlier edge's, when the wait would have joined a
     * deadlock that was there before it). Unmodifiable; empty when the
     * server named no cycle.
     */
    public List<DeadlockEdge> cycle() {
        return cycle;
    }

    /**
     * One line naming each wait of cycle, as the server's own DEADLOCK
     * refusal does: {@code deadlock: session 7 waits for lock "y" held by
     * session 8, ...}.
     */
    static String describe(List<DeadlockEdge> cycle) {
        StringBuilder b = new StringBuilder("deadlock: ");
        for (int i = 0; i < cycle.size(); i++) {
            DeadlockEdge e = cycle.get(i);
            if (i > 0) {
                b.append(", ");
            }
            b.append(node(e.getSessionId(), e.getOwnerKey())).append(" waits for lock ").append(quote(e.getLock()))
                    .append(e.getQueuedAhead() ? " behind " : " held by ")
                    .append(node(e.getBlockerSessionId(), e.getBlockerOwnerKey()));
        }
        return b.toString();
    }

    private static String node(long session, String key) {
        String s = "session " + Long.toUnsignedString(session);
        return key.isEmpty() ? s : s + " key " + quote(key);
    }

    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }
}
