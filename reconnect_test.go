package baton

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
)

// breaksStreams is a member that answers a session's open and then ends
// every Sessions stream: at once after answering its resume
// (answerResume), or instead of answering it.
type breaksStreams struct {
	fakeMember
	answerResume bool
	streams      atomic.Int64
}

func (f *breaksStreams) Sessions(gs batonpb.Baton_SessionsServer) error {
	f.streams.Add(1)
	for {
		msg, err := gs.Recv()
		if err != nil {
			return err
		}
		for _, cr := range msg.GetRequests() {
			r := cr.GetRequest()
			if r.GetOpen() == nil && r.GetResume() == nil {
				continue
			}
			if r.GetOpen() != nil || f.answerResume {
				if err := gs.Send(&batonpb.SessionsResponse{Responses: []*batonpb.ChannelResponse{{Channel: cr.GetChannel(),
					Response: &batonpb.SessionResponse{Id: r.GetId(), Kind: &batonpb.SessionResponse_Open{Open: &batonpb.OpenSessionResponse{
						SessionId: 7, Ttl: durationpb.New(10 * time.Second),
					}}}}}}); err != nil {
					return err
				}
			}
			return status.Error(codes.Unavailable, "this member ends every stream")
		}
	}
}

// TestReconnectsBackOff: a session whose every stream ends (as soon as
// its resume is answered, or before) reconnects a few times a second at
// most. Before the backoff, a stream that ended right after its resume
// was resumed in a loop (thousands of streams a second, a whole core):
// the issue 23 client, whose bad request ended each stream it resumed.
// It runs on synctest's clock, over connections in memory.
func TestReconnectsBackOff(t *testing.T) {
	for _, answerResume := range []bool{true, false} {
		name := map[bool]string{true: "ends after the resume", false: "refuses the resume"}[answerResume]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &breaksStreams{answerResume: answerResume}
				// The default backoff: 20 ms doubling to 1 s.
				cl := serveFakeInMemory(t, f)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				// No Close: the member does not answer it; cl.Close abandons s.
				if _, err := cl.NewSession(ctx); err != nil {
					t.Fatal(err)
				}
				// The pauses before the first six reconnects add up to at
				// least 10+20+40+80+160+320 ms (each is half to all of
				// 20 ms << n): in 600 ms, at most six more streams.
				const window = 600 * time.Millisecond
				start := f.streams.Load()
				time.Sleep(window)
				n := f.streams.Load() - start
				t.Logf("%d streams in %v", n, window)
				if n > 6 {
					t.Fatalf("%d streams in %v: reconnects do not back off", n, window)
				}
				if n < 2 {
					t.Fatalf("%d streams in %v: the session stopped reconnecting", n, window)
				}
			})
		})
	}
}
