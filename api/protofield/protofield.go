// Package protofield writes, sizes and reads single protobuf fields for
// Baton's hand-written codecs: the Sessions stream (api/wire), raft's
// entries and messages (internal/raftwire, internal/transport), the log's
// commands (internal/fsm). Those codecs encode byte for
// byte as proto.Marshal does and decode as proto.Unmarshal does, without
// proto's reflection, and they run once per message or entry.
//
// google.golang.org/protobuf/encoding/protowire stays the source of
// truth for the encoding; this package adds the idioms the codecs share
// on top of it: a field's tag with its value, proto3's omission of zero
// values, the sizes that go with them, and a Reader for messages whose
// shape the decoder knows. The tests hold every helper to protowire and
// proto.Marshal.
//
// It is outside internal/ because the client's codec (api/wire) uses it,
// and it imports the standard library and protowire only (archtest), so
// that the client can take it along when it becomes a module of its own.
//
// Most fields of these messages are numbered below 16 and hold small
// values: a one-byte tag and a one-byte value or length, which the
// appenders write directly, without protowire's general varint encoder;
// AppendPresentUint, which writes every field of raft's messages, and
// the sizes of scalars and messages are small enough for the compiler to
// inline. A field number must be valid: 1 to protowire.MaxValidNumber.
package protofield

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// The fields of proto3 without presence ("implicit presence"): proto.Marshal
// leaves out a zero value, so these append nothing for zero, false, "" or
// empty bytes, and size them 0.

// AppendUint appends a varint field (uint64, uint32, int32 or int64; a
// negative int is its ten-byte two's complement, as proto writes it,
// when the caller converts it as uint64(int64(v))) unless v is zero.
func AppendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return AppendPresentUint(b, num, v)
}

// SizeUint is the size AppendUint appends.
func SizeUint(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return sizeTag(num) + protowire.SizeVarint(v)
}

// AppendBool appends a bool field unless it is false.
func AppendBool(b []byte, num protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return AppendPresentUint(b, num, 1)
}

// SizeBool is the size AppendBool appends.
func SizeBool(num protowire.Number, v bool) int {
	if !v {
		return 0
	}
	return sizeTag(num) + 1
}

// AppendString appends a string field unless it is empty. proto.Marshal
// refuses a string that is not UTF-8; the caller checks that first
// (utf8.ValidString), or knows it.
func AppendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return append(appendLen(b, num, len(s)), s...)
}

// SizeString is the size AppendString appends.
func SizeString(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return sizeTag(num) + protowire.SizeBytes(len(s))
}

// AppendBytes appends a bytes field unless it is empty.
func AppendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return AppendPresentBytes(b, num, v)
}

// SizeBytes is the size AppendBytes appends.
func SizeBytes(num protowire.Number, v []byte) int {
	if len(v) == 0 {
		return 0
	}
	return sizeTag(num) + protowire.SizeBytes(len(v))
}

// The fields with presence (proto2's optional fields, as raftpb has them):
// proto.Marshal writes a field that is set even when its value is zero or
// empty, so these always append; the caller tests whether it is set.

// AppendPresentUint appends a varint field, even when v is zero.
func AppendPresentUint(b []byte, num protowire.Number, v uint64) []byte {
	if num < 16 && v < 0x80 {
		return append(b, byte(num)<<3, byte(v)) // a varint field's tag is num<<3
	}
	return appendVarintField(b, num, v)
}

// appendVarintField is AppendPresentUint for any number and value, kept
// out of line so that AppendPresentUint stays small enough to inline.
//
//go:noinline
func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	return appendVarint(appendTag(b, num, protowire.VarintType), v)
}

// SizePresentUint is the size AppendPresentUint appends.
func SizePresentUint(num protowire.Number, v uint64) int {
	return sizeTag(num) + protowire.SizeVarint(v)
}

// AppendPresentBytes appends a bytes field, even when v is empty: a set
// proto2 bytes field, or a message already encoded.
func AppendPresentBytes(b []byte, num protowire.Number, v []byte) []byte {
	return append(appendLen(b, num, len(v)), v...)
}

// SizePresentBytes is the size AppendPresentBytes appends for n bytes.
func SizePresentBytes(num protowire.Number, n int) int {
	return sizeTag(num) + protowire.SizeBytes(n)
}

// Message fields, which proto.Marshal writes whenever the message is set,
// even when it is empty.

// AppendMessageHeader appends the tag and length of a message field whose
// size bytes the caller appends next. The caller computes size first (the
// Size helpers, summed over the message's fields) because the length
// precedes the message.
func AppendMessageHeader(b []byte, num protowire.Number, size int) []byte {
	return appendLen(b, num, size)
}

// SizeMessage is the size of a message field whose message encodes in
// size bytes: its tag, its length and the message.
func SizeMessage(num protowire.Number, size int) int {
	return sizeTag(num) + protowire.SizeBytes(size)
}

// appendLen appends the tag and length of a length-delimited field, the
// common one-byte tag and length directly.
func appendLen(b []byte, num protowire.Number, n int) []byte {
	if num < 16 && n < 0x80 {
		return append(b, byte(num)<<3|byte(protowire.BytesType), byte(n))
	}
	return appendVarint(appendTag(b, num, protowire.BytesType), uint64(n))
}

func appendTag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	return appendVarint(b, protowire.EncodeTag(num, typ))
}

// appendVarint is protowire.AppendVarint as a loop, which the compiler
// inlines into appendVarintField and appendLen: a call fewer per field
// whose value takes more than a byte (a raft index, a lock token).
func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// sizeTag is protowire.SizeTag(num), in fewer steps for the inliner.
func sizeTag(num protowire.Number) int { return protowire.SizeVarint(uint64(num) << 3) }
