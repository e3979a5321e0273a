package server

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton/internal/fsm"
)

// The dashboard's feed, GET /v1/feed: a stream of newline-delimited JSON
// events that tells the page when to read the API again, instead of its
// polling, and carries the recent grants and acquire waits its chart
// draws. The page reads the state itself through the same API as curl
// (linearizable reads, each checked against the caller's permissions); the
// feed only says that something applied, so it leaks no more than the
// applied index:
//
//	{"hello":{"member":"a","you":"alice","may_blacklist":true,"may_release":true}}
//	{"rates":{"through":1764129600,"seconds":[{"second":1764129600,"grants":3,"waits":1,"wait_seconds_sum":0.25},…]}}
//	{"changed":{"applied_index":1042,"leader_id":1,"term":3}}
//	{"error":{"code":14,"message":"this member knows no leader…"}}
//
// hello comes first, then the rates of the last RecentSeconds (only the
// seconds in which something was counted); then a changed event after
// applied batches (at most one per feedMinInterval) and each second the
// rates of the seconds completed since (with a changed event if the
// leader or term moved). Like a Watch stream, the
// feed ends when its member knows no leader or stops; the page connects
// again, to this member, when it can.

// MaxFeeds bounds the dashboard feeds one member serves at once: each is
// a goroutine woken after every applied batch.
const MaxFeeds = 1000

// feedMinInterval spaces the changed events of one feed: each makes the
// page read the API again, and a busy cluster applies hundreds of batches
// a second.
const feedMinInterval = 250 * time.Millisecond

// feedTick is how often a feed sends the seconds of rates completed and
// checks that its member knows a leader.
var feedTick = time.Second

// feedEvent is one line of the feed: exactly one field is set.
type feedEvent struct {
	Hello   *feedHello  `json:"hello,omitempty"`
	Rates   *feedRates  `json:"rates,omitempty"`
	Changed *feedChange `json:"changed,omitempty"`
	Error   *feedError  `json:"error,omitempty"`
}

// feedHello says who the page is and what it may do, so it offers only
// the actions the member would accept (which still checks each one).
type feedHello struct {
	Member string `json:"member"`
	You    string `json:"you"` // the authenticated user, "" with authentication off
	// MayBlacklist: the caller may blacklist sessions (admin over every
	// lock, or an operator when authentication is off).
	MayBlacklist bool `json:"may_blacklist"`
	// MayRelease: the caller may release another's hold conditionally
	// under some prefix (admin over it); the member checks the lock's.
	MayRelease bool `json:"may_release"`
}

// feedRates are the samples of the seconds up to Through in which
// something was counted: a second not listed counted nothing.
type feedRates struct {
	Through int64        `json:"through"` // Unix seconds
	Seconds []RateSample `json:"seconds"`
}

type feedChange struct {
	AppliedIndex uint64 `json:"applied_index"`
	LeaderID     uint64 `json:"leader_id"`
	Term         uint64 `json:"term"`
}

type feedError struct {
	Code    codes.Code `json:"code"`
	Message string     `json:"message"`
}

// applied wakes the feeds after a batch applied: each waits on the
// current channel, which notify closes and replaces.
type applied struct {
	feeds atomic.Int32 // feeds served, read without mu on the apply path

	mu sync.Mutex
	c  chan struct{}
}

// wait returns a channel closed at the next notify.
func (a *applied) wait() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.c == nil {
		a.c = make(chan struct{})
	}
	return a.c
}

// notify wakes every feed waiting.
func (a *applied) notify() {
	if a.feeds.Load() == 0 {
		return
	}
	a.mu.Lock()
	if a.c != nil {
		close(a.c)
		a.c = nil
	}
	a.mu.Unlock()
}

// httpFeed serves the dashboard's feed.
func (s *Server) httpFeed() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		// A plain HTTP handler, as httpWatch: the bearer token is passed
		// on as the gateway passes it.
		ctx := metadata.NewIncomingContext(r.Context(), metadata.Pairs("authorization", r.Header.Get("Authorization")))
		hello, err := s.feedHello(ctx)
		if err == nil {
			defer s.applied.feeds.Add(-1)
			if s.applied.feeds.Add(1) > MaxFeeds {
				err = status.Errorf(codes.ResourceExhausted, "this member serves %d dashboard feeds, its limit; close some", MaxFeeds)
			}
		}
		if err != nil {
			st := status.Convert(s.toStatus(err))
			body, _ := json.Marshal(feedError{Code: st.Code(), Message: st.Message()})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(runtime.HTTPStatusFromCode(st.Code()))
			_, _ = w.Write(append(body, '\n'))
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Cache-Control", "no-cache")
		flusher, _ := w.(http.Flusher)
		send := func(e feedEvent) error {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if _, err := w.Write(append(b, '\n')); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
			return nil
		}
		if err := s.feed(ctx, hello, send); err != nil && r.Context().Err() == nil {
			st := status.Convert(err)
			_ = send(feedEvent{Error: &feedError{Code: st.Code(), Message: st.Message()}})
		}
	}
}

// feedHello authenticates the caller and says what it may do.
func (s *Server) feedHello(ctx context.Context) (*feedHello, error) {
	who, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	h := &feedHello{Member: s.cfg.Name, You: who}
	if !s.authView().enabled {
		ok := s.authorizeOperator(ctx, "Blacklist") == nil
		h.MayBlacklist, h.MayRelease = ok, ok
		return h, nil
	}
	s.node.View(func(m *fsm.Machine) {
		h.MayBlacklist = m.Allowed(who, "", fsm.PermAdmin)
		h.MayRelease = m.AllowedSomewhere(who, fsm.PermAdmin)
	})
	return h, nil
}

// feed sends the events of one feed through send until ctx ends, the
// member stops or knows no leader.
func (s *Server) feed(ctx context.Context, hello *feedHello, send func(feedEvent) error) error {
	if err := send(feedEvent{Hello: hello}); err != nil {
		return err
	}
	last := time.Now().Unix() - 1 // the last second whose rates were sent
	if err := send(feedEvent{Rates: &feedRates{Through: last, Seconds: s.locks.recent.since(last-RecentSeconds+1, last)}}); err != nil {
		return err
	}
	st := s.node.Status()
	sent := feedChange{AppliedIndex: st.Applied, LeaderID: st.Leader, Term: st.Term}
	tick := time.NewTicker(feedTick)
	defer tick.Stop()
	var pending bool              // a batch applied since the last changed event
	var throttle <-chan time.Time // until when the next one must wait
	for {
		var wake <-chan struct{}
		if !pending {
			wake = s.applied.wait()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.stopC:
			return status.Error(codes.Unavailable, "member stopping")
		case <-wake:
			pending = true
		case <-throttle:
			throttle = nil
		case now := <-tick.C:
			if s.node.Leader() == 0 {
				return status.Error(codes.Unavailable, "this member knows no leader, so its state may be behind: the dashboard connects again when it knows one")
			}
			if sec := now.Unix() - 1; sec > last {
				if err := send(feedEvent{Rates: &feedRates{Through: sec, Seconds: s.locks.recent.since(last+1, sec)}}); err != nil {
					return err
				}
				last = sec
			}
			if st := s.node.Status(); st.Leader != sent.LeaderID || st.Term != sent.Term {
				pending = true
			}
		}
		if pending && throttle == nil {
			st := s.node.Status()
			sent = feedChange{AppliedIndex: st.Applied, LeaderID: st.Leader, Term: st.Term}
			if err := send(feedEvent{Changed: &sent}); err != nil {
				return err
			}
			pending = false
			throttle = time.After(feedMinInterval)
		}
	}
}
