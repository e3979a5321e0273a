package fsm

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// fillAll sets every field of msg (recursively, one element per list) to
// a non-zero value.
func fillAll(msg protoreflect.Message) {
	fields := msg.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := msg.Mutable(fd).List()
			e := l.NewElement()
			fillAll(e.Message())
			l.Append(e)
		case fd.IsList():
			msg.Mutable(fd).List().Append(scalar(fd))
		case fd.Message() != nil:
			fillAll(msg.Mutable(fd).Message())
		default:
			msg.Set(fd, scalar(fd))
		}
	}
}

func scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("s")
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1)
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(7)
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(7)
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(7)
	}
	panic("unexpected kind " + fd.Kind().String())
}

// TestClonesCopyEveryField fails when a field added to the proto is not
// copied by the hand-written clones.
func TestClonesCopyEveryField(t *testing.T) {
	r := &fsmpb.Result{}
	fillAll(r.ProtoReflect())
	if c := cloneResult(r); !proto.Equal(c, r) {
		t.Errorf("cloneResult lost fields:\n got %v\nwant %v", c, r)
	}
	w := &fsmpb.Waiter{}
	fillAll(w.ProtoReflect())
	if c := cloneWaiter(w); !proto.Equal(c, w) {
		t.Errorf("cloneWaiter lost fields:\n got %v\nwant %v", c, w)
	}
	// Clones share nothing with the original.
	c := cloneResult(r)
	c.Acquire.Holder.Token++
	c.AcquireMany[0].Lock += "x"
	c.SessionsEnded[0]++
	if proto.Equal(c, r) {
		t.Error("clone shares memory with the original")
	}
}
