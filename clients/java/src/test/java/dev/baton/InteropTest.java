package dev.baton;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** A Java program and a Go program (`baton lock`) holding the same lock name exclude each other. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class InteropTest {
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
    void javaAndGoExcludeEachOther(@TempDir Path dir) throws Exception {
        String name = "java-test/interop/" + UUID.randomUUID();
        try (Session s = client.newSession(Duration.ofSeconds(10))) {
            // Java holds it: Go's `baton lock --no-wait` is refused (exit 75).
            try (Lease l = s.mutex(name).lock(WAIT)) {
                Process go = new ProcessBuilder(TestCluster.binary(), "lock", "--endpoints", cluster.endpoints(),
                        "--no-wait", name, "--", "true").redirectErrorStream(true).start();
                assertTrue(go.waitFor(30, TimeUnit.SECONDS));
                assertEquals(75, go.exitValue(), new String(go.getInputStream().readAllBytes()));
            }
            // Go holds it (its command writes its token, then waits for a
            // file): Java's tryLock is refused and names Go's session.
            Path held = dir.resolve("held");
            Path done = dir.resolve("done");
            Process go = new ProcessBuilder(TestCluster.binary(), "lock", "--endpoints", cluster.endpoints(),
                    "--owner", "go-program", name, "--", "sh", "-c",
                    "echo $BATON_TOKEN > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"; while [ ! -e \"$1\" ]; do sleep 0.05; done",
                    held.toString(), done.toString()).redirectErrorStream(true).start();
            try {
                TestCluster.await("Go holding the lock", WAIT, () -> Files.exists(held));
                long goToken = Long.parseLong(Files.readString(held).trim());
                LockBusyException busy = assertThrows(LockBusyException.class, () -> s.mutex(name).tryLock());
                assertEquals("go-program", busy.holder().owner());
                assertEquals(goToken, busy.holder().token());
                assertNotEquals(s.id(), busy.holder().sessionId());
                Files.createFile(done);
                assertTrue(go.waitFor(30, TimeUnit.SECONDS));
                assertEquals(0, go.exitValue(), new String(go.getInputStream().readAllBytes()));
                try (Lease l = s.mutex(name).lock(WAIT)) {
                    assertTrue(l.token() > goToken, "Java's token after Go's");
                }
            } finally {
                go.destroyForcibly();
            }
        }
    }
}
