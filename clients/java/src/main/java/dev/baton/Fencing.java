package dev.baton;

import java.io.ByteArrayOutputStream;
import java.net.http.HttpRequest;
import java.nio.charset.StandardCharsets;
import java.sql.PreparedStatement;
import java.sql.SQLException;

/**
 * Fencing passes a Lease's fencing token to storage, as the Go fence
 * package does, so that storage can refuse a writer whose lock passed to a
 * newer holder: over HTTP as two headers (the lock's name and the token,
 * which a server guarded by Go's fence.Middleware checks), and to SQL as a
 * parameter ({@link #bindToken}, {@link FencedUpdate}).
 */
public final class Fencing {
    /** LOCK_HEADER names the lock whose token the request carries, escaped by escapeLock (Go: fence.LockHeader). */
    public static final String LOCK_HEADER = "Baton-Lock";
    /** TOKEN_HEADER is the fencing token in decimal (Go: fence.TokenHeader). */
    public static final String TOKEN_HEADER = "Baton-Fencing-Token";

    private Fencing() {}

    /** headers sets b's LOCK_HEADER and TOKEN_HEADER to lease's lock and token, replacing any there. */
    public static HttpRequest.Builder headers(HttpRequest.Builder b, Lease lease) {
        return b.setHeader(LOCK_HEADER, escapeLock(lease.name())).setHeader(TOKEN_HEADER, Long.toString(checked(lease.token())));
    }

    /**
     * bindToken sets parameter index of ps to lease's token (a BIGINT): the
     * value a fenced statement compares with the token it stored
     * ({@code ... WHERE fence <= ?}).
     */
    public static void bindToken(PreparedStatement ps, int index, Lease lease) throws SQLException {
        ps.setLong(index, checked(lease.token()));
    }

    /** checked is token if storage can keep it (1..2^63-1, a BIGINT), else throws InvalidArgumentException. */
    static long checked(long token) {
        if (token <= 0) {
            throw new InvalidArgumentException(3, "", "fencing token " + Long.toUnsignedString(token)
                    + " is not from 1 to 2^63-1", null);
        }
        return token;
    }

    /**
     * escapeLock escapes a lock name for a header value, which carries
     * printable ASCII only: every byte of its UTF-8 outside '!'..'~', and
     * '%', as %XX (Go's fence.EscapeLock). "jobs/42" stays "jobs/42".
     */
    public static String escapeLock(String name) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (byte b : name.getBytes(StandardCharsets.UTF_8)) {
            int c = b & 0xff;
            if (c > ' ' && c < 0x7f && c != '%') {
                out.write(c);
            } else {
                byte[] hex = String.format("%%%02X", c).getBytes(StandardCharsets.US_ASCII);
                out.write(hex, 0, hex.length);
            }
        }
        return out.toString(StandardCharsets.US_ASCII);
    }
}
