package sim

import (
	"math/rand/v2"
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestCopyMessage holds copyMessage to proto.Clone on random messages,
// and checks the copy shares no memory with the original. copyMessage
// copies raftpb's fields by name, so the test also fails if raft's
// messages or entries gain a field it does not know.
func TestCopyMessage(t *testing.T) {
	fieldNumbers := func(md protoreflect.MessageDescriptor) []int {
		var ns []int
		for i := range md.Fields().Len() {
			ns = append(ns, int(md.Fields().Get(i).Number()))
		}
		slices.Sort(ns)
		return ns
	}
	if got := fieldNumbers((&raftpb.Message{}).ProtoReflect().Descriptor()); !slices.Equal(got, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}) {
		t.Fatalf("raftpb.Message has fields %v: teach copyMessage the new ones", got)
	}
	if got := fieldNumbers((&raftpb.Entry{}).ProtoReflect().Descriptor()); !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Fatalf("raftpb.Entry has fields %v: teach copyMessage the new ones", got)
	}

	r := rand.New(rand.NewPCG(1, 2))
	maybe := func() *uint64 {
		if r.IntN(4) == 0 {
			return nil
		}
		return new(r.Uint64N(1 << uint(r.IntN(64))))
	}
	bytes := func() []byte {
		switch r.IntN(4) {
		case 0:
			return nil // unset
		case 1:
			return []byte{} // set, empty
		}
		b := make([]byte, 1+r.IntN(200))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	for range 2000 {
		m := &raftpb.Message{To: maybe(), From: maybe(), Term: maybe(), LogTerm: maybe(), Index: maybe(), Commit: maybe(),
			Vote: maybe(), RejectHint: maybe(), Context: bytes()}
		if r.IntN(4) > 0 {
			m.Type = new(raftpb.MessageType(r.IntN(len(raftpb.MessageType_name))))
		}
		if r.IntN(3) == 0 {
			m.Reject = new(r.IntN(2) == 0)
		}
		if r.IntN(3) > 0 {
			m.Entries = []*raftpb.Entry{}
			for range r.IntN(5) {
				e := &raftpb.Entry{Term: maybe(), Index: maybe(), Data: bytes()}
				if r.IntN(4) > 0 {
					e.Type = new(raftpb.EntryType(r.IntN(3)))
				}
				m.Entries = append(m.Entries, e)
			}
		}
		if r.IntN(20) == 0 {
			m.Snapshot = &raftpb.Snapshot{Data: bytes(), Metadata: &raftpb.SnapshotMetadata{Index: maybe(), Term: maybe()}}
		}
		want := proto.Clone(m)
		c := copyMessage(m)
		if !proto.Equal(c, want) {
			t.Fatalf("copyMessage(%v) = %v", want, c)
		}
		// Overwrite everything the copy has: the original must not change.
		for _, p := range []*uint64{c.To, c.From, c.Term, c.LogTerm, c.Index, c.Commit, c.Vote, c.RejectHint} {
			if p != nil {
				*p = ^*p
			}
		}
		clear(c.Context)
		for _, e := range c.Entries {
			clear(e.Data)
			if e.Term != nil {
				*e.Term = ^*e.Term
			}
		}
		if c.Snapshot != nil {
			clear(c.Snapshot.Data)
		}
		if !proto.Equal(m, want) {
			t.Fatalf("changing the copy changed the original: %v, was %v", m, want)
		}
	}
}
