package dev.baton;

import java.util.List;

/**
 * LockInfo is a lock's state as the leader reads it (linearizably): its
 * holder limit, its holders, and the sessions waiting for it in queue
 * order. A lock nobody holds or waits for has no holders and limit 0.
 */
public record LockInfo(String name, int limit, List<Holder> holders, List<Long> waitingSessions) {}
