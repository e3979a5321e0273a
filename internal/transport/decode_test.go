package transport

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/transport/transportpb"
)

func ent(typ raftpb.EntryType, term, index uint64, data []byte) *raftpb.Entry {
	return &raftpb.Entry{Type: &typ, Term: &term, Index: &index, Data: data}
}

func msg(typ raftpb.MessageType) *raftpb.Message {
	return &raftpb.Message{Type: &typ, To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(5))}
}

// raftMessages are messages as raft sends them between members.
func raftMessages() []*raftpb.Message {
	app := msg(raftpb.MsgApp)
	app.LogTerm, app.Index, app.Commit = new(uint64(5)), new(uint64(100)), new(uint64(99))
	for i := range 5 {
		app.Entries = append(app.Entries, ent(raftpb.EntryNormal, 5, uint64(101+i), []byte(fmt.Sprintf("command %d", i))))
	}
	app.Entries = append(app.Entries,
		ent(raftpb.EntryNormal, 5, 106, nil),      // a new leader's empty entry
		ent(raftpb.EntryNormal, 5, 107, []byte{}), // present, empty
		ent(raftpb.EntryConfChangeV2, 5, 108, []byte{1, 2, 3}),
		&raftpb.Entry{Data: []byte("no term, index or type")},
	)
	resp := msg(raftpb.MsgAppResp)
	resp.Index, resp.Reject, resp.RejectHint, resp.LogTerm = new(uint64(100)), new(true), new(uint64(90)), new(uint64(4))
	hb := msg(raftpb.MsgHeartbeat)
	hb.Commit, hb.Context = new(uint64(99)), []byte("read index context")
	hbEmpty := msg(raftpb.MsgHeartbeat)
	hbEmpty.Context = []byte{}
	vote := msg(raftpb.MsgVote)
	vote.LogTerm, vote.Index, vote.Vote = new(uint64(4)), new(uint64(100)), new(uint64(0))
	return []*raftpb.Message{app, resp, hb, hbEmpty, vote, msg(raftpb.MsgHeartbeatResp), msg(raftpb.MsgTimeoutNow), {}}
}

func marshalMsg(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRaftMessagesDecodeWithoutProto pins that what raft sends between
// members takes the fast decoder and decodes as proto does.
func TestRaftMessagesDecodeWithoutProto(t *testing.T) {
	for _, m := range raftMessages() {
		got, ok := fastMessage(marshalMsg(t, m))
		if !ok {
			t.Errorf("%v: not decoded by the fast path", m)
			continue
		}
		if !proto.Equal(got, m) {
			t.Errorf("decoded\n%v\nwant\n%v", got, m)
		}
	}
	env := &transportpb.Envelope{GroupId: 1, Messages: [][]byte{marshalMsg(t, raftMessages()[0]), {}}}
	if got, ok := fastEnvelope(marshalMsg(t, env)); !ok || !proto.Equal(got, env) {
		t.Errorf("envelope: %v, %v", got, ok)
	}
}

// TestFrameIsProtoEnvelope: appendFrame writes a frame's Envelope as
// proto.Marshal does, byte for byte, with the messages the fast encoder
// takes and one it leaves to proto (a snapshot).
func TestFrameIsProtoEnvelope(t *testing.T) {
	snap := msg(raftpb.MsgSnap)
	snap.Snapshot = &raftpb.Snapshot{Data: []byte("state"), Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(9))}}
	var (
		q   []queued
		env = &transportpb.Envelope{GroupId: 1}
	)
	for _, m := range append(raftMessages(), snap) {
		q = append(q, queued{group: 1, m: m})
		env.Messages = append(env.Messages, marshalMsg(t, m))
	}
	frame, rest, err := appendFrame([]byte("prefix"), q)
	if err != nil || len(rest) != 0 {
		t.Fatalf("appendFrame: %v, %d messages left", err, len(rest))
	}
	want := marshalMsg(t, env)
	want = append(binary.BigEndian.AppendUint32([]byte("prefix"), uint32(len(want))), want...)
	if !bytes.Equal(frame, want) {
		t.Fatalf("frame\n%x\nproto\n%x", frame, want)
	}
}

// TestEntryDataDoesNotOverlap: the entries' data share one allocation,
// so appending to one must not write over the next.
func TestEntryDataDoesNotOverlap(t *testing.T) {
	m, err := decodeMessage(marshalMsg(t, raftMessages()[0]))
	if err != nil {
		t.Fatal(err)
	}
	_ = append(m.Entries[0].Data, "XXXXXXXXXXXXXXXX"...)
	if got := string(m.Entries[1].Data); got != "command 1" {
		t.Fatalf("entry 1's data became %q after appending to entry 0's", got)
	}
	b := marshalMsg(t, raftMessages()[0])
	m, _ = decodeMessage(b)
	for i := range b {
		b[i] = 0
	}
	if got := string(m.Entries[0].Data); got != "command 0" {
		t.Fatalf("decoded data aliases the input: %q", got)
	}
}

// TestOtherMessagesGoToProto: what the fast path does not take decodes
// as proto decodes it.
func TestOtherMessagesGoToProto(t *testing.T) {
	snap := msg(raftpb.MsgSnap)
	snap.Snapshot = &raftpb.Snapshot{Data: []byte("state"), Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(9))}}
	app := marshalMsg(t, raftMessages()[0])
	tag := func(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
	for name, b := range map[string][]byte{
		"snapshot":           marshalMsg(t, snap),
		"term twice":         append(bytes.Clone(app), append(tag(4, protowire.VarintType), 7)...),
		"unknown field":      append(bytes.Clone(app), append(tag(40, protowire.VarintType), 7)...),
		"unknown type":       append(tag(1, protowire.VarintType), 99),
		"unknown entry type": append(tag(7, protowire.BytesType), append([]byte{2}, append(tag(1, protowire.VarintType), 9)...)...),
		"entry index twice":  append(tag(7, protowire.BytesType), append([]byte{4}, append(append(tag(3, protowire.VarintType), 1), append(tag(3, protowire.VarintType), 2)...)...)...),
		"truncated":          app[:len(app)-3],
	} {
		if _, ok := fastMessage(b); ok {
			t.Errorf("%s: decoded by the fast path", name)
		}
		checkSameMessage(t, name, b)
	}
}

func checkSameMessage(t *testing.T, what string, b []byte) {
	t.Helper()
	got, err := decodeMessage(b)
	want := new(raftpb.Message)
	werr := proto.Unmarshal(b, want)
	if (err == nil) != (werr == nil) {
		t.Fatalf("%s: error %v, proto's %v (input %x)", what, err, werr, b)
	}
	if err == nil && !proto.Equal(got, want) {
		t.Fatalf("%s: decoded\n%v\nproto decoded\n%v\n(input %x)", what, got, want, b)
	}
	genv, err := decodeEnvelope(b)
	wenv := &transportpb.Envelope{}
	werr = proto.Unmarshal(b, wenv)
	if (err == nil) != (werr == nil) {
		t.Fatalf("%s: envelope error %v, proto's %v (input %x)", what, err, werr, b)
	}
	if err == nil && !proto.Equal(genv, wenv) {
		t.Fatalf("%s: envelope decoded\n%v\nproto decoded\n%v\n(input %x)", what, genv, wenv, b)
	}
}

// FuzzDecode checks that any input decodes, or fails, as proto's
// decoding does, as a raft message and as an envelope.
//
//	go test -run '^$' -fuzz FuzzDecode -fuzztime 60s ./internal/transport
func FuzzDecode(f *testing.F) {
	for _, m := range raftMessages() {
		f.Add(marshalMsg(f, m))
	}
	f.Add(marshalMsg(f, &transportpb.Envelope{GroupId: 1, Messages: [][]byte{marshalMsg(f, raftMessages()[0])}}))
	f.Fuzz(func(t *testing.T, b []byte) { checkSameMessage(t, "input", b) })
}

// BenchmarkDecodeMessage compares the fast decoder with proto on an append
// of 32 entries, as a follower receives them in own/64.
//
//	go test -run '^$' -bench BenchmarkDecodeMessage -benchmem ./internal/transport
func BenchmarkDecodeMessage(b *testing.B) {
	m := msg(raftpb.MsgApp)
	m.LogTerm, m.Index, m.Commit = new(uint64(5)), new(uint64(100)), new(uint64(99))
	for i := range 32 {
		m.Entries = append(m.Entries, ent(raftpb.EntryNormal, 5, uint64(101+i), bytes.Repeat([]byte{'x'}, 60)))
	}
	data := marshalMsg(b, m)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeMessage(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := proto.Unmarshal(data, new(raftpb.Message)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
