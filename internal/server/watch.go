package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
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

// MaxWatchBacklog bounds the states one Watch stream has not sent yet,
// and MaxWatchQueueBytes the bytes of those of every stream of a member
// (a state offered to several streams counts once for each). A reader
// whose next state would pass either loses its queue: the stream sends
// the lock's state now instead, with the holds that ended since the last
// state it sent (WatchResponse.missed), from the lock's replicated
// history. So watchers that do not read cost a member a bounded memory.
const (
	MaxWatchBacklog    = 1024
	MaxWatchQueueBytes = 64 << 20
)

// watchQueueBytes is MaxWatchQueueBytes, smaller in tests.
var watchQueueBytes int64 = MaxWatchQueueBytes

// watcher is one Watch stream: the states offered to it and not yet sent,
// in log order, one per entry that changed its lock.
type watcher struct {
	name   string
	wake   chan struct{} // capacity 1
	queued *atomic.Int64 // the member's bytes queued for all watchers (watches.queued)

	mu     sync.Mutex
	queue  []*batonpb.WatchResponse
	bytes  int64 // of queue
	lagged bool  // its queue was dropped (too much waited, or a snapshot came)
}

// offer queues r, of size bytes, or drops the queue when r would pass a
// bound.
func (w *watcher) offer(r *batonpb.WatchResponse, size int64) {
	w.mu.Lock()
	switch {
	case w.lagged:
	case len(w.queue) >= MaxWatchBacklog || w.queued.Load()+size > watchQueueBytes:
		w.dropLocked()
	default:
		w.queue = append(w.queue, r)
		w.bytes += size
		w.queued.Add(size)
	}
	w.mu.Unlock()
	poke(w.wake)
}

// lag drops the queue: the stream catches up from the machine.
func (w *watcher) lag() {
	w.mu.Lock()
	w.dropLocked()
	w.mu.Unlock()
	poke(w.wake)
}

func (w *watcher) dropLocked() {
	w.queued.Add(-w.bytes)
	w.lagged, w.queue, w.bytes = true, nil, 0
}

// take returns the queued states and whether the watcher lagged, and
// empties the queue.
func (w *watcher) take() ([]*batonpb.WatchResponse, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q, lagged := w.queue, w.lagged
	w.queued.Add(-w.bytes)
	w.queue, w.lagged, w.bytes = nil, false, 0
	return q, lagged
}

// watches routes applied changes to Watch streams. As each command is
// applied (inspect, on the Ready loop with the machine locked), every
// watched lock it may have changed is read, and its state, if it differs
// from the last one recorded for the lock, is queued; at the end of the
// batch (flush) the queued states go to their watchers in log order. So a
// watcher sees each change as of its own entry, not only a batch's last.
type watches struct {
	active   atomic.Int32  // watchers, read without mu on the apply path
	catchUps atomic.Uint64 // streams that lagged and caught up from the machine
	queued   atomic.Int64  // bytes of states queued for every watcher (MaxWatchQueueBytes)

	mu      sync.Mutex
	byName  map[string]map[*watcher]struct{}
	last    map[string]*batonpb.WatchResponse // per watched lock: its last state queued or read
	pending []*batonpb.WatchResponse          // states of this batch, in log order
	names   []string                          // the lock of each pending state
	sizes   []int64                           // the encoded size of each pending state
	all     bool                              // a snapshot came: any lock may have changed

	// authGen counts the batches that changed who may read what (users,
	// roles, permissions, tokens, authentication on or off) or brought a
	// snapshot; authDirty notes such a change until the batch's flush.
	// A stream checks its caller again when it moved, before it sends
	// anything newer, and every stream is woken to do so.
	authGen   atomic.Uint64
	authDirty atomic.Bool
}

func newWatches() *watches {
	return &watches{byName: make(map[string]map[*watcher]struct{}), last: make(map[string]*batonpb.WatchResponse)}
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
	w.queued = &ws.queued
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
			w.mu.Lock()
			w.queued.Add(-w.bytes)
			w.queue, w.bytes = nil, 0
			w.mu.Unlock()
		}
		if len(m) == 0 {
			delete(ws.byName, w.name)
			delete(ws.last, w.name)
		}
	}
}

// seed records r as the last state of its lock unless one is recorded
// (inspect keeps it current from then on). Called with the machine read
// locked, at r's index.
func (ws *watches) seed(name string, r *batonpb.WatchResponse) {
	ws.mu.Lock()
	if _, ok := ws.last[name]; !ok {
		ws.last[name] = r
	}
	ws.mu.Unlock()
}

// inspect reads, after the command at index was applied to m, every
// watched lock the command may have changed, and queues the state of each
// that did change.
func (ws *watches) inspect(index uint64, cmd *fsmpb.Command, res *fsmpb.Result, m *fsm.Machine) {
	if ws.active.Load() == 0 {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var marked []string
	var seen map[string]struct{} // marked's names, once there are many
	mark := func(name string) {
		if _, ok := ws.byName[name]; !ok {
			return
		}
		if seen == nil {
			if slices.Contains(marked, name) {
				return
			}
			marked = append(marked, name)
			if len(marked) == 32 {
				// An entry that ends a session's waits for many watched
				// locks: a set, not a scan of those so far for each.
				seen = make(map[string]struct{}, 2*len(marked))
				for _, n := range marked {
					seen[n] = struct{}{}
				}
			}
			return
		}
		if _, dup := seen[name]; !dup {
			seen[name] = struct{}{}
			marked = append(marked, name)
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
	case *fsmpb.Command_ExpireHold:
		mark(op.ExpireHold.GetLock())
	case *fsmpb.Command_EndLockDelay:
		mark(op.EndLockDelay.GetLock())
	case *fsmpb.Command_RevokeHold:
		mark(op.RevokeHold.GetLock())
	case *fsmpb.Command_EndRevokedHold:
		mark(op.EndRevokedHold.GetLock())
	case *fsmpb.Command_AcquireMany:
		for _, name := range op.AcquireMany.GetLocks() {
			mark(name)
		}
	}
	for _, g := range res.GetGrants() {
		mark(g.GetLock())
	}
	for _, e := range res.GetWaitsEnded() {
		mark(e.GetLock())
	}
	for _, e := range res.GetHoldsEnded() {
		mark(e.GetLock())
	}
	for _, r := range res.GetHoldsRevoked() {
		mark(r.GetLock())
	}
	// A session's end ends its holds and waits everywhere, listed in res
	// only in part: a watched lock whose last state shows the session
	// changed.
	for _, id := range res.GetSessionsEnded() {
		for name, r := range ws.last {
			if mentions(r.GetLock(), id) {
				mark(name)
			}
		}
	}
	for _, name := range marked {
		r := lockState(m, name)
		r.Index = index
		if last := ws.last[name]; last != nil && proto.Equal(last.GetLock(), r.GetLock()) {
			continue
		}
		ws.last[name] = r
		ws.pending = append(ws.pending, r)
		ws.names = append(ws.names, name)
		ws.sizes = append(ws.sizes, int64(proto.Size(r)))
	}
}

// mentions reports whether session id holds or waits for l.
func mentions(l *batonpb.Lock, id uint64) bool {
	for _, h := range l.GetHolders() {
		if h.GetSessionId() == id {
			return true
		}
	}
	for _, w := range l.GetWaiters() {
		if w.GetSessionId() == id {
			return true
		}
	}
	return false
}

// restored notes that every lock may have changed (a snapshot replaced
// the machine): every watcher catches up as one that lagged does.
func (ws *watches) restored() {
	if ws.active.Load() == 0 {
		return
	}
	ws.mu.Lock()
	ws.all = true
	ws.mu.Unlock()
}

// authChanged notes that the batch being applied changed who may read
// what.
func (ws *watches) authChanged() { ws.authDirty.Store(true) }

// flush hands the batch's states to their watchers, in log order, or
// after a snapshot makes every watcher catch up. After a batch that
// changed who may read what it wakes every watcher to check its caller
// again; the count moves before any state of the batch is offered, so a
// stream that takes one sees it moved.
func (ws *watches) flush() {
	authMoved := ws.authDirty.Swap(false)
	if authMoved {
		ws.authGen.Add(1)
	}
	if ws.active.Load() == 0 {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if authMoved {
		defer func() {
			for _, set := range ws.byName {
				for w := range set {
					poke(w.wake)
				}
			}
		}()
	}
	for i, r := range ws.pending {
		for w := range ws.byName[ws.names[i]] {
			w.offer(r, ws.sizes[i])
		}
	}
	clear(ws.pending)
	clear(ws.names)
	ws.pending, ws.names, ws.sizes = ws.pending[:0], ws.names[:0], ws.sizes[:0]
	if ws.all {
		ws.all = false
		clear(ws.last)
		for _, set := range ws.byName {
			for w := range set {
				w.lag()
			}
		}
	}
}

func lockState(m *fsm.Machine, name string) *batonpb.WatchResponse {
	r := &batonpb.WatchResponse{Index: m.AppliedIndex()}
	if l, ok := m.Lock(name); ok {
		r.Lock = lockToWire(l)
	}
	return r
}

// catchUp is the state of lock name now and, when after is set, the holds
// of it that ended after index after, from its history, oldest first.
func catchUp(m *fsm.Machine, name string, after uint64) *batonpb.WatchResponse {
	r := lockState(m, name)
	if after == 0 {
		return r
	}
	ends := m.PastHolds(name) // the most recent first
	for i := len(ends) - 1; i >= 0; i-- {
		if ends[i].EndedIndex > after {
			r.Missed = append(r.Missed, pastToWire(ends[i]))
		}
	}
	r.Gap, r.MissedAll = true, m.HistoryComplete(name, after)
	return r
}

// Watch implements batonpb.BatonServer.
func (s *Server) Watch(r *batonpb.WatchRequest, stream batonpb.Baton_WatchServer) error {
	return s.watch(stream.Context(), r.GetName(), r.GetAfterIndex(), stream.Send)
}

// watch serves one watch of name through send until ctx ends: the state
// now (with what ended after index after, if set), then each change.
func (s *Server) watch(ctx context.Context, name string, after uint64, send func(*batonpb.WatchResponse) error) error {
	if err := checkName("name", name); err != nil {
		return s.toStatus(err)
	}
	who, err := s.principal(ctx)
	if err != nil {
		return s.toStatus(err)
	}
	w := &watcher{name: name, wake: make(chan struct{}, 1)}
	// Loaded before the permission is first checked, so that a change
	// after that check shows.
	authGen := s.watches.authGen.Load()
	// Registered before the first read, so no change after it is missed.
	if err := s.watches.add(w); err != nil {
		return err
	}
	defer s.watches.remove(w)
	if err := s.node.ReadBarrier(ctx); err != nil {
		return s.toStatus(err)
	}
	var first *batonpb.WatchResponse
	s.node.View(func(m *fsm.Machine) {
		if err = mayRead(m, who, name); err == nil {
			first = catchUp(m, name, after)
			s.watches.seed(name, lockState(m, name))
		}
	})
	if err != nil {
		return s.toStatus(err)
	}
	if err := send(first); err != nil {
		return err
	}
	sent := first
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
		queue, lagged := w.take()
		if g := s.watches.authGen.Load(); g != authGen {
			// Who may read what changed: a caller that may no longer
			// read the lock (its permission revoked, its user or token
			// gone) gets nothing newer.
			authGen = g
			if err := s.mayStillRead(ctx, name); err != nil {
				return s.toStatus(err)
			}
		}
		if lagged {
			// What the queue held is gone: the state now, with the
			// holds that ended since the last state sent. States
			// offered after this read are newer; older ones are
			// skipped below.
			s.watches.catchUps.Add(1)
			var r *batonpb.WatchResponse
			s.node.View(func(m *fsm.Machine) {
				r = catchUp(m, name, sent.GetIndex())
				s.watches.seed(name, lockState(m, name))
			})
			queue = []*batonpb.WatchResponse{r}
		}
		for _, next := range queue {
			if next.GetIndex() <= sent.GetIndex() || (!next.GetGap() && proto.Equal(next.GetLock(), sent.GetLock())) {
				continue // not newer, or the lock did not change
			}
			if err := send(next); err != nil {
				return err
			}
			sent = next
		}
	}
}

// mayStillRead authenticates the caller of ctx again and checks that it
// may read name, as the state stands.
func (s *Server) mayStillRead(ctx context.Context, name string) error {
	who, err := s.principal(ctx)
	if err != nil {
		return err
	}
	s.node.View(func(m *fsm.Machine) { err = mayRead(m, who, name) })
	return err
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
		var after uint64
		if a := r.URL.Query().Get("after_index"); a != "" {
			var perr error
			if after, perr = strconv.ParseUint(a, 10, 64); perr != nil {
				http.Error(w, fmt.Sprintf("after_index %q is not a log index (an unsigned integer)", a), http.StatusBadRequest)
				return
			}
		}
		err := s.watch(ctx, r.URL.Query().Get("name"), after, func(resp *batonpb.WatchResponse) error {
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
