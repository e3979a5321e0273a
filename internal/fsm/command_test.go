package fsm

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// checkDecodeCommand holds DecodeCommand to proto.Unmarshal on data: when
// it answers, proto decodes data to an equal command with no unknown
// fields. It reports whether DecodeCommand answered.
func checkDecodeCommand(t *testing.T, data []byte) bool {
	t.Helper()
	got, ok := DecodeCommand(data)
	if !ok {
		return false
	}
	want := &fsmpb.Command{}
	if err := proto.Unmarshal(data, want); err != nil {
		t.Fatalf("DecodeCommand took %x, which proto refuses: %v", data, err)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("DecodeCommand(%x) = %v; proto: %v", data, got, want)
	}
	m := want.ProtoReflect()
	if len(m.GetUnknown()) > 0 {
		t.Fatalf("DecodeCommand took %x, which has unknown fields", data)
	}
	if fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("op")); fd != nil && len(m.Get(fd).Message().GetUnknown()) > 0 {
		t.Fatalf("DecodeCommand took %x, whose operation has unknown fields", data)
	}
	return true
}

func randomCommand(r *rand.Rand) *fsmpb.Command {
	pick := func(vals ...uint64) uint64 { return vals[r.IntN(len(vals))] }
	cmd := &fsmpb.Command{
		SessionId: pick(0, 1, 127, 128, 1<<40), Seq: pick(0, 1, 300), MinUnackedSeq: pick(0, 5),
		WallTimeUnixNano: int64(pick(0, 1763830000000000000, 1<<63)), Proposer: pick(0, 3), ProposalId: pick(0, 1<<62),
	}
	cmd.SecretHash = [][]byte{nil, make([]byte, SecretHashLen), []byte("x")}[r.IntN(3)]
	if len(cmd.SecretHash) == SecretHashLen {
		cmd.SecretHash[0], cmd.SecretHash[31] = byte(r.Uint32()), byte(r.Uint32())
	}
	cmd.Principal = []string{"", "alice", "ünïcode"}[r.IntN(3)]
	name := []string{"", "jobs/42", "ünïcode/λ", string(make([]byte, 300))}[r.IntN(4)]
	switch r.IntN(5) {
	case 0:
		cmd.Op = &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
			Lock: name, OwnerKey: []string{"", "k"}[r.IntN(2)], Wait: r.IntN(2) == 0,
			WaitTimeoutNanos: int64(pick(0, 5e9, 1<<63)), Shared: r.IntN(2) == 0, Limit: uint32(pick(0, 3, 1<<32-1)),
			HoldLimitNanos: int64(pick(0, 1e9)), LockDelayNanos: int64(pick(0, 15e9)),
		}}
	case 1:
		cmd.Op = &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: name, Token: pick(0, 99, 1<<63), OwnerKey: []string{"", "k"}[r.IntN(2)]}}
	case 2:
		cmd.Op = &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{}}
	case 3:
		cmd.Op = &fsmpb.Command_RotateSigningKey{RotateSigningKey: &fsmpb.RotateSigningKey{
			Seed: make([]byte, pick(0, SigningKeySeedLen)), RetentionNanos: int64(pick(0, 3600e9)), First: r.IntN(2) == 0}}
	default:
		cmd.Op = &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: pick(1, 1000)}}
	}
	return cmd
}

// TestDecodeCommand: DecodeCommand decodes every acquire and release proto
// encodes, as proto does, and leaves other operations to proto.
func TestDecodeCommand(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		cmd := randomCommand(r)
		data, err := proto.Marshal(cmd)
		if err != nil {
			t.Fatal(err)
		}
		answered := checkDecodeCommand(t, data)
		switch cmd.Op.(type) {
		case *fsmpb.Command_Acquire, *fsmpb.Command_Release:
			if !answered {
				t.Fatalf("DecodeCommand left %v to proto", cmd)
			}
		default:
			if answered {
				t.Fatalf("DecodeCommand answered %v", cmd)
			}
		}
	}
	acquire, _ := proto.Marshal(&fsmpb.Command{Seq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "x"}}})
	for what, data := range map[string][]byte{
		"a field of a newer release": protowire.AppendVarint(protowire.AppendTag(acquire, 7, protowire.VarintType), 1),
		"an acquire field of a newer release": protowire.AppendBytes(protowire.AppendTag(nil, 14, protowire.BytesType),
			protowire.AppendVarint(protowire.AppendTag([]byte{0x0a, 1, 'x'}, 9, protowire.VarintType), 1)),
		"a field twice":           protowire.AppendVarint(protowire.AppendTag(acquire, 2, protowire.VarintType), 2),
		"two operations":          append(acquire, acquire[2:]...),
		"a known number as bytes": protowire.AppendBytes(protowire.AppendTag(acquire, 1, protowire.BytesType), []byte("x")),
		"a lock name not UTF-8":   protowire.AppendBytes(protowire.AppendTag(nil, 14, protowire.BytesType), []byte{0x0a, 1, 0xff}),
		"a cut tail":              acquire[:len(acquire)-1],
		"no operation":            protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 5),
	} {
		if _, ok := DecodeCommand(data); ok {
			t.Errorf("%s: DecodeCommand answered %x", what, data)
		}
	}
}

// TestDecoderBatch: a Decoder decodes a batch as DecodeCommand does, and
// nothing it returned changes while it decodes the rest (its blocks are
// never reused), with the entries it leaves to proto, and blocks that run
// out, in between.
func TestDecoderBatch(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 7, maxBlock + 3, 3 * maxBlock} {
		datas := make([][]byte, n)
		for i := range datas {
			data, err := proto.Marshal(randomCommand(r))
			if err != nil {
				t.Fatal(err)
			}
			if r.IntN(10) == 0 {
				data = data[:len(data)-1] // refused, or a different command
			}
			datas[i] = data
		}
		var d Decoder
		d.Expect(n - n/3) // fewer than come: blocks run out
		got := make([]*fsmpb.Command, n)
		for i, data := range datas {
			if cmd, ok := d.Decode(data); ok {
				got[i] = cmd
			}
		}
		for i, data := range datas {
			want, ok := DecodeCommand(data)
			if ok != (got[i] != nil) {
				t.Fatalf("batch of %d, command %d: Decoder answered %v, DecodeCommand %v", n, i, got[i] != nil, ok)
			}
			if ok && !proto.Equal(got[i], want) {
				t.Fatalf("batch of %d, command %d: Decoder kept %v; DecodeCommand: %v", n, i, got[i], want)
			}
		}
	}
}

// addCommandSeeds seeds f with 50 random commands, encoded.
func addCommandSeeds(f *testing.F, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed+1))
	for range 50 {
		data, _ := proto.Marshal(randomCommand(r))
		f.Add(data)
	}
}

// FuzzDecodeCommand holds DecodeCommand to proto on any bytes.
func FuzzDecodeCommand(f *testing.F) {
	addCommandSeeds(f, 3)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecodeCommand(t, data)
	})
}

func BenchmarkDecodeCommand(b *testing.B) {
	data, _ := proto.Marshal(&fsmpb.Command{SessionId: 123456, Seq: 1234, MinUnackedSeq: 1200, WallTimeUnixNano: 1763830000000000000,
		Proposer: 1, ProposalId: 99999, SecretHash: make([]byte, SecretHashLen), Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "bench/own/0042"}}})
	b.Run("batch", func(b *testing.B) {
		b.ReportAllocs()
		var d Decoder
		for b.Loop() {
			if len(d.cmds) == 0 {
				d.Expect(64)
			}
			if _, ok := d.Decode(data); !ok {
				b.Fatal("not decoded")
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := DecodeCommand(data); !ok {
				b.Fatal("not decoded")
			}
		}
	})
	b.Run("proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var cmd fsmpb.Command
			if err := proto.Unmarshal(data, &cmd); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// checkEncodeCommand holds EncodeCommand to proto.Marshal on cmd: when it
// answers, its bytes are proto's. It reports whether it answered.
func checkEncodeCommand(t *testing.T, cmd *fsmpb.Command) bool {
	t.Helper()
	got, ok := EncodeCommand(cmd)
	if !ok {
		return false
	}
	want, err := proto.Marshal(cmd)
	if err != nil {
		t.Fatalf("EncodeCommand encoded %v, which proto refuses: %v", cmd, err)
	}
	if string(got) != string(want) {
		t.Fatalf("EncodeCommand(%v) = %x; proto: %x", cmd, got, want)
	}
	return true
}

// TestEncodeCommand: EncodeCommand encodes every acquire and release as
// proto does, byte for byte, and leaves to proto other operations,
// unknown fields, and strings that are not UTF-8 (which proto refuses).
func TestEncodeCommand(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 20_000 {
		cmd := randomCommand(r)
		answered := checkEncodeCommand(t, cmd)
		switch cmd.Op.(type) {
		case *fsmpb.Command_Acquire, *fsmpb.Command_Release:
			if !answered {
				t.Fatalf("EncodeCommand left %v to proto", cmd)
			}
		default:
			if answered {
				t.Fatalf("EncodeCommand answered for %v", cmd)
			}
		}
	}

	acquire := func() *fsmpb.Command {
		return &fsmpb.Command{SessionId: 7, Seq: 2, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "jobs/1"}}}
	}
	refused := map[string]*fsmpb.Command{
		"no operation":        {SessionId: 7},
		"nil acquire":         {Op: &fsmpb.Command_Acquire{}},
		"nil release":         {Op: &fsmpb.Command_Release{}},
		"lock not UTF-8":      {Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "a\xff"}}},
		"owner key not UTF-8": {Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "a", OwnerKey: "\xc0"}}},
	}
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1)
	cmd := acquire()
	cmd.ProtoReflect().SetUnknown(unknown)
	refused["unknown field in the command"] = cmd
	cmd = acquire()
	cmd.GetAcquire().ProtoReflect().SetUnknown(unknown)
	refused["unknown field in the acquire"] = cmd
	cmd = acquire()
	cmd.GetAcquire().Value = "10.0.0.1:80"
	refused["an acquire with a value (left to proto)"] = cmd
	for what, cmd := range refused {
		if data, ok := EncodeCommand(cmd); ok {
			t.Errorf("%s: EncodeCommand answered %x", what, data)
		}
	}
}

// FuzzEncodeCommand holds EncodeCommand to proto on any command.
func FuzzEncodeCommand(f *testing.F) {
	addCommandSeeds(f, 7)
	f.Fuzz(func(t *testing.T, data []byte) {
		var cmd fsmpb.Command
		if proto.Unmarshal(data, &cmd) != nil {
			return
		}
		checkEncodeCommand(t, &cmd)
	})
}

func BenchmarkEncodeCommand(b *testing.B) {
	cmd := &fsmpb.Command{SessionId: 123456, Seq: 1234, MinUnackedSeq: 1200, WallTimeUnixNano: 1763830000000000000,
		Proposer: 1, ProposalId: 99999, SecretHash: make([]byte, SecretHashLen), Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "bench/own/0042"}}}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := EncodeCommand(cmd); !ok {
				b.Fatal("not encoded")
			}
		}
	})
	b.Run("proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := proto.Marshal(cmd); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEncodeCommandKnowsEveryField sets each field of Command beside an
// acquire: EncodeCommand must give proto's bytes (or leave the command to
// proto), never drop a field it does not know. (A field added to Command
// without its place in EncodeCommand was dropped from every acquire and
// release: the principal, until this test.)
func TestEncodeCommandKnowsEveryField(t *testing.T) {
	fields := (&fsmpb.Command{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil {
			continue
		}
		cmd := &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "jobs/1"}}}
		cmd.ProtoReflect().Set(fd, scalar(fd))
		checkEncodeCommand(t, cmd)
		if data, ok := EncodeCommand(cmd); ok {
			checkDecodeCommand(t, data)
		}
	}
}
