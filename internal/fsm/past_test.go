package fsm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// pastRig applies entries to a machine for the history tests.
type pastRig struct {
	t   *testing.T
	m   *Machine
	idx uint64
	s   uint64 // the session that takes and frees locks
	seq uint64
}

func newPastRig(t *testing.T, version uint32) *pastRig {
	r := &pastRig{t: t, m: New()}
	if version > 1 {
		r.apply(&fsmpb.Command{Op: &fsmpb.Command_SetLogVersion{SetLogVersion: &fsmpb.SetLogVersion{Version: version}}})
	}
	r.s = r.open("w")
	return r
}

func (r *pastRig) apply(cmd *fsmpb.Command) *fsmpb.Result {
	r.t.Helper()
	r.idx++
	cmd.WallTimeUnixNano = int64(r.idx) * 1000
	res := r.m.Apply(r.idx, cmd)
	if res.GetError() != fsmpb.Error_ERROR_NONE {
		r.t.Fatalf("entry %d %v: %v", r.idx, cmd, res)
	}
	return res
}

func (r *pastRig) open(owner string) uint64 {
	return r.apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: owner}}}).GetSessionId()
}

func (r *pastRig) acquire(s uint64, name string) {
	r.seq++
	r.apply(&fsmpb.Command{SessionId: s, Seq: r.seq, MinUnackedSeq: r.seq, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: name}}})
}

// cycle takes and frees lock name: one end.
func (r *pastRig) cycle(name string) {
	r.seq++
	tok := r.apply(&fsmpb.Command{SessionId: r.s, Seq: r.seq, MinUnackedSeq: r.seq,
		Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: name}}}).GetAcquire().GetToken()
	r.seq++
	r.apply(&fsmpb.Command{SessionId: r.s, Seq: r.seq, MinUnackedSeq: r.seq,
		Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: name, Token: tok}}})
}

func pastName(i int) string { return fmt.Sprintf("job/%05d", i) }

// TestPastLocksBound: the history keeps the PastLocks locks whose last end
// is the most recent; an end moves its lock to the front. Below
// HistoryVersion it is in memory only: not in the snapshot, nor in the
// hash.
func TestPastLocksBound(t *testing.T) {
	r := newPastRig(t, 1)
	m := r.m
	for i := range PastLocks {
		r.cycle(pastName(i))
	}
	r.cycle(pastName(0)) // job/00000 is the most recent again: job/00001 is the oldest
	r.cycle(pastName(PastLocks))
	if n := len(m.past.locks); n != PastLocks {
		t.Fatalf("history of %d locks, want %d", n, PastLocks)
	}
	if got := m.PastHolds(pastName(1)); got != nil {
		t.Fatalf("the oldest lock's history was kept: %+v", got)
	}
	if got := m.PastHolds(pastName(0)); len(got) != 2 {
		t.Fatalf("%s: %d ends, want 2", pastName(0), len(got))
	}
	if got := m.PastHolds(pastName(2)); len(got) != 1 || got[0].How != EndReleased || got[0].Owner != "w" {
		t.Fatalf("%s: %+v", pastName(2), got)
	}

	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	fresh := New()
	if err := fresh.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if fresh.Hash() != m.Hash() {
		t.Fatal("a machine restored from the snapshot hashes differently: the history is in the hash")
	}
	if got := fresh.PastHolds(pastName(0)); got != nil {
		t.Fatalf("the history came through a snapshot below version %d: %+v", HistoryVersion, got)
	}
}

// TestHistoryEvictsAlikeAfterRestore: from HistoryVersion, a machine
// restored from a snapshot keeps the order in which locks leave the
// history, also among the locks one entry ended (a session's expiry): fed
// the same entries, it evicts the same locks and hashes like the machine
// that applied them all. A state frozen before the evictions encodes to
// the snapshot of its index, though Apply evicted and rewrote the
// records it reads.
func TestHistoryEvictsAlikeAfterRestore(t *testing.T) {
	r := newPastRig(t, HistoryVersion)
	for i := range PastLocks - 3 {
		r.cycle(pastName(i))
	}
	// One entry ends three holds: their locks are the three most recent,
	// recorded in name order.
	doomed := r.open("doomed")
	for _, name := range []string{"z/c", "z/a", "z/b"} {
		r.acquire(doomed, name)
	}
	r.apply(&fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: doomed}}})
	if n := len(r.m.past.locks); n != PastLocks {
		t.Fatalf("history of %d locks, want %d", n, PastLocks)
	}

	snap, err := r.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	restored := New()
	if err := restored.Restore(snap); err != nil {
		t.Fatal(err)
	}
	f := r.m.Freeze()
	// Feed both the same entries: PastLocks-2 new locks evict, oldest
	// first, every job and z/a, the first of the three z/ locks; then
	// z/b again, which rewrites a record the frozen state reads.
	replay := &pastRig{t: t, m: restored, idx: r.idx, s: r.s, seq: r.seq}
	for _, rig := range []*pastRig{r, replay} {
		for i := range PastLocks - 2 {
			rig.cycle(fmt.Sprintf("new/%05d", i))
		}
		rig.cycle("z/b")
	}
	if got := f.Encode(); !bytes.Equal(got, snap) {
		t.Fatalf("the frozen state encodes to %d bytes, its snapshot was %d; first difference at %d", len(got), len(snap), firstDiff(got, snap))
	}
	r.m.Thaw(f)
	for _, m := range []*Machine{r.m, restored} {
		if got := m.PastHolds("z/a"); got != nil {
			t.Fatalf("z/a, the first of its entry's ends, is still in the history: %+v", got)
		}
		if got := m.PastHolds("z/c"); len(got) != 1 || got[0].How != EndSessionExpired {
			t.Fatalf("z/c: %+v, want its expiry", got)
		}
		if got := m.PastHolds("z/b"); len(got) != 2 || got[0].How != EndReleased || got[1].How != EndSessionExpired {
			t.Fatalf("z/b: %+v, want a release after its expiry", got)
		}
		if got := m.PastHolds(pastName(PastLocks - 4)); got != nil {
			t.Fatalf("%s is still in the history", pastName(PastLocks-4))
		}
	}
	if restored.Hash() != r.m.Hash() {
		t.Fatal("the restored machine hashes unlike the one that applied every entry")
	}
}

// TestRestoreChecksHistory: a snapshot whose history recordEnd could not
// have made is refused, naming what is wrong, and changes nothing.
func TestRestoreChecksHistory(t *testing.T) {
	r := newPastRig(t, HistoryVersion)
	r.cycle("a")
	r.cycle("b")
	r.cycle("b")
	good, err := r.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, want string
		change     func(s *fsmpb.Snapshot)
	}{
		{"below its version", "snapshot of log version 6", func(s *fsmpb.Snapshot) { s.LogVersion = SignedTokensVersion }},
		{"no ends", "history of 0 ends", func(s *fsmpb.Snapshot) { s.History[0].Holds = nil }},
		{"too many ends", "history of 9 ends", func(s *fsmpb.Snapshot) {
			for len(s.History[1].Holds) < PastHoldsPerLock+1 {
				s.History[1].Holds = append(s.History[1].Holds, proto.CloneOf(s.History[1].Holds[1]))
			}
		}},
		{"bad name", "lock name is empty", func(s *fsmpb.Snapshot) { s.History[0].Lock = "" }},
		{"twice", `lock "b" has two histories`, func(s *fsmpb.Snapshot) { s.History[0].Lock = "b" }},
		{"unknown end", "unknown way to end 8", func(s *fsmpb.Snapshot) { s.History[0].Holds[0].How = 8 }},
		{"no end", "unknown way to end 0", func(s *fsmpb.Snapshot) { s.History[0].Holds[0].How = 0 }},
		{"ended later", "ended index 99 outside 1..", func(s *fsmpb.Snapshot) { s.History[1].Holds[1].EndedIndex = 99 }},
		{"granted after its end", "token 9 outside 1..6", func(s *fsmpb.Snapshot) { s.History[1].Holds[0].Token = 9 }},
		{"no session", "session 0, opened after", func(s *fsmpb.Snapshot) { s.History[0].Holds[0].SessionId = 0 }},
		{"ends out of order", "before the end recorded before it", func(s *fsmpb.Snapshot) {
			h := s.History[1].Holds
			h[0], h[1] = h[1], h[0]
		}},
		{"locks out of order", "older than the last end of the lock before it", func(s *fsmpb.Snapshot) {
			s.History[0], s.History[1] = s.History[1], s.History[0]
		}},
		{"bad owner key", "owner key", func(s *fsmpb.Snapshot) { s.History[0].Holds[0].OwnerKey = strings.Repeat("k", 1000) }},
		{"floor below its version", "a history floor in a snapshot of log version 10", func(s *fsmpb.Snapshot) { s.HistoryFloor = 1 }},
		{"floor above the index", "history floor 99 above the applied index", func(s *fsmpb.Snapshot) {
			s.LogVersion = WatchHistoryVersion
			s.HistoryFloor = 99
		}},
		{"value below its version", "a value in a snapshot of log version 10", func(s *fsmpb.Snapshot) { s.History[0].Holds[0].Value = "10.0.0.1:80" }},
		{"bad value", "control character", func(s *fsmpb.Snapshot) {
			s.LogVersion = WatchHistoryVersion
			s.History[0].Holds[0].Value = "10.0.0.1:80\n"
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var s fsmpb.Snapshot
			if err := proto.Unmarshal(good, &s); err != nil {
				t.Fatal(err)
			}
			if len(s.History) != 2 || len(s.History[1].Holds) != 2 {
				t.Fatalf("history %v, want a and b (two ends)", s.History)
			}
			tt.change(&s)
			bad, err := proto.MarshalOptions{Deterministic: true}.Marshal(&s)
			if err != nil {
				t.Fatal(err)
			}
			m := New()
			err = m.Restore(bad)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("restore: %v, want an error containing %q", err, tt.want)
			}
			if m.AppliedIndex() != 0 || m.past.locks != nil {
				t.Fatal("a refused restore changed the machine")
			}
		})
	}
}
