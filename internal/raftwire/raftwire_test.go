package raftwire

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

type gen struct{ r *rand.Rand }

func (g gen) pick(vals ...uint64) uint64 { return vals[g.r.IntN(len(vals))] }

// maybe returns a pointer to one of vals, or nil (unset).
func (g gen) maybe(vals ...uint64) *uint64 {
	if g.r.IntN(4) == 0 {
		return nil
	}
	return new(g.pick(vals...))
}

func (g gen) bytes() []byte {
	switch g.r.IntN(4) {
	case 0:
		return nil // unset
	case 1:
		return []byte{} // set, empty
	}
	b := make([]byte, g.pick(1, 127, 128, 5000))
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return b
}

func (g gen) entry() *raftpb.Entry {
	e := &raftpb.Entry{Term: g.maybe(0, 1, 127, 128, 1<<40, 1<<64-1), Index: g.maybe(0, 1, 300, 1<<35, 1<<64-1), Data: g.bytes()}
	if g.r.IntN(4) > 0 {
		e.Type = new(raftpb.EntryType([]int32{0, 1, 2, -1, 1 << 30}[g.r.IntN(5)]))
	}
	return e
}

func (g gen) message() *raftpb.Message {
	m := &raftpb.Message{
		To: g.maybe(0, 1, 3, 1<<62), From: g.maybe(0, 2), Term: g.maybe(0, 5, 1<<40), LogTerm: g.maybe(0, 4),
		Index: g.maybe(0, 1, 1<<50), Commit: g.maybe(0, 99, 1<<64-1), RejectHint: g.maybe(0, 7), Vote: g.maybe(0, 2),
		Context: g.bytes(),
	}
	if g.r.IntN(4) > 0 {
		m.Type = new(raftpb.MessageType([]int32{3, 4, 8, 9, 17, -1}[g.r.IntN(6)]))
	}
	if g.r.IntN(3) == 0 {
		m.Reject = new(g.r.IntN(2) == 0)
	}
	for range g.pick(0, 0, 1, 3) {
		m.Entries = append(m.Entries, g.entry())
	}
	return m
}

// TestAppendEntry holds AppendEntry to proto.Marshal: unset and zero
// fields, nil and empty data, large and negative values.
func TestAppendEntry(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(7, 8))}
	for range 20_000 {
		e := g.entry()
		want, err := proto.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := AppendEntry([]byte("prefix"), e)
		if !ok || !bytes.Equal(got[6:], want) || string(got[:6]) != "prefix" {
			t.Fatalf("AppendEntry(%v) = %x, %v; proto.Marshal: %x", e, got[6:], ok, want)
		}
	}
}

// TestAppendMessage holds MessageSize and AppendMessage to proto.Marshal,
// and checks that what they leave to proto is left.
func TestAppendMessage(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(9, 10))}
	for range 20_000 {
		m := g.message()
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		size, ok := MessageSize(m)
		if !ok {
			t.Fatalf("MessageSize left %v to proto", m)
		}
		got := AppendMessage([]byte("prefix"), m)
		if size != len(want) || !bytes.Equal(got[6:], want) || string(got[:6]) != "prefix" {
			t.Fatalf("AppendMessage(%v) = %x (size %d); proto.Marshal: %x", m, got[6:], size, want)
		}
	}
	unknown := func() *raftpb.Entry {
		e := &raftpb.Entry{Index: new(uint64(1))}
		e.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 20, protowire.VarintType), 1))
		return e
	}
	withUnknown := &raftpb.Message{To: new(uint64(1))}
	withUnknown.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 20, protowire.VarintType), 1))
	for what, m := range map[string]*raftpb.Message{
		"a snapshot":               {Snapshot: &raftpb.Snapshot{}},
		"responses":                {Responses: []*raftpb.Message{{}}},
		"an unknown field":         withUnknown,
		"an entry's unknown field": {Entries: []*raftpb.Entry{{}, unknown()}},
	} {
		if _, ok := MessageSize(m); ok {
			t.Errorf("MessageSize took a message with %s", what)
		}
	}
	if b, ok := AppendEntry(nil, unknown()); ok || len(b) > 0 {
		t.Errorf("AppendEntry took an entry with an unknown field")
	}
}

// BenchmarkAppendMessage: a 30-entry append and an append response, by
// hand and by proto.
func BenchmarkAppendMessage(b *testing.B) {
	app := &raftpb.Message{Type: new(raftpb.MsgApp), To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(3)),
		LogTerm: new(uint64(3)), Index: new(uint64(123456)), Commit: new(uint64(123450))}
	for i := range 30 {
		app.Entries = append(app.Entries, &raftpb.Entry{Type: new(raftpb.EntryType_EntryNormal), Term: new(uint64(3)),
			Index: new(uint64(123457 + i)), Data: make([]byte, 60)})
	}
	resp := &raftpb.Message{Type: new(raftpb.MsgAppResp), To: new(uint64(1)), From: new(uint64(2)), Term: new(uint64(3)),
		Index: new(uint64(123456)), Commit: new(uint64(123450))}
	buf := make([]byte, 0, 8192)
	for _, c := range []struct {
		name string
		m    *raftpb.Message
	}{{"append", app}, {"response", resp}} {
		b.Run(c.name+"/hand", func(b *testing.B) {
			for b.Loop() {
				if _, ok := MessageSize(c.m); !ok {
					b.Fatal("left to proto")
				}
				buf = AppendMessage(buf[:0], c.m)
			}
		})
		b.Run(c.name+"/proto", func(b *testing.B) {
			for b.Loop() {
				_ = proto.Size(c.m)
				buf, _ = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(buf[:0], c.m)
			}
		})
	}
}

// FuzzAppendMessage holds the encoders to proto.Marshal on any message
// proto decodes from the input: AppendMessage where MessageSize takes it,
// and AppendEntry on each of its entries.
func FuzzAppendMessage(f *testing.F) {
	g := gen{rand.New(rand.NewPCG(11, 12))}
	for range 20 {
		b, err := proto.Marshal(g.message())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := &raftpb.Message{}
		if proto.Unmarshal(data, m) != nil {
			return
		}
		for _, e := range m.Entries {
			want, err := proto.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := AppendEntry(nil, e); ok && !bytes.Equal(got, want) {
				t.Fatalf("AppendEntry(%v) = %x; proto.Marshal: %x", e, got, want)
			}
		}
		size, ok := MessageSize(m)
		if !ok {
			return
		}
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendMessage(nil, m); size != len(want) || !bytes.Equal(got, want) {
			t.Fatalf("AppendMessage(%v) = %x (size %d); proto.Marshal: %x", m, got, size, want)
		}
	})
}
