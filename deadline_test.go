package baton

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
)

// The tests here hold the client's deadline to its rule, on synctest's
// clock and over connections in memory, so each instant is exact: the
// deadline is the send of the newest answered keepalive (or of the open)
// plus the TTL less SafetyMargin(TTL); the session is in jeopardy at that
// instant; and an answer that comes back after its own deadline does not
// end the jeopardy.

// keepaliveMember answers a session's open after openDelay, and the n-th
// keepalive (from 0) after answerAfter(n), or never if that is negative.
// It records when each keepalive arrived: with no network delay, the
// instant the client sent it.
type keepaliveMember struct {
	fakeMember
	ttl         time.Duration
	openDelay   time.Duration
	answerAfter func(n int) time.Duration

	mu      sync.Mutex
	arrived []time.Time
}

func (f *keepaliveMember) Sessions(gs batonpb.Baton_SessionsServer) error {
	var sendMu sync.Mutex
	answerIn := func(d time.Duration, cr *batonpb.ChannelRequest, resp *batonpb.SessionResponse) {
		resp.Id = cr.GetRequest().GetId()
		go func() {
			time.Sleep(d)
			sendMu.Lock()
			defer sendMu.Unlock()
			gs.Send(&batonpb.SessionsResponse{Responses: []*batonpb.ChannelResponse{{Channel: cr.GetChannel(), Response: resp}}})
		}()
	}
	for {
		msg, err := gs.Recv()
		if err != nil {
			return err
		}
		for _, cr := range msg.GetRequests() {
			r := cr.GetRequest()
			switch {
			case r.GetOpen() != nil || r.GetResume() != nil:
				answerIn(f.openDelay, cr, &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Open{Open: &batonpb.OpenSessionResponse{
					SessionId: 42, Ttl: durationpb.New(f.ttl),
				}}})
			case r.GetKeepAlive() != nil:
				f.mu.Lock()
				n := len(f.arrived)
				f.arrived = append(f.arrived, time.Now())
				f.mu.Unlock()
				if d := f.answerAfter(n); d >= 0 {
					answerIn(d, cr, &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_KeepAlive{KeepAlive: &batonpb.KeepAliveResponse{
						SessionId: 42, Ttl: durationpb.New(f.ttl),
					}}})
				}
			}
		}
	}
}

// keepaliveArrival is when the n-th keepalive arrived.
func (f *keepaliveMember) keepaliveArrival(t *testing.T, n int) time.Time {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.arrived) <= n {
		t.Fatalf("%d keepalives arrived, want keepalive %d", len(f.arrived), n)
	}
	return f.arrived[n]
}

// sessionOn opens a session of f's TTL with f, inside a synctest bubble,
// recording its events, and returns it with the instant before the open
// was sent. The member and the client stop when the test ends; the
// session is abandoned (the member answers no Close).
func sessionOn(t *testing.T, f *keepaliveMember, events *eventLog) (*Session, time.Time) {
	t.Helper()
	cl := serveFakeInMemory(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := time.Now()
	s, err := cl.NewSession(ctx, WithTTL(f.ttl), WithEvents(events.record))
	if err != nil {
		t.Fatal(err)
	}
	return s, before
}

// states lists the states of the events recorded so far.
func (e *eventLog) states() []State {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []State
	for _, ev := range e.evs {
		out = append(out, ev.State)
	}
	return out
}

// TestDeadlineCountsFromTheSend: the open's answer sets the deadline to
// the open's send plus the TTL less the margin, and a keepalive's answer,
// however late, to the keepalive's send plus the same. Counted from the
// answer, the client's deadline would pass after the server's, which
// counts from when the keepalive arrived.
func TestDeadlineCountsFromTheSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl, delay = 3 * time.Second, 500 * time.Millisecond
		f := &keepaliveMember{ttl: ttl, openDelay: delay, answerAfter: func(int) time.Duration { return delay }}
		s, opened := sessionOn(t, f, newEventLog())
		margin := SafetyMargin(ttl)
		if got, want := s.Deadline(), opened.Add(ttl-margin); !got.Equal(want) {
			t.Fatalf("after the open: deadline %v after its send, want %v (TTL %v less the margin %v)", got.Sub(opened), want.Sub(opened), ttl, margin)
		}
		// The first keepalive goes a third of the TTL after the open's
		// answer; its answer comes delay later.
		time.Sleep(ttl/3 + delay)
		synctest.Wait()
		sent := f.keepaliveArrival(t, 0)
		if got, want := s.Deadline(), sent.Add(ttl-margin); !got.Equal(want) {
			t.Fatalf("after a keepalive answered %v after its send: deadline %v after the send, want %v", delay, got.Sub(sent), want.Sub(sent))
		}
	})
}

// TestJeopardyAtTheDeadline: with no keepalive answered, the session is
// healthy until its deadline and in jeopardy from that very instant.
func TestJeopardyAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 3 * time.Second
		f := &keepaliveMember{ttl: ttl, answerAfter: func(int) time.Duration { return -1 }}
		events := newEventLog()
		s, _ := sessionOn(t, f, events)
		deadline := s.Deadline()
		time.Sleep(time.Until(deadline) - time.Nanosecond)
		synctest.Wait()
		if st := s.State(); st != StateHealthy {
			t.Fatalf("a nanosecond before the deadline: %v, want healthy", st)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if st := s.State(); st != StateJeopardy {
			t.Fatalf("at the deadline: %v, want jeopardy", st)
		}
		if ev := events.next(t, StateJeopardy, time.Second); !ev.At.Equal(deadline) {
			t.Fatalf("jeopardy declared %v after the deadline, want at it", ev.At.Sub(deadline))
		}
	})
}

// TestLateAnswerKeepsTheJeopardy: an answer that comes back after the
// deadline it sets has passed moves the deadline but leaves the session in
// jeopardy: the server counted its own deadline from the same keepalive,
// and may be handing the session's holds on.
func TestLateAnswerKeepsTheJeopardy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 3 * time.Second
		margin := SafetyMargin(ttl)
		late := ttl - margin + time.Millisecond
		f := &keepaliveMember{ttl: ttl, answerAfter: func(n int) time.Duration {
			if n == 0 {
				return late
			}
			return -1
		}}
		events := newEventLog()
		s, _ := sessionOn(t, f, events)
		time.Sleep(ttl/3 + late)
		synctest.Wait()
		sent := f.keepaliveArrival(t, 0)
		if got, want := s.Deadline(), sent.Add(ttl-margin); !got.Equal(want) {
			t.Fatalf("the late answer moved the deadline to %v after its send, want %v: was it taken?", got.Sub(sent), want.Sub(sent))
		}
		if st := s.State(); st != StateJeopardy {
			t.Fatalf("after an answer past its deadline: %v, want jeopardy", st)
		}
		for _, st := range events.states() {
			if st == StateSafe {
				t.Fatalf("events %v: an answer past its deadline made the session safe", events.states())
			}
		}
	})
}
