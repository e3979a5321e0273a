package server

import (
	"testing"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/fsm"
)

func TestStreamQueueKeepsOrderAndEndsWhenFull(t *testing.T) {
	st := newStream(1, fsm.SecretHash{}, "")
	for i := range 3 {
		st.push(&batonpb.SessionResponse{Id: uint64(i)})
	}
	select {
	case <-st.ready:
	default:
		t.Fatal("no ready signal after push")
	}
	got := st.take()
	for i, r := range got {
		if r.GetId() != uint64(i) {
			t.Fatalf("response %d has id %d: order lost", i, r.GetId())
		}
	}
	if len(got) != 3 || len(st.take()) != 0 {
		t.Fatalf("take returned %d, then not empty", len(got))
	}
	for range StreamBuffer + 1 {
		st.push(&batonpb.SessionResponse{})
	}
	select {
	case <-st.ended:
	default:
		t.Fatal("a full queue did not end the stream")
	}
	if st.endErr != errStreamSlow {
		t.Fatalf("ended with %v, want errStreamSlow", st.endErr)
	}
	if n := len(st.take()); n != StreamBuffer {
		t.Fatalf("queue holds %d, want the %d pushed before it filled", n, StreamBuffer)
	}
}
