package storage

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestAppendEntry holds appendEntry to proto.Marshal: unset and zero
// fields, nil and empty data, large and negative values.
func TestAppendEntry(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	pick := func(vals ...uint64) uint64 { return vals[r.IntN(len(vals))] }
	for range 20_000 {
		e := &raftpb.Entry{}
		if r.IntN(4) > 0 {
			e.Type = new(raftpb.EntryType([]int32{0, 1, 2, -1, 1 << 30}[r.IntN(5)]))
		}
		if r.IntN(4) > 0 {
			e.Term = new(pick(0, 1, 127, 128, 1<<40, 1<<64-1))
		}
		if r.IntN(4) > 0 {
			e.Index = new(pick(0, 1, 300, 1<<35, 1<<64-1))
		}
		switch r.IntN(4) {
		case 0: // nil: unset
		case 1:
			e.Data = []byte{}
		default:
			e.Data = make([]byte, pick(1, 127, 128, 5000))
			for i := range e.Data {
				e.Data[i] = byte(r.Uint32())
			}
		}
		want, err := proto.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendEntry([]byte("prefix"), e); !bytes.Equal(got[6:], want) || string(got[:6]) != "prefix" {
			t.Fatalf("appendEntry(%v) = %x; proto.Marshal: %x", e, got[6:], want)
		}
	}
}

func BenchmarkAppendEntry(b *testing.B) {
	e := &raftpb.Entry{Type: new(raftpb.EntryType_EntryNormal), Term: new(uint64(3)), Index: new(uint64(123456)), Data: make([]byte, 60)}
	buf := make([]byte, 0, 256)
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			buf = appendEntry(buf[:0], e)
		}
	})
	b.Run("proto", func(b *testing.B) {
		for b.Loop() {
			buf, _ = proto.MarshalOptions{}.MarshalAppend(buf[:0], e)
		}
	})
}
