package dev.baton;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;

/**
 * Session is a client session: the liveness every hold and wait of it rides
 * on. A keepalive thread sends a keepalive every TTL/3; a watchdog thread
 * ends every {@link Lease} at the session's conservative deadline when no
 * keepalive was answered in time (see {@link #safetyMargin}). Every
 * mutating request carries the session's id, its secret and a sequence
 * number, and is sent again with the same number until it is answered, so
 * it takes effect exactly once. A Session is safe for concurrent use; close
 * it (try-with-resources) to release everything it holds at once.
 *
 * <p>A lock can be lost at any time: a partition, a pause or an operator's
 * blacklist ends the session. Work under a lock should stop when its
 * Lease's {@link Lease#onLost onLost} callback runs, and write through
 * fencing tokens ({@link Fencing}).
 */
public final class Session implements AutoCloseable {
    /** The TTLs a member accepts. */
    public static final Duration MIN_TTL = Duration.ofSeconds(1);
    public static final Duration MAX_TTL = Duration.ofMinutes(10);

    /** The fraction of the TTL the client allows for a difference in clock rate with the leader. */
    public static final double CLOCK_RATE_ALLOWANCE = 0.01;
    /** The least clock margin, whatever the TTL. */
    public static final Duration MIN_CLOCK_MARGIN = Duration.ofMillis(50);
    /** The time the client may take to notice its deadline passed (scheduling, a GC pause). */
    public static final Duration SCHEDULING_ALLOWANCE = Duration.ofMillis(50);

    /** State is the session's state as the client sees it. */
    public enum State {
        /** The conservative deadline lies ahead: every Lease is valid. */
        HEALTHY,
        /**
         * The deadline passed with no keepalive answered: every Lease was lost
         * then. An answer in time makes the session healthy again; Leases lost
         * stay lost.
         */
        JEOPARDY,
        /** The server ended the session, or nothing answered for a TTL past the deadline. */
        EXPIRED,
        /** {@link Session#close} ended it. */
        CLOSED
    }

    private static final SecureRandom RANDOM = new SecureRandom();

    private final BatonClient client;
    private final Transport transport;
    private final long id;
    private final String secret; // proves a request is this session's; never printed
    private final Duration ttl;
    private final String owner;
    private final long marginNanos;
    private final InFlight inFlight = new InFlight();
    private final Thread keepAliveThread;
    private final Thread watchdogThread;
    volatile boolean keepAlivesPaused; // tests of the deadline stop the keepalives

    private final Object mu = new Object();
    // The client's conservative deadline, a System.nanoTime reading: every
    // Lease is valid until then. Written under mu.
    private volatile long deadline;
    private State state = State.HEALTHY; // guarded by mu
    private BatonException endCause; // why the session ended; guarded by mu
    private long lastSeq; // guarded by mu
    private final TreeSet<Long> pending = new TreeSet<>(); // seqs without an answer; guarded by mu
    private final Set<Lease> leases = new LinkedHashSet<>(); // guarded by mu

    private Session(BatonClient client, long id, String secret, Duration ttl, String owner, long deadline) {
        this.client = client;
        this.transport = client.transport();
        this.id = id;
        this.secret = secret;
        this.ttl = ttl;
        this.owner = owner;
        this.marginNanos = safetyMargin(ttl).toNanos();
        this.deadline = deadline;
        this.keepAliveThread = new Thread(this::keepAliveLoop, "baton-keepalives-" + Long.toUnsignedString(id));
        this.watchdogThread = new Thread(this::watchdogLoop, "baton-deadline-" + Long.toUnsignedString(id));
        keepAliveThread.setDaemon(true);
        watchdogThread.setDaemon(true);
    }

    /**
     * The margin the client subtracts from a session of the given TTL:
     * max(1% of TTL, 50 ms) + 50 ms, as the Go client does. A session stays
     * valid, in the client's eyes, until sendTime + TTL - margin, where
     * sendTime is when the client sent the newest keepalive that was
     * answered (read before the request is written). The server counts its
     * own deadline from when that keepalive arrived, so the client's
     * deadline passes first by the network delay plus the margin.
     */
    public static Duration safetyMargin(Duration ttl) {
        long clock = Math.max((long) (ttl.toNanos() * CLOCK_RATE_ALLOWANCE), MIN_CLOCK_MARGIN.toNanos());
        return Duration.ofNanos(clock + SCHEDULING_ALLOWANCE.toNanos());
    }

    /** open opens a session on the leader (BatonClient.newSession). */
    static Session open(BatonClient client, Duration ttl, String owner) throws InterruptedException {
        if (ttl.compareTo(MIN_TTL) < 0 || ttl.compareTo(MAX_TTL) > 0) {
            throw new InvalidArgumentException(3, "INVALID_ARGUMENT",
                    "session TTL " + ttl + " is outside " + MIN_TTL + ".." + MAX_TTL, null);
        }
        byte[] b = new byte[32];
        RANDOM.nextBytes(b);
        String secret = Base64.getUrlEncoder().withoutPadding().encodeToString(b);
        // The nonce makes the open exactly-once across the transport's
        // retries: a retry after a lost answer is answered with the session
        // the first attempt opened (the secret is ours, so it is the same).
        ObjectNode body = Wire.object().put("ttl", Wire.duration(ttl)).put("owner", owner)
                .put("nonce", Long.toUnsignedString(RANDOM.nextLong() | 1)).put("secret", secret);
        Transport t = client.transport();
        // The deadline counts from before the first attempt: the answer may
        // be a retry's, naming a session whose TTL began when an earlier
        // attempt applied.
        long sent = System.nanoTime();
        Transport.Answer a = t.call("POST", "/v1/sessions", body,
                new Transport.Retry(() -> null, client.requestTimeout(), t.maxAttempts()), null);
        Duration granted = orDefault(Wire.duration(a.body().get("ttl")), ttl);
        long id = Wire.uint64(a.body(), "session_id");
        Session s = new Session(client, id, secret, ttl, owner, sent + granted.toNanos() - safetyMargin(ttl).toNanos());
        s.keepAliveThread.start();
        s.watchdogThread.start();
        return s;
    }

    private static Duration orDefault(Duration d, Duration def) {
        return d == null || d.isZero() || d.isNegative() ? def : d;
    }

    /** The session's id: unique forever in its cluster, and public. */
    public long id() {
        return id;
    }

    /** The session's TTL. */
    public Duration ttl() {
        return ttl;
    }

    /** The session's owner label, shown to operators beside its holds. */
    public String owner() {
        return owner;
    }

    /** The session's state now. */
    public State state() {
        synchronized (mu) {
            return state;
        }
    }

    /** Why the session ended, or null while it lives. */
    public BatonException endCause() {
        synchronized (mu) {
            return endCause;
        }
    }

    /** The time left until the client's conservative deadline; zero once it passed. */
    public Duration remaining() {
        return Duration.ofNanos(Math.max(0, deadline - System.nanoTime()));
    }

    /** mutex is a handle on the lock name, one holder at a time. Nothing is sent until it is locked. */
    public Mutex mutex(String name) {
        return new Mutex(this, name, "", false, 1);
    }

    /**
     * semaphore is a handle on the lock name as a semaphore of permits
     * holders, each holding one permit with its own token. Every user of the
     * name must state the same permits while anyone holds or waits for it.
     */
    public Semaphore semaphore(String name, int permits) {
        return new Semaphore(new Mutex(this, name, "", true, permits));
    }

    /** readWriteLock is a handle on name as a read/write lock of ReadWriteLock.DEFAULT_MAX_READERS readers. */
    public ReadWriteLock readWriteLock(String name) {
        return readWriteLock(name, ReadWriteLock.DEFAULT_MAX_READERS);
    }

    /**
     * readWriteLock is a handle on name as a read/write lock that admits
     * many readers at once (up to maxReaders, which every user of the name
     * must state alike) or one writer.
     */
    public ReadWriteLock readWriteLock(String name, int maxReaders) {
        return new ReadWriteLock(this, name, maxReaders);
    }

    /**
     * close ends the session on the server, which releases its holds and
     * drops its waits at once, and stops its threads. Every Lease is lost
     * (its onLost callbacks run). Closing an ended session does nothing. If
     * no member answers, the server ends the session after its TTL.
     */
    @Override
    public void close() {
        synchronized (mu) {
            if (endCause != null) {
                return;
            }
        }
        BatonException cause = new SessionLostException(0, "", "session " + id + " closed", null);
        try {
            mutate("/v1/sessions/" + Long.toUnsignedString(id) + "/close", Wire.object(), client.requestTimeout(),
                    transport.maxAttempts());
        } catch (BatonException e) {
            // Lost already, or no member answered: the server ends it after its TTL.
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            end(cause, State.CLOSED);
            client.forget(this);
            join(keepAliveThread);
            join(watchdogThread);
        }
    }

    private static void join(Thread t) {
        if (t == Thread.currentThread()) {
            return;
        }
        try {
            t.join(Duration.ofSeconds(5).toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The session's id, owner and TTL; never its secret. */
    @Override
    public String toString() {
        return "Session{id=" + Long.toUnsignedString(id) + ", owner=" + owner + ", ttl=" + ttl + "}";
    }

    // ---- requests ----

    /**
     * mutate sends a mutating request of this session with the next sequence
     * number, and again with the same number until it is answered (UNAVAILABLE,
     * OVERLOADED, no answer), the session ends, or maxAttempts (0: no bound).
     * The server answers a retry with the first attempt's answer.
     */
    Transport.Answer mutate(String path, ObjectNode body, Duration attemptTimeout, int maxAttempts)
            throws InterruptedException {
        boolean closing = path.endsWith("/close"); // CloseSessionRequest has no header
        long seq;
        synchronized (mu) {
            if (endCause != null) {
                throw endCause;
            }
            seq = ++lastSeq;
            pending.add(seq);
        }
        try {
            if (closing) {
                body.put("seq", seq).put("secret", secret);
            } else {
                body.putObject("header").put("session_id", Long.toUnsignedString(id)).put("seq", seq)
                        .put("min_unacked_seq", minUnacked()).put("secret", secret);
            }
            return transport.call("POST", path, body, new Transport.Retry(this::stopCause, attemptTimeout, maxAttempts),
                    inFlight);
        } catch (SessionLostException e) {
            if (!closing) {
                end(e, State.EXPIRED);
            }
            throw e;
        } finally {
            synchronized (mu) {
                pending.remove(seq);
            }
        }
    }

    /** The lowest sequence number without an answer: the server keeps the answers from there on. */
    private long minUnacked() {
        synchronized (mu) {
            return pending.isEmpty() ? lastSeq + 1 : pending.first();
        }
    }

    /** The exception that ends the session's calls, or null while it lives. */
    private BatonException stopCause() {
        synchronized (mu) {
            return endCause;
        }
    }

    String secretForRequests() {
        return secret;
    }

    Transport transport() {
        return transport;
    }

    Duration requestTimeout() {
        return client.requestTimeout();
    }

    /**
     * register makes a Lease of a granted hold. A session that ended while
     * the grant was on its way makes the Lease lost at once.
     */
    Lease register(Mutex m, long token) {
        Lease l = new Lease(this, m.name(), m.ownerKey(), token);
        synchronized (mu) {
            if (endCause == null) {
                leases.add(l);
                return l;
            }
        }
        l.lose();
        return l;
    }

    /** release gives back one entry of the hold (name, ownerKey, token): Lease.release. */
    void release(String name, String ownerKey, long token) throws InterruptedException {
        ObjectNode body = Wire.object().put("name", name).put("token", token).put("owner_key", ownerKey);
        mutate("/v1/locks/release", body, client.requestTimeout(), 0);
    }

    /** forget drops a released Lease from the ones the deadline ends. */
    void forget(Lease l) {
        synchronized (mu) {
            leases.remove(l);
        }
    }

    /** deadlineAhead reports whether the conservative deadline lies ahead. */
    boolean deadlineAhead() {
        return System.nanoTime() - deadline < 0;
    }

    long deadlineNanos() {
        return deadline;
    }

    boolean ended() {
        synchronized (mu) {
            return endCause != null;
        }
    }

    // ---- keepalives and the deadline ----

    /**
     * keepAliveLoop starts a keepalive every TTL/3, each on a thread of its
     * own, so that a slow answer neither delays the next keepalive nor is
     * given up while it can still move the deadline (until a TTL after its
     * send).
     */
    private void keepAliveLoop() {
        long period = ttl.toNanos() / 3;
        long next = System.nanoTime() + period;
        while (true) {
            synchronized (mu) {
                long wait;
                try {
                    while (endCause == null && (wait = next - System.nanoTime()) > 0) {
                        waitNanos(wait);
                    }
                } catch (InterruptedException e) {
                    return;
                }
                if (endCause != null) {
                    return;
                }
            }
            next = Math.max(next + period, System.nanoTime());
            if (!keepAlivesPaused) {
                Thread t = new Thread(this::keepAlive, "baton-keepalive-" + Long.toUnsignedString(id));
                t.setDaemon(true);
                t.start();
            }
        }
    }

    /**
     * keepAlive sends one keepalive. An answer moves the deadline to the
     * answered attempt's send time + TTL - margin (extend); a member that is
     * not the leader names it and the call follows; a refusal that says the
     * session is gone ends it. Its attempts stop a TTL after the first: an
     * answer to a later one could not move the deadline past what the next
     * keepalives do.
     */
    private void keepAlive() {
        long giveUp = System.nanoTime() + ttl.toNanos();
        String path = "/v1/sessions/" + Long.toUnsignedString(id) + "/keepalive";
        try {
            Transport.Answer a = transport.call("POST", path, Wire.object().put("secret", secret),
                    new Transport.Retry(() -> {
                        BatonException e = stopCause();
                        if (e == null && System.nanoTime() - giveUp > 0) {
                            e = new UnavailableException(14, "", "keepalive unanswered for a TTL", null);
                        }
                        return e;
                    }, ttl, 0), inFlight);
            extend(a.sentNanos(), orDefault(Wire.duration(a.body().get("ttl")), ttl));
        } catch (SessionLostException | PermissionDeniedException e) {
            // Expired, not found, blacklisted (its keepalives refused, so it
            // will expire), or a secret it no longer has: lost now.
            end(e, State.EXPIRED);
        } catch (BatonException e) {
            // Unanswered: the next keepalive tries again, and the watchdog
            // decides at the deadline.
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * extend moves the deadline after a keepalive sent at sent (a nanoTime
     * reading taken before the request was written) was answered with ttl.
     * An answer in time after a jeopardy makes the session healthy again.
     */
    private void extend(long sent, Duration granted) {
        long nd = sent + granted.toNanos() - marginNanos;
        synchronized (mu) {
            if (nd - deadline > 0) {
                deadline = nd;
                mu.notifyAll();
            }
            if (state == State.JEOPARDY && System.nanoTime() - nd < 0) {
                state = State.HEALTHY;
            }
        }
    }

    /**
     * watchdogLoop is where the client decides its Leases are lost: once the
     * deadline passed with no keepalive answered, every Lease is lost and the
     * session is in jeopardy; once a TTL more passed, the client gives up and
     * the session is lost.
     */
    private void watchdogLoop() {
        while (true) {
            List<Lease> lost;
            synchronized (mu) {
                while (true) {
                    if (endCause != null) {
                        return;
                    }
                    long at = state == State.JEOPARDY ? deadline + ttl.toNanos() : deadline;
                    long wait = at - System.nanoTime();
                    if (wait <= 0) {
                        break;
                    }
                    try {
                        waitNanos(wait);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
                if (state == State.JEOPARDY) {
                    lost = null;
                } else {
                    state = State.JEOPARDY;
                    lost = new ArrayList<>(leases);
                    leases.clear();
                }
            }
            if (lost == null) {
                end(new SessionLostException(0, "", "session " + id + ": no answer from the cluster for a TTL ("
                        + ttl + ") past the deadline", null), State.EXPIRED);
                return;
            }
            for (Lease l : lost) {
                l.lose();
            }
        }
    }

    /** waitNanos waits on mu (held) for n nanoseconds or more (rounded up to the millisecond), or until notified. */
    private void waitNanos(long n) throws InterruptedException {
        mu.wait(Math.max(1, (n + 999_999) / 1_000_000));
    }

    /** end ends the session locally: every Lease is lost, every call under way fails with cause. */
    void end(BatonException cause, State st) {
        List<Lease> lost;
        synchronized (mu) {
            if (endCause != null) {
                return;
            }
            endCause = cause;
            state = st;
            lost = new ArrayList<>(leases);
            leases.clear();
            mu.notifyAll();
        }
        inFlight.close();
        for (Lease l : lost) {
            l.lose();
        }
    }
}
