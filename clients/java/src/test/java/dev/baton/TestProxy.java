package dev.baton;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * TestProxy is a TCP proxy on 127.0.0.1 in front of one member, for the
 * tests that need the network to misbehave in a known way: it delays every
 * byte from the member by answerDelayMillis (an answer arrives that long
 * after the member sent it), and it can lose the answer to the next acquire
 * (it closes the client's connection instead of delivering it).
 */
final class TestProxy implements AutoCloseable {
    private final ServerSocket listener;
    private final String target;
    volatile long answerDelayMillis;
    /** How many answers to acquires are still to be lost. */
    final AtomicInteger answersToLose = new AtomicInteger();
    /** How many acquires the proxy forwarded. */
    final AtomicInteger acquiresForwarded = new AtomicInteger();

    TestProxy(String target) throws IOException {
        this.target = target;
        this.listener = new ServerSocket();
        listener.bind(new InetSocketAddress("127.0.0.1", 0));
        Thread t = new Thread(this::acceptLoop, "test-proxy");
        t.setDaemon(true);
        t.start();
    }

    String addr() {
        return "127.0.0.1:" + listener.getLocalPort();
    }

    private void acceptLoop() {
        while (!listener.isClosed()) {
            try {
                Socket client = listener.accept();
                String[] hp = target.split(":");
                Socket server = new Socket(hp[0], Integer.parseInt(hp[1]));
                AtomicBoolean answeringAcquire = new AtomicBoolean();
                daemon(() -> toMember(client, server, answeringAcquire));
                daemon(() -> toClient(server, client, answeringAcquire));
            } catch (IOException e) {
                return;
            }
        }
    }

    /**
     * toMember forwards the client's bytes, noting whether the last request
     * on the connection is an acquire (HTTP/1.1: its answer is the next).
     */
    private void toMember(Socket client, Socket server, AtomicBoolean answeringAcquire) {
        byte[] buf = new byte[64 << 10];
        try (InputStream in = client.getInputStream(); OutputStream out = server.getOutputStream()) {
            int n;
            while ((n = in.read(buf)) > 0) {
                String chunk = new String(buf, 0, n, StandardCharsets.ISO_8859_1);
                if (chunk.startsWith("POST ") || chunk.startsWith("GET ")) {
                    boolean acquire = chunk.startsWith("POST /v1/locks/acquire ");
                    answeringAcquire.set(acquire);
                    if (acquire) {
                        acquiresForwarded.incrementAndGet();
                    }
                }
                out.write(buf, 0, n);
                out.flush();
            }
        } catch (IOException e) {
            // either side closed
        } finally {
            closeQuietly(client, server);
        }
    }

    private void toClient(Socket server, Socket client, AtomicBoolean answeringAcquire) {
        BlockingQueue<Object[]> due = new LinkedBlockingQueue<>();
        daemon(() -> deliver(due, client, server));
        byte[] buf = new byte[64 << 10];
        try (InputStream in = server.getInputStream()) {
            int n;
            while ((n = in.read(buf)) > 0) {
                if (answeringAcquire.get() && answersToLose.getAndUpdate(x -> Math.max(0, x - 1)) > 0) {
                    closeQuietly(client, server); // the answer is lost with the connection
                    return;
                }
                due.add(new Object[] {System.nanoTime() + answerDelayMillis * 1_000_000, Arrays.copyOf(buf, n)});
            }
        } catch (IOException e) {
            // either side closed
        }
        due.add(new Object[] {0L, new byte[0]}); // the end
    }

    /** deliver writes each chunk to the client once it is due. */
    private static void deliver(BlockingQueue<Object[]> due, Socket client, Socket server) {
        try (OutputStream out = client.getOutputStream()) {
            while (true) {
                Object[] d = due.take();
                byte[] b = (byte[]) d[1];
                if (b.length == 0) {
                    return;
                }
                long wait = (long) d[0] - System.nanoTime();
                if (wait > 0) {
                    Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                }
                out.write(b);
                out.flush();
            }
        } catch (IOException | InterruptedException e) {
            // the client went away
        } finally {
            closeQuietly(client, server);
        }
    }

    private static void daemon(Runnable r) {
        Thread t = new Thread(r, "test-proxy-conn");
        t.setDaemon(true);
        t.start();
    }

    private static void closeQuietly(Socket... ss) {
        for (Socket s : ss) {
            try {
                s.close();
            } catch (IOException e) {
                // closed already
            }
        }
    }

    @Override
    public void close() throws IOException {
        listener.close();
    }
}
