package dev.baton;

import com.fasterxml.jackson.databind.JsonNode;
import java.net.InetAddress;
import java.net.URLEncoder;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * BatonClient talks to a Baton cluster: any of its members, following the
 * leader they name. Each session keeps a stream of its own to the leader in
 * Baton's session framing; reads (describe) and an operator's revokeLock use the HTTP/JSON face. Open sessions with
 * {@link #newSession}; take locks through them. Close the client to close
 * every session it opened. A BatonClient is safe for concurrent use.
 *
 * <pre>{@code
 * try (BatonClient client = BatonClient.connect("10.0.0.1:7700,10.0.0.2:7700");
 *      Session session = client.newSession(Duration.ofSeconds(10));
 *      Lease lease = session.mutex("jobs/42").lock(Duration.ofSeconds(5))) {
 *     lease.onLost(worker::stop);
 *     worker.run(lease.token());
 * }
 * }</pre>
 */
public final class BatonClient implements AutoCloseable {
    /** A session's TTL unless stated: the server's default. */
    public static final Duration DEFAULT_TTL = Duration.ofSeconds(10);
    /** How many members a call that belongs to no session tries before UnavailableException. */
    public static final int DEFAULT_MAX_ATTEMPTS = 20;
    /** How long one attempt of a call that does not wait may take. */
    public static final Duration DEFAULT_REQUEST_TIMEOUT = Duration.ofSeconds(5);
    /** A revoke's grace unless stated: time for a command to finish its step and release. */
    public static final Duration DEFAULT_REVOKE_GRACE = Rules.DEFAULT_REVOKE_GRACE;

    private final Transport transport;
    private final Duration requestTimeout;
    private final Set<Session> sessions = ConcurrentHashMap.newKeySet();

    private BatonClient(Builder b) {
        this.transport = new Transport(b.endpoints, b.bearerToken, b.maxAttempts, b.requestTimeout);
        this.requestTimeout = b.requestTimeout;
    }

    /**
     * connect is a client of the cluster whose members' client addresses are
     * endpoints ("host:port,host:port"), once one of them answers.
     *
     * @throws UnavailableException when none answers within the attempts
     */
    public static BatonClient connect(String endpoints) throws InterruptedException {
        return builder().endpoints(endpoints).build();
    }

    /** builder starts a client with options: endpoints, a bearer token, attempts, timeouts. */
    public static Builder builder() {
        return new Builder();
    }

    /** Builder configures a BatonClient. */
    public static final class Builder {
        private final List<String> endpoints = new ArrayList<>();
        private String bearerToken;
        private int maxAttempts = DEFAULT_MAX_ATTEMPTS;
        private Duration requestTimeout = DEFAULT_REQUEST_TIMEOUT;

        private Builder() {}

        /** endpoints adds members' client addresses, comma-separated "host:port". */
        public Builder endpoints(String list) {
            for (String e : list.split(",")) {
                if (!e.isBlank()) {
                    endpoints.add(e.trim());
                }
            }
            return this;
        }

        /** bearerToken authenticates every call as a user (clusters with authentication on). */
        public Builder bearerToken(String token) {
            this.bearerToken = token;
            return this;
        }

        /** maxAttempts bounds the attempts of a call that belongs to no session (default 20). */
        public Builder maxAttempts(int n) {
            this.maxAttempts = n;
            return this;
        }

        /** requestTimeout bounds one attempt of a call that does not wait (default 5 s). */
        public Builder requestTimeout(Duration d) {
            this.requestTimeout = d;
            return this;
        }

        /** build makes the client once a member answers. */
        public BatonClient build() throws InterruptedException {
            if (endpoints.isEmpty()) {
                throw new InvalidArgumentException(3, "", "no endpoints", null);
            }
            if (maxAttempts < 1 || requestTimeout.isNegative() || requestTimeout.isZero()) {
                throw new InvalidArgumentException(3, "", "max attempts " + maxAttempts + " and request timeout "
                        + requestTimeout + " must be positive", null);
            }
            BatonClient c = new BatonClient(this);
            c.get("/v1/status");
            return c;
        }
    }

    /** newSession opens a session of ttl with the owner label "host/pid/java". */
    public Session newSession(Duration ttl) throws InterruptedException {
        return newSession(ttl, defaultOwner());
    }

    /**
     * newSession opens a session on the leader with ttl (1 s .. 10 min) and
     * an owner label that operators see beside its holds. It returns once the
     * session exists; its keepalives start then.
     */
    public Session newSession(Duration ttl, String owner) throws InterruptedException {
        Session s = Session.open(this, ttl, owner);
        sessions.add(s);
        return s;
    }

    /** describe reads the lock's holders and waiters from the leader (linearizable). */
    public LockInfo describe(String name) throws InterruptedException {
        JsonNode r = get("/v1/lock?name=" + URLEncoder.encode(name, StandardCharsets.UTF_8));
        JsonNode l = r.path("lock");
        List<Holder> holders = new ArrayList<>();
        for (JsonNode h : l.path("holders")) {
            holders.add(Wire.holder(h));
        }
        List<Long> waiters = new ArrayList<>();
        for (JsonNode w : l.path("waiters")) {
            waiters.add(Wire.uint64(w, "session_id"));
        }
        return new LockInfo(name, l.path("limit").asInt(), List.copyOf(holders), List.copyOf(waiters));
    }

    /** revokeLock asks every holder of name to let go within DEFAULT_REVOKE_GRACE (revokeLock(name, grace, 0)). */
    public List<Revocation> revokeLock(String name) throws InterruptedException {
        return revokeLock(name, DEFAULT_REVOKE_GRACE, 0);
    }

    /** revokeLock asks every holder of name to let go within grace (revokeLock(name, grace, 0)). */
    public List<Revocation> revokeLock(String name, Duration grace) throws InterruptedException {
        return revokeLock(name, grace, 0);
    }

    /**
     * revokeLock asks the holders of lock name to let go within grace (1 s ..
     * 1 h, in whole milliseconds) and returns the holds asked, each with its
     * deadline. Each holder's client is told at once ({@link Lease#revokeRequested});
     * a hold not released when the grace passes is ended by the leader,
     * fenced like any end: its Lease is lost with a RevokedException, and
     * the next holder's token is larger. With token not 0 only the hold with
     * that token is asked (the one the caller saw); with 0, every holder of
     * the lock (each reader of a read/write lock, each permit of a
     * semaphore). A hold already being revoked keeps its first revocation,
     * so asking again is harmless, and a call whose outcome is unknown is
     * sent again. With authentication on it needs admin over the name, as
     * CasRelease does.
     *
     * @throws InvalidArgumentException for a bad name or grace, before anything is sent
     * @throws NotHolderException when nobody holds the lock (reason LOCK_NOT_FOUND), or
     *     token names no hold of it (TOKEN_MISMATCH); nothing changed then
     * @throws PermissionDeniedException when the client's user may not administer name
     */
    public List<Revocation> revokeLock(String name, Duration grace, long token) throws InterruptedException {
        Rules.checkLockName(name);
        Rules.checkRevokeGrace(grace);
        var body = Wire.object().put("name", name).put("grace", Wire.duration(grace));
        if (token != 0) {
            body.put("token", Long.toUnsignedString(token));
        }
        JsonNode r = transport.call("POST", "/v1/locks/revoke", body,
                new Transport.Retry(() -> null, requestTimeout, transport.maxAttempts())).body();
        List<Revocation> out = new ArrayList<>();
        for (JsonNode h : r.path("revoked")) {
            out.add(Wire.revocation(name, h));
        }
        return List.copyOf(out);
    }

    private JsonNode get(String path) throws InterruptedException {
        return transport.call("GET", path, null, new Transport.Retry(() -> null, requestTimeout, transport.maxAttempts()))
                .body();
    }

    /** close closes every session the client opened and still has. */
    @Override
    public void close() {
        for (Session s : List.copyOf(sessions)) {
            s.close();
        }
    }

    Transport transport() {
        return transport;
    }

    Duration requestTimeout() {
        return requestTimeout;
    }

    void forget(Session s) {
        sessions.remove(s);
    }

    private static String defaultOwner() {
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName();
        } catch (UnknownHostException e) {
            host = "unknown";
        }
        return host + "/" + ProcessHandle.current().pid() + "/java";
    }
}
