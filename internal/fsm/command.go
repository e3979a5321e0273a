package fsm

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/batonlock/baton/api/protofield"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// DecodeCommand decodes a log entry's command without proto's reflection,
// for the commands every cycle of a lock makes: Acquire and Release. Every
// member decodes every entry it applies, and proto.Unmarshal (plus the
// check for unknown fields that follows it) costs a follower more CPU than
// applying the entry does.
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
	f := protofield.NewReader(data)
	for f.Next() {
		switch {
		case f.IsVarint(1):
			cmd.SessionId = f.Varint()
		case f.IsVarint(2):
			cmd.Seq = f.Varint()
		case f.IsVarint(3):
			cmd.MinUnackedSeq = f.Varint()
		case f.IsVarint(4):
			cmd.WallTimeUnixNano = int64(f.Varint())
		case f.IsVarint(5):
			cmd.Proposer = f.Varint()
		case f.IsVarint(6):
			cmd.ProposalId = f.Varint()
		case f.IsBytes(7):
			if b := f.Bytes(); len(b) > 0 {
				if len(d.hashes) < len(b) {
					d.hashes = make([]byte, max(d.block()*SecretHashLen, len(b)))
				}
				cmd.SecretHash = d.hashes[:len(b):len(b)]
				d.hashes = d.hashes[len(b):]
				copy(cmd.SecretHash, b)
			} else {
				cmd.SecretHash = []byte{} // as proto: present, empty
			}
		case f.IsBytes(8):
			text, ok := f.Text()
			if !ok {
				return nil, false
			}
			cmd.Principal = text
		case f.IsBytes(14) || f.IsBytes(15):
			if cmd.Op != nil {
				return nil, false // two operations: proto keeps the last
			}
			if f.Number() == 14 {
				if len(d.acqs) == 0 {
					d.acqs = make([]acquireOp, d.opBlock())
				}
				a := &d.acqs[0]
				d.acqs = d.acqs[1:]
				if !decodeAcquire(&a.op, f.Bytes()) {
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
				if !decodeRelease(&r.op, f.Bytes()) {
					return nil, false
				}
				r.w.Release = &r.op
				cmd.Op = &r.w
			}
		default:
			return nil, false
		}
	}
	if !f.Done() || cmd.Op == nil {
		return nil, false
	}
	return cmd, true
}

// decodeAcquire decodes b into op, a zero Acquire.
func decodeAcquire(op *fsmpb.Acquire, b []byte) bool {
	var ok bool
	f := protofield.NewReader(b)
	for f.Next() {
		switch {
		case f.IsBytes(1):
			if op.Lock, ok = f.Text(); !ok {
				return false
			}
		case f.IsBytes(2):
			if op.OwnerKey, ok = f.Text(); !ok {
				return false
			}
		case f.IsVarint(3):
			op.Wait = f.Varint() != 0
		case f.IsVarint(4):
			op.WaitTimeoutNanos = int64(f.Varint())
		case f.IsVarint(5):
			op.Shared = f.Varint() != 0
		case f.IsVarint(6):
			op.Limit = uint32(f.Varint())
		case f.IsVarint(7):
			op.HoldLimitNanos = int64(f.Varint())
		case f.IsVarint(8):
			op.LockDelayNanos = int64(f.Varint())
		default:
			return false
		}
	}
	return f.Done()
}

// decodeRelease decodes b into op, a zero Release.
func decodeRelease(op *fsmpb.Release, b []byte) bool {
	var ok bool
	f := protofield.NewReader(b)
	for f.Next() {
		switch {
		case f.IsBytes(1):
			if op.Lock, ok = f.Text(); !ok {
				return false
			}
		case f.IsVarint(2):
			op.Token = f.Varint()
		case f.IsBytes(3):
			if op.OwnerKey, ok = f.Text(); !ok {
				return false
			}
		default:
			return false
		}
	}
	return f.Done()
}

// EncodeCommand encodes cmd as proto.Marshal does, byte for byte, without
// proto's reflection, for the commands every cycle of a lock makes:
// Acquire and Release (the leader encodes every command it proposes). For
// any other operation, an Acquire with a value (an election's: rare), a command or operation carrying unknown fields, or
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
		if a == nil || len(a.ProtoReflect().GetUnknown()) > 0 || !utf8.ValidString(a.Lock) || !utf8.ValidString(a.OwnerKey) || a.Value != "" {
			return nil, false
		}
		opNum = 14
		opSize = protofield.SizeString(1, a.Lock) + protofield.SizeString(2, a.OwnerKey) + protofield.SizeBool(3, a.Wait) +
			protofield.SizeUint(4, uint64(a.WaitTimeoutNanos)) + protofield.SizeBool(5, a.Shared) +
			protofield.SizeUint(6, uint64(a.Limit)) + protofield.SizeUint(7, uint64(a.HoldLimitNanos)) +
			protofield.SizeUint(8, uint64(a.LockDelayNanos))
	case *fsmpb.Command_Release:
		r := op.Release
		if r == nil || len(r.ProtoReflect().GetUnknown()) > 0 || !utf8.ValidString(r.Lock) || !utf8.ValidString(r.OwnerKey) {
			return nil, false
		}
		opNum = 15
		opSize = protofield.SizeString(1, r.Lock) + protofield.SizeUint(2, r.Token) + protofield.SizeString(3, r.OwnerKey)
	default:
		return nil, false
	}
	head := [...]uint64{cmd.SessionId, cmd.Seq, cmd.MinUnackedSeq, uint64(cmd.WallTimeUnixNano), cmd.Proposer, cmd.ProposalId}
	size := protofield.SizeMessage(opNum, opSize) + protofield.SizeBytes(7, cmd.SecretHash) + protofield.SizeString(8, cmd.Principal)
	for i, v := range head {
		size += protofield.SizeUint(protowire.Number(i+1), v)
	}
	b := make([]byte, 0, size)
	for i, v := range head {
		b = protofield.AppendUint(b, protowire.Number(i+1), v)
	}
	b = protofield.AppendBytes(b, 7, cmd.SecretHash)
	b = protofield.AppendString(b, 8, cmd.Principal)
	b = protofield.AppendMessageHeader(b, opNum, opSize)
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_Acquire:
		a := op.Acquire
		b = protofield.AppendString(b, 1, a.Lock)
		b = protofield.AppendString(b, 2, a.OwnerKey)
		b = protofield.AppendBool(b, 3, a.Wait)
		b = protofield.AppendUint(b, 4, uint64(a.WaitTimeoutNanos))
		b = protofield.AppendBool(b, 5, a.Shared)
		b = protofield.AppendUint(b, 6, uint64(a.Limit))
		b = protofield.AppendUint(b, 7, uint64(a.HoldLimitNanos))
		b = protofield.AppendUint(b, 8, uint64(a.LockDelayNanos))
	case *fsmpb.Command_Release:
		r := op.Release
		b = protofield.AppendString(b, 1, r.Lock)
		b = protofield.AppendUint(b, 2, r.Token)
		b = protofield.AppendString(b, 3, r.OwnerKey)
	}
	return b, true
}
