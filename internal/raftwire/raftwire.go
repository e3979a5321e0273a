// Package raftwire encodes raft's entries and messages as proto.Marshal
// does, byte for byte, without its reflection: every member encodes every
// entry it logs (internal/storage) and every message it sends
// (internal/transport), and proto's reflective marshalling of raftpb's
// proto2 fields costs far more than writing the bytes.
// What the encoders do not know (a snapshot, nested responses, unknown
// fields) they leave to proto: Append reports false. The decoders are in
// internal/transport, the only package that reads messages.
package raftwire

import (
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/batonlock/baton/api/protofield"
)

// AppendEntry appends e as proto.Marshal encodes it, or reports false
// (and appends nothing) when e has unknown fields.
func AppendEntry(b []byte, e *raftpb.Entry) ([]byte, bool) {
	if len(e.ProtoReflect().GetUnknown()) > 0 {
		return b, false
	}
	return appendEntry(b, e), true
}

// appendEntry encodes e's fields in number order, each only when set
// (raftpb's fields are proto2's, with presence).
func appendEntry(b []byte, e *raftpb.Entry) []byte {
	if e.Type != nil {
		b = protofield.AppendPresentUint(b, 1, uint64(*e.Type))
	}
	if e.Term != nil {
		b = protofield.AppendPresentUint(b, 2, *e.Term)
	}
	if e.Index != nil {
		b = protofield.AppendPresentUint(b, 3, *e.Index)
	}
	if e.Data != nil {
		b = protofield.AppendPresentBytes(b, 4, e.Data)
	}
	return b
}

func entrySize(e *raftpb.Entry) int {
	n := 0
	if e.Type != nil {
		n += protofield.SizePresentUint(1, uint64(*e.Type))
	}
	if e.Term != nil {
		n += protofield.SizePresentUint(2, *e.Term)
	}
	if e.Index != nil {
		n += protofield.SizePresentUint(3, *e.Index)
	}
	if e.Data != nil {
		n += protofield.SizePresentBytes(4, len(e.Data))
	}
	return n
}

// MessageSize is the size of m's encoding, and whether AppendMessage
// encodes it: not a message with a snapshot, nested responses or unknown
// fields, in it or in its entries.
func MessageSize(m *raftpb.Message) (int, bool) {
	if m.Snapshot != nil || len(m.Responses) > 0 || len(m.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	// Each field by its constant number, which lets the compiler fold
	// the tag's size and encoding away.
	n := 0
	if m.Type != nil {
		n += protofield.SizePresentUint(1, uint64(*m.Type))
	}
	if m.To != nil {
		n += protofield.SizePresentUint(2, *m.To)
	}
	if m.From != nil {
		n += protofield.SizePresentUint(3, *m.From)
	}
	if m.Term != nil {
		n += protofield.SizePresentUint(4, *m.Term)
	}
	if m.LogTerm != nil {
		n += protofield.SizePresentUint(5, *m.LogTerm)
	}
	if m.Index != nil {
		n += protofield.SizePresentUint(6, *m.Index)
	}
	for _, e := range m.Entries {
		if len(e.ProtoReflect().GetUnknown()) > 0 {
			return 0, false
		}
		n += protofield.SizeMessage(7, entrySize(e))
	}
	if m.Commit != nil {
		n += protofield.SizePresentUint(8, *m.Commit)
	}
	if m.Reject != nil {
		n += protofield.SizePresentUint(10, protowire.EncodeBool(*m.Reject))
	}
	if m.RejectHint != nil {
		n += protofield.SizePresentUint(11, *m.RejectHint)
	}
	if m.Context != nil {
		n += protofield.SizePresentBytes(12, len(m.Context))
	}
	if m.Vote != nil {
		n += protofield.SizePresentUint(13, *m.Vote)
	}
	return n, true
}

// AppendMessage appends m as proto.Marshal encodes it. Call it only for a
// message MessageSize said it encodes.
func AppendMessage(b []byte, m *raftpb.Message) []byte {
	if m.Type != nil {
		b = protofield.AppendPresentUint(b, 1, uint64(*m.Type))
	}
	if m.To != nil {
		b = protofield.AppendPresentUint(b, 2, *m.To)
	}
	if m.From != nil {
		b = protofield.AppendPresentUint(b, 3, *m.From)
	}
	if m.Term != nil {
		b = protofield.AppendPresentUint(b, 4, *m.Term)
	}
	if m.LogTerm != nil {
		b = protofield.AppendPresentUint(b, 5, *m.LogTerm)
	}
	if m.Index != nil {
		b = protofield.AppendPresentUint(b, 6, *m.Index)
	}
	for _, e := range m.Entries {
		b = appendEntry(protofield.AppendMessageHeader(b, 7, entrySize(e)), e)
	}
	if m.Commit != nil {
		b = protofield.AppendPresentUint(b, 8, *m.Commit)
	}
	if m.Reject != nil {
		b = protofield.AppendPresentUint(b, 10, protowire.EncodeBool(*m.Reject))
	}
	if m.RejectHint != nil {
		b = protofield.AppendPresentUint(b, 11, *m.RejectHint)
	}
	if m.Context != nil {
		b = protofield.AppendPresentBytes(b, 12, m.Context)
	}
	if m.Vote != nil {
		b = protofield.AppendPresentUint(b, 13, *m.Vote)
	}
	return b
}
