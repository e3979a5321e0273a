// Package raftwire encodes raft's entries and messages as proto.Marshal
// does, byte for byte, without its reflection: every member encodes every
// entry it logs (internal/storage) and every message it sends
// (internal/transport), and proto's reflective marshalling of raftpb's
// proto2 fields was a few percent of the whole system's CPU under load.
// What the encoders do not know (a snapshot, nested responses, unknown
// fields) they leave to proto: Append reports false. The decoders are in
// internal/transport, the only package that reads messages.
package raftwire

import (
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// AppendEntry appends e as proto.Marshal encodes it, or reports false
// (and appends nothing) when e has unknown fields.
func AppendEntry(b []byte, e *raftpb.Entry) ([]byte, bool) {
	if len(e.ProtoReflect().GetUnknown()) > 0 {
		return b, false
	}
	return appendEntry(b, e), true
}

// appendEntry encodes e's fields in number order, each only when set.
func appendEntry(b []byte, e *raftpb.Entry) []byte {
	if e.Type != nil {
		b = appendVarint(b, 1, uint64(*e.Type))
	}
	if e.Term != nil {
		b = appendVarint(b, 2, *e.Term)
	}
	if e.Index != nil {
		b = appendVarint(b, 3, *e.Index)
	}
	if e.Data != nil {
		b = appendBytes(b, 4, e.Data)
	}
	return b
}

// appendBytes appends a bytes field numbered below 16.
func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = appendLen(b, num, len(v))
	return append(b, v...)
}

// appendLen appends the tag and length of a bytes field numbered below 16.
func appendLen(b []byte, num protowire.Number, n int) []byte {
	tag := byte(num)<<3 | byte(protowire.BytesType)
	if n < 0x80 {
		return append(b, tag, byte(n))
	}
	return protowire.AppendVarint(append(b, tag), uint64(n))
}

func entrySize(e *raftpb.Entry) int {
	n := 0
	if e.Type != nil {
		n += 1 + protowire.SizeVarint(uint64(*e.Type))
	}
	if e.Term != nil {
		n += 1 + protowire.SizeVarint(*e.Term)
	}
	if e.Index != nil {
		n += 1 + protowire.SizeVarint(*e.Index)
	}
	if e.Data != nil {
		n += 1 + protowire.SizeBytes(len(e.Data))
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
	n := 0
	for _, v := range [...]*uint64{m.To, m.From, m.Term, m.LogTerm, m.Index} {
		if v != nil {
			n += 1 + protowire.SizeVarint(*v)
		}
	}
	if m.Type != nil {
		n += 1 + protowire.SizeVarint(uint64(*m.Type))
	}
	for _, e := range m.Entries {
		if len(e.ProtoReflect().GetUnknown()) > 0 {
			return 0, false
		}
		n += 1 + protowire.SizeBytes(entrySize(e))
	}
	if m.Commit != nil {
		n += 1 + protowire.SizeVarint(*m.Commit)
	}
	if m.Reject != nil {
		n += 2
	}
	if m.RejectHint != nil {
		n += 1 + protowire.SizeVarint(*m.RejectHint)
	}
	if m.Context != nil {
		n += 1 + protowire.SizeBytes(len(m.Context))
	}
	if m.Vote != nil {
		n += 1 + protowire.SizeVarint(*m.Vote)
	}
	return n, true
}

// AppendMessage appends m as proto.Marshal encodes it. Call it only for a
// message MessageSize said it encodes.
func AppendMessage(b []byte, m *raftpb.Message) []byte {
	if m.Type != nil {
		b = appendVarint(b, 1, uint64(*m.Type))
	}
	for i, v := range [...]*uint64{m.To, m.From, m.Term, m.LogTerm, m.Index} {
		if v != nil {
			b = appendVarint(b, protowire.Number(2+i), *v)
		}
	}
	for _, e := range m.Entries {
		b = appendEntry(appendLen(b, 7, entrySize(e)), e)
	}
	if m.Commit != nil {
		b = appendVarint(b, 8, *m.Commit)
	}
	if m.Reject != nil {
		b = appendVarint(b, 10, protowire.EncodeBool(*m.Reject))
	}
	if m.RejectHint != nil {
		b = appendVarint(b, 11, *m.RejectHint)
	}
	if m.Context != nil {
		b = appendBytes(b, 12, m.Context)
	}
	if m.Vote != nil {
		b = appendVarint(b, 13, *m.Vote)
	}
	return b
}

// appendVarint appends a varint field numbered below 16 (a one-byte tag),
// with the common small values inline.
func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(num)<<3, byte(v))
	}
	return protowire.AppendVarint(append(b, byte(num)<<3), v)
}
