package liveness

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

type recProposer struct {
	expired []uint64
	fail    bool
}

func (p *recProposer) ExpireSession(_ context.Context, id uint64) error {
	p.expired = append(p.expired, id)
	if p.fail {
		return errors.New("not now")
	}
	return nil
}

func (p *recProposer) CancelWait(context.Context, string, uint64, uint64) error { return nil }

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
	if err := tr.Check(1); !errors.Is(err, ErrSessionLost) {
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
