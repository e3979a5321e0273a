package dev.baton;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A Java program, a Go program (`baton lock`) and a Python program (the
 * client in clients/python) holding the same lock name exclude each other.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class InteropTest {
    private static final Duration WAIT = Duration.ofSeconds(20);
    private static TestCluster cluster;
    private static BatonClient client;
    private static final ExecutorService pool = Executors.newCachedThreadPool();

    @BeforeAll
    static void start() throws Exception {
        cluster = TestCluster.shared();
        client = BatonClient.connect(cluster.endpoints());
    }

    @AfterAll
    static void stop() throws Exception {
        pool.shutdownNow();
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

    /**
     * A Python program: BATON_PYTHON (default /usr/bin/python3, which has
     * Debian's python3-protobuf) with the repository's clients/python on its
     * path. "try NAME" exits 75 when the lock is busy, else 0; "hold NAME
     * HELD DONE" locks it, writes its token to HELD, and releases it once
     * DONE exists.
     */
    private static final String PYTHON_PROGRAM = String.join("\n",
            "import os, sys, time, baton",
            "mode, endpoints, name = sys.argv[1:4]",
            "with baton.connect(endpoints).session(ttl=10, owner='python-program') as s:",
            "    if mode == 'try':",
            "        try:",
            "            s.try_lock(name).release()",
            "        except baton.LockBusy:",
            "            sys.exit(75)",
            "        sys.exit(0)",
            "    held, done = sys.argv[4:6]",
            "    with s.lock(name, timeout=20) as lease:",
            "        with open(held + '.tmp', 'w') as f:",
            "            f.write(str(lease.token))",
            "        os.rename(held + '.tmp', held)",
            "        while not os.path.exists(done) and lease.valid():",
            "            time.sleep(0.02)",
            "        sys.exit(0 if lease.valid() else 1)",
            "");

    private static Process python(String... args) throws Exception {
        String py = System.getenv("BATON_PYTHON");
        List<String> cmd = new ArrayList<>(List.of(py == null || py.isBlank() ? "/usr/bin/python3" : py, "-c",
                PYTHON_PROGRAM));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().put("PYTHONPATH", new File("../python").getCanonicalPath());
        return pb.start();
    }

    @Test
    void javaAndPythonExcludeEachOther(@TempDir Path dir) throws Exception {
        String name = "java-test/interop-python/" + UUID.randomUUID();
        try (Session s = client.newSession(Duration.ofSeconds(10))) {
            // Java holds it: Python's try_lock is refused.
            try (Lease l = s.mutex(name).lock(WAIT)) {
                Process py = python("try", cluster.endpoints(), name);
                assertTrue(py.waitFor(30, TimeUnit.SECONDS));
                assertEquals(75, py.exitValue(), new String(py.getInputStream().readAllBytes()));
            }
            // Python holds it: Java's tryLock is refused and names Python's
            // session; Java's lock() waits until Python releases, and gets a
            // larger token.
            Path held = dir.resolve("held");
            Path done = dir.resolve("done");
            Process py = python("hold", cluster.endpoints(), name, held.toString(), done.toString());
            try {
                TestCluster.await("Python holding the lock", WAIT, () -> Files.exists(held) || !py.isAlive());
                assertTrue(py.isAlive(), () -> "Python exited before it held the lock");
                long pyToken = Long.parseLong(Files.readString(held).trim());
                LockBusyException busy = assertThrows(LockBusyException.class, () -> s.mutex(name).tryLock());
                assertEquals("python-program", busy.holder().owner());
                assertEquals(pyToken, busy.holder().token());
                Future<Lease> waiting = pool.submit(() -> s.mutex(name).lock(WAIT));
                TestCluster.await("Java queued behind Python", WAIT,
                        () -> describeQuietly(name).waitingSessions().size() == 1);
                assertFalse(waiting.isDone(), "Java's lock() waits while Python holds the lock");
                Files.createFile(done);
                try (Lease l = waiting.get(WAIT.toSeconds(), TimeUnit.SECONDS)) {
                    assertTrue(l.token() > pyToken, "Java's token after Python's");
                }
                assertTrue(py.waitFor(30, TimeUnit.SECONDS));
                assertEquals(0, py.exitValue(), new String(py.getInputStream().readAllBytes()));
            } finally {
                py.destroyForcibly();
            }
        }
    }

    private static LockInfo describeQuietly(String name) {
        try {
            return client.describe(name);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }
}
