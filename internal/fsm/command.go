package fsm

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// DecodeCommand decodes a log entry's command without proto's reflection,
// for the commands every cycle of a lock makes: Acquire and Release. Every
// member decodes every entry it applies, and through proto.Unmarshal (plus
// the check for unknown fields that follows it) that was a sixth of a
// follower's CPU under load.
//
// It answers only what it is sure of: ok is false, and the caller decodes
// with proto (which also finds unknown fields and refuses what does not
// decode), for any other operation, a field number it does not know (a
// newer release's field), a known number with another wire type, a field
// given twice, a string that is not UTF-8 or bytes that do not parse. When
// ok is true, cmd is what proto.Unmarshal would make of data, and it has
// no unknown fields (FuzzDecodeCommand holds it to that).
func DecodeCommand(data []byte) (cmd *fsmpb.Command, ok bool) {
	var d Decoder
	return d.Decode(data)
}

// A Decoder decodes the commands of a batch of entries as DecodeCommand
// does, taking their memory from blocks it allocates for many commands at
// once: a command and its operation are otherwise three objects (the
// command, the operation and the wrapper that puts it in the oneof), and
// every member decodes every entry it applies. What Decode returns is never
// reused, so a caller may keep it as long as it likes; it keeps its block
// alive as long.
//
// Expect sizes the blocks: the number of entries the caller is about to
// decode. The zero Decoder allocates one command at a time.
type Decoder struct {
	left int // commands still expected
	cmds []fsmpb.Command
	acqs []acquireOp
	rels []releaseOp
	// hashes is room for the commands' secret hashes, which are copied
	// out of data (it may be a buffer that is reused).
	hashes []byte
}

// maxBlock bounds a Decoder's blocks, so that one long batch (a member
// catching up) does not allocate for all of it at once.
const maxBlock = 256

type acquireOp struct {
	w  fsmpb.Command_Acquire
	op fsmpb.Acquire
}

type releaseOp struct {
	w  fsmpb.Command_Release
	op fsmpb.Release
}

// NewAcquire returns a command holding an Acquire, op, in one allocation
// instead of three.
func NewAcquire() (cmd *fsmpb.Command, op *fsmpb.Acquire) {
	c := &struct {
		cmd fsmpb.Command
		acquireOp
	}{}
	c.w.Acquire = &c.op
	c.cmd.Op = &c.w
	return &c.cmd, &c.op
}

// NewRelease returns a command holding a Release, op, in one allocation
// instead of three.
func NewRelease() (cmd *fsmpb.Command, op *fsmpb.Release) {
	c := &struct {
		cmd fsmpb.Command
		releaseOp
	}{}
	c.w.Release = &c.op
	c.cmd.Op = &c.w
	return &c.cmd, &c.op
}

// Expect tells d that about n commands follow.
func (d *Decoder) Expect(n int) { d.left = n }

// block is how many commands a new block holds; opBlock how many
// operations of one kind (a lock's cycle is an acquire and a release, so a
// batch is about half of each).
func (d *Decoder) block() int   { return min(max(d.left, 1), maxBlock) }
func (d *Decoder) opBlock() int { return min(max((d.left+1)/2, 1), maxBlock) }

// Decode is DecodeCommand.
func (d *Decoder) Decode(data []byte) (cmd *fsmpb.Command, ok bool) {
	if len(d.cmds) == 0 {
		d.cmds = make([]fsmpb.Command, d.block())
	}
	cmd, d.cmds = &d.cmds[0], d.cmds[1:]
	d.left--
	var seen uint32
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 || num > 31 || seen&(1<<num) != 0 {
			return nil, false
		}
		seen |= 1 << num
		data = data[n:]
		switch {
		case num >= 1 && num <= 6 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(data)
			if n < 0 {
				return nil, false
			}
			data = data[n:]
			switch num {
			case 1:
				cmd.SessionId = v
			case 2:
				cmd.Seq = v
			case 3:
				cmd.MinUnackedSeq = v
			case 4:
				cmd.WallTimeUnixNano = int64(v)
			case 5:
				cmd.Proposer = v
			case 6:
				cmd.ProposalId = v
			}
		case num == 7 && typ == protowire.BytesType:
			b, n := protowire.ConsumeBytes(data)
			if n < 0 {
				return nil, false
			}
			data = data[n:]
			if len(b) > 0 {
				if len(d.hashes) < len(b) {
					d.hashes = make([]byte, max(d.block()*SecretHashLen, len(b)))
				}
				cmd.SecretHash = d.hashes[:len(b):len(b)]
				d.hashes = d.hashes[len(b):]
				copy(cmd.SecretHash, b)
			} else {
				cmd.SecretHash = []byte{} // as proto: present, empty
			}
		case num == 8 && typ == protowire.BytesType:
			b, n := protowire.ConsumeBytes(data)
			if n < 0 {
				return nil, false
			}
			data = data[n:]
			text, ok := str(b)
			if !ok {
				return nil, false
			}
			cmd.Principal = text
		case (num == 14 || num == 15) && typ == protowire.BytesType:
			if cmd.Op != nil {
				return nil, false // two operations: proto keeps the last
			}
			b, n := protowire.ConsumeBytes(data)
			if n < 0 {
				return nil, false
			}
			data = data[n:]
			if num == 14 {
				if len(d.acqs) == 0 {
					d.acqs = make([]acquireOp, d.opBlock())
				}
				a := &d.acqs[0]
				d.acqs = d.acqs[1:]
				if !decodeAcquire(&a.op, b) {
					return nil, false
				}
				a.w.Acquire = &a.op
				cmd.Op = &a.w
			} else {
				if len(d.rels) == 0 {
					d.rels = make([]releaseOp, d.opBlock())
				}
				r := &d.rels[0]
				d.rels = d.rels[1:]
				if !decodeRelease(&r.op, b) {
					return nil, false
				}
				r.w.Release = &r.op
				cmd.Op = &r.w
			}
		default:
			return nil, false
		}
	}
	if cmd.Op == nil {
		return nil, false
	}
	return cmd, true
}

// fieldScanner walks the fields of a small message, refusing (ok false)
// what DecodeCommand leaves to proto.
type fieldScanner struct {
	b    []byte
	seen uint32
}

// next returns the next field's number and its varint value or bytes.
func (s *fieldScanner) next() (num protowire.Number, v uint64, b []byte, isBytes, ok bool) {
	num, typ, n := protowire.ConsumeTag(s.b)
	if n < 0 || num > 31 || s.seen&(1<<num) != 0 {
		return 0, 0, nil, false, false
	}
	s.seen |= 1 << num
	s.b = s.b[n:]
	switch typ {
	case protowire.VarintType:
		v, n = protowire.ConsumeVarint(s.b)
	case protowire.BytesType:
		b, n = protowire.ConsumeBytes(s.b)
		isBytes = true
	default:
		return 0, 0, nil, false, false
	}
	if n < 0 {
		return 0, 0, nil, false, false
	}
	s.b = s.b[n:]
	return num, v, b, isBytes, true
}

// str converts a proto3 string field, which must be UTF-8.
func str(b []byte) (string, bool) {
	if !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

// decodeAcquire decodes b into op, a zero Acquire.
func decodeAcquire(op *fsmpb.Acquire, b []byte) bool {
	s := fieldScanner{b: b}
	for len(s.b) > 0 {
		num, v, b, isBytes, ok := s.next()
		if !ok {
			return false
		}
		switch {
		case (num == 1 || num == 2) && isBytes:
			text, ok := str(b)
			if !ok {
				return false
			}
			if num == 1 {
				op.Lock = text
			} else {
				op.OwnerKey = text
			}
		case num >= 3 && num <= 7 && !isBytes:
			switch num {
			case 3:
				op.Wait = v != 0
			case 4:
				op.WaitTimeoutNanos = int64(v)
			case 5:
				op.Shared = v != 0
			case 6:
				op.Limit = uint32(v)
			case 7:
				op.HoldLimitNanos = int64(v)
			}
		default:
			return false
		}
	}
	return true
}

// decodeRelease decodes b into op, a zero Release.
func decodeRelease(op *fsmpb.Release, b []byte) bool {
	s := fieldScanner{b: b}
	for len(s.b) > 0 {
		num, v, b, isBytes, ok := s.next()
		if !ok {
			return false
		}
		switch {
		case (num == 1 || num == 3) && isBytes:
			text, ok := str(b)
			if !ok {
				return false
			}
			if num == 1 {
				op.Lock = text
			} else {
				op.OwnerKey = text
			}
		case num == 2 && !isBytes:
			op.Token = v
		default:
			return false
		}
	}
	return true
}

// EncodeCommand encodes cmd as proto.Marshal does, byte for byte, without
// proto's reflection, for the commands every cycle of a lock makes:
// Acquire and Release (the leader encodes every command it proposes). For
// any other operation, a command or operation carrying unknown fields, or
// a string that is not UTF-8 (which proto refuses), ok is false and the
// caller encodes with proto. TestEncodeCommand and FuzzEncodeCommand hold
// it to proto.Marshal.
func EncodeCommand(cmd *fsmpb.Command) (data []byte, ok bool) {
	if len(cmd.ProtoReflect().GetUnknown()) > 0 || !utf8.ValidString(cmd.Principal) {
		return nil, false
	}
	var opNum protowire.Number
	var opSize int
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_Acquire:
		a := op.Acquire
		if a == nil || len(a.ProtoReflect().GetUnknown()) > 0 || !utf8.ValidString(a.Lock) || !utf8.ValidString(a.OwnerKey) {
			return nil, false
		}
		opNum = 14
		opSize = sizeString(1, a.Lock) + sizeString(2, a.OwnerKey) + sizeBool(3, a.Wait) +
			sizeUint(4, uint64(a.WaitTimeoutNanos)) + sizeBool(5, a.Shared) +
			sizeUint(6, uint64(a.Limit)) + sizeUint(7, uint64(a.HoldLimitNanos))
	case *fsmpb.Command_Release:
		r := op.Release
		if r == nil || len(r.ProtoReflect().GetUnknown()) > 0 || !utf8.ValidString(r.Lock) || !utf8.ValidString(r.OwnerKey) {
			return nil, false
		}
		opNum = 15
		opSize = sizeString(1, r.Lock) + sizeUint(2, r.Token) + sizeString(3, r.OwnerKey)
	default:
		return nil, false
	}
	head := [...]uint64{cmd.SessionId, cmd.Seq, cmd.MinUnackedSeq, uint64(cmd.WallTimeUnixNano), cmd.Proposer, cmd.ProposalId}
	size := sizeMessage(opNum, opSize) + sizeBytes(7, cmd.SecretHash) + sizeString(8, cmd.Principal)
	for i, v := range head {
		size += sizeUint(protowire.Number(i+1), v)
	}
	b := make([]byte, 0, size)
	for i, v := range head {
		b = appendUint(b, protowire.Number(i+1), v)
	}
	b = appendBytes(b, 7, cmd.SecretHash)
	b = appendString(b, 8, cmd.Principal)
	b = protowire.AppendTag(b, opNum, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(opSize))
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_Acquire:
		a := op.Acquire
		b = appendString(b, 1, a.Lock)
		b = appendString(b, 2, a.OwnerKey)
		b = appendBool(b, 3, a.Wait)
		b = appendUint(b, 4, uint64(a.WaitTimeoutNanos))
		b = appendBool(b, 5, a.Shared)
		b = appendUint(b, 6, uint64(a.Limit))
		b = appendUint(b, 7, uint64(a.HoldLimitNanos))
	case *fsmpb.Command_Release:
		r := op.Release
		b = appendString(b, 1, r.Lock)
		b = appendUint(b, 2, r.Token)
		b = appendString(b, 3, r.OwnerKey)
	}
	return b, true
}
