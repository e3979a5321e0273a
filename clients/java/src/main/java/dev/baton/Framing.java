package dev.baton;

import baton.v1.BatonOuterClass.SessionsRequest;
import baton.v1.BatonOuterClass.SessionsResponse;
import com.google.protobuf.ByteString;
import com.google.protobuf.CodedInputStream;
import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.WireFormat;
import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * Framing is one Sessions stream in Baton's own session framing
 * (docs/PROTOCOL.md, section 3) on a TCP connection to one member: the
 * preface, a hello, the member's accept, then message frames (a kind byte,
 * the payload's length as a varint, the payload), each one SessionsRequest
 * or SessionsResponse, until an end frame carrying a google.rpc.Status.
 *
 * <p>A writer thread owns the socket's output: {@link #send} only queues,
 * so a caller holding the session's lock never blocks on the network (a
 * stalled socket must not keep the watchdog from declaring a Lease lost on
 * time). One thread reads, with {@link #receive}.
 */
final class Framing implements AutoCloseable {
    static final byte[] PREFACE = "BATON-SESSIONS/1\r\n".getBytes(StandardCharsets.US_ASCII);
    static final int KIND_HELLO = 1;
    static final int KIND_ACCEPT = 2;
    static final int KIND_MESSAGE = 3;
    static final int KIND_END = 4;
    /** The largest frame a member writes. */
    static final int MAX_RESPONSE_BYTES = 4 << 20;
    static final String CLIENT_NAME = "baton-java/0.1";
    static final String ERROR_DOMAIN = "batonlock.io";
    private static final byte[] STOP = new byte[0];

    private final String addr;
    private final Socket socket;
    private final DataInputStream in;
    private final LinkedBlockingQueue<byte[]> queue = new LinkedBlockingQueue<>();
    private final Thread writer;
    private volatile boolean closed;

    /** Ended is the end of a stream: error is why (null: a clean end, or our own close). */
    static final class Ended extends Exception {
        private static final long serialVersionUID = 1L;
        final transient BatonException error;

        Ended(BatonException error) {
            super(error == null ? "stream ended" : error.getMessage(), error, false, false);
            this.error = error;
        }
    }

    private Framing(String addr, Socket socket) throws IOException {
        this.addr = addr;
        this.socket = socket;
        this.in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
        this.writer = new Thread(this::writeLoop, "baton-writer-" + addr);
        writer.setDaemon(true);
    }

    /**
     * dial connects to addr, writes the preface and the hello, and reads the
     * member's accept, all within timeout (which also bounds every read until
     * {@link #clearTimeout}).
     *
     * @throws BatonException the member's refusal (its end frame), or
     *     UnavailableException when it cannot be reached or does not speak the framing
     */
    static Framing dial(String addr, Duration timeout, String bearerToken) {
        int colon = addr.lastIndexOf(':');
        Socket sock = new Socket();
        try {
            if (colon < 0) {
                throw new IOException("address " + addr + " has no port");
            }
            String host = addr.substring(0, colon).replace("[", "").replace("]", "");
            sock.connect(new InetSocketAddress(host, Integer.parseInt(addr.substring(colon + 1))),
                    (int) timeout.toMillis());
            sock.setTcpNoDelay(true);
            sock.setSoTimeout((int) timeout.toMillis());
            OutputStream out = sock.getOutputStream();
            ByteArrayOutputStream first = new ByteArrayOutputStream();
            first.write(PREFACE);
            first.write(frame(KIND_HELLO, hello(bearerToken)));
            out.write(first.toByteArray());
            out.flush();
            Framing f = new Framing(addr, sock);
            int kind = f.in.readUnsignedByte();
            byte[] payload = f.readPayload();
            if (kind == KIND_END) {
                BatonException e = parseStatus(payload);
                throw e != null ? e : unavailable(addr + " ended the sessions stream as it opened", null);
            }
            if (kind != KIND_ACCEPT) {
                throw unavailable(addr + " does not speak Baton's session framing", null);
            }
            f.writer.start();
            return f;
        } catch (IOException | RuntimeException e) {
            closeQuietly(sock);
            if (e instanceof BatonException be) {
                throw be;
            }
            throw unavailable("open a sessions stream on " + addr + ": " + e, e);
        }
    }

    String addr() {
        return addr;
    }

    /** clearTimeout makes reads wait as long as it takes: the stream is attached. */
    void clearTimeout() throws IOException {
        socket.setSoTimeout(0);
    }

    /** send queues req for the writer; it never blocks on the network. Nothing happens once closed. */
    void send(SessionsRequest req) {
        if (!closed) {
            queue.add(frame(KIND_MESSAGE, req.toByteArray()));
        }
    }

    private void writeLoop() {
        try {
            OutputStream out = socket.getOutputStream();
            while (true) {
                byte[] b = queue.take();
                if (b == STOP || closed) {
                    return;
                }
                out.write(b);
                out.flush();
            }
        } catch (IOException | InterruptedException e) {
            close(); // the reader sees the connection end
        }
    }

    /**
     * receive reads the next SessionsResponse.
     *
     * @throws Ended when the stream ended: the member's end frame, or a
     *     broken or closed connection (UnavailableException)
     */
    SessionsResponse receive() throws Ended {
        try {
            int kind = in.readUnsignedByte();
            byte[] payload = readPayload();
            if (kind == KIND_END) {
                throw new Ended(parseStatus(payload));
            }
            if (kind != KIND_MESSAGE) {
                throw new Ended(unavailable(addr + " sent a frame of kind " + kind, null));
            }
            return SessionsResponse.parseFrom(payload);
        } catch (IOException e) {
            close();
            throw new Ended(unavailable("sessions stream to " + addr + ": " + e, e));
        }
    }

    private byte[] readPayload() throws IOException {
        long n = 0;
        for (int shift = 0;; shift += 7) {
            if (shift > 63) {
                throw new IOException("overlong frame length");
            }
            int c = in.readUnsignedByte();
            n |= (long) (c & 0x7f) << shift;
            if (c < 0x80) {
                break;
            }
        }
        if (n > MAX_RESPONSE_BYTES) {
            throw new IOException("frame of " + n + " bytes over the limit of " + MAX_RESPONSE_BYTES);
        }
        byte[] b = new byte[(int) n];
        in.readFully(b);
        return b;
    }

    /** close closes the connection: a reader blocked in receive returns. Closing twice does nothing. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        queue.add(STOP);
        closeQuietly(socket);
    }

    /** A frame: the kind byte, the payload's length as a varint, the payload. */
    static byte[] frame(int kind, byte[] payload) {
        ByteArrayOutputStream b = new ByteArrayOutputStream(payload.length + 6);
        b.write(kind);
        int n = payload.length;
        while ((n & ~0x7f) != 0) {
            b.write((n & 0x7f) | 0x80);
            n >>>= 7;
        }
        b.write(n);
        b.writeBytes(payload);
        return b.toByteArray();
    }

    /** A hello frame's payload: field 1 the authorization, field 2 the client's name. */
    static byte[] hello(String bearerToken) {
        try {
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            CodedOutputStream out = CodedOutputStream.newInstance(b);
            if (bearerToken != null && !bearerToken.isEmpty()) {
                out.writeString(1, "Bearer " + bearerToken);
            }
            out.writeString(2, CLIENT_NAME);
            out.flush();
            return b.toByteArray();
        } catch (IOException e) {
            throw new IllegalStateException("writing to memory failed", e);
        }
    }

    /**
     * parseStatus is an end frame's google.rpc.Status as an exception (null
     * for a clean end): its code and message, and the Reason and leader of its
     * ErrorInfo detail. Decoded by hand: google.rpc's messages are not among
     * the generated ones (baton.proto does not import them).
     */
    static BatonException parseStatus(byte[] payload) throws IOException {
        int code = 0;
        String message = "";
        String reason = "";
        String leader = "";
        CodedInputStream in = CodedInputStream.newInstance(payload);
        for (int tag; (tag = in.readTag()) != 0;) {
            switch (WireFormat.getTagFieldNumber(tag)) {
                case 1 -> code = in.readInt32();
                case 2 -> message = in.readString();
                case 3 -> {
                    String[] info = errorInfo(in.readBytes());
                    if (info != null) {
                        reason = info[0];
                        leader = info[1];
                    }
                }
                default -> in.skipField(tag);
            }
        }
        if (code == 0) {
            return null;
        }
        return Wire.error(code, reason, message, leader);
    }

    /** The reason and leader address of a google.protobuf.Any holding Baton's ErrorInfo; null otherwise. */
    private static String[] errorInfo(ByteString any) throws IOException {
        String type = "";
        ByteString value = ByteString.EMPTY;
        CodedInputStream in = any.newCodedInput();
        for (int tag; (tag = in.readTag()) != 0;) {
            switch (WireFormat.getTagFieldNumber(tag)) {
                case 1 -> type = in.readString();
                case 2 -> value = in.readBytes();
                default -> in.skipField(tag);
            }
        }
        if (!type.endsWith("/google.rpc.ErrorInfo")) {
            return null;
        }
        String reason = "";
        String domain = "";
        String leader = "";
        in = value.newCodedInput();
        for (int tag; (tag = in.readTag()) != 0;) {
            switch (WireFormat.getTagFieldNumber(tag)) {
                case 1 -> reason = in.readString();
                case 2 -> domain = in.readString();
                case 3 -> {
                    String k = "";
                    String v = "";
                    CodedInputStream e = in.readBytes().newCodedInput();
                    for (int t; (t = e.readTag()) != 0;) {
                        switch (WireFormat.getTagFieldNumber(t)) {
                            case 1 -> k = e.readString();
                            case 2 -> v = e.readString();
                            default -> e.skipField(t);
                        }
                    }
                    if (k.equals("leader_addr")) {
                        leader = v;
                    }
                }
                default -> in.skipField(tag);
            }
        }
        return ERROR_DOMAIN.equals(domain) ? new String[] {reason, leader} : null;
    }

    private static UnavailableException unavailable(String message, Throwable cause) {
        return new UnavailableException(14, "", message, cause);
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException e) {
            // closed already
        }
    }
}
