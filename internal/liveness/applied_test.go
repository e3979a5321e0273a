package liveness

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// The tests here hold the tracker to what each applied result reports
// (Applied): every command goes through a real state machine, and its
// result alone reaches the tracker, as on the leader's apply path.

// start is when each test's leader was promoted.
var start = time.Unix(1000, 0)

// applier is a state machine and the tracker its results go to.
type applier struct {
	t   *testing.T
	tr  *Tracker
	m   *fsm.Machine
	idx uint64
}

// apply applies cmd at the next index, which must succeed, and hands its
// result to the tracker.
func (a *applier) apply(cmd *fsmpb.Command) *fsmpb.Result {
	a.t.Helper()
	a.idx++
	res := a.m.Apply(a.idx, cmd)
	if err := fsm.ErrorOf(res); err != nil {
		a.t.Fatalf("%v: %v", cmd, err)
	}
	a.tr.Applied(res)
	return res
}

// leading is a state machine whose manual tracker leads, on a clock the
// test moves.
type leading struct {
	applier
	now time.Time
	p   *recProposer
}

func newLeading(t *testing.T) *leading {
	l := &leading{applier: applier{t: t, m: fsm.New()}, now: start, p: &recProposer{}}
	l.tr = NewManual(l.p, nil, func() time.Time { return l.now })
	l.tr.Promote(1, l.m)
	return l
}

// at moves the clock to d after start and lets the tracker propose what
// is due.
func (l *leading) at(d time.Duration) {
	l.now = start.Add(d)
	l.tr.FireDue(context.Background())
}

// expiresAt checks that the expiry of session id, the first, is proposed
// at d after start and not a moment before.
func (l *leading) expiresAt(id uint64, d time.Duration) {
	l.t.Helper()
	l.at(d - time.Nanosecond)
	if len(l.p.expired) != 0 {
		l.t.Fatalf("expired %v before %v", l.p.expired, d)
	}
	l.at(d)
	if !slices.Equal(l.p.expired, []uint64{id}) {
		l.t.Fatalf("at %v: expired %v, want [%d]", d, l.p.expired, id)
	}
}

func openCmd(ttl time.Duration, nonce uint64) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{
		TtlNanos: int64(ttl), Owner: "o", Nonce: nonce}}}
}

// acquireCmd is an acquire by session s with seq; it acknowledges no
// answer (min_unacked_seq 1), so the cache answers any retry.
func acquireCmd(s, seq uint64, lock string, wait, holdLimit time.Duration) *fsmpb.Command {
	return &fsmpb.Command{SessionId: s, Seq: seq, MinUnackedSeq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
		Lock: lock, Wait: wait != 0, WaitTimeoutNanos: max(int64(wait), 0), HoldLimitNanos: int64(holdLimit)}}}
}

// forever is a wait without a timeout, for acquireCmd.
const forever = -1

func releaseCmd(s, seq uint64, lock string, token uint64) *fsmpb.Command {
	return &fsmpb.Command{SessionId: s, Seq: seq, MinUnackedSeq: 1, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{
		Lock: lock, Token: token}}}
}

func key(lock string, session, n uint64) string {
	return lock + "/" + strconv.FormatUint(session, 10) + "/" + strconv.FormatUint(n, 10)
}

// TestAppliedSessionOpened: a session's deadline is the time its open
// applied plus its TTL; an open retried with its nonce, which answers the
// same session, does not move it.
func TestAppliedSessionOpened(t *testing.T) {
	l := newLeading(t)
	l.at(time.Second)
	id := l.apply(openCmd(5*time.Second, 7)).GetSessionId()
	if left, ok := l.tr.Remaining(id); !ok || left != 5*time.Second {
		t.Fatalf("just opened: %v left (known %v), want the TTL, 5s", left, ok)
	}
	l.at(3 * time.Second)
	if again := l.apply(openCmd(5*time.Second, 7)).GetSessionId(); again != id {
		t.Fatalf("the retried open answered session %d, want %d", again, id)
	}
	if left, _ := l.tr.Remaining(id); left != 3*time.Second {
		t.Fatalf("after a retried open: %v left, want 3s (the deadline stays)", left)
	}
	l.expiresAt(id, 6*time.Second)
}

// TestAppliedKeepalive: a keepalive moves the deadline to its arrival
// plus the TTL, not a moment more, and never back; the session's secret
// and blacklisting come from the results too.
func TestAppliedKeepalive(t *testing.T) {
	l := newLeading(t)
	hash := sha256.Sum256([]byte("secret"))
	open := openCmd(5*time.Second, 0)
	open.GetOpenSession().SecretHash = hash[:]
	id := l.apply(open).GetSessionId()
	if err := l.tr.Check(id, nil); !errors.Is(err, ErrSecretMismatch) {
		t.Fatalf("keepalive without the secret: %v, want ErrSecretMismatch", err)
	}
	l.at(2 * time.Second)
	if ttl, err := l.tr.Heartbeat(id, start.Add(2*time.Second)); err != nil || ttl != 5*time.Second {
		t.Fatalf("heartbeat: %v, %v", ttl, err)
	}
	// One that arrived before the last (received late) changes nothing.
	if _, err := l.tr.Heartbeat(id, start.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if left, _ := l.tr.Remaining(id); left != 5*time.Second {
		t.Fatalf("after keepalives at 2s and 1s: %v left at 2s, want 5s", left)
	}
	l.expiresAt(id, 7*time.Second) // received+TTL

	other := l.apply(openCmd(time.Minute, 0)).GetSessionId()
	if err := l.tr.Check(other, nil); err != nil {
		t.Fatal(err)
	}
	l.apply(&fsmpb.Command{Op: &fsmpb.Command_BlacklistSession{BlacklistSession: &fsmpb.BlacklistSession{SessionId: other}}})
	if _, err := l.tr.Heartbeat(other, l.now); !errors.Is(err, ErrBlacklisted) {
		t.Fatalf("keepalive of a blacklisted session: %v, want ErrBlacklisted", err)
	}
}

// TestAppliedTimedWait: a wait with a timeout is cancelled when the
// timeout has passed since it was queued, not before; its retry does not
// move it; a wait without one, or granted in time, is never cancelled.
func TestAppliedTimedWait(t *testing.T) {
	l := newLeading(t)
	a, b := l.apply(openCmd(10*time.Minute, 0)).GetSessionId(), l.apply(openCmd(10*time.Minute, 0)).GetSessionId()
	l.apply(acquireCmd(a, 1, "x", 0, 0))
	ty := l.apply(acquireCmd(a, 2, "y", 0, 0)).GetAcquire().GetToken()
	l.at(time.Second)
	if st := l.apply(acquireCmd(b, 1, "x", 3*time.Second, 0)).GetAcquire().GetStatus(); st != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
		t.Fatalf("b's acquire of x: %v, want QUEUED", st)
	}
	l.apply(acquireCmd(b, 2, "x", forever, 0))
	l.apply(acquireCmd(b, 3, "y", 2*time.Second, 0))
	l.at(2 * time.Second)
	if st := l.apply(acquireCmd(b, 1, "x", 3*time.Second, 0)).GetAcquire().GetStatus(); st != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
		t.Fatalf("b's retry: %v, want QUEUED from the cache", st)
	}
	// a lets go of y before b's wait for it times out (at 3s).
	if g := l.apply(releaseCmd(a, 3, "y", ty)).GetGrants(); len(g) != 1 {
		t.Fatalf("a's release of y granted %v, want b's wait", g)
	}
	l.at(4*time.Second - time.Nanosecond)
	if len(l.p.cancels) != 0 {
		t.Fatalf("cancelled %v before any timeout passed", l.p.cancels)
	}
	l.at(4 * time.Second)
	if want := []string{key("x", b, 1)}; !slices.Equal(l.p.cancels, want) {
		t.Fatalf("at 4s: cancelled %v, want %v", l.p.cancels, want)
	}
	l.at(time.Hour - time.Nanosecond)
	if len(l.p.cancels) != 1 {
		t.Fatalf("later: cancelled %v, want only b's timed wait for x", l.p.cancels)
	}
}

// TestAppliedHoldLimit: a limited hold is expired when its limit has
// passed since it was granted, at once or from the queue; its retry and a
// partial release change nothing; a hold its session let go of, by a
// release or an abandoned cancel, is forgotten.
func TestAppliedHoldLimit(t *testing.T) {
	l := newLeading(t)
	a, b := l.apply(openCmd(10*time.Minute, 0)).GetSessionId(), l.apply(openCmd(10*time.Minute, 0)).GetSessionId()
	tx := l.apply(acquireCmd(a, 1, "x", 0, 10*time.Second)).GetAcquire().GetToken()
	l.at(2 * time.Second)
	if tok := l.apply(acquireCmd(a, 1, "x", 0, 10*time.Second)).GetAcquire().GetToken(); tok != tx {
		t.Fatalf("a's retry got token %d, want %d from the cache", tok, tx)
	}
	if n := l.apply(acquireCmd(a, 2, "x", 0, 10*time.Second)).GetAcquire().GetCount(); n != 2 {
		t.Fatalf("a's reentrant acquire: count %d, want 2", n)
	}
	l.apply(releaseCmd(a, 3, "x", tx)) // one count left: the limit runs on

	// y: released; z: granted from the queue, then undone by an
	// abandoned cancel; w: granted from the queue at 5s.
	ty := l.apply(acquireCmd(a, 4, "y", 0, 5*time.Second)).GetAcquire().GetToken()
	l.apply(releaseCmd(a, 5, "y", ty))
	tz := l.apply(acquireCmd(a, 6, "z", 0, 0)).GetAcquire().GetToken()
	l.apply(acquireCmd(b, 1, "z", forever, 4*time.Second))
	tw := l.apply(acquireCmd(a, 7, "w", 0, 0)).GetAcquire().GetToken()
	l.apply(acquireCmd(b, 2, "w", forever, 4*time.Second))
	l.apply(releaseCmd(a, 8, "z", tz))
	l.apply(&fsmpb.Command{Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{
		Lock: "z", SessionId: b, AcquireSeq: 1, Abandoned: true}}})
	if l.m.NumLocks() != 2 {
		t.Fatalf("%d locks, want x and w (the abandoned cancel released z)", l.m.NumLocks())
	}
	l.at(5 * time.Second)
	g := l.apply(releaseCmd(a, 9, "w", tw)).GetGrants()
	if len(g) != 1 {
		t.Fatalf("a's release of w granted %v, want b's wait", g)
	}

	l.at(9*time.Second - time.Nanosecond)
	if len(l.p.holds) != 0 {
		t.Fatalf("expired %v before any limit passed", l.p.holds)
	}
	l.at(9 * time.Second)
	if want := []string{key("w", b, g[0].GetToken())}; !slices.Equal(l.p.holds, want) {
		t.Fatalf("at 9s: expired %v, want %v (w's limit from its grant at 5s)", l.p.holds, want)
	}
	l.at(10*time.Second - time.Nanosecond)
	if len(l.p.holds) != 1 {
		t.Fatalf("expired %v before x's limit", l.p.holds)
	}
	l.at(10 * time.Second)
	if want := []string{key("w", b, g[0].GetToken()), key("x", a, tx)}; !slices.Equal(l.p.holds, want) {
		t.Fatalf("at 10s: expired %v, want %v", l.p.holds, want)
	}
	l.at(time.Hour - time.Nanosecond)
	if len(l.p.holds) != 2 {
		t.Fatalf("later: expired %v; y and z ended at their sessions' request", l.p.holds)
	}
}

// TestAppliedSessionEnded: a session that ended, closed or expired, is
// forgotten with its timed waits and limited holds: nothing of it is
// proposed again, and its keepalives are refused.
func TestAppliedSessionEnded(t *testing.T) {
	l := newLeading(t)
	a, b := l.apply(openCmd(10*time.Second, 0)).GetSessionId(), l.apply(openCmd(10*time.Minute, 0)).GetSessionId()
	c := l.apply(openCmd(2*time.Second, 0)).GetSessionId()
	l.apply(acquireCmd(b, 1, "x", 0, 0))
	l.apply(acquireCmd(a, 1, "h", 0, 5*time.Second))
	l.apply(acquireCmd(a, 2, "x", 3*time.Second, 0))
	tk := l.apply(acquireCmd(c, 1, "k", 0, 4*time.Second)).GetAcquire().GetToken()
	l.at(time.Second)
	l.apply(&fsmpb.Command{SessionId: a, Seq: 3, MinUnackedSeq: 1, Op: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{}}})
	if err := l.tr.Check(a, nil); !errors.Is(err, ErrSessionLost) {
		t.Fatalf("keepalive of a closed session: %v, want ErrSessionLost", err)
	}
	l.at(2 * time.Second)
	if want := []string{"expire " + strconv.FormatUint(c, 10)}; !slices.Equal(l.p.all, want) {
		t.Fatalf("at 2s: proposed %q, want %q", l.p.all, want)
	}
	l.apply(&fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: c}}})
	if err := l.tr.CheckHold("k", c, tk, nil); !errors.Is(err, ErrHoldLost) {
		t.Fatalf("renewal of an expired session's hold: %v, want ErrHoldLost", err)
	}
	l.at(10*time.Minute - time.Nanosecond) // b's deadline
	if len(l.p.all) != 1 {
		t.Fatalf("proposed %q; a and c ended, with their wait and holds", l.p.all)
	}
}
