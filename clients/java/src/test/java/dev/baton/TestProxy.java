package dev.baton;

import baton.v1.BatonOuterClass.ChannelRequest;
import baton.v1.BatonOuterClass.ChannelResponse;
import baton.v1.BatonOuterClass.SessionsRequest;
import baton.v1.BatonOuterClass.SessionsResponse;
import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Arrays;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * TestProxy is a TCP proxy on 127.0.0.1 in front of one member that reads
 * Baton's session framing, for the tests that need the network to misbehave
 * in a known way: it delays every frame from the member by answerDelayMillis
 * (an answer arrives that long after the member sent it); it can lose the
 * answer to an acquire (it closes the client's connection instead of
 * delivering it); and it can cut every connection and refuse new ones.
 */
final class TestProxy implements AutoCloseable {
    private final ServerSocket listener;
    private final String target;
    private final Set<Socket> open = ConcurrentHashMap.newKeySet();
    volatile long answerDelayMillis;
    /** While set, connections are closed as they come. */
    volatile boolean refusing;
    /** How many answers to acquires are still to be lost. */
    final AtomicInteger answersToLose = new AtomicInteger();
    /** How many acquires the proxy forwarded. */
    final AtomicInteger acquiresForwarded = new AtomicInteger();

    TestProxy(String target) throws IOException {
        this.target = target;
        this.listener = new ServerSocket();
        listener.bind(new InetSocketAddress("127.0.0.1", 0));
        daemon(this::acceptLoop);
    }

    String addr() {
        return "127.0.0.1:" + listener.getLocalPort();
    }

    /** cut closes every connection through the proxy. */
    void cut() {
        for (Socket s : open) {
            closeQuietly(s);
        }
    }

    private void acceptLoop() {
        while (!listener.isClosed()) {
            try {
                Socket client = listener.accept();
                if (refusing) {
                    client.close();
                    continue;
                }
                open.add(client);
                daemon(() -> serve(client));
            } catch (IOException e) {
                if (listener.isClosed()) {
                    return;
                }
            }
        }
    }

    /**
     * serve connects client to the member: a session stream (it starts with
     * the framing's preface) frame by frame, anything else (the HTTP face's
     * reads) byte by byte.
     */
    private void serve(Socket client) {
        Socket server = null;
        try {
            DataInputStream in = new DataInputStream(new BufferedInputStream(client.getInputStream()));
            byte[] preface = new byte[Framing.PREFACE.length];
            in.readFully(preface);
            String[] hp = target.split(":");
            Socket s = new Socket(hp[0], Integer.parseInt(hp[1]));
            server = s;
            open.add(s);
            s.getOutputStream().write(preface);
            if (Arrays.equals(preface, Framing.PREFACE)) {
                daemon(() -> toClient(s, client));
                toMember(in, client, s);
            } else {
                DataInputStream answers = new DataInputStream(s.getInputStream());
                daemon(() -> pipe(answers, client, s, client));
                pipe(in, s, client, s);
            }
        } catch (IOException e) {
            closeQuietly(client);
            if (server != null) {
                closeQuietly(server);
            }
        }
    }

    /** pipe copies in to the socket to, byte by byte, until either side closes. */
    private void pipe(DataInputStream in, Socket to, Socket a, Socket b) {
        byte[] buf = new byte[64 << 10];
        try {
            OutputStream out = to.getOutputStream();
            for (int n; (n = in.read(buf)) > 0;) {
                out.write(buf, 0, n);
                out.flush();
            }
        } catch (IOException e) {
            // either side closed
        } finally {
            closeQuietly(a, b);
        }
    }

    /** toMember forwards the client's frames, counting acquires. */
    private void toMember(DataInputStream in, Socket client, Socket server) {
        try {
            OutputStream out = server.getOutputStream();
            while (true) {
                int kind = in.readUnsignedByte();
                byte[] payload = readPayload(in);
                if (kind == Framing.KIND_MESSAGE) {
                    for (ChannelRequest cr : SessionsRequest.parseFrom(payload).getRequestsList()) {
                        if (cr.getRequest().hasAcquire()) {
                            acquiresForwarded.incrementAndGet();
                        }
                    }
                }
                out.write(Framing.frame(kind, payload));
                out.flush();
            }
        } catch (IOException e) {
            // either side closed
        } finally {
            closeQuietly(client, server);
        }
    }

    /** toClient forwards the member's frames, each once it is due, or loses the answer to an acquire. */
    private void toClient(Socket server, Socket client) {
        BlockingQueue<Object[]> due = new LinkedBlockingQueue<>();
        daemon(() -> deliver(due, client, server));
        try {
            DataInputStream in = new DataInputStream(new BufferedInputStream(server.getInputStream()));
            while (true) {
                int kind = in.readUnsignedByte();
                byte[] payload = readPayload(in);
                if (kind == Framing.KIND_MESSAGE && answersAnAcquire(SessionsResponse.parseFrom(payload))
                        && answersToLose.getAndUpdate(x -> Math.max(0, x - 1)) > 0) {
                    closeQuietly(client, server); // the answer is lost with the connection
                    break;
                }
                due.add(new Object[] {System.nanoTime() + answerDelayMillis * 1_000_000, Framing.frame(kind, payload)});
            }
        } catch (IOException e) {
            // either side closed
        }
        due.add(new Object[] {0L, new byte[0]}); // the end
    }

    private static boolean answersAnAcquire(SessionsResponse r) {
        for (ChannelResponse cr : r.getResponsesList()) {
            if (cr.hasResponse() && (cr.getResponse().hasAcquire() || cr.getResponse().hasGrant())) {
                return true;
            }
        }
        return false;
    }

    private static byte[] readPayload(DataInputStream in) throws IOException {
        int n = 0;
        for (int shift = 0;; shift += 7) {
            int c = in.readUnsignedByte();
            n |= (c & 0x7f) << shift;
            if (c < 0x80) {
                break;
            }
        }
        byte[] b = new byte[n];
        in.readFully(b);
        return b;
    }

    /** deliver writes each frame to the client once it is due. */
    private void deliver(BlockingQueue<Object[]> due, Socket client, Socket server) {
        try {
            OutputStream out = client.getOutputStream();
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

    private void closeQuietly(Socket... ss) {
        for (Socket s : ss) {
            open.remove(s);
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
        cut();
    }
}
