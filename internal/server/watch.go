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
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// MaxWatches bounds the Watch streams one member serves at once: each is a
// goroutine, and each is looked at after every applied batch that touches
// its lock.
const MaxWatches = 10000

// watchLeaderCheck is how often a Watch stream checks that its member
// still knows a leader. One that does not (partitioned from the majority)
// applies nothing new, so its watchers would see an old state as current:
// the stream ends instead, and the client follows the lock through another
// member (etcd's clients ask for this with WithRequireLeader).
var watchLeaderCheck = 500 * time.Millisecond

// watcher is one Watch stream: the latest state offered to it and not yet
// sent. A slow reader sees the latest state, never a queue of old ones.
type watcher struct {
	name string
	wake chan struct{} // capacity 1

	mu   sync.Mutex
	next *batonpb.WatchResponse // nil: nothing new
}

// offer makes r the state to send next, unless a later one is there.
func (w *watcher) offer(r *batonpb.WatchResponse) {
	w.mu.Lock()
	if w.next == nil || w.next.GetIndex() <= r.GetIndex() {
		w.next = r
	}
	w.mu.Unlock()
	poke(w.wake)
}

func (w *watcher) take() *batonpb.WatchResponse {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.next
	w.next = nil
	return r
}

// watches routes applied changes to Watch streams. The apply path notes
// which watched locks a command may have changed (touched); at the end of
// the batch (flush) each of them is read once and offered to its watchers.
type watches struct {
	active atomic.Int32 // watchers, read without mu on the apply path

	mu     sync.Mutex
	byName map[string]map[*watcher]struct{}
	dirty  map[string]struct{}
	all    bool // a session ended or a snapshot came: any lock may have changed
}

func newWatches() *watches {
	return &watches{byName: make(map[string]map[*watcher]struct{}), dirty: make(map[string]struct{})}
}

func (ws *watches) add(w *watcher) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.active.Load() >= MaxWatches {
		return status.Errorf(codes.ResourceExhausted, "this member serves %d watches, its limit; watch through another member or close some", MaxWatches)
	}
	m := ws.byName[w.name]
	if m == nil {
		m = make(map[*watcher]struct{})
		ws.byName[w.name] = m
	}
	m[w] = struct{}{}
	ws.active.Add(1)
	return nil
}

func (ws *watches) remove(w *watcher) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if m := ws.byName[w.name]; m != nil {
		if _, ok := m[w]; ok {
			delete(m, w)
			ws.active.Add(-1)
		}
		if len(m) == 0 {
			delete(ws.byName, w.name)
		}
	}
}

// touched notes the locks cmd (with its result res) may have changed.
func (ws *watches) touched(cmd *fsmpb.Command, res *fsmpb.Result) {
	if ws.active.Load() == 0 {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	mark := func(name string) {
		if _, ok := ws.byName[name]; ok {
			ws.dirty[name] = struct{}{}
		}
	}
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_Acquire:
		mark(op.Acquire.GetLock())
	case *fsmpb.Command_Release:
		mark(op.Release.GetLock())
	case *fsmpb.Command_CasRelease:
		mark(op.CasRelease.GetLock())
	case *fsmpb.Command_Proclaim:
		mark(op.Proclaim.GetLock())
	case *fsmpb.Command_CancelWait:
		mark(op.CancelWait.GetLock())
	case *fsmpb.Command_AcquireMany:
		for _, name := range op.AcquireMany.GetLocks() {
			mark(name)
		}
	case *fsmpb.Command_ExpireSession, *fsmpb.Command_CloseSession, *fsmpb.Command_BlacklistSession:
		// Ends holds and waits anywhere (listed in res only in part).
		ws.all = true
	}
	for _, g := range res.GetGrants() {
		mark(g.GetLock())
	}
	for _, e := range res.GetWaitsEnded() {
		mark(e.GetLock())
	}
	// Holds another's request ended (CasRelease, ExpireHold,
	// EndRevokedHold), and holds a Revoke asked to end.
	for _, e := range res.GetHoldsEnded() {
		mark(e.GetLock())
	}
	for _, r := range res.GetHoldsRevoked() {
		mark(r.GetLock())
	}
}

// restored notes that every lock may have changed.
func (ws *watches) restored() {
	if ws.active.Load() == 0 {
		return
	}
	ws.mu.Lock()
	ws.all = true
	ws.mu.Unlock()
}

// flush reads each watched lock that may have changed and offers its state
// to its watchers. view reads the state machine.
func (ws *watches) flush(view func(func(*fsm.Machine))) {
	if ws.active.Load() == 0 {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if !ws.all && len(ws.dirty) == 0 {
		return
	}
	view(func(m *fsm.Machine) {
		offer := func(name string) {
			r := lockState(m, name)
			for w := range ws.byName[name] {
				w.offer(r)
			}
		}
		if ws.all {
			for name := range ws.byName {
				offer(name)
			}
		} else {
			for name := range ws.dirty {
				offer(name)
			}
		}
	})
	ws.all = false
	clear(ws.dirty)
}

func lockState(m *fsm.Machine, name string) *batonpb.WatchResponse {
	r := &batonpb.WatchResponse{Index: m.AppliedIndex()}
	if l, ok := m.Lock(name); ok {
		r.Lock = lockToWire(l)
	}
	return r
}

// Watch implements batonpb.BatonServer.
func (s *Server) Watch(r *batonpb.WatchRequest, stream batonpb.Baton_WatchServer) error {
	return s.watch(stream.Context(), r.GetName(), stream.Send)
}

// watch serves one watch of name through send until ctx ends.
func (s *Server) watch(ctx context.Context, name string, send func(*batonpb.WatchResponse) error) error {
	if err := checkName("name", name); err != nil {
		return s.toStatus(err)
	}
	who, err := s.principal(ctx)
	if err != nil {
		return s.toStatus(err)
	}
	w := &watcher{name: name, wake: make(chan struct{}, 1)}
	// Registered before the first read, so no change after it is missed.
	if err := s.watches.add(w); err != nil {
		return err
	}
	defer s.watches.remove(w)
	if err := s.node.ReadBarrier(ctx); err != nil {
		return s.toStatus(err)
	}
	s.node.View(func(m *fsm.Machine) {
		if err = mayRead(m, who, name); err == nil {
			w.offer(lockState(m, name))
		}
	})
	if err != nil {
		return s.toStatus(err)
	}
	var sent *batonpb.WatchResponse
	check := time.NewTicker(watchLeaderCheck)
	defer check.Stop()
	for {
		select {
		case <-w.wake:
		case <-ctx.Done():
			return s.toStatus(ctx.Err())
		case <-s.stopC:
			return status.Error(codes.Unavailable, "member stopping")
		case <-check.C:
			if s.node.Leader() == 0 {
				return status.Error(codes.Unavailable, "this member knows no leader, so its state may be behind: watch through another member")
			}
			continue
		}
		next := w.take()
		if next == nil || (sent != nil && (next.GetIndex() <= sent.GetIndex() || proto.Equal(next.GetLock(), sent.GetLock()))) {
			continue // nothing newer, or the lock did not change
		}
		if err := send(next); err != nil {
			return err
		}
		sent = next
	}
}

// httpWatch serves Watch over HTTP as newline-delimited JSON, one
// {"result": WatchResponse} object per state, the shape grpc-gateway gives
// streams (its in-process handler cannot serve them):
//
//	curl -N '127.0.0.1:7700/v1/watch?name=leader/jobs'
func (s *Server) httpWatch(marshal func(any) ([]byte, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		flusher, _ := w.(http.Flusher)
		started := false
		// A plain HTTP handler, not the gateway's: the bearer token is
		// passed on as the gateway passes it.
		ctx := metadata.NewIncomingContext(r.Context(), metadata.Pairs("authorization", r.Header.Get("Authorization")))
		err := s.watch(ctx, r.URL.Query().Get("name"), func(resp *batonpb.WatchResponse) error {
			b, err := marshal(resp)
			if err != nil {
				return err
			}
			if !started {
				w.Header().Set("Content-Type", "application/json")
				started = true
			}
			if _, err := w.Write(append(append(append([]byte(`{"result":`), b...), '}'), '\n')); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
			return nil
		})
		if err == nil || r.Context().Err() != nil {
			return
		}
		st := status.Convert(err)
		body, _ := json.Marshal(map[string]any{"code": st.Code(), "message": st.Message()})
		if !started {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(runtime.HTTPStatusFromCode(st.Code()))
			_, _ = w.Write(append(body, '\n'))
			return
		}
		_, _ = w.Write(append(append(append([]byte(`{"error":`), body...), '}'), '\n'))
	}
}
