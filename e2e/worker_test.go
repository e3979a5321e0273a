package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
)

// worker is one chaos client: one session at a time, one hold at a time.
type worker struct {
	id    int
	r     *router
	h     *history
	locks []string
	rng   *rand.Rand
	stats *callStats

	session uint64
	secret  string // the session's, drawn by the server (as for an HTTP client)
	seq     uint64
	holds   map[string]uint64 // lock -> token the client was granted

	// deadline is when the client gives its session up; lost is set when
	// the server refused the session. session and holds belong to the run
	// goroutine (writes to session also take mu, for alive).
	mu       sync.Mutex
	deadline time.Time
	lost     bool
	paused   bool // keepalives are not sent (a simulated process pause)
	kaStop   context.CancelFunc
	kaDone   chan struct{}

	sessionsOpened, sessionsLost int
	zombieWrites, zombieFenced   int
}

// alive reports whether the client may still act as the session's owner:
// before sendTime(last acknowledged keepalive) + TTL - margin.
func (w *worker) alive() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.session != 0 && !w.lost && time.Now().Before(w.deadline)
}

// validUntil is the session's deadline as the client reckons it, zero
// once the server refused the session.
func (w *worker) validUntil() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.session == 0 || w.lost {
		return time.Time{}
	}
	return w.deadline
}

func (w *worker) extend(to time.Time) {
	w.mu.Lock()
	if !w.lost && to.After(w.deadline) {
		w.deadline = to
	}
	w.mu.Unlock()
}

func (w *worker) deadlineCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	w.mu.Lock()
	d := w.deadline
	w.mu.Unlock()
	return context.WithDeadline(ctx, d)
}

func (w *worker) owner() string { return fmt.Sprintf("e2e/chaos/client-%d", w.id) }

// open opens a session and starts its keepalive loop.
func (w *worker) open(ctx context.Context) bool {
	sent := time.Now()
	var resp *batonpb.OpenSessionResponse
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := w.r.do(octx, w.stats, 2*time.Second, func(ctx context.Context, c batonpb.BatonClient) error {
		var err error
		// Not idempotent: a retry after an unknown outcome may leave an
		// orphan session, which expires after its TTL.
		resp, err = c.OpenSession(ctx, &batonpb.OpenSessionRequest{Ttl: durationpb.New(chaosTTL), Owner: w.owner()})
		return err
	})
	if err != nil {
		return false
	}
	now := time.Now()
	w.h.ack(resp.GetSessionId(), now)
	w.h.op(opRec{kind: opOpen, client: w.id, session: resp.GetSessionId(), at: now})
	w.sessionsOpened++
	w.mu.Lock()
	w.session, w.secret, w.seq, w.holds = resp.GetSessionId(), resp.GetSecret(), 0, map[string]uint64{}
	w.lost = false
	w.deadline = sent.Add(resp.GetTtl().AsDuration() - chaosMargin)
	kctx, kstop := context.WithCancel(ctx)
	w.kaStop, w.kaDone = kstop, make(chan struct{})
	w.mu.Unlock()
	go w.keepAlive(kctx, resp.GetSessionId(), resp.GetSecret(), w.kaDone)
	return true
}

// keepAlive sends unary KeepAlives every TTL/5 until ctx ends or the
// session is refused. A refusal or a passed deadline ends the session for
// the client.
func (w *worker) keepAlive(ctx context.Context, id uint64, secret string, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(chaosTTL / 5):
		}
		w.mu.Lock()
		paused := w.paused
		w.mu.Unlock()
		if paused {
			continue
		}
		sent := time.Now()
		var resp *batonpb.KeepAliveResponse
		kctx, cancel := context.WithTimeout(ctx, chaosTTL/2)
		err := w.r.do(kctx, nil, time.Second, func(ctx context.Context, c batonpb.BatonClient) error {
			var err error
			resp, err = c.KeepAlive(ctx, &batonpb.KeepAliveRequest{SessionId: id, Secret: secret})
			return err
		})
		cancel()
		switch {
		case err == nil:
			w.extend(sent.Add(resp.GetTtl().AsDuration() - chaosMargin))
		case ctx.Err() != nil:
			return
		case !retryable(err) && kctx.Err() == nil:
			w.drop() // SESSION_NOT_FOUND, SESSION_EXPIRED, BLACKLISTED
			return
		}
	}
}

// drop marks the session lost for the client and stops its keepalives.
func (w *worker) drop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lost = true
	if w.kaStop != nil {
		w.kaStop()
	}
}

// sessionGone forgets the session (the server expires it) and its holds.
// Run goroutine only.
func (w *worker) sessionGone() {
	w.drop()
	w.mu.Lock()
	done := w.kaDone
	w.mu.Unlock()
	if done != nil {
		<-done
	}
	w.mu.Lock()
	if w.session != 0 {
		w.sessionsLost++
	}
	w.session = 0
	w.mu.Unlock()
	w.holds = map[string]uint64{}
}

// run is the client loop: acquire (try or wait), write through the fence,
// release. On stop it returns after an acknowledged acquire or release,
// so it may end holding a lock.
func (w *worker) run(ctx context.Context, stop *atomic.Bool) {
	for ctx.Err() == nil {
		if !w.alive() {
			if w.session != 0 {
				w.sessionGone()
			}
			if stop.Load() {
				return
			}
			if !w.open(ctx) {
				sleepCtx(ctx, 100*time.Millisecond)
			}
			continue
		}
		if stop.Load() {
			return
		}
		name := w.locks[w.rng.IntN(len(w.locks))]
		token, ok := w.acquire(ctx, name, w.rng.IntN(2) == 0)
		if !ok {
			sleepCtx(ctx, time.Duration(w.rng.IntN(20))*time.Millisecond)
			continue
		}
		if stop.Load() {
			return
		}
		if w.rng.IntN(150) == 0 {
			w.zombie(ctx, name, token)
			continue
		}
		for range 1 + w.rng.IntN(3) {
			if !w.alive() {
				break
			}
			w.h.write(name, token, w.id, w.session, w.validUntil())
			sleepCtx(ctx, time.Duration(w.rng.IntN(15))*time.Millisecond)
		}
		if !w.alive() {
			continue
		}
		w.release(ctx, name, token)
	}
}

// zombie simulates a process pause between the client's check of its
// deadline and its write: keepalives stop, the session expires on the
// server and the lock may go to another client, and then the paused
// client writes with its old token anyway. Only the fence can stop it.
func (w *worker) zombie(ctx context.Context, name string, token uint64) {
	w.mu.Lock()
	w.paused = true
	w.mu.Unlock()
	sleepCtx(ctx, chaosTTL+time.Second)
	w.mu.Lock()
	w.paused = false
	w.mu.Unlock()
	w.zombieWrites++
	if !w.h.writeZombie(name, token, w.id, w.session, w.validUntil()) {
		w.zombieFenced++
	}
}

// acquire takes name, retrying the same seq until a definite answer or
// the session's client-side deadline.
func (w *worker) acquire(ctx context.Context, name string, wait bool) (uint64, bool) {
	w.seq++
	req := &batonpb.AcquireRequest{
		Header: &batonpb.RequestHeader{SessionId: w.session, Seq: w.seq, Secret: w.secret},
		Name:   name, Wait: wait,
	}
	attempt := 2 * time.Second
	if wait {
		req.WaitTimeout = waitTimeout
		// Longer than the server-side wait: a client-side cancel would
		// make the server abandon the wait.
		attempt = waitTimeout.AsDuration() + 4*time.Second
	}
	dctx, cancel := w.deadlineCtx(ctx)
	defer cancel()
	sent := time.Now()
	var resp *batonpb.AcquireResponse
	err := w.r.do(dctx, w.stats, attempt, func(ctx context.Context, c batonpb.BatonClient) error {
		var err error
		resp, err = c.Acquire(ctx, req)
		return err
	})
	now := time.Now()
	if err != nil {
		if dctx.Err() == nil {
			reason, _ := errInfo(err)
			w.h.op(opRec{kind: opAcquire, client: w.id, session: w.session, seq: req.Header.Seq, lock: name, refused: reason, at: now})
			switch reason {
			case "SESSION_NOT_FOUND", "SESSION_EXPIRED", "BLACKLISTED":
				w.sessionGone()
			}
		}
		return 0, false
	}
	w.h.op(opRec{kind: opAcquire, client: w.id, session: w.session, seq: req.Header.Seq, lock: name,
		acquired: resp.GetAcquired(), token: resp.GetToken(), sent: sent, at: now})
	if !resp.GetAcquired() {
		return 0, false
	}
	w.h.ack(resp.GetToken(), now)
	w.holds[name] = resp.GetToken()
	return resp.GetToken(), true
}

// release gives name back, retrying the same seq.
func (w *worker) release(ctx context.Context, name string, token uint64) {
	w.seq++
	req := &batonpb.ReleaseRequest{
		Header: &batonpb.RequestHeader{SessionId: w.session, Seq: w.seq, Secret: w.secret},
		Name:   name, Token: token,
	}
	dctx, cancel := w.deadlineCtx(ctx)
	defer cancel()
	err := w.r.do(dctx, w.stats, 2*time.Second, func(ctx context.Context, c batonpb.BatonClient) error {
		_, err := c.Release(ctx, req)
		return err
	})
	now := time.Now()
	if err != nil {
		if dctx.Err() == nil {
			reason, _ := errInfo(err)
			w.h.op(opRec{kind: opRelease, client: w.id, session: w.session, seq: req.Header.Seq, lock: name, token: token, refused: reason, at: now})
			delete(w.holds, name)
			switch reason {
			case "SESSION_NOT_FOUND", "SESSION_EXPIRED", "BLACKLISTED":
				w.sessionGone()
			}
		}
		return
	}
	w.h.op(opRec{kind: opRelease, client: w.id, session: w.session, seq: req.Header.Seq, lock: name, token: token, at: now})
	delete(w.holds, name)
}

// finish releases what the client holds, closes its session and stops
// its keepalives (after the final checks).
func (w *worker) finish(ctx context.Context) {
	if w.alive() {
		for name, tok := range w.holds {
			w.release(ctx, name, tok)
		}
		if w.alive() {
			w.seq++
			seq, id, secret := w.seq, w.session, w.secret
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := w.r.do(cctx, w.stats, 2*time.Second, func(ctx context.Context, c batonpb.BatonClient) error {
				_, err := c.CloseSession(ctx, &batonpb.CloseSessionRequest{SessionId: id, Seq: seq, Secret: secret})
				return err
			})
			cancel()
			if err == nil {
				w.h.op(opRec{kind: opClose, client: w.id, session: id, seq: seq, at: time.Now()})
			}
		}
	}
	w.mu.Lock()
	stop, done := w.kaStop, w.kaDone
	w.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}
