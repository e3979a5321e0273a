package baton

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/batonlock/baton/api/batonpb"
)

// fill sets every field of m, recursively, to a value other than its
// default, so that a copy that misses a field differs from m.
func fill(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			if fd.Kind() == protoreflect.MessageKind {
				e := l.NewElement()
				fill(e.Message())
				l.Append(e)
			} else {
				l.Append(scalar(fd))
			}
		case fd.IsMap():
			panic("no map fields expected in session requests: extend fill")
		case fd.Kind() == protoreflect.MessageKind:
			fill(m.Mutable(fd).Message())
		default:
			m.Set(fd, scalar(fd))
		}
	}
}

func scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x-" + string(fd.Name()))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(uint64(fd.Number()) + 100)
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(uint32(fd.Number()) + 100)
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(int64(fd.Number()) + 100)
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(int32(fd.Number()) + 100)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(fd.Enum().Values().Get(fd.Enum().Values().Len() - 1).Number())
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("x"))
	}
	panic("field kind " + fd.Kind().String() + " not expected: extend scalar")
}

// TestStampCopiesEveryField: for every kind of session request, a send's
// copy (stamp) equals the request with the id and header set, whatever
// fields the request has, and the request itself is left as it was.
func TestStampCopiesEveryField(t *testing.T) {
	oneof := (&batonpb.SessionRequest{}).ProtoReflect().Descriptor().Oneofs().ByName("kind")
	for i := range oneof.Fields().Len() {
		fd := oneof.Fields().Get(i)
		for _, mutating := range []bool{false, true} {
			req := &batonpb.SessionRequest{}
			m := req.ProtoReflect()
			fill(m.Mutable(fd).Message())
			before := proto.Clone(req)

			var h *batonpb.RequestHeader
			if mutating {
				h = &batonpb.RequestHeader{SessionId: 41, Seq: 42, MinUnackedSeq: 40}
			}
			got := stamp(req, 7, h)

			want := proto.Clone(req).(*batonpb.SessionRequest)
			want.Id = 7
			if mutating {
				kind := want.ProtoReflect().Get(fd).Message()
				if hf := kind.Descriptor().Fields().ByName("header"); hf != nil {
					kind.Set(hf, protoreflect.ValueOfMessage(h.ProtoReflect()))
				} else if c := want.GetClose(); c != nil {
					c.SessionId, c.Seq = h.GetSessionId(), h.GetSeq()
				}
			}
			if !proto.Equal(got, want) {
				t.Errorf("%s (mutating %v): stamp = %v, want %v", fd.Name(), mutating, got, want)
			}
			if !proto.Equal(req, before) {
				t.Errorf("%s (mutating %v): stamp changed the request to %v", fd.Name(), mutating, req)
			}
		}
	}
}

// BenchmarkStamp compares a send's copy of an acquire request by stamp
// with proto.Clone, which the client used before.
func BenchmarkStamp(b *testing.B) {
	req := &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Acquire{Acquire: &batonpb.AcquireRequest{
		Name: "jobs/nightly-report", OwnerKey: "worker-17", Wait: true,
	}}}
	h := &batonpb.RequestHeader{SessionId: 41, Seq: 42, MinUnackedSeq: 40}
	b.Run("stamp", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = stamp(req, 7, h)
		}
	})
	b.Run("clone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := proto.Clone(req).(*batonpb.SessionRequest)
			r.Id = 7
			r.GetAcquire().Header = h
		}
	})
}
