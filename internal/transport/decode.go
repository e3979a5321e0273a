package transport

import (
	"math"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/protofield"
	"github.com/batonlock/baton/internal/transport/transportpb"
)

// Raft's messages are decoded here without protobuf's reflection: a
// follower decodes every entry the leader sends, and raftpb's proto2
// fields made that five allocations per entry (the entry, three pointers
// and its data) plus the reflection's walk. The decoders know the
// messages raft sends between members, except snapshots, and leave
// anything else, or anything unusual (an unknown field or enum value, a
// field twice, malformed data), to proto.Unmarshal, so the result is
// always proto's (FuzzDecode checks).

// decodeEnvelope decodes a frame's Envelope. Its messages alias b (no
// copy): they are decoded, and copied, before b is read into again.
func decodeEnvelope(b []byte) (*transportpb.Envelope, error) {
	if env, ok := fastEnvelope(b); ok {
		return env, nil
	}
	env := &transportpb.Envelope{}
	if err := proto.Unmarshal(b, env); err != nil {
		return nil, err
	}
	return env, nil
}

func fastEnvelope(b []byte) (*transportpb.Envelope, bool) {
	env := &transportpb.Envelope{}
	r := protofield.NewReader(b)
	r.AllowRepeat(3)
	for r.Next() {
		switch {
		case r.IsVarint(2):
			env.GroupId = r.Varint()
		case r.IsBytes(3):
			env.Messages = append(env.Messages, r.Bytes())
		default:
			return nil, false // the Hello, among others
		}
	}
	return env, r.Done()
}

// decodeMessage decodes one raftpb.Message as proto.Unmarshal does. What
// it returns does not alias b.
func decodeMessage(b []byte) (*raftpb.Message, error) {
	if m, ok := fastMessage(b); ok {
		return m, nil
	}
	m := new(raftpb.Message)
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, err
	}
	return m, nil
}

// message is a raftpb.Message with room for its optional fields.
type message struct {
	m   raftpb.Message
	typ raftpb.MessageType
	u   [9]uint64 // to, from, term, logTerm, index, commit, vote, rejectHint, (spare)
	rej bool
}

// entry is a raftpb.Entry with room for its optional fields.
type entry struct {
	e     raftpb.Entry
	typ   raftpb.EntryType
	term  uint64
	index uint64
}

func fastMessage(b []byte) (*raftpb.Message, bool) {
	// A first pass checks the fields and counts the entries and their
	// data, which are then allocated together.
	var (
		nEntries int
		dataSize int
	)
	r := protofield.NewReader(b)
	r.AllowRepeat(7)
	for r.Next() {
		if r.IsBytes(7) {
			size, ok := entryDataSize(r.Bytes())
			if !ok {
				return nil, false
			}
			nEntries++
			dataSize += size
		}
	}
	if !r.Done() {
		return nil, false
	}

	mm := &message{}
	m := &mm.m
	var (
		ents []entry
		data []byte
	)
	if nEntries > 0 {
		m.Entries = make([]*raftpb.Entry, nEntries)
		ents = make([]entry, nEntries)
		data = make([]byte, 0, dataSize)
	}
	set := func(i int, v uint64) *uint64 {
		mm.u[i] = v
		return &mm.u[i]
	}
	next := 0
	r = protofield.NewReader(b)
	r.AllowRepeat(7)
	for r.Next() {
		switch num := r.Number(); {
		case r.IsBytes(12):
			m.Context = append(make([]byte, 0, len(r.Bytes())), r.Bytes()...) // not nil when empty, as proto2 has it
		case r.IsBytes(7):
			en := &ents[next]
			var ok bool
			if data, ok = decodeEntry(r.Bytes(), en, data); !ok {
				return nil, false
			}
			m.Entries[next] = &en.e
			next++
		case !r.IsVarint(num):
			return nil, false // a snapshot, local responses
		case num == 1:
			v := r.Varint()
			if v > math.MaxInt32 {
				return nil, false
			}
			if _, ok := raftpb.MessageType_name[int32(v)]; !ok {
				return nil, false // a closed enum's unknown value: proto keeps it as unknown
			}
			mm.typ = raftpb.MessageType(v)
			m.Type = &mm.typ
		case num == 2:
			m.To = set(0, r.Varint())
		case num == 3:
			m.From = set(1, r.Varint())
		case num == 4:
			m.Term = set(2, r.Varint())
		case num == 5:
			m.LogTerm = set(3, r.Varint())
		case num == 6:
			m.Index = set(4, r.Varint())
		case num == 8:
			m.Commit = set(5, r.Varint())
		case num == 13:
			m.Vote = set(6, r.Varint())
		case num == 10:
			mm.rej = r.Varint() != 0
			m.Reject = &mm.rej
		case num == 11:
			m.RejectHint = set(7, r.Varint())
		default:
			return nil, false
		}
	}
	return m, r.Done()
}

// entryDataSize checks that e is an entry decodeEntry takes and returns
// the size of its data.
func entryDataSize(e []byte) (int, bool) {
	size := 0
	r := protofield.NewReader(e)
	for r.Next() {
		switch num := r.Number(); {
		case r.IsBytes(4):
			size += len(r.Bytes())
		case num >= 1 && num <= 3 && r.IsVarint(num):
			// Another type (a later raft's) goes to proto, which knows
			// whether it is one.
			if num == 1 && r.Varint() > uint64(raftpb.EntryConfChangeV2) {
				return 0, false
			}
		default:
			return 0, false
		}
	}
	return size, r.Done()
}

// decodeEntry decodes e, which entryDataSize accepted, into en, copying
// its data onto the end of data (whose capacity has room for it). It
// returns data, and false if e is not such an entry after all.
func decodeEntry(e []byte, en *entry, data []byte) ([]byte, bool) {
	r := protofield.NewReader(e)
	for r.Next() {
		switch {
		case r.IsBytes(4):
			d := r.Bytes()
			if len(data)+len(d) > cap(data) {
				return data, false
			}
			start := len(data)
			data = append(data, d...)
			// Each entry's data ends at its own capacity, so nobody
			// appends over the next; present but empty is not nil (data
			// is not), as proto2 has it.
			en.e.Data = data[start:len(data):len(data)]
		case r.IsVarint(1):
			en.typ = raftpb.EntryType(r.Varint())
			en.e.Type = &en.typ
		case r.IsVarint(2):
			en.term = r.Varint()
			en.e.Term = &en.term
		case r.IsVarint(3):
			en.index = r.Varint()
			en.e.Index = &en.index
		default:
			return data, false
		}
	}
	return data, r.Done()
}
