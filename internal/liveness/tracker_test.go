package liveness

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

type recProposer struct {
	all     []string // every call, in order: "expire 3", "cancel x/2/1", "hold x/2/5"
	expired []uint64
	holds   []string // "lock/session/token" of each ExpireHold
	cancels []string // "lock/session/seq" of each CancelWait
	delays  []string // "lock/from" of each EndLockDelay
	revoked []string // "lock/session/token" of each EndRevokedHold
	fail    bool
}

func (p *recProposer) ExpireSession(_ context.Context, id uint64) error {
	p.expired = append(p.expired, id)
	p.all = append(p.all, "expire "+strconv.FormatUint(id, 10))
	if p.fail {
		return errors.New("not now")
	}
	return nil
}

func (p *recProposer) CancelWait(_ context.Context, lock string, session, seq uint64) error {
	p.cancels = append(p.cancels, lock+"/"+strconv.FormatUint(session, 10)+"/"+strconv.FormatUint(seq, 10))
	p.all = append(p.all, "cancel "+p.cancels[len(p.cancels)-1])
	return nil
}

func (p *recProposer) ExpireHold(_ context.Context, lock string, session, token uint64, ownerKey string) error {
	h := lock + "/" + strconv.FormatUint(session, 10) + "/" + strconv.FormatUint(token, 10)
	if ownerKey != "" {
		h += "/" + ownerKey
	}
	p.holds = append(p.holds, h)
	p.all = append(p.all, "hold "+p.holds[len(p.holds)-1])
	return nil
}

func (p *recProposer) EndLockDelay(_ context.Context, lock string, delayFrom uint64) error {
	p.delays = append(p.delays, lock+"/"+strconv.FormatUint(delayFrom, 10))
	p.all = append(p.all, "end-delay "+p.delays[len(p.delays)-1])
	if p.fail {
		return errors.New("not now")
	}
	return nil
}

func (p *recProposer) EndRevokedHold(_ context.Context, lock string, session, token uint64) error {
	p.revoked = append(p.revoked, lock+"/"+strconv.FormatUint(session, 10)+"/"+strconv.FormatUint(token, 10))
	p.all = append(p.all, "end-revoked "+p.revoked[len(p.revoked)-1])
	if p.fail {
		return errors.New("not now")
	}
	return nil
}

// appliedTracker returns a manual tracker on the clock *now, with a
// recording proposer, and the machine it follows: apply applies a command
// as the next entry (failing the test if it is refused) and gives the
// tracker its result; open opens a session of a 10-minute TTL.
func appliedTracker(t *testing.T, now *time.Time) (tr *Tracker, p *recProposer, m *fsm.Machine,
	apply func(*fsmpb.Command) *fsmpb.Result, open func() uint64) {
	p = &recProposer{}
	tr = NewManual(p, nil, func() time.Time { return *now })
	m = fsm.New()
	idx := uint64(0)
	apply = func(cmd *fsmpb.Command) *fsmpb.Result {
		t.Helper()
		idx++
		res := m.Apply(idx, cmd)
		if err := fsm.ErrorOf(res); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		tr.Applied(res)
		return res
	}
	open = func() uint64 {
		return apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{TtlNanos: int64(10 * time.Minute), Owner: "o"}}}).GetSessionId()
	}
	return tr, p, m, apply, open
}

// TestLockDelays: a lock-delay an expiry started is ended when its length
// passes on the leader's clock, counted from the entry's apply; a restart
// (a later expiry of another holder) replaces it; a failed end is
// proposed again; a new leader times every running delay afresh, in
// full, from its promotion.
func TestLockDelays(t *testing.T) {
	now := time.Unix(1000, 0)
	tr, p, m, apply, open := appliedTracker(t, &now)
	tr.Promote(1, m)
	a, b, c := open(), open(), open()
	acquire := func(s uint64, lock string, delay time.Duration, shared bool) {
		apply(&fsmpb.Command{SessionId: s, Seq: 1, MinUnackedSeq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
			Lock: lock, LockDelayNanos: int64(delay), Shared: shared, Limit: 2}}})
	}
	expire := func(s uint64) uint64 {
		apply(&fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: s}}})
		return m.AppliedIndex()
	}
	acquire(a, "x", 5*time.Second, true)
	acquire(b, "x", 5*time.Second, true)
	acquire(c, "y", 2*time.Second, false)
	fromA := expire(a) // x's delay runs to 1005
	now = now.Add(3 * time.Second)
	fromB := expire(b) // restarted: x's delay runs to 1008
	fromC := expire(c) // y's runs to 1005
	if fromA == fromB {
		t.Fatal("one entry for two expiries")
	}
	now = now.Add(2 * time.Second) // 1005
	tr.FireDue(context.Background())
	if want := []string{"y/" + strconv.FormatUint(fromC, 10)}; !slices.Equal(p.delays, want) {
		t.Fatalf("ended %v, want %v (x's delay was restarted)", p.delays, want)
	}
	apply(&fsmpb.Command{Op: &fsmpb.Command_EndLockDelay{EndLockDelay: &fsmpb.EndLockDelay{Lock: "y", DelayFrom: fromC}}})

	// A failed end is proposed again RetryDelay later.
	p.delays, p.fail = nil, true
	now = now.Add(3 * time.Second) // 1008
	tr.FireDue(context.Background())
	p.fail = false
	now = now.Add(RetryDelay)
	tr.FireDue(context.Background())
	want := "x/" + strconv.FormatUint(fromB, 10)
	if !slices.Equal(p.delays, []string{want, want}) {
		t.Fatalf("ended %v, want %s twice (a failed end is retried)", p.delays, want)
	}

	// A new leader: the delay (not yet ended in the log) runs its full
	// length from the promotion.
	p.delays = nil
	tr.Demote()
	now = now.Add(time.Minute)
	tr.Promote(2, m)
	if next := tr.FireDue(context.Background()); len(p.delays) != 0 || !next.Equal(now.Add(5*time.Second)) {
		t.Fatalf("after promotion: ended %v, next %v; want none and %v", p.delays, next, now.Add(5*time.Second))
	}
	now = now.Add(5 * time.Second)
	tr.FireDue(context.Background())
	if !slices.Equal(p.delays, []string{want}) {
		t.Fatalf("after promotion: ended %v, want %s", p.delays, want)
	}
	res := apply(&fsmpb.Command{Op: &fsmpb.Command_EndLockDelay{EndLockDelay: &fsmpb.EndLockDelay{Lock: "x", DelayFrom: fromB}}})
	if res.GetLiveness().GetLockDelayEnded() == nil {
		t.Fatalf("the end reports no ended delay: %v", res)
	}
	p.delays = nil
	now = now.Add(time.Hour)
	if next := tr.FireDue(context.Background()); len(p.delays) != 0 || !next.IsZero() {
		t.Fatalf("an ended delay is proposed again: %v, next %v", p.delays, next)
	}
}

// TestRevocations: a revoked hold is ended when its grace passes on the
// leader's clock, counted from the revoke's apply; a second revoke keeps
// the first grace; a hold released in time, or of a session that ended,
// is forgotten; a failed end is proposed again; a new leader gives every
// revoked hold its full grace from its promotion.
func TestRevocations(t *testing.T) {
	now := time.Unix(1000, 0)
	tr, p, m, apply, open := appliedTracker(t, &now)
	tr.Promote(1, m)
	a, b, c := open(), open(), open()
	acquire := func(s, seq uint64, lock string) uint64 {
		return apply(&fsmpb.Command{SessionId: s, Seq: seq, MinUnackedSeq: seq, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
			Lock: lock}}}).GetAcquire().GetToken()
	}
	revoke := func(lock string, grace time.Duration) {
		apply(&fsmpb.Command{Op: &fsmpb.Command_RevokeHold{RevokeHold: &fsmpb.RevokeHold{Lock: lock, GraceNanos: int64(grace)}}})
	}
	hold := func(lock string, s, token uint64) string {
		return lock + "/" + strconv.FormatUint(s, 10) + "/" + strconv.FormatUint(token, 10)
	}
	tx, ty := acquire(a, 1, "x"), acquire(b, 1, "y")
	acquire(c, 1, "z")
	revoke("x", 10*time.Second)
	revoke("y", 5*time.Second)
	revoke("z", 5*time.Second)
	now = now.Add(3 * time.Second)
	revoke("x", time.Second) // keeps its first grace (to 1010)
	// b lets go in time; c's session ends.
	apply(&fsmpb.Command{SessionId: b, Seq: 2, MinUnackedSeq: 2, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "y", Token: ty}}})
	apply(&fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: c}}})
	now = now.Add(5 * time.Second) // 1008
	tr.FireDue(context.Background())
	if len(p.revoked) != 0 {
		t.Fatalf("ended %v; y was released and z's session ended, x's grace runs to 1010", p.revoked)
	}
	// A failed end is proposed again RetryDelay later.
	p.fail = true
	now = now.Add(2 * time.Second) // 1010
	tr.FireDue(context.Background())
	p.fail = false
	now = now.Add(RetryDelay)
	tr.FireDue(context.Background())
	if want := hold("x", a, tx); !slices.Equal(p.revoked, []string{want, want}) {
		t.Fatalf("ended %v, want %s twice (a failed end is retried)", p.revoked, want)
	}

	// A new leader: the hold (not yet ended in the log) gets its full
	// grace from the promotion.
	p.revoked = nil
	tr.Demote()
	now = now.Add(time.Minute)
	tr.Promote(2, m)
	if next := tr.FireDue(context.Background()); len(p.revoked) != 0 || !next.Equal(now.Add(10*time.Second)) {
		t.Fatalf("after promotion: ended %v, next %v; want none and %v", p.revoked, next, now.Add(10*time.Second))
	}
	now = now.Add(10 * time.Second)
	tr.FireDue(context.Background())
	if want := hold("x", a, tx); !slices.Equal(p.revoked, []string{want}) {
		t.Fatalf("after promotion: ended %v, want %s", p.revoked, want)
	}
	res := apply(&fsmpb.Command{Op: &fsmpb.Command_EndRevokedHold{EndRevokedHold: &fsmpb.EndRevokedHold{Lock: "x", SessionId: a, Token: tx}}})
	if len(res.GetHoldsEnded()) != 1 || len(res.GetLiveness().GetRevocationsEnded()) != 1 {
		t.Fatalf("the end reports %v", res)
	}
	p.revoked = nil
	now = now.Add(time.Hour)
	if next := tr.FireDue(context.Background()); len(p.revoked) != 0 || !next.IsZero() {
		t.Fatalf("an ended revocation is proposed again: %v, next %v", p.revoked, next)
	}
}

// TestRevokedHoldsSharingAToken: one session's two reads of a lock, under
// two owner keys, granted by one entry, share the token; revoked, each is
// timed and ended on its own, by the revoking leader and by a new one
// after its promotion, so neither outlives its grace.
func TestRevokedHoldsSharingAToken(t *testing.T) {
	now := time.Unix(1000, 0)
	tr, p, m, apply, open := appliedTracker(t, &now)
	tr.Promote(1, m)
	a, b := open(), open()
	var seqA, seqB uint64
	acquire := func(s uint64, seq *uint64, key string, shared bool) *fsmpb.Result {
		*seq++
		return apply(&fsmpb.Command{SessionId: s, Seq: *seq, MinUnackedSeq: *seq, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
			Lock: "rw", OwnerKey: key, Shared: shared, Limit: 4, Wait: true}}})
	}
	// sharedPair makes a hold "rw" twice, under "" and "k", with one token.
	sharedPair := func() uint64 {
		t.Helper()
		tb := acquire(b, &seqB, "", false).GetAcquire().GetToken()
		acquire(a, &seqA, "", true)
		acquire(a, &seqA, "k", true)
		seqB++
		res := apply(&fsmpb.Command{SessionId: b, Seq: seqB, MinUnackedSeq: seqB, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "rw", Token: tb}}})
		if gs := res.GetGrants(); len(gs) != 2 || gs[0].GetToken() != gs[1].GetToken() {
			t.Fatalf("the release granted %v, want both of a's reads with one token", gs)
		}
		return res.GetGrants()[0].GetToken()
	}
	revokeAndEnd := func(round string, promote bool) {
		t.Helper()
		token := sharedPair()
		p.revoked = nil
		apply(&fsmpb.Command{Op: &fsmpb.Command_RevokeHold{RevokeHold: &fsmpb.RevokeHold{Lock: "rw", GraceNanos: int64(5 * time.Second)}}})
		if promote {
			tr.Demote()
			tr.Promote(2, m)
		}
		now = now.Add(5 * time.Second)
		tr.FireDue(context.Background())
		one := fmt.Sprintf("rw/%d/%d", a, token)
		if !slices.Equal(p.revoked, []string{one, one}) {
			t.Fatalf("%s: ended %v, want %s twice (one end per hold)", round, p.revoked, one)
		}
		ended := 0
		for range 2 {
			r := apply(&fsmpb.Command{Op: &fsmpb.Command_EndRevokedHold{EndRevokedHold: &fsmpb.EndRevokedHold{Lock: "rw", SessionId: a, Token: token}}})
			ended += len(r.GetHoldsEnded())
		}
		if ended != 2 {
			t.Fatalf("%s: the two ends ended %d holds", round, ended)
		}
		p.revoked = nil
		now = now.Add(time.Hour)
		if tr.FireDue(context.Background()); len(p.revoked) != 0 {
			t.Fatalf("%s: ended holds are ended again: %v", round, p.revoked)
		}
	}
	revokeAndEnd("the revoking leader", false)
	revokeAndEnd("a new leader", true)
}

// TestHoldLimits: a limited hold is expired when its limit passes unless
// renewed; a renewal counts from its arrival; a hold that ended is
// forgotten; a new leader gives every limited hold its full limit from its
// promotion.
func TestHoldLimits(t *testing.T) {
	now := time.Unix(1000, 0)
	tr, p, m, apply, open := appliedTracker(t, &now)
	tr.Promote(1, m)
	a, b := open(), open()
	acquire := func(s, seq uint64, lock string, limit time.Duration, wait bool) *fsmpb.Result {
		return apply(&fsmpb.Command{SessionId: s, Seq: seq, MinUnackedSeq: seq, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
			Lock: lock, HoldLimitNanos: int64(limit), Wait: wait}}})
	}
	ta := acquire(a, 1, "x", 10*time.Second, false).GetAcquire().GetToken()
	acquire(b, 1, "x", 20*time.Second, true) // queued behind a
	tb := acquire(b, 2, "y", 5*time.Second, false).GetAcquire().GetToken()

	now = now.Add(4 * time.Second)
	if _, err := tr.RenewHold("y", b, tb, now); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.RenewHold("y", b, tb+1, now); !errors.Is(err, ErrHoldLost) {
		t.Fatalf("renewal of an unknown hold: %v", err)
	}
	now = now.Add(4500 * time.Millisecond) // 8.5 s: y's renewed deadline (9 s) not yet
	tr.FireDue(context.Background())
	if len(p.holds) != 0 {
		t.Fatalf("expired %v before any limit passed", p.holds)
	}
	if _, err := tr.RenewHold("y", b, tb, now); err != nil {
		t.Fatal(err)
	}
	now = now.Add(1500 * time.Millisecond) // 10 s: x's limit passed, y runs to 13.5 s
	tr.FireDue(context.Background())
	if want := []string{"x/" + strconv.FormatUint(a, 10) + "/" + strconv.FormatUint(ta, 10)}; !slices.Equal(p.holds, want) {
		t.Fatalf("expired %v, want %v", p.holds, want)
	}
	if err := tr.CheckHold("x", a, ta, nil); !errors.Is(err, ErrHoldLost) {
		t.Fatalf("renewal of a hold being expired: %v", err)
	}
	// The expiry applies: b is granted x, with its own limit from now.
	res := apply(&fsmpb.Command{Op: &fsmpb.Command_ExpireHold{ExpireHold: &fsmpb.ExpireHold{Lock: "x", SessionId: a, Token: ta}}})
	if lh := res.GetLiveness().GetLimitedHoldsGranted(); len(res.GetGrants()) != 1 || len(lh) != 1 || lh[0].GetHoldLimitNanos() != int64(20*time.Second) {
		t.Fatalf("expiry's grants: %v, limited holds %v", res.GetGrants(), lh)
	}
	tbx := res.GetGrants()[0].GetToken()
	// b releases y: its timer is forgotten.
	apply(&fsmpb.Command{SessionId: b, Seq: 3, MinUnackedSeq: 3, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "y", Token: tb}}})
	now = now.Add(time.Hour)
	p.holds = nil
	// A new leader: b's hold of x gets a full 20 s from the promotion.
	tr.Demote()
	tr.Promote(2, m)
	if next := tr.FireDue(context.Background()); len(p.holds) != 0 || !next.Equal(now.Add(20*time.Second)) {
		t.Fatalf("after promotion: expired %v, next %v", p.holds, next)
	}
	now = now.Add(20 * time.Second)
	tr.FireDue(context.Background())
	if want := []string{"x/" + strconv.FormatUint(b, 10) + "/" + strconv.FormatUint(tbx, 10)}; !slices.Equal(p.holds, want) {
		t.Fatalf("expired %v, want %v", p.holds, want)
	}

	// acquire_many: each hold it grants gets its own timer.
	p.holds = nil
	many := apply(&fsmpb.Command{SessionId: a, Seq: 2, MinUnackedSeq: 2, Op: &fsmpb.Command_AcquireMany{AcquireMany: &fsmpb.AcquireMany{
		Locks: []string{"m1", "m2"}, HoldLimitNanos: int64(3 * time.Second)}}})
	tm := many.GetAcquireMany()[0].GetToken()
	now = now.Add(2 * time.Second)
	if _, err := tr.RenewHold("m2", a, tm, now); err != nil {
		t.Fatal(err)
	}
	now = now.Add(1500 * time.Millisecond)
	tr.FireDue(context.Background())
	if want := []string{"m1/" + strconv.FormatUint(a, 10) + "/" + strconv.FormatUint(tm, 10)}; !slices.Equal(p.holds, want) {
		t.Fatalf("acquire_many's holds: expired %v, want %v (m2 was renewed)", p.holds, want)
	}
}

// TestManualTrackerOnVirtualClock checks the manual mode the simulation
// uses: deadlines follow the injected clock, a new leader grants a full
// TTL from its promotion, FireDue proposes in id order in the caller's
// goroutine in deadline order (ties by id), and a failed proposal is
// retried RetryDelay later.
func TestManualTrackerOnVirtualClock(t *testing.T) {
	now := time.Unix(1000, 0)
	p := &recProposer{}
	tr := NewManual(p, nil, func() time.Time { return now })
	m := fsm.New()
	for i, ttl := range []time.Duration{2 * time.Second, time.Second} {
		res := m.Apply(uint64(i+1), &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{TtlNanos: int64(ttl), Owner: "o"}}})
		if fsm.ErrorOf(res) != nil {
			t.Fatal(res)
		}
	}
	now = now.Add(time.Hour) // time before promotion does not count
	tr.Promote(1, m)
	next := tr.FireDue(context.Background())
	if want := now.Add(time.Second); !next.Equal(want) || len(p.expired) != 0 {
		t.Fatalf("next %v expired %v; want %v and none", next, p.expired, want)
	}
	if _, err := tr.Heartbeat(2, now.Add(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	p.fail = true
	next = tr.FireDue(context.Background())
	// Session 2's deadline (heartbeat at +0.5 s, TTL 1 s) passed before
	// session 1's (TTL 2 s).
	if !slices.Equal(p.expired, []uint64{2, 1}) {
		t.Fatalf("expired %v, want [2 1] in deadline order", p.expired)
	}
	if want := now.Add(RetryDelay); !next.Equal(want) {
		t.Fatalf("next %v, want the retry at %v", next, want)
	}
	if err := tr.Check(1, nil); !errors.Is(err, ErrSessionLost) {
		t.Fatalf("check of an expiring session: %v", err)
	}
	p.fail = false
	now = now.Add(RetryDelay)
	tr.FireDue(context.Background())
	// Both retries come due at the same instant: by id.
	if !slices.Equal(p.expired, []uint64{2, 1, 1, 2}) {
		t.Fatalf("expired %v, want the retries", p.expired)
	}
	tr.Demote()
	now = now.Add(time.Hour)
	if next := tr.FireDue(context.Background()); !next.IsZero() || len(p.expired) != 4 {
		t.Fatalf("a follower proposed: next %v expired %v", next, p.expired)
	}
}

// BenchmarkHeartbeatAndDue: with many sessions, a heartbeat and a check for
// due deadlines must not cost a scan of every session.
func BenchmarkHeartbeatAndDue(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run("sessions="+strconv.Itoa(n), func(b *testing.B) {
			now := time.Unix(1000, 0)
			tr := NewManual(&recProposer{}, nil, func() time.Time { return now })
			m := fsm.New()
			for i := range n {
				m.Apply(uint64(i+1), &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{TtlNanos: int64(10 * time.Second), Owner: "o"}}})
			}
			tr.Promote(1, m)
			id := uint64(1)
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Microsecond)
				if _, err := tr.Heartbeat(id, now); err != nil {
					b.Fatal(err)
				}
				tr.FireDue(context.Background())
				id = id%uint64(n) + 1
			}
		})
	}
}

// TestSecrets: a keepalive or renewal for a session opened with a secret
// must show its hash, whether the tracker learnt the session from the log
// (Applied) or from the state machine at its promotion (a new leader).
func TestSecrets(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := NewManual(&recProposer{}, nil, func() time.Time { return now })
	m := fsm.New()
	hash := sha256.Sum256([]byte("the owner's secret"))
	other := sha256.Sum256([]byte("a guess"))
	tr.Promote(1, m)
	open := &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{
		TtlNanos: int64(time.Minute), Owner: "o", SecretHash: hash[:]}}}
	res := m.Apply(1, open)
	tr.Applied(res)
	acq := &fsmpb.Command{SessionId: res.GetSessionId(), Seq: 1, SecretHash: hash[:], Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
		Lock: "x", HoldLimitNanos: int64(time.Minute)}}}
	ares := m.Apply(2, acq)
	tr.Applied(ares)
	id, token := res.GetSessionId(), ares.GetAcquire().GetToken()
	check := func(when string) {
		t.Helper()
		for _, shown := range [][]byte{nil, other[:], hash[:31]} {
			if err := tr.Check(id, shown); !errors.Is(err, ErrSecretMismatch) {
				t.Errorf("%s: keepalive showing %x: %v; want ErrSecretMismatch", when, shown, err)
			}
			if err := tr.CheckHold("x", id, token, shown); !errors.Is(err, ErrSecretMismatch) {
				t.Errorf("%s: renewal showing %x: %v; want ErrSecretMismatch", when, shown, err)
			}
		}
		if err := tr.Check(id, hash[:]); err != nil {
			t.Errorf("%s: the owner's keepalive: %v", when, err)
		}
		if err := tr.CheckHold("x", id, token, hash[:]); err != nil {
			t.Errorf("%s: the owner's renewal: %v", when, err)
		}
	}
	check("after Applied")
	tr.Demote()
	tr.Promote(2, m)
	check("after a promotion")

	// A stranger's keepalives are refused before they count against the
	// session's rate: the owner still has its whole burst.
	const rate = 10
	for range 3 * rate {
		if err := tr.Admit(id, other[:], now, rate); !errors.Is(err, ErrSecretMismatch) {
			t.Fatalf("a stranger's keepalive: %v, want ErrSecretMismatch", err)
		}
	}
	for i := range rate {
		if err := tr.Admit(id, hash[:], now, rate); err != nil {
			t.Fatalf("the owner's keepalive %d of %d after a stranger's: %v", i+1, rate, err)
		}
	}
}

// TestAdmitRate: a session's keepalives are admitted up to its rate, as
// many at once, then one per interval; one over is refused without
// changing anything, and each session has its own.
func TestAdmitRate(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := NewManual(&recProposer{}, nil, func() time.Time { return now })
	m := fsm.New()
	idx := uint64(0)
	open := func() uint64 {
		idx++
		cmd := &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{TtlNanos: int64(time.Minute), Owner: "o"}}}
		res := m.Apply(idx, cmd)
		tr.Applied(res)
		return res.GetSessionId()
	}
	tr.Promote(1, m)
	a, b := open(), open()
	const rate = 50
	admit := func(id uint64, at time.Duration) error { return tr.Admit(id, nil, now.Add(at), rate) }
	for i := range rate {
		if err := admit(a, 0); err != nil {
			t.Fatalf("keepalive %d of %d at once: %v", i+1, rate, err)
		}
	}
	if err := admit(a, 0); !errors.Is(err, ErrTooFast) {
		t.Fatalf("keepalive %d at once: %v, want ErrTooFast", rate+1, err)
	}
	if err := admit(b, 0); err != nil {
		t.Fatalf("another session's keepalive: %v", err)
	}
	// One interval (20 ms) later, one more; not two.
	if err := admit(a, 20*time.Millisecond); err != nil {
		t.Fatalf("keepalive an interval later: %v", err)
	}
	if err := admit(a, 20*time.Millisecond); !errors.Is(err, ErrTooFast) {
		t.Fatalf("second keepalive an interval later: %v, want ErrTooFast", err)
	}
	// A second after the last, the whole burst again.
	for i := range rate {
		if err := admit(a, 1040*time.Millisecond); err != nil {
			t.Fatalf("keepalive %d of %d a second later: %v", i+1, rate, err)
		}
	}
	if err := tr.Admit(a, nil, now, 0); err != nil {
		t.Fatalf("no rate: %v", err)
	}
	if err := admit(999, 0); !errors.Is(err, ErrSessionLost) {
		t.Fatalf("unknown session: %v, want ErrSessionLost", err)
	}
}

// TestSameInstantInKeyOrder: deadlines that pass at the same instant are
// proposed in one order whatever the order they were queued in: sessions
// by id, then waits by lock, session and sequence, then holds by lock,
// session and token (the simulation replays a seed by it).
func TestSameInstantInKeyOrder(t *testing.T) {
	l := newLeading(t)
	long := 10 * time.Minute
	s1, s2 := l.apply(openCmd(5*time.Second, 0)).GetSessionId(), l.apply(openCmd(10*time.Second, 0)).GetSessionId()
	h, w, g := l.apply(openCmd(long, 0)).GetSessionId(), l.apply(openCmd(long, 0)).GetSessionId(), l.apply(openCmd(long, 0)).GetSessionId()
	w2 := l.apply(openCmd(long, 0)).GetSessionId()
	// Each kind queued in the reverse of the order it is due in, and the
	// kinds in the reverse of theirs: holds, waits, then s1 again.
	thb := l.apply(acquireCmd(g, 1, "hb", 0, 10*time.Second)).GetAcquire().GetToken()
	tha := l.apply(acquireCmd(g, 2, "ha", 0, 10*time.Second)).GetAcquire().GetToken()
	l.apply(acquireCmd(h, 1, "wa", 0, 0))
	l.apply(acquireCmd(h, 2, "wb", 0, 0))
	l.apply(acquireCmd(w, 1, "wb", 10*time.Second, 0))
	l.apply(acquireCmd(w2, 1, "wa", 10*time.Second, 0))
	l.apply(acquireCmd(w, 2, "wa", 10*time.Second, 0))
	l.now = start.Add(5 * time.Second)
	if _, err := l.tr.Heartbeat(s1, l.now); err != nil {
		t.Fatal(err)
	}
	l.at(5 * time.Second) // s1's first deadline: queued again at 10s
	l.at(10*time.Second - time.Nanosecond)
	if len(l.p.all) != 0 {
		t.Fatalf("proposed %q before 10s", l.p.all)
	}
	l.at(10 * time.Second)
	want := []string{
		"expire " + strconv.FormatUint(s1, 10), "expire " + strconv.FormatUint(s2, 10),
		"cancel " + key("wa", w, 2), "cancel " + key("wa", w2, 1), "cancel " + key("wb", w, 1),
		"hold " + key("ha", g, tha), "hold " + key("hb", g, thb),
	}
	if !slices.Equal(l.p.all, want) {
		t.Fatalf("at 10s: proposed %q, want %q", l.p.all, want)
	}
}

// TestPromoteRestartsTimedWaits: a new leader gives every timed wait its
// full timeout from its promotion, however long the wait was queued
// before; a wait without a timeout is never cancelled.
func TestPromoteRestartsTimedWaits(t *testing.T) {
	l := newLeading(t)
	a, b := l.apply(openCmd(10*time.Minute, 0)).GetSessionId(), l.apply(openCmd(10*time.Minute, 0)).GetSessionId()
	l.apply(acquireCmd(a, 1, "x", 0, 0))
	l.apply(acquireCmd(b, 1, "x", 3*time.Second, 0))
	l.apply(acquireCmd(b, 2, "x", forever, 0))
	l.at(time.Second)
	l.tr.Demote()
	l.at(time.Hour)
	l.tr.Promote(2, l.m)
	l.at(time.Hour + 3*time.Second - time.Nanosecond)
	if len(l.p.all) != 0 {
		t.Fatalf("proposed %q before the full timeout from the promotion", l.p.all)
	}
	l.at(time.Hour + 3*time.Second)
	if want := []string{"cancel " + key("x", b, 1)}; !slices.Equal(l.p.all, want) {
		t.Fatalf("a timeout after the promotion: proposed %q, want %q", l.p.all, want)
	}
}

// sameTokenReads makes, at log version 14 on a tracker that leads, one
// release grant session a reads of "rw" under keys "" and "k" with hold
// limits first and second (0: none), so the two holds share a token; with
// promote a new term's Promote times them afresh. It returns the tracker,
// its proposer, apply, a's id and the token.
func sameTokenReads(t *testing.T, now *time.Time, first, second time.Duration, promote bool) (*Tracker, *recProposer, func(*fsmpb.Command) *fsmpb.Result, uint64, uint64) {
	t.Helper()
	tr, p, m, apply, open := appliedTracker(t, now)
	m.SetLogVersion(fsm.SameTokenHoldsVersion)
	tr.Promote(1, m)
	a, b := open(), open()
	tb := apply(&fsmpb.Command{SessionId: b, Seq: 1, MinUnackedSeq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
		Lock: "rw", Limit: 4}}}).GetAcquire().GetToken()
	for i, limit := range []time.Duration{first, second} {
		apply(&fsmpb.Command{SessionId: a, Seq: uint64(i + 1), MinUnackedSeq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
			Lock: "rw", OwnerKey: []string{"", "k"}[i], Shared: true, Limit: 4, Wait: true, HoldLimitNanos: int64(limit)}}})
	}
	res := apply(&fsmpb.Command{SessionId: b, Seq: 2, MinUnackedSeq: 2, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "rw", Token: tb}}})
	if len(res.GetGrants()) != 2 {
		t.Fatalf("grants %v, want both of a's waits", res.GetGrants())
	}
	if promote {
		tr.Demote()
		tr.Promote(2, m)
	}
	return tr, p, apply, a, res.GetGrants()[0].GetToken()
}

// TestLimitedHoldsSharingAToken: one session's reads of "rw" under keys
// "" and "k", granted by one release, share a token. With both limited,
// the limit's passing proposes an ExpireHold for each, naming its owner
// key, and the two end both holds; with only "k"'s limited, one for "k"
// alone, which ends it (the state machine at log version 14: below it,
// the command named the first hold, which had no limit, and was
// refused). A new leader times them alike.
func TestLimitedHoldsSharingAToken(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limitFirst bool
		promote    bool
	}{{"both", true, false}, {"k-only", false, false}, {"both/new-leader", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			first := 30 * time.Second
			if !tc.limitFirst {
				first = 0
			}
			now := time.Unix(1000, 0)
			tr, p, apply, a, token := sameTokenReads(t, &now, first, 30*time.Second, tc.promote)
			now = now.Add(30 * time.Second)
			tr.FireDue(context.Background())
			one := fmt.Sprintf("rw/%d/%d", a, token)
			want := []string{one + "/k"}
			if tc.limitFirst {
				want = []string{one, one + "/k"}
			}
			if !slices.Equal(p.holds, want) {
				t.Fatalf("expired %v, want %v", p.holds, want)
			}
			ended := 0
			for _, key := range []string{"", "k"}[len([]string{"", "k"})-len(want):] {
				k := key
				r := apply(&fsmpb.Command{Op: &fsmpb.Command_ExpireHold{ExpireHold: &fsmpb.ExpireHold{Lock: "rw", SessionId: a, Token: token, OwnerKey: &k}}})
				ended += len(r.GetHoldsEnded())
			}
			if ended != len(want) {
				t.Fatalf("the expiries ended %d holds, want %d", ended, len(want))
			}
			p.holds = nil
			now = now.Add(time.Hour)
			if tr.FireDue(context.Background()); len(p.holds) != 0 {
				t.Fatalf("ended holds are expired again: %v", p.holds)
			}
		})
	}
}

// TestSharedHoldClockRunsOnTheLongestLimit: one entry grants session a's
// keys "" (hold limit 5s) and "k" (60s) permits of one lock, with one
// token, so one clock times both (a renewal names no key). It runs on the
// longer limit: at 30s neither hold is expired, though the first's own
// limit passed (ending k's then would end a hold its holder counts on
// for 60s), and at 60s both are.
func TestSharedHoldClockRunsOnTheLongestLimit(t *testing.T) {
	for _, promote := range []bool{false, true} {
		t.Run(fmt.Sprintf("new-leader=%v", promote), func(t *testing.T) {
			now := time.Unix(1000, 0)
			tr, p, _, a, token := sameTokenReads(t, &now, 5*time.Second, 60*time.Second, promote)
			now = now.Add(30 * time.Second)
			if tr.FireDue(context.Background()); len(p.holds) != 0 {
				t.Fatalf("at 30s expired %v, want none: k's limit is 60s", p.holds)
			}
			now = now.Add(30 * time.Second)
			tr.FireDue(context.Background())
			one := fmt.Sprintf("rw/%d/%d", a, token)
			if want := []string{one, one + "/k"}; !slices.Equal(p.holds, want) {
				t.Fatalf("at 60s expired %v, want %v", p.holds, want)
			}
		})
	}
}
