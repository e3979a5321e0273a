package raftnode

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// TestRefusalSettlesTheSeq: a request refused before it is proposed (here
// a lock-delay at log version 1) is refused only once the log has settled
// its seq, so an earlier attempt of it that arrives afterwards (delayed on
// another connection: the same seq, without what the refusal was about)
// is answered REFUSED from the cache and grants nothing. Refuse (the no-space
// guard's) settles a seq alike, whatever the request shows that the log
// version cannot carry; it sends a caller whose earlier attempt applied
// back to retry, and answers a seq the log refuses itself with that
// refusal.
func TestRefusalSettlesTheSeq(t *testing.T) {
	ctx := context.Background()
	st := &memStore{}
	cfg := DefaultConfig()
	cfg.ID, cfg.Peers, cfg.Store, cfg.Recovered, cfg.Transport = 1, []uint64{1}, st, st.recovered(), &memNet{nodes: map[uint64]*Node{}}
	cfg.TickInterval = 5 * time.Millisecond
	cfg.LogVersion = 1
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	waitLeader(t, n)
	res, _, err := n.Propose(ctx, &fsmpb.Command{Op: &fsmpb.Command_OpenSession{
		OpenSession: &fsmpb.OpenSession{TtlNanos: int64(time.Minute), Owner: "w"}}})
	if err != nil || fsm.ErrorOf(res) != nil {
		t.Fatalf("open: %v %v", err, res)
	}
	session := res.GetSessionId()
	acquire := func(seq uint64, lock string, delay time.Duration) *fsmpb.Command {
		return &fsmpb.Command{SessionId: session, Seq: seq, MinUnackedSeq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
			Lock: lock, LockDelayNanos: int64(delay)}}}
	}
	// applied is the state machine's applied index: advanced before a
	// proposal completes (Status is refreshed only at the end of the
	// loop's turn, which may come after the caller read it).
	applied := func() uint64 {
		var i uint64
		n.View(func(m *fsm.Machine) { i = m.AppliedIndex() })
		return i
	}
	held := func(lock string) bool {
		var ok bool
		n.View(func(m *fsm.Machine) {
			l, found := m.Lock(lock)
			ok = found && len(l.GetHolders()) > 0
		})
		return ok
	}

	// Refused before the log, for good: the earlier attempt grants nothing.
	commit := applied()
	if _, _, err := n.Propose(ctx, acquire(1, "x", time.Second)); !errors.Is(err, ErrLogVersion) {
		t.Fatalf("a lock-delay at log version 1: %v, want ErrLogVersion", err)
	}
	if after := applied(); after != commit+1 {
		t.Fatalf("the refusal committed %d entries, want its fence alone", after-commit)
	}
	res, _, err = n.Propose(ctx, acquire(1, "x", 0))
	if err != nil || res.GetError() != fsmpb.Error_ERROR_REFUSED || res.GetAcquire() != nil || held("x") {
		t.Fatalf("the refused request's earlier attempt, applied after the refusal: %v %v (lock held: %v), want REFUSED and no hold", err, res, held("x"))
	}

	res, _, err = n.Propose(ctx, acquire(2, "y", 0))
	if err != nil || res.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
		t.Fatalf("acquire y: %v %v", err, res)
	}

	// Refuse: a fresh seq is settled and refused; one that applied sends
	// the caller back to retry; a stale one gets the log's own refusal.
	refusal := errors.New("refused")
	if err := n.Refuse(ctx, acquire(3, "z", 0), refusal); err != refusal {
		t.Fatalf("Refuse of a fresh seq: %v, want the refusal", err)
	}
	if res, _, err = n.Propose(ctx, acquire(3, "z", 0)); err != nil || res.GetError() != fsmpb.Error_ERROR_REFUSED || held("z") {
		t.Fatalf("the earlier attempt of a refused seq: %v %v, want REFUSED and no hold", err, res)
	}
	var nl *NotLeaderError
	if err := n.Refuse(ctx, acquire(2, "y", 0), refusal); !errors.As(err, &nl) || nl.Leader != 1 {
		t.Fatalf("Refuse of a seq that applied: %v, want a NotLeaderError naming this member (retry here)", err)
	}
	// Below log version 3 the fence leaves out the secret hash the request
	// shows (and below 4 its principal), as every command does: the log
	// cannot carry them yet. The seq is settled all the same.
	shown := acquire(4, "u", 0)
	shown.SecretHash, shown.Principal = bytes.Repeat([]byte{7}, fsm.SecretHashLen), "alice"
	commit = applied()
	if err := n.Refuse(ctx, shown, refusal); err != refusal {
		t.Fatalf("Refuse of a fresh seq showing a secret at log version 1: %v, want the refusal", err)
	}
	if after := applied(); after != commit+1 {
		t.Fatalf("the refusal of a request showing a secret at log version 1 committed %d entries, want its fence", after-commit)
	}
	if res, _, err = n.Propose(ctx, acquire(4, "u", 0)); err != nil || res.GetError() != fsmpb.Error_ERROR_REFUSED || held("u") {
		t.Fatalf("the earlier attempt of a seq refused showing a secret: %v %v, want REFUSED and no hold", err, res)
	}
	stale := acquire(5, "w", 0)
	stale.MinUnackedSeq = 5
	if res, _, err = n.Propose(ctx, stale); err != nil || fsm.ErrorOf(res) != nil {
		t.Fatalf("acquire w: %v %v", err, res)
	}
	if err := n.Refuse(ctx, acquire(3, "z", 0), refusal); !errors.Is(err, fsm.ErrStaleSequence) {
		t.Fatalf("Refuse of a seq below min unacked: %v, want the log's stale sequence", err)
	}
	if err := n.Refuse(ctx, &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "v"}}}, refusal); err != refusal {
		t.Fatalf("Refuse of a command without a seq: %v, want the refusal at once", err)
	}
}
