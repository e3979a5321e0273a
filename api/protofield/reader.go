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
	b          []byte
	seen       uint64 // bit n: field n was read
	repeatable uint64 // bit n: field n may be read again
	bad        bool

	num   protowire.Number
	typ   protowire.Type
	value uint64 // a varint field's value
	data  []byte // a bytes field's value, aliasing the message
}

// maxNumber is the largest field number a Reader takes: the bits of seen.
const maxNumber = 63

// NewReader returns a Reader of the message encoded in b.
func NewReader(b []byte) Reader { return Reader{b: b} }

// AllowRepeat lets field num occur more than once (a repeated field).
func (r *Reader) AllowRepeat(num protowire.Number) {
	if num >= 0 && num <= maxNumber {
		r.repeatable |= 1 << num
	}
}

// Next reads the next field and reports whether there was one it takes;
// it returns false at the end of the message and at anything the Reader
// refuses (see Reader; Done tells which).
func (r *Reader) Next() bool {
	if len(r.b) == 0 || r.bad {
		return false
	}
	num, typ, n := protowire.ConsumeTag(r.b)
	if n < 0 || num > maxNumber || r.seen&^r.repeatable&(1<<num) != 0 {
		r.bad = true
		return false
	}
	r.seen |= 1 << num
	rest := r.b[n:]
	switch typ {
	case protowire.VarintType:
		r.value, n = protowire.ConsumeVarint(rest)
	case protowire.BytesType:
		r.data, n = protowire.ConsumeBytes(rest)
	default:
		n = -1
	}
	if n < 0 {
		r.bad = true
		return false
	}
	r.num, r.typ, r.b = num, typ, rest[n:]
	return true
}

// Done reports whether Next read the whole message: it is false when
// Next stopped at something it refuses.
func (r *Reader) Done() bool { return !r.bad && len(r.b) == 0 }

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
func (r *Reader) Bytes() []byte { return r.data }

// Text is the value of the bytes field Next read as a proto3 string, and
// whether it is one: proto.Unmarshal refuses a string that is not UTF-8.
func (r *Reader) Text() (string, bool) {
	if !utf8.Valid(r.data) {
		return "", false
	}
	return string(r.data), true
}
