package protofield

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// A Reader walks the fields of one encoded message, for a decoder that
// knows the message's shape and leaves everything else to proto.Unmarshal.
// Next stops, and Done then reports false, at what such a decoder cannot
// take as proto would:
//   - malformed data: a bad tag, a truncated value, a field number 0;
//   - a wire type other than varint and bytes (fixed32, fixed64, groups);
//   - a field number above 63 (none of the messages decoded this way has
//     one; a decoder refuses numbers it does not know anyway);
//   - a field given a second time, unless AllowRepeat named it: proto
//     keeps the last value of a scalar and merges a message, which a
//     decoder that sets each field once would get wrong.
//
// The usual loop:
//
//	r := protofield.NewReader(b)
//	for r.Next() {
//		switch {
//		case r.IsVarint(1):
//			m.Id = r.Varint()
//		case r.IsBytes(2):
//			if m.Name, ok = r.Text(); !ok {
//				return false
//			}
//		default:
//			return false // a field this decoder does not know
//		}
//	}
//	return r.Done()
type Reader struct {
	// msg is the message, never changed: Next moves offsets only, so
	// that it stores no pointers (a store of a pointer costs a write
	// barrier while the garbage collector runs).
	msg        []byte
	pos        int    // the offset of the next field
	seen       uint64 // bit n: field n was read
	repeatable uint64 // bit n: field n may be read again
	bad        bool

	num        protowire.Number
	typ        protowire.Type
	value      uint64 // a varint field's value
	start, end int    // a bytes field's value: msg[start:end]
}

// maxNumber is the largest field number a Reader takes: the bits of seen.
const maxNumber = 63

// NewReader returns a Reader of the message encoded in b.
func NewReader(b []byte) Reader { return Reader{msg: b} }

// AllowRepeat lets field num occur more than once (a repeated field).
func (r *Reader) AllowRepeat(num protowire.Number) {
	if num >= 0 && num <= maxNumber {
		r.repeatable |= 1 << num
	}
}

// Next reads the next field and reports whether there was one it takes;
// it returns false at the end of the message and at anything the Reader
// refuses (see Reader; Done tells which). A one-byte tag, value or length
// (the common case) it decodes itself, anything longer with protowire.
func (r *Reader) Next() bool {
	b := r.msg[r.pos:]
	if len(b) == 0 || r.bad {
		return false
	}
	var (
		num protowire.Number
		typ protowire.Type
		n   int
	)
	if b[0] < 0x80 {
		num, typ, n = protowire.Number(b[0]>>3), protowire.Type(b[0]&7), 1
	} else {
		num, typ, n = protowire.ConsumeTag(b)
	}
	if n < 0 || num < 1 || num > maxNumber || r.seen&^r.repeatable&(1<<num) != 0 {
		r.bad = true
		return false
	}
	r.seen |= 1 << num
	pos := r.pos + n
	b = b[n:]
	switch {
	case typ == protowire.VarintType && len(b) > 0 && b[0] < 0x80:
		r.value, n = uint64(b[0]), 1
	case typ == protowire.VarintType:
		r.value, n = protowire.ConsumeVarint(b)
	case typ == protowire.BytesType && len(b) > 0 && b[0] < 0x80:
		if l := int(b[0]); l < len(b) {
			r.start, r.end, n = pos+1, pos+1+l, 1+l
		} else {
			n = -1 // truncated
		}
	case typ == protowire.BytesType:
		var v []byte
		if v, n = protowire.ConsumeBytes(b); n >= 0 {
			r.start, r.end = pos+n-len(v), pos+n
		}
	default:
		n = -1
	}
	if n < 0 {
		r.bad = true
		return false
	}
	r.num, r.typ, r.pos = num, typ, pos+n
	return true
}

// Done reports whether Next read the whole message: it is false when
// Next stopped at something it refuses.
func (r *Reader) Done() bool { return !r.bad && r.pos == len(r.msg) }

// Number is the field Next read.
func (r *Reader) Number() protowire.Number { return r.num }

// IsVarint reports whether Next read field num as a varint.
func (r *Reader) IsVarint(num protowire.Number) bool {
	return r.num == num && r.typ == protowire.VarintType
}

// IsBytes reports whether Next read field num as bytes (a string, bytes
// or a message).
func (r *Reader) IsBytes(num protowire.Number) bool {
	return r.num == num && r.typ == protowire.BytesType
}

// Varint is the value of the varint field Next read. A bool is Varint()
// != 0, an int64 is int64(Varint()), a uint32 or int32 its low 32 bits,
// as proto decodes them.
func (r *Reader) Varint() uint64 { return r.value }

// Bytes is the value of the bytes field Next read. It aliases the
// message: copy it to keep it past the message's buffer.
func (r *Reader) Bytes() []byte { return r.msg[r.start:r.end] }

// Text is the value of the bytes field Next read as a proto3 string, and
// whether it is one: proto.Unmarshal refuses a string that is not UTF-8.
func (r *Reader) Text() (string, bool) {
	b := r.Bytes()
	if !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}
