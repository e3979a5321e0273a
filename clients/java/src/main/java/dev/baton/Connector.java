package dev.baton;

import baton.v1.BatonOuterClass.ChannelRequest;
import baton.v1.BatonOuterClass.ChannelResponse;
import baton.v1.BatonOuterClass.OpenSessionResponse;
import baton.v1.BatonOuterClass.SessionRequest;
import baton.v1.BatonOuterClass.SessionResponse;
import baton.v1.BatonOuterClass.SessionsRequest;
import java.io.IOException;
import java.time.Duration;
import java.util.List;

/**
 * Connector attaches a session to a stream on the leader: it dials members
 * in Baton's framing, sends the session's open or resume as the first
 * request of the channel, follows NOT_LEADER hints (at most MAX_HINTS in a
 * row, so that two members naming each other during an election cannot
 * keep it in a loop) and otherwise goes round the endpoints with the
 * client's backoff (docs/PROTOCOL.md, sections 2 and 9).
 */
final class Connector {
    /** How many leader hints in a row a connect follows before going round the endpoints. */
    static final int MAX_HINTS = 3;

    private final Session session;
    private final Transport transport;
    private final Duration ttl;

    /**
     * Attached is a stream whose first request, an open or a resume, was
     * answered; sent is when it was queued; rest is what came in the same
     * message after the answer (a resume's list of holds may), for the
     * session to take in order.
     */
    record Attached(Framing stream, OpenSessionResponse open, long sent, List<ChannelResponse> rest) {}

    Connector(Session session, Transport transport, Duration ttl) {
        this.session = session;
        this.transport = transport;
        this.ttl = ttl;
    }

    /**
     * connect opens a stream on the leader whose first request is first,
     * following leader hints (at most MAX_HINTS in a row) and going round the
     * endpoints with backoff. bounded limits it to the client's attempts;
     * otherwise only the session's end or a final refusal stops it.
     */
    Attached connect(SessionRequest first, boolean bounded) {
        BatonException last = null;
        int hops = 0;
        for (int attempt = 0;; attempt++) {
            if (bounded && attempt >= transport.maxAttempts()) {
                throw new UnavailableException(14, last == null ? "" : last.reason(), "no leader answered in "
                        + attempt + " attempts" + (last == null ? "" : ": " + last.getMessage()), last);
            }
            BatonException ended = session.endCause();
            if (ended != null) {
                throw ended;
            }
            String addr = transport.target();
            long sent = System.nanoTime();
            try {
                return dial(addr, first, sent);
            } catch (BatonException e) {
                last = e;
                if (e instanceof UnavailableException u && "NOT_LEADER".equals(e.reason())
                        && !u.leaderAddr().isEmpty() && !u.leaderAddr().equals(addr) && hops < MAX_HINTS) {
                    transport.follow(addr, u.leaderAddr());
                    hops++;
                    continue;
                }
                if (!Session.retryable(e)) {
                    throw e;
                }
                transport.forget(addr);
            }
            hops = 0;
            if (session.sleepUnlessEnded(Transport.pause(attempt))) {
                BatonException cause = session.endCause();
                throw cause != null ? cause : new SessionLostException(0, "", "session closed", null);
            }
        }
    }

    /** dial opens a stream on addr and sends first; the stream, once the member answered it. */
    private Attached dial(String addr, SessionRequest first, long sent) {
        Duration timeout = ttl.dividedBy(2).compareTo(Duration.ofSeconds(1)) > 0 ? ttl.dividedBy(2)
                : Duration.ofSeconds(1);
        Framing f = Framing.dial(addr, timeout, transport.bearerToken());
        try {
            f.send(SessionsRequest.newBuilder()
                    .addRequests(ChannelRequest.newBuilder().setChannel(Session.CHANNEL).setRequest(first)).build());
            while (true) {
                List<ChannelResponse> batch = f.receive().getResponsesList();
                for (int i = 0; i < batch.size(); i++) {
                    ChannelResponse cr = batch.get(i);
                    if (cr.getChannel() != Session.CHANNEL) {
                        continue;
                    }
                    if (cr.hasResponse()) {
                        SessionResponse r = cr.getResponse();
                        if (r.hasError()) {
                            throw Wire.error(r.getError());
                        }
                        if (r.hasOpen()) {
                            f.clearTimeout();
                            transport.follow(addr, addr);
                            return new Attached(f, r.getOpen(), sent, batch.subList(i + 1, batch.size()));
                        }
                    }
                    if (cr.hasEnd()) {
                        throw cr.getEnd().hasError() ? Wire.error(cr.getEnd().getError())
                                : new UnavailableException(14, "", addr + " ended the channel", null);
                    }
                }
            }
        } catch (Framing.Ended e) {
            f.close();
            throw e.error != null ? e.error : new UnavailableException(14, "", addr + " ended the stream", null);
        } catch (IOException e) {
            f.close();
            throw new UnavailableException(14, "", "sessions stream to " + addr + ": " + e, e);
        } catch (RuntimeException e) {
            f.close();
            throw e;
        }
    }
}
