package liveness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonlock/baton/internal/fsm"
)

// The tests here hold the real-time loop (Run) to its deadlines: each runs
// in a synctest bubble, whose clock moves only when every goroutine in it
// is blocked, so "at the deadline and not a nanosecond before" is checked
// exactly, timers, retries and proposal goroutines included.

// callLog is a Proposer safe for concurrent use: it records each call
// ("expire 3", "cancel x/2/1", "hold x/2/5"); the nth call returns once
// gates[n] is closed, if there is one, and fails if failing is set then.
type callLog struct {
	mu      sync.Mutex
	calls   []string
	seen    int // calls already returned by fresh
	failing bool
	gates   []chan struct{}
}

func (p *callLog) call(what string) error {
	p.mu.Lock()
	var gate chan struct{}
	if n := len(p.calls); n < len(p.gates) {
		gate = p.gates[n]
	}
	p.calls = append(p.calls, what)
	p.mu.Unlock()
	if gate != nil {
		<-gate
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failing {
		return errors.New("not now")
	}
	return nil
}

func (p *callLog) ExpireSession(_ context.Context, id uint64) error {
	return p.call(fmt.Sprintf("expire %d", id))
}

func (p *callLog) CancelWait(_ context.Context, lock string, session, seq uint64) error {
	return p.call("cancel " + key(lock, session, seq))
}

func (p *callLog) ExpireHold(_ context.Context, lock string, session, token uint64, ownerKey string) error {
	if ownerKey != "" {
		return p.call("hold " + key(lock, session, token) + "/" + ownerKey)
	}
	return p.call("hold " + key(lock, session, token))
}

func (p *callLog) EndLockDelay(_ context.Context, lock string, delayFrom uint64) error {
	return p.call(fmt.Sprintf("end-delay %s/%d", lock, delayFrom))
}

func (p *callLog) EndRevokedHold(_ context.Context, lock string, session, token uint64) error {
	return p.call("end-revoked " + key(lock, session, token))
}

func (p *callLog) setFailing(fail bool) {
	p.mu.Lock()
	p.failing = fail
	p.mu.Unlock()
}

// fresh returns the calls made since the last fresh, sorted: the loop
// makes the proposals due at one instant on goroutines of their own, in
// no set order.
func (p *callLog) fresh() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := slices.Sorted(slices.Values(p.calls[p.seen:]))
	p.seen = len(p.calls)
	return out
}

// running is a tracker that leads and runs its real-time loop in a
// synctest bubble, over a state machine whose commands the test applies.
type running struct {
	applier
	p     *callLog
	start time.Time // the promotion
	stop  func()    // ends Run and waits for it
	done  chan struct{}
}

// newRunning promotes a tracker and starts Run; call it in a bubble.
func newRunning(t *testing.T) *running {
	r := &running{applier: applier{t: t, m: fsm.New()}, p: &callLog{}, start: time.Now(), done: make(chan struct{})}
	r.tr = New(r.p, nil)
	r.tr.Promote(1, r.m)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(r.done)
		r.tr.Run(ctx)
	}()
	r.stop = func() {
		cancel()
		<-r.done
	}
	t.Cleanup(r.stop)
	return r
}

// at sleeps until d after the promotion and lets every goroutine of the
// bubble (the loop, its timers and proposals) run until they block.
func (r *running) at(d time.Duration) {
	time.Sleep(time.Until(r.start.Add(d)))
	synctest.Wait()
}

// proposed checks the calls made since the last check.
func (r *running) proposed(when string, want ...string) {
	r.t.Helper()
	if got := r.p.fresh(); !slices.Equal(got, want) {
		r.t.Fatalf("%s: proposed %q, want %q", when, got, want)
	}
}

// TestRunProposesAtDeadlines: the real-time loop proposes a session's
// expiry, a timed wait's cancel and a hold's expiry each at its deadline,
// not a nanosecond before, including deadlines that arrive while it sleeps
// and a session deadline a keepalive moved to received+TTL; a session
// whose expiry is under way is refused keepalives and not proposed twice.
func TestRunProposesAtDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRunning(t)
		a := r.apply(openCmd(5*time.Second, 0)).GetSessionId()
		b := r.apply(openCmd(time.Minute, 0)).GetSessionId()
		r.apply(acquireCmd(b, 1, "x", 0, 0))
		th := r.apply(acquireCmd(a, 1, "h", 0, 4*time.Second)).GetAcquire().GetToken()
		r.at(time.Second) // the loop sleeps until the hold's limit, at 4s
		r.apply(acquireCmd(a, 2, "x", 2*time.Second, 0))
		r.at(2 * time.Second)
		if _, err := r.tr.Heartbeat(a, time.Now()); err != nil {
			t.Fatal(err)
		}

		r.at(3*time.Second - time.Nanosecond)
		r.proposed("before 3s")
		r.at(3 * time.Second)
		r.proposed("at 3s, the wait queued at 1s for 2s", "cancel "+key("x", a, 2))
		r.at(4*time.Second - time.Nanosecond)
		r.proposed("before 4s")
		r.at(4 * time.Second)
		r.proposed("at 4s, the hold's limit", "hold "+key("h", a, th))
		r.at(7*time.Second - time.Nanosecond)
		r.proposed("before 7s (a's TTL from open ran out at 5s, but the keepalive at 2s moved it)")
		r.at(7 * time.Second)
		r.proposed("at 7s, the keepalive at 2s plus the TTL", fmt.Sprintf("expire %d", a))
		if _, err := r.tr.Heartbeat(a, time.Now()); !errors.Is(err, ErrSessionLost) {
			t.Fatalf("keepalive of a session being expired: %v, want ErrSessionLost", err)
		}
		r.at(time.Minute - time.Nanosecond)
		r.proposed("before 1m (the expiry of a, not yet applied, is not proposed again)")
		r.at(time.Minute)
		r.proposed("at 1m", fmt.Sprintf("expire %d", b))
	})
}

// TestRunRetriesFailedProposals: a proposal that failed is made again
// RetryDelay later, not before, and again until it succeeds.
func TestRunRetriesFailedProposals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRunning(t)
		a := r.apply(openCmd(time.Second, 0)).GetSessionId()
		b := r.apply(openCmd(time.Minute, 0)).GetSessionId()
		r.apply(acquireCmd(b, 1, "x", 0, 0))
		r.apply(acquireCmd(a, 1, "x", time.Second, 0))
		th := r.apply(acquireCmd(a, 2, "h", 0, time.Second)).GetAcquire().GetToken()
		all := []string{"cancel " + key("x", a, 1), fmt.Sprintf("expire %d", a), "hold " + key("h", a, th)}
		slices.Sort(all)

		r.p.setFailing(true)
		r.at(time.Second)
		r.proposed("at 1s", all...)
		r.at(time.Second + RetryDelay - time.Nanosecond)
		r.proposed("before the retry")
		r.at(time.Second + RetryDelay)
		r.proposed("at the first retry", all...)
		r.p.setFailing(false)
		r.at(time.Second + 2*RetryDelay)
		r.proposed("at the second retry", all...)
		r.at(time.Minute - time.Nanosecond)
		r.proposed("after the retries succeeded")
	})
}

// TestRunDropsRetriesOfAnEarlierTerm: a new term derives every deadline
// afresh, so a proposal of the term before that fails is not retried: if
// it were, it would duplicate the new term's proposal under way.
func TestRunDropsRetriesOfAnEarlierTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRunning(t)
		first, second := make(chan struct{}), make(chan struct{})
		r.p.gates = []chan struct{}{first, second}
		a := r.apply(openCmd(time.Second, 0)).GetSessionId()
		expire := fmt.Sprintf("expire %d", a)
		r.at(time.Second)
		r.proposed("at 1s, in term 1", expire)
		r.tr.Demote()
		r.tr.Promote(2, r.m)
		r.at(2 * time.Second)
		r.proposed("a full TTL after the promotion, in term 2", expire)
		// Term 1's proposal fails while term 2's is under way.
		r.p.setFailing(true)
		close(first)
		synctest.Wait()
		r.p.setFailing(false)
		r.at(time.Hour)
		r.proposed("after term 1's failure, term 2's proposal under way")
		close(second)
		r.at(2 * time.Hour)
		r.proposed("once term 2's proposal succeeded")
	})
}

// TestRunWaitsForItsProposals: Run returns when its ctx ends, but not
// before the proposals it started have returned.
func TestRunWaitsForItsProposals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRunning(t)
		gate := make(chan struct{})
		r.p.gates = []chan struct{}{gate}
		a := r.apply(openCmd(time.Second, 0)).GetSessionId()
		r.at(time.Second)
		r.proposed("at 1s", fmt.Sprintf("expire %d", a))
		cancel := r.stop
		go cancel()
		synctest.Wait()
		select {
		case <-r.done:
			t.Fatal("Run returned with a proposal under way")
		default:
		}
		close(gate)
		synctest.Wait()
		select {
		case <-r.done:
		default:
			t.Fatal("Run did not return once its proposal did")
		}
	})
}

// TestRunFollowerProposesNothing: a follower forgets every deadline and
// proposes nothing, whatever the time; its promotion wakes the loop,
// which counts every deadline afresh from it.
func TestRunFollowerProposesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRunning(t)
		a := r.apply(openCmd(time.Second, 0)).GetSessionId()
		r.at(time.Second / 2)
		r.tr.Demote()
		if _, err := r.tr.Heartbeat(a, time.Now()); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("keepalive on a follower: %v, want ErrNotLeader", err)
		}
		if _, known := r.tr.Remaining(a); known {
			t.Fatal("a follower knows a session's deadline")
		}
		b := r.apply(openCmd(time.Second, 0)).GetSessionId() // applied on the follower
		r.at(time.Hour)
		r.proposed("on a follower, an hour on")
		r.tr.Promote(2, r.m)
		r.at(time.Hour + time.Second - time.Nanosecond)
		r.proposed("before a full TTL from the promotion")
		r.at(time.Hour + time.Second)
		r.proposed("a full TTL from the promotion", fmt.Sprintf("expire %d", a), fmt.Sprintf("expire %d", b))
	})
}
