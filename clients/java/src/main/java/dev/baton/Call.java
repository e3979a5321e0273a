package dev.baton;

import baton.v1.BatonOuterClass.SessionRequest;
import baton.v1.BatonOuterClass.SessionResponse;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Call is one request of a session on its stream: a mutating request keeps
 * its sequence number for every send (exactly once), and gets a new stream
 * id for each; a keepalive notes when it was sent, from which its answer
 * counts the deadline. Its fields are guarded by the session's lock, except
 * that {@link #await} may be called without it.
 */
final class Call {
    final SessionRequest request; // without id or header: sendLocked adds them
    final long seq; // 0: not mutating (a keepalive)
    final boolean keepAlive;
    long id; // the stream id of the latest send
    long sent; // System.nanoTime before a keepalive was queued
    boolean waits; // an acquire that may queue: its final answer is a push
    String name = "";
    String ownerKey = "";
    boolean isFinal;
    SessionResponse response;
    BatonException error;
    boolean abandoned; // its caller gave up: a grant that comes is released
    Call cleanup; // the release of an abandoned acquire's grant
    int retries;
    private final CountDownLatch done = new CountDownLatch(1);

    Call(SessionRequest request, long seq, boolean keepAlive) {
        this.request = request;
        this.seq = seq;
        this.keepAlive = keepAlive;
    }

    /** finish records the final answer (the session's lock held); later ones are ignored. */
    boolean finish(SessionResponse resp, BatonException err) {
        if (isFinal) {
            return false;
        }
        isFinal = true;
        response = resp;
        error = err;
        done.countDown();
        return true;
    }

    /** await waits for the final answer; false when nanos (negative: no bound) passed first. */
    boolean await(long nanos) throws InterruptedException {
        if (nanos < 0) {
            done.await();
            return true;
        }
        return done.await(nanos, TimeUnit.NANOSECONDS);
    }
}
