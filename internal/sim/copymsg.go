package sim

import (
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// copyMessage returns a deep copy of m, as the receiver of m would decode
// it from the wire: nothing of it aliases m, which its sender's raft log
// and off-heap buffers keep. The messages members send each other (all
// but snapshots) are copied with one allocation for the message and its
// fields, one for its entries and one for their data; anything else
// (a snapshot, local responses, unknown fields) goes to proto.Clone.
// TestCopyMessage holds it to proto.Clone, and to raftpb's fields.
func copyMessage(m *raftpb.Message) *raftpb.Message {
	if m.Snapshot != nil || len(m.Responses) > 0 || len(m.ProtoReflect().GetUnknown()) > 0 {
		return proto.Clone(m).(*raftpb.Message)
	}
	dataSize := 0
	for _, e := range m.Entries {
		if len(e.ProtoReflect().GetUnknown()) > 0 {
			return proto.Clone(m).(*raftpb.Message)
		}
		dataSize += len(e.Data)
	}
	c := &messageCopy{}
	cm := &c.m
	if m.Type != nil {
		c.typ = *m.Type
		cm.Type = &c.typ
	}
	if m.Reject != nil {
		c.reject = *m.Reject
		cm.Reject = &c.reject
	}
	for i, f := range [...]struct {
		dst **uint64
		src *uint64
	}{
		{&cm.To, m.To}, {&cm.From, m.From}, {&cm.Term, m.Term}, {&cm.LogTerm, m.LogTerm},
		{&cm.Index, m.Index}, {&cm.Commit, m.Commit}, {&cm.Vote, m.Vote}, {&cm.RejectHint, m.RejectHint},
	} {
		if f.src != nil {
			c.u[i] = *f.src
			*f.dst = &c.u[i]
		}
	}
	if m.Context != nil {
		cm.Context = append(make([]byte, 0, len(m.Context)), m.Context...)
	}
	if m.Entries != nil {
		cm.Entries = make([]*raftpb.Entry, len(m.Entries))
		ents := make([]entryCopy, len(m.Entries))
		data := make([]byte, 0, dataSize)
		for i, e := range m.Entries {
			ce := &ents[i]
			if e.Type != nil {
				ce.typ = *e.Type
				ce.e.Type = &ce.typ
			}
			if e.Term != nil {
				ce.term = *e.Term
				ce.e.Term = &ce.term
			}
			if e.Index != nil {
				ce.index = *e.Index
				ce.e.Index = &ce.index
			}
			if e.Data != nil {
				start := len(data)
				data = append(data, e.Data...)
				// Each entry's data ends at its own capacity, so nobody
				// appends over the next one's; present but empty stays
				// not nil, as proto2 has it.
				ce.e.Data = data[start:len(data):len(data)]
			}
			cm.Entries[i] = &ce.e
		}
	}
	return cm
}

// messageCopy is a raftpb.Message with room for its optional fields.
type messageCopy struct {
	m      raftpb.Message
	typ    raftpb.MessageType
	reject bool
	u      [8]uint64 // to, from, term, logTerm, index, commit, vote, rejectHint
}

// entryCopy is a raftpb.Entry with room for its optional fields.
type entryCopy struct {
	e     raftpb.Entry
	typ   raftpb.EntryType
	term  uint64
	index uint64
}
