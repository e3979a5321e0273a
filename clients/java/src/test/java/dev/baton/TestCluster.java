package dev.baton;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * TestCluster is the Baton cluster a test runs against: the one
 * BATON_ENDPOINTS names when it is set (external), otherwise members this
 * class starts itself from the `baton` binary (BATON_BIN, or built with
 * `go build ./cmd/baton` from the repository root) in a temporary
 * directory, on free ports of 127.0.0.1, and stops by their processes.
 */
final class TestCluster implements AutoCloseable {
    private static final Duration UP_TIMEOUT = Duration.ofSeconds(30);
    private static String builtBinary;

    private final List<Member> members = new ArrayList<>();
    private final String external;
    private final Path dir;

    record Member(String name, String clientAddr, String peerAddr, Path logFile, Process process) {}

    private TestCluster(String external, Path dir) {
        this.external = external;
        this.dir = dir;
    }

    /** shared is the external cluster when BATON_ENDPOINTS is set, else a single member started here. */
    static TestCluster shared() throws Exception {
        String env = System.getenv("BATON_ENDPOINTS");
        if (env != null && !env.isBlank()) {
            return new TestCluster(env, null);
        }
        return start(1);
    }

    /** start starts a cluster of n members of its own, whatever BATON_ENDPOINTS says, and waits for a leader. */
    static TestCluster start(int n) throws Exception {
        TestCluster c = new TestCluster(null, Files.createTempDirectory("baton-java-test"));
        List<String[]> addrs = new ArrayList<>();
        StringBuilder initial = new StringBuilder();
        for (int i = 0; i < n; i++) {
            String[] a = {freeAddr(), freeAddr()};
            addrs.add(a);
            initial.append(i == 0 ? "" : ",").append("n").append(i + 1).append("=").append(a[1]);
        }
        for (int i = 0; i < n; i++) {
            String name = "n" + (i + 1);
            Path log = c.dir.resolve(name + ".log");
            ProcessBuilder pb = new ProcessBuilder(binary(), "server", "--name", name,
                    "--data-dir", c.dir.resolve(name).toString(), "--client-addr", addrs.get(i)[0],
                    "--peer-addr", addrs.get(i)[1], "--initial-cluster", initial.toString());
            pb.redirectErrorStream(true).redirectOutput(log.toFile());
            c.members.add(new Member(name, addrs.get(i)[0], addrs.get(i)[1], log, pb.start()));
        }
        try {
            await("a leader of " + n, UP_TIMEOUT, () -> c.leaderAddr() != null);
        } catch (AssertionError e) {
            c.close();
            throw e;
        }
        return c;
    }

    /** The endpoints of the cluster, comma-separated. */
    String endpoints() {
        if (external != null) {
            return external;
        }
        return String.join(",", members.stream().map(Member::clientAddr).toList());
    }

    List<Member> members() {
        return members;
    }

    /** The leader's client address as a live member says, or null when none knows one. */
    String leaderAddr() {
        for (String addr : endpoints().split(",")) {
            if (!alive(addr.trim())) {
                continue;
            }
            try {
                JsonNode st = status(addr.trim());
                String l = st.path("leader_addr").asText();
                if (!l.isEmpty() && alive(l)) {
                    return l;
                }
            } catch (IOException e) {
                // down, or not yet up: ask the next
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return null;
            }
        }
        return null;
    }

    private boolean alive(String addr) {
        for (Member m : members) {
            if (m.clientAddr().equals(addr)) {
                return m.process().isAlive();
            }
        }
        return true; // an external member
    }

    /** kill stops the member at clientAddr with SIGKILL, by its process, and waits for it to exit. */
    void kill(String clientAddr) throws InterruptedException {
        for (Member m : members) {
            if (m.clientAddr().equals(clientAddr)) {
                m.process().destroyForcibly();
                m.process().waitFor(10, TimeUnit.SECONDS);
                return;
            }
        }
        throw new AssertionError("no member of this cluster is at " + clientAddr);
    }

    static JsonNode status(String addr) throws IOException, InterruptedException {
        HttpResponse<byte[]> r = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(2)).build()
                .send(HttpRequest.newBuilder(URI.create("http://" + addr + "/v1/status"))
                        .timeout(Duration.ofSeconds(2)).build(), HttpResponse.BodyHandlers.ofByteArray());
        return Wire.JSON.readTree(r.body());
    }

    /**
     * post sends an operator's call to the HTTP/JSON face of addr (CasRelease,
     * Blacklist) and returns its answer, failing the test on any other status
     * than 200.
     */
    static JsonNode post(String addr, String path, String json) throws IOException, InterruptedException {
        HttpResponse<byte[]> r = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(2)).build()
                .send(HttpRequest.newBuilder(URI.create("http://" + addr + path)).timeout(Duration.ofSeconds(10))
                        .header("Content-Type", "application/json")
                        .POST(HttpRequest.BodyPublishers.ofString(json)).build(), HttpResponse.BodyHandlers.ofByteArray());
        if (r.statusCode() != 200) {
            throw new AssertionError("POST " + path + ": HTTP " + r.statusCode() + ": " + new String(r.body()));
        }
        return Wire.JSON.readTree(r.body());
    }

    /** The `baton` binary: BATON_BIN, or one built once from the repository root. */
    static synchronized String binary() throws IOException, InterruptedException {
        String env = System.getenv("BATON_BIN");
        if (env != null && !env.isBlank()) {
            return env;
        }
        if (builtBinary == null) {
            File root = new File("../..").getCanonicalFile();
            File out = new File("target/baton").getAbsoluteFile();
            Process p = new ProcessBuilder("go", "build", "-o", out.getPath(), "./cmd/baton").directory(root)
                    .inheritIO().start();
            if (!p.waitFor(10, TimeUnit.MINUTES) || p.exitValue() != 0) {
                throw new IOException("go build ./cmd/baton in " + root + " failed; set BATON_BIN to a baton binary");
            }
            builtBinary = out.getPath();
        }
        return builtBinary;
    }

    /** await polls cond every 20 ms until it holds, or fails after timeout naming what. */
    static void await(String what, Duration timeout, BooleanSupplier cond) throws InterruptedException {
        long end = System.nanoTime() + timeout.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() - end > 0) {
                throw new AssertionError("timed out after " + timeout + " waiting for " + what);
            }
            Thread.sleep(20);
        }
    }

    private static String freeAddr() throws IOException {
        try (ServerSocket s = new ServerSocket()) {
            s.bind(new InetSocketAddress("127.0.0.1", 0));
            return "127.0.0.1:" + s.getLocalPort();
        }
    }

    /** close stops every member this class started (by its process) and removes their files. */
    @Override
    public void close() throws IOException, InterruptedException {
        for (Member m : members) {
            m.process().destroyForcibly();
        }
        for (Member m : members) {
            m.process().waitFor(10, TimeUnit.SECONDS);
        }
        if (dir != null) {
            try (var walk = Files.walk(dir)) {
                for (Path p : walk.sorted((a, b) -> b.compareTo(a)).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }
}
