package wire

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
)

func acquireReq(ch uint64, name string) *batonpb.ChannelRequest {
	return &batonpb.ChannelRequest{Channel: ch, Request: &batonpb.SessionRequest{Id: ch + 100, Kind: &batonpb.SessionRequest_Acquire{
		Acquire: &batonpb.AcquireRequest{Header: &batonpb.RequestHeader{SessionId: 7, Seq: 12, MinUnackedSeq: 11},
			Name: name, OwnerKey: "k", Wait: true, Shared: true, Limit: 3}}}}
}

func releaseReq(ch uint64, name string) *batonpb.ChannelRequest {
	return &batonpb.ChannelRequest{Channel: ch, Request: &batonpb.SessionRequest{Id: 9, Kind: &batonpb.SessionRequest_Release{
		Release: &batonpb.ReleaseRequest{Header: &batonpb.RequestHeader{SessionId: 7, Seq: 13}, Name: name, Token: 1 << 40, OwnerKey: "k"}}}}
}

func keepAliveReq(ch uint64) *batonpb.ChannelRequest {
	return &batonpb.ChannelRequest{Channel: ch, Request: &batonpb.SessionRequest{Id: 3, Kind: &batonpb.SessionRequest_KeepAlive{
		KeepAlive: &batonpb.KeepAliveRequest{SessionId: 7}}}}
}

func acquireResp(ch uint64, name string) *batonpb.ChannelResponse {
	return &batonpb.ChannelResponse{Channel: ch, Response: &batonpb.SessionResponse{Id: 4, Kind: &batonpb.SessionResponse_Acquire{
		Acquire: &batonpb.AcquireResponse{Name: name, Acquired: true, Token: 99, Count: 1, Seq: 12, SignedToken: "AWNsYWltcw"}}}}
}

func queuedResp(ch uint64) *batonpb.ChannelResponse {
	return &batonpb.ChannelResponse{Channel: ch, Response: &batonpb.SessionResponse{Id: 5, Kind: &batonpb.SessionResponse_Acquire{
		Acquire: &batonpb.AcquireResponse{Name: "q", Queued: true, Position: 2, Seq: 14, Skipped: true}}}}
}

func releaseResp(ch uint64) *batonpb.ChannelResponse {
	return &batonpb.ChannelResponse{Channel: ch, Response: &batonpb.SessionResponse{Id: 6, Kind: &batonpb.SessionResponse_Release{
		Release: &batonpb.ReleaseResponse{RemainingCount: 2}}}}
}

func grantResp(ch uint64) *batonpb.ChannelResponse {
	return &batonpb.ChannelResponse{Channel: ch, Response: &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Grant{
		Grant: &batonpb.Grant{Seq: 14, Name: "q", Token: 100, SignedToken: "AWdyYW50"}}}}
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHotShapesDecodeWithoutProto pins that the requests and answers of
// the hot path take this package's decoders (else the package would cost
// a check and save nothing) and decode as proto does.
func TestHotShapesDecodeWithoutProto(t *testing.T) {
	for _, m := range []*batonpb.ChannelRequest{
		acquireReq(1, "jobs/1"), releaseReq(2, "jobs/1"), keepAliveReq(3),
		{Channel: 4, Request: &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Acquire{Acquire: &batonpb.AcquireRequest{Name: "no header"}}}},
		{Channel: 5, Detach: true, Request: &batonpb.SessionRequest{Id: 1, Kind: &batonpb.SessionRequest_Release{Release: &batonpb.ReleaseRequest{}}}},
	} {
		got, ok := decodeChannelRequest(marshal(t, m))
		if !ok {
			t.Errorf("%v: not decoded by the fast path", m)
		} else if !proto.Equal(got, m) {
			t.Errorf("decoded %v, want %v", got, m)
		}
	}
	for _, m := range []*batonpb.ChannelResponse{acquireResp(1, "jobs/1"), queuedResp(2), releaseResp(3), grantResp(4)} {
		got, ok := decodeChannelResponse(marshal(t, m))
		if !ok {
			t.Errorf("%v: not decoded by the fast path", m)
		} else if !proto.Equal(got, m) {
			t.Errorf("decoded %v, want %v", got, m)
		}
	}
}

// TestOtherShapesGoToProto: what the fast path does not know, or would
// decode differently from proto, is left to proto, and a batch mixing
// both decodes as proto decodes it.
func TestOtherShapesGoToProto(t *testing.T) {
	acq := marshal(t, acquireReq(1, "a"))
	tag := func(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	reqs := map[string][]byte{
		"open": marshal(t, &batonpb.ChannelRequest{Channel: 1, Request: &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Open{
			Open: &batonpb.OpenSessionRequest{Ttl: durationpb.New(time.Second), Owner: "o"}}}}),
		"wait timeout": marshal(t, &batonpb.ChannelRequest{Channel: 1, Request: &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Acquire{
			Acquire: &batonpb.AcquireRequest{Name: "a", WaitTimeout: durationpb.New(time.Second)}}}}),
		"detach only":     marshal(t, &batonpb.ChannelRequest{Channel: 1, Detach: true}),
		"no kind":         marshal(t, &batonpb.ChannelRequest{Channel: 1, Request: &batonpb.SessionRequest{Id: 2}}),
		"channel twice":   cat(acq, tag(1, protowire.VarintType), []byte{5}),
		"unknown field":   cat(acq, tag(9, protowire.VarintType), []byte{5}),
		"wrong wire type": cat(tag(1, protowire.BytesType), []byte{0}, acq),
	}
	// A SessionRequest with an acquire and then a release: proto keeps the
	// release.
	sr := cat(marshal(t, acquireReq(1, "a").GetRequest()), marshal(t, releaseReq(1, "b").GetRequest()))
	reqs["two kinds"] = cat(tag(2, protowire.BytesType), protowire.AppendVarint(nil, uint64(len(sr))), sr)
	bad := marshal(t, acquireReq(1, "ab"))
	bad[bytes.Index(bad, []byte("ab"))] = 0xff
	reqs["invalid UTF-8"] = bad
	for name, b := range reqs {
		if _, ok := decodeChannelRequest(b); ok {
			t.Errorf("%s: decoded by the fast path", name)
		}
		var batch []byte
		for _, e := range [][]byte{acq, b, acq} {
			batch = protowire.AppendTag(batch, 1, protowire.BytesType)
			batch = protowire.AppendBytes(batch, e)
		}
		checkSame(t, name, batch, &batonpb.SessionsRequest{}, &batonpb.SessionsRequest{})
	}

	resps := map[string]*batonpb.ChannelResponse{
		"holder": {Channel: 1, Response: &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Acquire{
			Acquire: &batonpb.AcquireResponse{Name: "a", Holder: &batonpb.Holder{SessionId: 3}}}}},
		"error": {Channel: 1, Response: &batonpb.SessionResponse{Id: 1, Error: &batonpb.Error{Code: 9, Message: "m"}}},
		"end":   {Channel: 1, End: &batonpb.ChannelEnd{}},
		"keepalive": {Channel: 1, Response: &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_KeepAlive{
			KeepAlive: &batonpb.KeepAliveResponse{SessionId: 1, Ttl: durationpb.New(time.Second)}}}},
	}
	for name, m := range resps {
		b := marshal(t, m)
		if _, ok := decodeChannelResponse(b); ok {
			t.Errorf("%s: decoded by the fast path", name)
		}
		batch := marshal(t, &batonpb.SessionsResponse{Responses: []*batonpb.ChannelResponse{acquireResp(1, "a"), m, grantResp(2)}})
		checkSame(t, name, batch, &batonpb.SessionsResponse{}, &batonpb.SessionsResponse{})
	}
}

// checkSame decodes b with this package into got and with proto into
// want, and fails unless both refuse it or both give the same message.
func checkSame(t *testing.T, what string, b []byte, got, want proto.Message) {
	t.Helper()
	var err error
	switch m := got.(type) {
	case *batonpb.SessionsRequest:
		err = UnmarshalSessionsRequest(b, m)
	case *batonpb.SessionsResponse:
		err = UnmarshalSessionsResponse(b, m)
	}
	werr := proto.Unmarshal(b, want)
	if (err == nil) != (werr == nil) {
		t.Fatalf("%s: error %v, proto's %v (input %x)", what, err, werr, b)
	}
	if err == nil && !proto.Equal(got, want) {
		t.Fatalf("%s: decoded\n%v\nproto decoded\n%v\n(input %x)", what, got, want, b)
	}
}

// FuzzUnmarshal checks that any input decodes, or fails, as proto's
// decoding does, for both messages of the stream.
//
//	go test -run '^$' -fuzz FuzzUnmarshal -fuzztime 60s ./api/wire
func FuzzUnmarshal(f *testing.F) {
	f.Add(marshal(f, &batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{acquireReq(1, "jobs/1"), releaseReq(2, "x"), keepAliveReq(3)}}))
	f.Add(marshal(f, &batonpb.SessionsResponse{Responses: []*batonpb.ChannelResponse{acquireResp(1, "jobs/1"), queuedResp(2), releaseResp(3), grantResp(4)}}))
	f.Add(marshal(f, &batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{{Channel: 1, Detach: true}}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		checkSame(t, "SessionsRequest", b, &batonpb.SessionsRequest{}, &batonpb.SessionsRequest{})
		checkSame(t, "SessionsResponse", b, &batonpb.SessionsResponse{}, &batonpb.SessionsResponse{})
	})
}

// TestCodec: the codec hands the stream's messages to this package and
// everything else to proto, and its name keeps the plain content type.
func TestCodec(t *testing.T) {
	var c Codec
	if c.Name() != "" {
		t.Fatalf("Name %q: the content type would gain a suffix", c.Name())
	}
	in := &batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{acquireReq(1, "a"), keepAliveReq(2)}}
	data, err := c.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := &batonpb.SessionsRequest{}
	if err := c.Unmarshal(data, out); err != nil || !proto.Equal(in, out) {
		t.Fatalf("round trip: %v, %v", out, err)
	}
	st := &batonpb.StatusResponse{Leader: "n1"}
	data, err = c.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	got := &batonpb.StatusResponse{}
	if err := c.Unmarshal(data, got); err != nil || !proto.Equal(st, got) {
		t.Fatalf("status round trip: %v, %v", got, err)
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer{0xff}}, &batonpb.SessionsResponse{}); err == nil {
		t.Fatal("garbage decoded")
	}
}

// BenchmarkUnmarshal compares this package with proto on a batch of 32
// acquires and on one of 32 answers, as own/64 sends them.
//
//	go test -run '^$' -bench BenchmarkUnmarshal -benchmem ./api/wire
func BenchmarkUnmarshal(b *testing.B) {
	req, resp := &batonpb.SessionsRequest{}, &batonpb.SessionsResponse{}
	for i := range 32 {
		req.Requests = append(req.Requests, acquireReq(uint64(i+1), fmt.Sprintf("bench/%d", i)))
		resp.Responses = append(resp.Responses, acquireResp(uint64(i+1), fmt.Sprintf("bench/%d", i)))
	}
	rb, sb := marshal(b, req), marshal(b, resp)
	b.Run("request/wire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := UnmarshalSessionsRequest(rb, &batonpb.SessionsRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("request/proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := proto.Unmarshal(rb, &batonpb.SessionsRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("response/wire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := UnmarshalSessionsResponse(sb, &batonpb.SessionsResponse{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("response/proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := proto.Unmarshal(sb, &batonpb.SessionsResponse{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A message decoded into again decodes as a new one would, and what the
// first decode returned is not changed by the second: a reader that keeps
// one SessionsRequest for its stream may keep the requests of each.
func TestUnmarshalSessionsRequestReuse(t *testing.T) {
	first := &batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{acquireReq(1, "a"), releaseReq(2, "b"), keepAliveReq(3)}}
	unknownField := protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1)
	for _, second := range [][]byte{
		marshal(t, &batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{releaseReq(5, "c")}}),
		marshal(t, &batonpb.SessionsRequest{}),
		append(marshal(t, &batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{keepAliveReq(6)}}), unknownField...),
	} {
		var m batonpb.SessionsRequest
		if err := UnmarshalSessionsRequest(marshal(t, first), &m); err != nil {
			t.Fatal(err)
		}
		kept := m.GetRequests()[0]
		keptCopy := proto.Clone(kept)
		if err := UnmarshalSessionsRequest(second, &m); err != nil {
			t.Fatal(err)
		}
		var want batonpb.SessionsRequest
		if err := proto.Unmarshal(second, &want); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&m, &want) {
			t.Errorf("decoded again: %v, want %v", &m, &want)
		}
		if !proto.Equal(kept, keptCopy) {
			t.Errorf("a request of the first decode changed: %v, was %v", kept, keptCopy)
		}
	}
	// A message that held unknown fields decodes the next one clean.
	var m batonpb.SessionsRequest
	withUnknown := append(marshal(t, &batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{keepAliveReq(6)}}), unknownField...)
	if err := UnmarshalSessionsRequest(withUnknown, &m); err != nil {
		t.Fatal(err)
	}
	plain := marshal(t, first)
	if err := UnmarshalSessionsRequest(plain, &m); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&m, first) {
		t.Errorf("after unknown fields: %v, want %v", &m, first)
	}
}
