package dev.baton;

import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * Rules checks a request before it is sent, with the limits of the
 * server's rules (api/rules), so that a bad one is refused at once with
 * what is wrong and nothing reaches the cluster. The server checks again.
 */
final class Rules {
    /** The longest lock name, in bytes of UTF-8. */
    static final int MAX_NAME_LEN = 512;
    /**
     * The bounds of a revoke's grace: below a second the holder could not
     * hear of it before its hold ends; a holder that needs more than an
     * hour is better asked again. The default gives a command time to
     * finish its step and release.
     */
    static final Duration MIN_REVOKE_GRACE = Duration.ofSeconds(1);
    static final Duration MAX_REVOKE_GRACE = Duration.ofHours(1);
    static final Duration DEFAULT_REVOKE_GRACE = Duration.ofSeconds(30);

    private Rules() {}

    /** checkLockName refuses a name that is empty, too long, not valid UTF-8, or has a control character. */
    static void checkLockName(String name) {
        if (name == null || name.isEmpty()) {
            throw invalid("lock name is empty");
        }
        for (int i = 0; i < name.length();) {
            int cp = name.codePointAt(i);
            if (Character.isSurrogate((char) cp) && Character.charCount(cp) == 1) {
                throw invalid("lock name \"" + name + "\" is not valid UTF-8 (a lone surrogate at char " + i + ")");
            }
            if (Character.isISOControl(cp)) {
                int at = name.substring(0, i).getBytes(StandardCharsets.UTF_8).length;
                throw invalid(String.format("lock name %s has control character U+%04X at byte %d", quote(name), cp, at));
            }
            i += Character.charCount(cp);
        }
        int n = name.getBytes(StandardCharsets.UTF_8).length;
        if (n > MAX_NAME_LEN) {
            throw invalid("lock name is " + n + " bytes; the limit is " + MAX_NAME_LEN);
        }
    }

    /** checkRevokeGrace refuses a grace outside MIN_REVOKE_GRACE..MAX_REVOKE_GRACE or not in whole milliseconds. */
    static void checkRevokeGrace(Duration grace) {
        if (grace == null) {
            throw invalid("revoke grace is null");
        }
        if (grace.compareTo(MIN_REVOKE_GRACE) < 0 || grace.compareTo(MAX_REVOKE_GRACE) > 0) {
            throw invalid("revoke grace " + grace + " is outside " + MIN_REVOKE_GRACE + ".." + MAX_REVOKE_GRACE);
        }
        if (grace.getNano() % 1_000_000 != 0) {
            throw invalid("revoke grace " + grace + " is not a whole number of milliseconds");
        }
    }

    /** quote shows s with its control characters escaped, as Go's %q would. */
    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        s.codePoints().forEach(cp -> {
            if (Character.isISOControl(cp)) {
                b.append(String.format("\\u%04x", cp));
            } else if (cp == '"' || cp == '\\') {
                b.append('\\').appendCodePoint(cp);
            } else {
                b.appendCodePoint(cp);
            }
        });
        return b.append('"').toString();
    }

    private static InvalidArgumentException invalid(String msg) {
        return new InvalidArgumentException(3, "INVALID_ARGUMENT", msg, null);
    }
}
