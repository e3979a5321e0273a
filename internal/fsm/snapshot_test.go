package fsm

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

func TestRestoreRefusesCorruptSnapshots(t *testing.T) {
	m, _ := fuzzMachine(t)
	good, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		tamper func(s *fsmpb.Snapshot)
	}{
		{"holder of missing session", func(s *fsmpb.Snapshot) { s.Locks[0].Holders[0].SessionId = 99 }},
		{"waiter of missing session", func(s *fsmpb.Snapshot) { s.Locks[0].Waiters[0].SessionId = 99 }},
		{"two holders", func(s *fsmpb.Snapshot) {
			s.Locks[0].Holders = append(s.Locks[0].Holders, &fsmpb.Holder{SessionId: 2, Token: 4, Count: 1})
		}},
		{"token from the future", func(s *fsmpb.Snapshot) { s.Locks[0].Holders[0].Token = 1000 }},
		{"count 0", func(s *fsmpb.Snapshot) { s.Locks[0].Holders[0].Count = 0 }},
		{"free lock with waiters", func(s *fsmpb.Snapshot) { s.Locks[0].Holders = nil }},
		{"unsorted sessions", func(s *fsmpb.Snapshot) { s.Sessions[0], s.Sessions[1] = s.Sessions[1], s.Sessions[0] }},
		{"wrong hold count", func(s *fsmpb.Snapshot) { s.Sessions[0].Holds = 5 }},
		{"bad lock name", func(s *fsmpb.Snapshot) { s.Locks[0].Name = "" }},
		{"cached result below min unacked", func(s *fsmpb.Snapshot) { s.Sessions[0].MinUnackedSeq = 9 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var snap fsmpb.Snapshot
			if err := proto.Unmarshal(good, &snap); err != nil {
				t.Fatal(err)
			}
			tt.tamper(&snap)
			bad, err := proto.Marshal(&snap)
			if err != nil {
				t.Fatal(err)
			}
			r := New()
			r.SetApplied(1)
			before := r.Hash()
			if err := r.Restore(bad); err == nil {
				t.Fatal("restored a corrupt snapshot")
			} else {
				t.Log(err)
			}
			if r.Hash() != before {
				t.Fatal("a failed restore changed the machine")
			}
		})
	}
	if err := New().Restore([]byte{0xff, 0xff}); err == nil {
		t.Fatal("restored garbage")
	}
}

func TestReadsReturnCopies(t *testing.T) {
	m, _ := fuzzMachine(t)
	h := m.Hash()
	l, ok := m.Lock("x")
	if !ok || len(l.GetHolders()) != 1 || len(l.GetWaiters()) != 1 {
		t.Fatalf("Lock(x) = %v, %v", l, ok)
	}
	l.Holders[0].Count = 9
	l.Waiters[0].AcquireSeq = 9
	s, _ := m.Session(1)
	s.Owner = "changed"
	_, holder := m.Check("x", 3)
	holder.Token = 1
	m.Locks("", "", 0)[0].Holders[0].Token = 1
	if m.Hash() != h {
		t.Fatal("changing a read's result changed the machine")
	}
}

func TestSessionsPaging(t *testing.T) {
	m := New()
	for i := uint64(1); i <= 5; i++ {
		m.Apply(i, &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{}}})
	}
	var got []uint64
	for after := uint64(0); ; {
		page := m.Sessions(after, 2)
		if len(page) == 0 {
			break
		}
		for _, s := range page {
			got = append(got, s.GetId())
		}
		after = page[len(page)-1].GetId()
	}
	if len(got) != 5 || got[0] != 1 || got[4] != 5 {
		t.Fatalf("paged sessions %v", got)
	}
	if m.NumSessions() != 5 || len(m.SessionIDs()) != 5 || m.Sessions(^uint64(0), 0) != nil {
		t.Fatal("session counts disagree")
	}
	if s, ok := m.Session(3); !ok || s.GetTtlNanos() != int64(DefaultTTL) {
		t.Fatalf("Session(3) = %v, %v", s, ok)
	}
}

func TestApplyOutOfOrderPanics(t *testing.T) {
	m := New()
	m.SetApplied(5)
	defer func() {
		if recover() == nil {
			t.Fatal("applying index 5 twice did not panic")
		}
	}()
	m.Apply(5, &fsmpb.Command{})
}
