package dev.baton;

import baton.v1.BatonOuterClass;
import baton.v1.BatonOuterClass.DeadlockEdge;
import baton.v1.BatonOuterClass.Reason;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.util.List;

/**
 * Wire is the JSON of Baton's HTTP face (grpc-gateway's protojson, with
 * proto field names: 64-bit integers come as decimal strings, durations as
 * "1.5s"), and the one table that maps the server's errors, from either
 * face, to the exception hierarchy.
 */
final class Wire {
    static final ObjectMapper JSON = new ObjectMapper();

    private Wire() {}

    static ObjectNode object() {
        return JSON.createObjectNode();
    }

    /** A protobuf Duration's JSON: seconds with up to nine decimals, then "s". */
    static String duration(Duration d) {
        BigDecimal s = BigDecimal.valueOf(d.getSeconds()).add(BigDecimal.valueOf(d.getNano(), 9));
        return s.stripTrailingZeros().toPlainString() + "s";
    }

    /** The Duration of a protobuf Duration's JSON; null for null or an empty node. */
    static Duration duration(JsonNode n) {
        if (n == null || n.isNull() || n.asText().isEmpty()) {
            return null;
        }
        String t = n.asText();
        BigDecimal s = new BigDecimal(t.substring(0, t.length() - 1));
        return Duration.ofNanos(s.movePointRight(9).longValueExact());
    }

    /** A uint64 field (a string or a number); 0 when absent. */
    static long uint64(JsonNode n, String field) {
        JsonNode v = n.get(field);
        return v == null || v.isNull() ? 0 : Long.parseUnsignedLong(v.asText());
    }

    /** A google.protobuf.Duration of d. */
    static com.google.protobuf.Duration proto(Duration d) {
        return com.google.protobuf.Duration.newBuilder().setSeconds(d.getSeconds()).setNanos(d.getNano()).build();
    }

    /** The Duration of a google.protobuf.Duration. */
    static Duration duration(com.google.protobuf.Duration d) {
        return Duration.ofSeconds(d.getSeconds(), d.getNanos());
    }

    /** The Holder of a Holder message of the session stream. */
    static Holder holder(BatonOuterClass.Holder h) {
        return new Holder(h.getSessionId(), h.getOwner(), h.getOwnerKey(), h.getToken(), h.getCount(), h.getShared());
    }

    /** The Holder of a Holder message; null when absent. */
    static Holder holder(JsonNode n) {
        if (n == null || n.isNull() || !n.isObject()) {
            return null;
        }
        return new Holder(uint64(n, "session_id"), n.path("owner").asText(), n.path("owner_key").asText(),
                uint64(n, "token"), n.path("count").asInt(), n.path("shared").asBoolean());
    }

    /** The Revocation a RevokeRequested message (a push, or a resume's holds list) tells of. */
    static Revocation revocation(BatonOuterClass.RevokeRequested r) {
        Instant deadline = r.hasDeadline()
                ? Instant.ofEpochSecond(r.getDeadline().getSeconds(), r.getDeadline().getNanos())
                : null;
        return new Revocation(r.getName(), r.getOwnerKey(), r.getToken(), duration(r.getGrace()), deadline);
    }

    /** The Revocation of lock name that a RevokeResponse's Holder (JSON) tells of. */
    static Revocation revocation(String name, JsonNode h) {
        JsonNode d = h.get("revoke_deadline");
        Instant deadline = d == null || d.isNull() || d.asText().isEmpty() ? null : Instant.parse(d.asText());
        Duration grace = duration(h.get("revoke_grace"));
        return new Revocation(name, h.path("owner_key").asText(), uint64(h, "token"),
                grace == null ? Duration.ZERO : grace, deadline);
    }

    /**
     * The exception for a server's error: its gRPC code, its Reason and its
     * message, in the one table of the client. The server's messages carry
     * no secrets.
     */
    static BatonException error(int code, String reason, String message) {
        return error(code, reason, message, "");
    }

    /** The exception for a session stream's Error message (an answer's, a channel end's, a lost session's). */
    static BatonException error(BatonOuterClass.Error e) {
        return error(e.getCode(), reasonName(e.getReason()), e.getMessage(), e.getLeaderAddr(), e.getDeadlockCycleList());
    }

    /** A Reason's name as the HTTP face and the exceptions spell it; "" for none or one this client does not know. */
    static String reasonName(Reason r) {
        return r == Reason.REASON_UNSPECIFIED || r == Reason.UNRECOGNIZED ? "" : r.name();
    }

    /**
     * The exception for an error with leaderAddr, the leader a NOT_LEADER
     * names ("" when none): an UnavailableException carries it.
     */
    static BatonException error(int code, String reason, String message, String leaderAddr) {
        return error(code, reason, message, leaderAddr, List.of());
    }

    /**
     * The exception for an error that may name a deadlock: a DEADLOCK's
     * DeadlockException carries cycle (the refused or ended wait first).
     */
    static BatonException error(int code, String reason, String message, String leaderAddr, List<DeadlockEdge> cycle) {
        switch (reason) {
            case "SESSION_NOT_FOUND":
            case "SESSION_EXPIRED":
                return new SessionLostException(code, reason, message, null);
            case "WAIT_TIMED_OUT":
                return new WaitTimeoutException(code, reason, message, null);
            case "SECRET_MISMATCH":
            case "BLACKLISTED":
            case "NOT_PERMITTED":
            case "NO_CREDENTIALS":
                return new PermissionDeniedException(code, reason, message, null);
            case "INVALID_ARGUMENT":
            case "LIMIT_MISMATCH":
                return new InvalidArgumentException(code, reason, message, null);
            case "LOCK_NOT_FOUND":
            case "NOT_HOLDER":
            case "TOKEN_MISMATCH":
            case "HOLD_LOST":
                return new NotHolderException(code, reason, message, null);
            case "TOO_MANY_WAITERS":
            case "TOO_MANY_PENDING":
            case "TOO_MANY_HOLDS":
            case "TOO_MANY_SESSIONS":
            case "NO_SPACE":
            case "OVERLOADED":
                return new ResourceExhaustedException(code, reason, message, null);
            case "NOT_LEADER":
            case "OUTCOME_UNKNOWN":
                return new UnavailableException(code, reason, message, null, leaderAddr);
            case "DEADLOCK":
                return new DeadlockException(code, reason, message, null, cycle);
            default:
                break;
        }
        switch (code) {
            case 3: // INVALID_ARGUMENT
                return new InvalidArgumentException(code, reason, message, null);
            case 7: // PERMISSION_DENIED
            case 16: // UNAUTHENTICATED
                return new PermissionDeniedException(code, reason, message, null);
            case 8: // RESOURCE_EXHAUSTED
                return new ResourceExhaustedException(code, reason, message, null);
            case 14: // UNAVAILABLE
                return new UnavailableException(code, reason, message, null, leaderAddr);
            default:
                return new BatonException(code, reason, message, null);
        }
    }
}
