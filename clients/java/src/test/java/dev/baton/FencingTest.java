package dev.baton;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The fencing helpers carry real leases' tokens to an HTTP server and a SQL database. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class FencingTest {
    private static final Duration WAIT = Duration.ofSeconds(20);
    private static TestCluster cluster;
    private static BatonClient client;

    @BeforeAll
    static void start() throws Exception {
        cluster = TestCluster.shared();
        client = BatonClient.connect(cluster.endpoints());
    }

    @AfterAll
    static void stop() throws Exception {
        client.close();
        cluster.close();
    }

    @Test
    void escapeLockMatchesGo() {
        assertEquals("jobs/42", Fencing.escapeLock("jobs/42"));
        assertEquals("a%20b%25c%C3%A9", Fencing.escapeLock("a b%cé"));
    }

    @Test
    void headersCarryTheLeasesClaim() throws Exception {
        String name = "java-test/fence http/" + UUID.randomUUID();
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/", ex -> {
            byte[] b = (ex.getRequestHeaders().getFirst(Fencing.LOCK_HEADER) + " "
                    + ex.getRequestHeaders().getFirst(Fencing.TOKEN_HEADER)).getBytes();
            ex.sendResponseHeaders(200, b.length);
            ex.getResponseBody().write(b);
            ex.close();
        });
        server.start();
        try (Session s = client.newSession(Duration.ofSeconds(10)); Lease l = s.mutex(name).lock(WAIT)) {
            HttpRequest req = l.fence(HttpRequest.newBuilder(
                    URI.create("http://127.0.0.1:" + server.getAddress().getPort() + "/write"))).build();
            String got = HttpClient.newHttpClient().send(req, HttpResponse.BodyHandlers.ofString()).body();
            assertEquals(Fencing.escapeLock(name) + " " + l.token(), got);
        } finally {
            server.stop(0);
        }
    }

    /** A holder whose lock passed to a newer holder that wrote cannot write after it. */
    @Test
    void aFencedUpdateRefusesAnOlderToken() throws Exception {
        String name = "java-test/fence sql/" + UUID.randomUUID();
        try (Connection db = DriverManager.getConnection("jdbc:h2:mem:fence;DB_CLOSE_DELAY=-1");
                Session a = client.newSession(Duration.ofSeconds(10));
                Session b = client.newSession(Duration.ofSeconds(10))) {
            try (Statement st = db.createStatement()) {
                st.execute("CREATE TABLE stock (item VARCHAR(20) PRIMARY KEY, n INT, fence BIGINT NOT NULL DEFAULT 0)");
                st.execute("INSERT INTO stock (item, n) VALUES ('apple', 10)");
            }
            Lease old = a.mutex(name).lock(WAIT);
            old.release(); // as if its session had paused past its deadline
            Lease newer = b.mutex(name).lock(WAIT);
            assertTrue(newer.token() > old.token());
            FencedUpdate set9 = new FencedUpdate("stock", "n = ?", List.of(9), "item = ?", List.of("apple"));
            assertTrue(set9.execute(db, newer), "the newer holder writes");
            FencedUpdate set0 = new FencedUpdate("stock", "n = ?", List.of(0), "item = ?", List.of("apple"));
            assertFalse(set0.execute(db, old), "the older holder is refused");
            try (PreparedStatement ps = db.prepareStatement("SELECT n FROM stock WHERE item = 'apple' AND fence = ?")) {
                Fencing.bindToken(ps, 1, newer);
                try (ResultSet rs = ps.executeQuery()) {
                    assertTrue(rs.next());
                    assertEquals(9, rs.getInt(1));
                }
            }
            newer.release();
        }
    }
}
