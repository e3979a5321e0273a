package server

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton/api/batonpb"
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
