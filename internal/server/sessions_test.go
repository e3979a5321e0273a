package server

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/streamconn"
)

// ready reports whether st's sender was woken, and takes the wake-up.
func ready(st *sessionsStream) bool {
	select {
	case <-st.ready:
		return true
	default:
		return false
	}
}

func TestSendKeepsOrderAndWakesOncePerBatch(t *testing.T) {
	h := newHub()
	st := newSessionsStream()
	a, b := &channel{id: 1, stream: st}, &channel{id: 2, stream: st}

	// From the Ready loop: nobody is woken before the batch's flush, and
	// the flush wakes the sender once for the whole batch.
	for i := range 3 {
		h.send(reply{ch: a, resp: &batonpb.SessionResponse{Id: uint64(i)}}, true)
		h.send(reply{ch: b, resp: &batonpb.SessionResponse{Id: uint64(i)}}, true)
	}
	if ready(st) {
		t.Fatal("the sender was woken before the batch's flush")
	}
	if len(h.wakes) != 1 {
		t.Fatalf("the batch wakes %d senders, want 1", len(h.wakes))
	}
	h.flush()
	if !ready(st) {
		t.Fatal("the flush did not wake the sender")
	}
	q, overflow := st.take()
	if overflow || len(q) != 6 {
		t.Fatalf("took %d replies (overflow %v), want 6", len(q), overflow)
	}
	for i, r := range q {
		if want := []*channel{a, b}[i%2]; r.ch != want || r.resp.GetId() != uint64(i/2) {
			t.Fatalf("reply %d is %d on channel %d: order lost", i, r.resp.GetId(), r.ch.id)
		}
	}

	// From anywhere else: at once.
	h.send(reply{ch: a, resp: &batonpb.SessionResponse{Id: 9}}, false)
	if !ready(st) {
		t.Fatal("an answer off the Ready loop did not wake the sender")
	}
	// A channel's end comes after what was sent before it, and nothing
	// sent after it goes out.
	h.end(a, nil)
	h.send(reply{ch: a, resp: &batonpb.SessionResponse{Id: 10}}, false)
	if q, _ := st.take(); len(q) != 2 || q[0].resp.GetId() != 9 || !q[1].end {
		t.Fatalf("took %v, want the answer then the end", q)
	}
}

func TestSendFailsTheStreamWhenFull(t *testing.T) {
	h := newHub()
	st := newSessionsStream()
	ch := &channel{id: 1, stream: st}
	for range StreamBuffer + 1 {
		h.send(reply{ch: ch, resp: &batonpb.SessionResponse{}}, false)
	}
	q, overflow := st.take()
	if !overflow {
		t.Fatal("a full queue did not fail the stream")
	}
	if len(q) != StreamBuffer {
		t.Fatalf("queue holds %d, want the %d sent before it filled", len(q), StreamBuffer)
	}
}

// An old client's Session stream is refused with a code it knows and a
// message that names the fix.
func TestSessionStreamIsRefused(t *testing.T) {
	err := New(Config{}).Session(nil)
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "use a client that speaks Sessions") {
		t.Fatalf("Session: %v, want UNIMPLEMENTED naming Sessions", err)
	}
}

// On the framing the sender reuses one message from send to send: each
// send carries exactly what was queued since the last, and what it sent is
// not kept alive by the reused buffers.
func TestSendQueuedReusesItsMessage(t *testing.T) {
	s := New(Config{})
	st := newSessionsStream()
	srv, cli := net.Pipe()
	defer srv.Close()
	defer cli.Close()
	cs := &connStream{ctx: context.Background(), c: srv}
	ch := &channel{id: 3, stream: st}
	frames := streamconn.NewReader(cli, 4<<10)
	for _, ids := range [][]uint64{{1, 2, 3}, {4}, {5, 6}} {
		for _, id := range ids {
			s.hub.send(reply{ch: ch, resp: &batonpb.SessionResponse{Id: id}}, false)
		}
		errc := make(chan error, 1)
		go func() { errc <- s.sendQueued(cs, st) }()
		kind, payload, err := frames.Next(1 << 20)
		if err != nil || kind != streamconn.KindMessage {
			t.Fatalf("frame of kind %d, %v", kind, err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		var got batonpb.SessionsResponse
		if err := proto.Unmarshal(payload, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.GetResponses()) != len(ids) {
			t.Fatalf("sent %d responses, want %d: %v", len(got.GetResponses()), len(ids), &got)
		}
		for i, r := range got.GetResponses() {
			if r.GetChannel() != 3 || r.GetResponse().GetId() != ids[i] {
				t.Fatalf("response %d: %v, want id %d on channel 3", i, r, ids[i])
			}
		}
		for i := range st.out.crs {
			if st.out.crs[i].Response != nil {
				t.Fatal("the reused buffers keep a sent response alive")
			}
		}
	}
}
