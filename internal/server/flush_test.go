package server

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/streamconn"
)

// tcpPair is a connected pair of loopback TCP connections. What the
// server can write at once to a client that does not read is bounded by
// their buffers: at most a few MiB (net.ipv4.tcp_wmem, tcp_rmem).
func tcpPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	server, client = s.(*net.TCPConn), c.(*net.TCPConn)
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// The flusher writes what a socket takes at once and leaves the rest to
// the stream's sender, which writes it before anything queued later: the
// client reads every answer, whole and in order.
func TestFlusherLeavesWhatDoesNotFitToTheSender(t *testing.T) {
	s := New(Config{})
	defer s.Stop()
	server, client := tcpPair(t)
	cs := newConnStream(context.Background(), server, nil)
	if cs.raw == nil {
		t.Fatal("a plain TCP connection has no raw socket for the flusher")
	}
	st := newSessionsStream()
	st.fast = cs
	ch := &channel{id: 5, stream: st}
	name := strings.Repeat("n", 1000)
	id := uint64(0)
	queue := func(n int) {
		for range n {
			s.hub.send(reply{ch: ch, resp: &batonpb.SessionResponse{Id: id, Kind: &batonpb.SessionResponse_Grant{Grant: &batonpb.Grant{Name: name}}}}, true)
			id++
		}
	}

	// A batch over the sockets' buffers (16 MB in messages of at most 1
	// MiB): the flusher writes part of it, keeps the rest and wakes the
	// sender.
	queue(16000)
	s.hub.flush()
	if ready(st) {
		t.Fatal("the flush woke the stream's sender, not the flusher")
	}
	s.flushStream(st)
	if !cs.pending() {
		t.Fatal("the flusher wrote 16 MB to a socket whose reader does not read, and left nothing")
	}
	if !ready(st) {
		t.Fatal("the flusher left bytes and did not wake the sender")
	}
	// While bytes wait, the flusher writes nothing more: it wakes the
	// sender for the next batch too.
	queue(10)
	s.flushStream(st)
	if !ready(st) {
		t.Fatal("the flusher did not leave the next batch to the sender")
	}
	st.mu.Lock()
	left := len(st.queue)
	st.mu.Unlock()
	if left != 10 {
		t.Fatalf("the queue holds %d replies after the flusher's turn, want the 10 left to the sender", left)
	}

	sent := make(chan error, 1)
	go func() { sent <- s.sendOwn(cs, st) }()
	frames := streamconn.NewReader(client, 64<<10)
	for want := uint64(0); want < id; {
		kind, payload, err := frames.Next(4 << 20)
		if err != nil || kind != streamconn.KindMessage {
			t.Fatalf("frame of kind %d, %v, after %d answers", kind, err, want)
		}
		var m batonpb.SessionsResponse
		if err := proto.Unmarshal(payload, &m); err != nil {
			t.Fatal(err)
		}
		for _, r := range m.GetResponses() {
			if r.GetChannel() != 5 || r.GetResponse().GetId() != want || r.GetResponse().GetGrant().GetName() != name {
				t.Fatalf("answer %d: channel %d id %d; the answers are out of order or torn", want, r.GetChannel(), r.GetResponse().GetId())
			}
			want++
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if cs.pending() {
		t.Fatal("bytes still pending after the sender's turn")
	}
}

// Once the handler returned, the flusher writes nothing (the stream's
// end frame may follow at any moment).
func TestFlusherSkipsAFinishedStream(t *testing.T) {
	s := New(Config{})
	defer s.Stop()
	server, _ := tcpPair(t)
	st := newSessionsStream()
	st.fast = newConnStream(context.Background(), server, nil)
	st.finished = true
	s.hub.send(reply{ch: &channel{id: 1, stream: st}, resp: &batonpb.SessionResponse{}}, true)
	s.flushStream(st)
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.queue) != 1 {
		t.Fatalf("the flusher took %d replies of a finished stream", 1-len(st.queue))
	}
}

// A TLS connection is not the flusher's: only its tls.Conn may write.
func TestNoRawSocketUnderTLS(t *testing.T) {
	if rawConnOf(tlsWrapped{}) != nil {
		t.Fatal("a raw socket under TLS")
	}
}

type tlsWrapped struct{ net.Conn }
