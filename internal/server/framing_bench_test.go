package server

import (
	"context"
	"io"
	"net"
	"testing"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/streamconn"
	"github.com/batonlock/baton/api/wire"
)

// BenchmarkSendQueued is a stream's sender on the framing answering one
// request per send, as at own/64 with a connection per worker: take the
// queue, build the message, encode and write it.
func BenchmarkSendQueued(b *testing.B) {
	s := New(Config{})
	st := newSessionsStream()
	cs := &connStream{ctx: context.Background(), c: discardConn{}}
	ch := &channel{id: 1, stream: st}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.hub.send(reply{ch: ch, resp: &batonpb.SessionResponse{Id: uint64(i)}}, false)
		if err := s.sendQueued(cs, st); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConnStreamRecv is a stream's receiver on the framing reading
// one acquire per frame.
func BenchmarkConnStreamRecv(b *testing.B) {
	msg, err := wire.MarshalSessionsRequest(nil, &batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{{
		Channel: 1, Request: &batonpb.SessionRequest{Id: 7, Kind: &batonpb.SessionRequest_Acquire{Acquire: &batonpb.AcquireRequest{
			Header: &batonpb.RequestHeader{SessionId: 3, Seq: 9}, Name: "jobs/17", OwnerKey: "worker-17"}}},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	frame := streamconn.Append(nil, streamconn.KindMessage, msg)
	src := &repeatReader{frame: frame}
	cs := &connStream{ctx: context.Background(), r: streamconn.NewReader(src, 16<<10)}
	b.ReportAllocs()
	for b.Loop() {
		m, err := cs.Recv()
		if err != nil || len(m.GetRequests()) != 1 {
			b.Fatal(m, err)
		}
	}
}

// discardConn is a connection whose writes all succeed and go nowhere.
type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }

// repeatReader reads frame over and over, one copy per Read.
type repeatReader struct{ frame []byte }

func (r *repeatReader) Read(p []byte) (int, error) {
	if len(p) < len(r.frame) {
		return 0, io.ErrShortBuffer
	}
	return copy(p, r.frame), nil
}
