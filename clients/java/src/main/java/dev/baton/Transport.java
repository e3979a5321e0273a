package dev.baton;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Supplier;

/**
 * Transport knows where the leader is, for the session streams and for the
 * unary calls, and makes the unary calls (reads: Status, Get) on Baton's
 * HTTP/JSON face. A call goes to the member the last NOT_LEADER named
 * (its ErrorInfo's leader_addr), else to the endpoints in turn. A call
 * whose member did not answer, or answered UNAVAILABLE or OVERLOADED, is
 * sent again after a pause that doubles from 20 ms to 1 s with jitter.
 */
final class Transport {
    static final Duration FIRST_BACKOFF = Duration.ofMillis(20);
    static final Duration MAX_BACKOFF = Duration.ofSeconds(1);

    private final List<String> endpoints;
    private final HttpClient http;
    private final String bearerToken;
    private final int maxAttempts;
    private volatile String leader; // the last leader hint, or null
    private int next; // the endpoint to try next without a hint; guarded by this

    /** An answer: the body, and when the attempt answered was sent (System.nanoTime). */
    record Answer(JsonNode body, long sentNanos) {}

    /**
     * How a call is retried. stop, polled before every attempt and while
     * one waits, returns the exception that ends the call (the session is
     * lost) or null; attemptTimeout bounds each attempt (null: unbounded);
     * maxAttempts bounds the attempts (0: until stop says so).
     */
    record Retry(Supplier<BatonException> stop, Duration attemptTimeout, int maxAttempts) {}

    Transport(List<String> endpoints, String bearerToken, int maxAttempts, Duration connectTimeout) {
        this.endpoints = List.copyOf(endpoints);
        this.bearerToken = bearerToken;
        this.maxAttempts = maxAttempts;
        this.http = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1) // the member's HTTP/JSON face is HTTP/1.1
                .connectTimeout(connectTimeout)
                .build();
    }

    int maxAttempts() {
        return maxAttempts;
    }

    String leaderHint() {
        return leader;
    }

    String bearerToken() {
        return bearerToken;
    }

    /**
     * call sends method path with body (null: none) until an answer that is
     * not a retryable refusal, and returns it, or throws the server's error
     * (mapped by Wire.error), the stop's exception, or UnavailableException
     * after retry.maxAttempts attempts.
     */
    Answer call(String method, String path, JsonNode body, Retry retry) throws InterruptedException {
        BatonException last = null;
        for (int attempt = 0; retry.maxAttempts() == 0 || attempt < retry.maxAttempts(); attempt++) {
            BatonException stopped = retry.stop().get();
            if (stopped != null) {
                throw stopped;
            }
            if (attempt > 0) {
                Thread.sleep(pause(attempt - 1).toMillis());
            }
            String addr = target();
            long sent = System.nanoTime();
            HttpResponse<byte[]> resp;
            try {
                resp = send(addr, method, path, body, retry.attemptTimeout());
            } catch (IOException e) {
                forget(addr);
                last = new UnavailableException(14, "", "member " + addr + " did not answer: " + e, e);
                continue;
            } catch (CancellationException e) {
                stopped = retry.stop().get();
                throw stopped != null ? stopped : new BatonException(1, "", "call cancelled", e);
            }
            JsonNode json = parse(resp.body());
            if (resp.statusCode() == 200) {
                return new Answer(json, sent);
            }
            int code = json.path("code").asInt(2);
            String reason = "";
            String leaderAddr = "";
            for (JsonNode d : json.path("details")) {
                if ("batonlock.io".equals(d.path("domain").asText())) {
                    reason = d.path("reason").asText();
                    leaderAddr = d.path("metadata").path("leader_addr").asText();
                }
            }
            String msg = json.path("message").asText("HTTP " + resp.statusCode());
            BatonException err = Wire.error(code, reason, msg);
            if ("NOT_LEADER".equals(reason)) {
                follow(addr, leaderAddr);
            } else if (code == 14 && reason.isEmpty()) {
                forget(addr); // not serving (stopping, or no leader known)
            }
            if (!(code == 14 || "OVERLOADED".equals(reason))) {
                throw err;
            }
            last = err;
        }
        throw new UnavailableException(14, last == null ? "" : last.reason(),
                "no leader answered in " + retry.maxAttempts() + " attempts"
                        + (last == null ? "" : ": " + last.getMessage()), last);
    }

    private HttpResponse<byte[]> send(String addr, String method, String path, JsonNode body, Duration timeout)
            throws IOException, InterruptedException {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://" + addr + path))
                .header("Accept", "application/json");
        if (timeout != null) {
            b.timeout(timeout);
        }
        if (bearerToken != null) {
            b.header("Authorization", "Bearer " + bearerToken);
        }
        if (body == null) {
            b.method(method, HttpRequest.BodyPublishers.noBody());
        } else {
            b.header("Content-Type", "application/json");
            b.method(method, HttpRequest.BodyPublishers.ofByteArray(Wire.JSON.writeValueAsBytes(body)));
        }
        CompletableFuture<HttpResponse<byte[]>> f = http.sendAsync(b.build(), HttpResponse.BodyHandlers.ofByteArray());
        try {
            return f.get();
        } catch (InterruptedException e) {
            f.cancel(true);
            throw e;
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof IOException io) {
                throw io;
            }
            if (c instanceof CancellationException ce) {
                throw ce;
            }
            throw new IOException(c);
        }
    }

    private static JsonNode parse(byte[] body) {
        try {
            return Wire.JSON.readTree(body);
        } catch (IOException e) {
            return Wire.object().put("message", "an answer that is not JSON: " + e.getMessage());
        }
    }

    /** The member to try: the leader hint, else the next endpoint. */
    synchronized String target() {
        String l = leader;
        if (l != null) {
            return l;
        }
        String addr = endpoints.get(next % endpoints.size());
        next++;
        return addr;
    }

    /** addr said leaderAddr leads; an empty one means it knows no leader, addr itself that it leads. */
    void follow(String addr, String leaderAddr) {
        if (leaderAddr.isEmpty()) {
            forget(addr);
        } else {
            leader = leaderAddr;
        }
    }

    /** addr did not serve: stop sending there until a hint names it again. */
    synchronized void forget(String addr) {
        if (addr.equals(leader)) {
            leader = null;
        }
    }

    /** The pause before retry n (0-based): 20 ms doubling to 1 s, up to 50% more at random. */
    static Duration pause(int n) {
        long base = FIRST_BACKOFF.toMillis() << Math.min(n, 10);
        base = Math.min(base, MAX_BACKOFF.toMillis());
        return Duration.ofMillis(base + ThreadLocalRandom.current().nextLong(base / 2 + 1));
    }
}
