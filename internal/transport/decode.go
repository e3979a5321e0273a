package transport

import (
	"math"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

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
	seenGroup := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		switch {
		case num == 2 && typ == protowire.VarintType && !seenGroup:
			env.GroupId, n = protowire.ConsumeVarint(b)
			seenGroup = true
		case num == 3 && typ == protowire.BytesType:
			var m []byte
			m, n = protowire.ConsumeBytes(b)
			env.Messages = append(env.Messages, m)
		default:
			return nil, false // the Hello, among others
		}
		if n < 0 {
			return nil, false
		}
		b = b[n:]
	}
	return env, true
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
	// A first pass counts the entries and their data, which are then
	// allocated together.
	var (
		seen     uint64
		nEntries int
		dataSize int
	)
	for rest := b; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 || num > 63 {
			return nil, false
		}
		if num != 7 {
			if seen&(1<<num) != 0 {
				return nil, false // proto keeps the last
			}
			seen |= 1 << num
		}
		rest = rest[n:]
		if num == 7 && typ == protowire.BytesType {
			e, n := protowire.ConsumeBytes(rest)
			if n < 0 {
				return nil, false
			}
			size, ok := entryDataSize(e)
			if !ok {
				return nil, false
			}
			nEntries++
			dataSize += size
			rest = rest[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, rest); n < 0 {
			return nil, false
		}
		rest = rest[n:]
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
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		b = b[n:]
		if typ == protowire.BytesType && num == 12 {
			c, n := protowire.ConsumeBytes(b)
			b = b[n:]
			m.Context = append(make([]byte, 0, len(c)), c...) // not nil when empty, as proto2 has it
			continue
		}
		if typ == protowire.BytesType {
			if num != 7 {
				return nil, false // a snapshot, local responses
			}
			e, n := protowire.ConsumeBytes(b)
			b = b[n:]
			en := &ents[next]
			if data, n = decodeEntry(e, en, data); n < 0 {
				return nil, false
			}
			m.Entries[next] = &en.e
			next++
			continue
		}
		if typ != protowire.VarintType {
			return nil, false
		}
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		switch num {
		case 1:
			if v > math.MaxInt32 {
				return nil, false
			}
			if _, ok := raftpb.MessageType_name[int32(v)]; !ok {
				return nil, false // a closed enum's unknown value: proto keeps it as unknown
			}
			mm.typ = raftpb.MessageType(v)
			m.Type = &mm.typ
		case 2:
			m.To = set(0, v)
		case 3:
			m.From = set(1, v)
		case 4:
			m.Term = set(2, v)
		case 5:
			m.LogTerm = set(3, v)
		case 6:
			m.Index = set(4, v)
		case 8:
			m.Commit = set(5, v)
		case 13:
			m.Vote = set(6, v)
		case 10:
			mm.rej = v != 0
			m.Reject = &mm.rej
		case 11:
			m.RejectHint = set(7, v)
		default:
			return nil, false
		}
	}
	return m, true
}

// entryDataSize checks that e is an entry decodeEntry takes and returns
// the size of its data.
func entryDataSize(e []byte) (int, bool) {
	var seen uint64
	size := 0
	for len(e) > 0 {
		num, typ, n := protowire.ConsumeTag(e)
		if n < 0 || num < 1 || num > 4 || seen&(1<<num) != 0 {
			return 0, false
		}
		seen |= 1 << num
		e = e[n:]
		switch {
		case num == 4 && typ == protowire.BytesType:
			d, n := protowire.ConsumeBytes(e)
			if n < 0 {
				return 0, false
			}
			size += len(d)
			e = e[n:]
		case num != 4 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(e)
			// Another type (a later raft's) goes to proto, which knows
			// whether it is one.
			if n < 0 || num == 1 && v > uint64(raftpb.EntryConfChangeV2) {
				return 0, false
			}
			e = e[n:]
		default:
			return 0, false
		}
	}
	return size, true
}

// decodeEntry decodes e, which entryDataSize accepted, into en, copying
// its data onto the end of data (whose capacity has room for it). It
// returns data and a negative n if e is not such an entry after all.
func decodeEntry(e []byte, en *entry, data []byte) ([]byte, int) {
	for len(e) > 0 {
		num, typ, n := protowire.ConsumeTag(e)
		if n < 0 {
			return data, -1
		}
		e = e[n:]
		if typ == protowire.BytesType && num == 4 {
			d, n := protowire.ConsumeBytes(e)
			if n < 0 || len(data)+len(d) > cap(data) {
				return data, -1
			}
			start := len(data)
			data = append(data, d...)
			// Each entry's data ends at its own capacity, so nobody
			// appends over the next; present but empty is not nil (data
			// is not), as proto2 has it.
			en.e.Data = data[start:len(data):len(data)]
			e = e[n:]
			continue
		}
		v, n := protowire.ConsumeVarint(e)
		if n < 0 || typ != protowire.VarintType {
			return data, -1
		}
		e = e[n:]
		switch num {
		case 1:
			en.typ = raftpb.EntryType(v)
			en.e.Type = &en.typ
		case 2:
			en.term = v
			en.e.Term = &en.term
		case 3:
			en.index = v
			en.e.Index = &en.index
		default:
			return data, -1
		}
	}
	return data, 0
}
