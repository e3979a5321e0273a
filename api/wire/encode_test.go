package wire

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/batonlock/baton/api/batonpb"
)

// checkEncode encodes m with this package and with proto and fails unless
// both refuse it or both give the same bytes; fast says whether the
// package's own encoder must have taken it.
func checkEncode(t *testing.T, what string, m proto.Message, fast bool) {
	t.Helper()
	var (
		got []byte
		err error
		ok  bool
	)
	switch m := m.(type) {
	case *batonpb.SessionsRequest:
		_, ok = sizeSessionsRequest(m)
		got, err = MarshalSessionsRequest(nil, m)
	case *batonpb.SessionsResponse:
		_, ok = sizeSessionsResponse(m)
		got, err = MarshalSessionsResponse(nil, m)
	}
	if fast && !ok {
		t.Errorf("%s: not encoded by the fast path", what)
	}
	want, werr := proto.Marshal(m)
	if (err == nil) != (werr == nil) {
		t.Fatalf("%s: error %v, proto's %v", what, err, werr)
	}
	if err == nil && !bytes.Equal(got, want) {
		t.Fatalf("%s: encoded\n%x\nproto encoded\n%x", what, got, want)
	}
	if err != nil {
		return
	}
	data, err := Codec{}.Marshal(m)
	if err != nil || !bytes.Equal(data.Materialize(), want) {
		t.Fatalf("%s: the codec encoded %x, %v", what, data.Materialize(), err)
	}
	data.Free()
}

// TestEncodeAsProto: the hot shapes take the package's encoder and come
// out as proto's bytes; other shapes are proto's too.
func TestEncodeAsProto(t *testing.T) {
	reqs := []*batonpb.ChannelRequest{
		acquireReq(1, "jobs/1"), releaseReq(2, "jobs/1"), keepAliveReq(3),
		{Channel: 4, Request: &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Acquire{Acquire: &batonpb.AcquireRequest{Name: "no header"}}}},
		{Channel: 5, Detach: true, Request: &batonpb.SessionRequest{Id: 1, Kind: &batonpb.SessionRequest_Release{Release: &batonpb.ReleaseRequest{}}}},
	}
	checkEncode(t, "hot requests", &batonpb.SessionsRequest{Requests: reqs}, true)
	checkEncode(t, "no requests", &batonpb.SessionsRequest{}, true)
	resps := []*batonpb.ChannelResponse{
		acquireResp(1, "jobs/1"), queuedResp(2), releaseResp(3), grantResp(4),
		{Channel: 5, Response: &batonpb.SessionResponse{Id: 9, Error: &batonpb.Error{Code: 9, Reason: batonpb.Reason_NOT_HOLDER, Message: "busy", LeaderAddr: "a:1"}}},
		{Channel: 6, Response: &batonpb.SessionResponse{Id: 9, Error: &batonpb.Error{Code: 10}, Kind: &batonpb.SessionResponse_Acquire{Acquire: &batonpb.AcquireResponse{Name: "n"}}}},
		{Channel: 7, Response: &batonpb.SessionResponse{}},
	}
	checkEncode(t, "hot responses", &batonpb.SessionsResponse{Responses: resps}, true)

	for name, r := range map[string]*batonpb.ChannelRequest{
		"open": {Channel: 1, Request: &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Open{
			Open: &batonpb.OpenSessionRequest{Ttl: durationpb.New(time.Second), Owner: "o"}}}},
		"wait timeout": {Channel: 1, Request: &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Acquire{
			Acquire: &batonpb.AcquireRequest{Name: "a", WaitTimeout: durationpb.New(time.Second)}}}},
		"lock-delay": {Channel: 1, Request: &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Acquire{
			Acquire: &batonpb.AcquireRequest{Name: "a", LockDelay: durationpb.New(15 * time.Second)}}}},
		"no lock-delay": {Channel: 1, Request: &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Acquire{
			Acquire: &batonpb.AcquireRequest{Name: "a", LockDelay: durationpb.New(0)}}}},
		"detach only": {Channel: 1, Detach: true},
		"header secret": {Channel: 1, Request: &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Release{Release: &batonpb.ReleaseRequest{
			Header: &batonpb.RequestHeader{SessionId: 1, Seq: 2, Secret: "s"}, Name: "a"}}}},
		"keepalive secret": {Channel: 1, Request: &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_KeepAlive{
			KeepAlive: &batonpb.KeepAliveRequest{SessionId: 1, Secret: "s"}}}},
		"invalid UTF-8": {Channel: 1, Request: &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Release{Release: &batonpb.ReleaseRequest{Name: "\xff"}}}},
	} {
		checkEncode(t, name, &batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{acquireReq(1, "a"), r}}, false)
		if got, want := ChannelRequestSize(r), proto.Size(r); got != want {
			t.Errorf("%s: ChannelRequestSize %d, proto.Size %d", name, got, want)
		}
	}
	for name, r := range map[string]*batonpb.ChannelResponse{
		"holder": {Channel: 1, Response: &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Acquire{
			Acquire: &batonpb.AcquireResponse{Name: "a", Holder: &batonpb.Holder{SessionId: 3}}}}},
		"lock-delay": {Channel: 1, Response: &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Acquire{
			Acquire: &batonpb.AcquireResponse{Name: "a", Acquired: true, LockDelay: durationpb.New(time.Second)}}}},
		"delayed until": {Channel: 1, Response: &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Acquire{
			Acquire: &batonpb.AcquireResponse{Name: "a", DelayedUntil: timestamppb.New(time.Unix(1, 0))}}}},
		"end": {Channel: 1, End: &batonpb.ChannelEnd{}},
		"keepalive": {Channel: 1, Response: &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_KeepAlive{
			KeepAlive: &batonpb.KeepAliveResponse{SessionId: 1, Ttl: durationpb.New(time.Second)}}}},
		"invalid UTF-8": {Channel: 1, Response: &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Grant{Grant: &batonpb.Grant{Name: "\xff"}}}},
		"signed token not UTF-8": {Channel: 1, Response: &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Grant{
			Grant: &batonpb.Grant{Name: "a", SignedToken: "\xff"}}}},
		"acquire's signed token not UTF-8": {Channel: 1, Response: &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Acquire{
			Acquire: &batonpb.AcquireResponse{Name: "a", SignedToken: "\xff"}}}},
	} {
		checkEncode(t, name, &batonpb.SessionsResponse{Responses: []*batonpb.ChannelResponse{acquireResp(1, "a"), r}}, false)
	}
	withUnknown := acquireReq(1, "a")
	withUnknown.GetRequest().GetAcquire().ProtoReflect().SetUnknown([]byte{0x78, 1}) // field 15, varint 1
	checkEncode(t, "unknown field", &batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{withUnknown}}, false)
}

// FuzzEncode builds hot-shaped messages from the input and checks that
// they encode as proto encodes them.
//
//	go test -run '^$' -fuzz FuzzEncode -fuzztime 60s ./api/wire
func FuzzEncode(f *testing.F) {
	f.Add(uint8(0), uint64(1), uint64(2), uint64(3), uint64(4), uint64(5), "jobs/1", "k", true, false, uint32(3), int32(2))
	f.Add(uint8(1), uint64(0), uint64(0), uint64(0), uint64(0), uint64(0), "", "", false, true, uint32(0), int32(-1))
	f.Add(uint8(2), uint64(1<<63), uint64(300), uint64(1), uint64(128), uint64(1<<40), "\xff", "é", true, true, uint32(1<<31), int32(19))
	f.Fuzz(func(t *testing.T, kind uint8, ch, id, sess, seq, token uint64, name, owner string, b1, b2 bool, small uint32, reason int32) {
		var h *batonpb.RequestHeader
		if sess != 0 || seq != 0 || kind&4 != 0 {
			h = &batonpb.RequestHeader{SessionId: sess, Seq: seq, MinUnackedSeq: seq / 2}
		}
		sr := &batonpb.SessionRequest{Id: id}
		switch kind % 3 {
		case 0:
			sr.Kind = &batonpb.SessionRequest_Acquire{Acquire: &batonpb.AcquireRequest{Header: h, Name: name, OwnerKey: owner, Wait: b1, Shared: b2, Limit: small}}
		case 1:
			sr.Kind = &batonpb.SessionRequest_Release{Release: &batonpb.ReleaseRequest{Header: h, Name: name, Token: token, OwnerKey: owner}}
		case 2:
			sr.Kind = &batonpb.SessionRequest_KeepAlive{KeepAlive: &batonpb.KeepAliveRequest{SessionId: sess}}
		}
		req := &batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{{Channel: ch, Request: sr, Detach: b1 && b2}, acquireReq(2, "x")}}
		checkEncode(t, "request", req, false)

		resp := &batonpb.SessionResponse{Id: id}
		if kind&8 != 0 {
			resp.Error = &batonpb.Error{Code: small, Reason: batonpb.Reason(reason), Message: owner, LeaderAddr: name}
		}
		switch kind % 4 {
		case 0:
			resp.Kind = &batonpb.SessionResponse_Acquire{Acquire: &batonpb.AcquireResponse{Name: name, Acquired: b1, Token: token,
				Count: small, Queued: b2, Position: small / 3, Seq: seq, Skipped: b1 && !b2, SignedToken: owner}}
		case 1:
			resp.Kind = &batonpb.SessionResponse_Release{Release: &batonpb.ReleaseResponse{RemainingCount: small}}
		case 2:
			resp.Kind = &batonpb.SessionResponse_Grant{Grant: &batonpb.Grant{Seq: seq, Name: name, Token: token, SignedToken: owner}}
		}
		checkEncode(t, "response", &batonpb.SessionsResponse{Responses: []*batonpb.ChannelResponse{{Channel: ch, Response: resp}, grantResp(3)}}, false)
	})
}

// TestCheckSessionRequest: CheckSessionRequest refuses what proto.Marshal
// refuses, and answers proto.Size otherwise, for every kind of session
// request with each of its strings (its header's too) in turn not valid
// UTF-8. A string field added to a hot shape and missed by its check
// fails here.
func TestCheckSessionRequest(t *testing.T) {
	kinds := (&batonpb.SessionRequest{}).ProtoReflect().Descriptor().Oneofs().ByName("kind").Fields()
	for i := range kinds.Len() {
		kind := kinds.Get(i)
		strs := stringFields(kind.Message())
		if len(strs) == 0 {
			t.Fatalf("%s has no string field: is the walk wrong?", kind.Name())
		}
		// The other strings empty: a secret makes a hot shape proto's, and
		// the check of the hot shapes is what this is about.
		for _, bad := range append([]protoreflect.FieldDescriptor{nil}, strs...) {
			r := &batonpb.SessionRequest{Id: 7}
			fill(r.ProtoReflect().Mutable(kind).Message(), bad, "")
			what := string(kind.Name()) + " valid"
			if bad != nil {
				what = string(kind.Name()) + " with " + string(bad.FullName()) + " not UTF-8"
			}
			size, err := CheckSessionRequest(r)
			_, perr := proto.Marshal(r)
			switch {
			case (err == nil) != (bad == nil) || (err == nil) != (perr == nil):
				t.Errorf("%s: %v; proto.Marshal: %v", what, err, perr)
			case err == nil && size != proto.Size(r):
				t.Errorf("%s: size %d, proto.Size %d", what, size, proto.Size(r))
			}
		}
	}
	for i := range kinds.Len() {
		r := &batonpb.SessionRequest{Id: 7}
		fill(r.ProtoReflect().Mutable(kinds.Get(i)).Message(), nil, "ok")
		if size, err := CheckSessionRequest(r); err != nil || size != proto.Size(r) {
			t.Errorf("%s with every string set: %d, %v; proto.Size %d", kinds.Get(i).Name(), size, err, proto.Size(r))
		}
	}
	hot := acquireReq(1, "a").GetRequest()
	if !fastSessionRequest(hot) {
		t.Fatal("an acquire is not a hot shape")
	}
	if n, err := CheckSessionRequest(hot); err != nil || n != proto.Size(hot) {
		t.Fatalf("hot acquire: %d, %v; proto.Size %d", n, err, proto.Size(hot))
	}
}

// stringFields lists the string fields of md and of the messages it
// holds (a header), one level down.
func stringFields(md protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	var out []protoreflect.FieldDescriptor
	fields := md.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		switch {
		case f.Kind() == protoreflect.StringKind:
			out = append(out, f)
		case f.Kind() == protoreflect.MessageKind && !f.IsList() && !f.IsMap() && f.Message().ParentFile().Package() == md.ParentFile().Package():
			out = append(out, stringFields(f.Message())...)
		}
	}
	return out
}

// fill sets every string field of m, and of the messages it holds, to
// other, bad to a string that is not valid UTF-8.
func fill(m protoreflect.Message, bad protoreflect.FieldDescriptor, other string) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		switch {
		case f.Kind() == protoreflect.StringKind:
			v := protoreflect.ValueOfString(other)
			if f == bad {
				v = protoreflect.ValueOfString("ok\xff")
			}
			if f.IsList() {
				l := m.Mutable(f).List()
				l.Append(protoreflect.ValueOfString("first"))
				l.Append(v)
			} else {
				m.Set(f, v)
			}
		case f.Kind() == protoreflect.MessageKind && !f.IsList() && !f.IsMap() && f.Message().ParentFile().Package() == m.Descriptor().ParentFile().Package():
			fill(m.Mutable(f).Message(), bad, other)
		case f.Kind() == protoreflect.Uint64Kind && !f.IsList():
			m.Set(f, protoreflect.ValueOfUint64(3))
		}
	}
}

// BenchmarkMarshal compares this package with proto on a batch of 32
// acquires and on one of 32 answers, as own/64 sends them.
//
//	go test -run '^$' -bench BenchmarkMarshal -benchmem ./api/wire
func BenchmarkMarshal(b *testing.B) {
	req, resp := &batonpb.SessionsRequest{}, &batonpb.SessionsResponse{}
	for i := range 32 {
		req.Requests = append(req.Requests, acquireReq(uint64(i+1), fmt.Sprintf("bench/%d", i)))
		resp.Responses = append(resp.Responses, acquireResp(uint64(i+1), fmt.Sprintf("bench/%d", i)))
	}
	buf := make([]byte, 0, 8192)
	for _, c := range []struct {
		name string
		m    proto.Message
	}{{"request", req}, {"response", resp}} {
		b.Run(c.name+"/wire", func(b *testing.B) {
			b.ReportAllocs()
			var err error
			for b.Loop() {
				switch m := c.m.(type) {
				case *batonpb.SessionsRequest:
					buf, err = MarshalSessionsRequest(buf[:0], m)
				case *batonpb.SessionsResponse:
					buf, err = MarshalSessionsResponse(buf[:0], m)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/proto", func(b *testing.B) {
			b.ReportAllocs()
			var err error
			for b.Loop() {
				if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], c.m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
