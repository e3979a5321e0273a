package server

import (
	"slices"
	"sync"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// waitID names one queued acquire.
type waitID struct {
	session uint64
	seq     uint64
}

// waitEvent is how a queued acquire ended: granted, or not.
type waitEvent struct {
	grant *fsmpb.Grant
	ended *fsmpb.WaitEnded
}

// hub routes apply-time events to their listeners: unary acquires waiting
// for a grant, and session streams. publish runs on the apply path and
// never blocks.
type hub struct {
	mu sync.Mutex
	// waits has every listener of a queued acquire: more than one when a
	// retry of the same request waits too, or when someone else's request
	// names the same session and seq (the log refuses it, and its handler
	// then forgets its own listener, not the owner's).
	waits   map[waitID][]chan waitEvent
	streams map[uint64]map[*stream]struct{}
	muxes   map[*mux]struct{} // Sessions streams: dropAll ends them too

	// wakes are the stream senders to wake at the end of the Ready
	// loop's batch (flush).
	wakes []chan struct{}
}

// wakeLater wakes w at the next flush.
func (h *hub) wakeLater(w chan struct{}) {
	h.mu.Lock()
	h.wakes = append(h.wakes, w)
	h.mu.Unlock()
}

// flush wakes the senders of everything queued since the last flush.
func (h *hub) flush() {
	h.mu.Lock()
	ws := h.wakes
	h.wakes = nil
	h.mu.Unlock()
	for _, w := range ws {
		poke(w)
	}
}

func newHub() *hub {
	return &hub{
		waits:   make(map[waitID][]chan waitEvent),
		streams: make(map[uint64]map[*stream]struct{}),
		muxes:   make(map[*mux]struct{}),
	}
}

// expect registers interest in the outcome of a queued acquire before it
// is proposed, so no grant can slip by unseen.
func (h *hub) expect(id waitID) chan waitEvent {
	ch := make(chan waitEvent, 1)
	h.mu.Lock()
	h.waits[id] = append(h.waits[id], ch)
	h.mu.Unlock()
	return ch
}

// forget drops the listener ch of id (the others stay).
func (h *hub) forget(id waitID, ch chan waitEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	chs := slices.DeleteFunc(h.waits[id], func(c chan waitEvent) bool { return c == ch })
	if len(chs) == 0 {
		delete(h.waits, id)
	} else {
		h.waits[id] = chs
	}
}

func (h *hub) attach(st *stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.streams[st.session]
	if m == nil {
		m = make(map[*stream]struct{})
		h.streams[st.session] = m
	}
	m[st] = struct{}{}
}

func (h *hub) detach(st *stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.streams[st.session]; m != nil {
		delete(m, st)
		if len(m) == 0 {
			delete(h.streams, st.session)
		}
	}
}

func (h *hub) attachMux(m *mux) {
	h.mu.Lock()
	h.muxes[m] = struct{}{}
	h.mu.Unlock()
}

func (h *hub) detachMux(m *mux) {
	h.mu.Lock()
	delete(h.muxes, m)
	h.mu.Unlock()
}

// dropAll ends every attached stream with err (this node stopped leading),
// then every Sessions stream, after the ends of its channels.
func (h *hub) dropAll(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.streams {
		for st := range m {
			st.end(err)
		}
	}
	for m := range h.muxes {
		m.drop(err)
	}
}

func (h *hub) publish(res *fsmpb.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range res.GetGrants() {
		id := waitID{g.GetSessionId(), g.GetAcquireSeq()}
		for _, ch := range h.waits[id] {
			ch <- waitEvent{grant: g}
		}
		delete(h.waits, id)
		for st := range h.streams[g.GetSessionId()] {
			if wk := st.queueResponse(&batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Grant{Grant: &batonpb.Grant{
				Seq: g.GetAcquireSeq(), Name: g.GetLock(), Token: g.GetToken(),
			}}}); wk != nil {
				h.wakes = append(h.wakes, wk)
			}
		}
	}
	for _, w := range res.GetWaitsEnded() {
		id := waitID{w.GetSessionId(), w.GetAcquireSeq()}
		for _, ch := range h.waits[id] {
			ch <- waitEvent{ended: w}
		}
		delete(h.waits, id)
		for st := range h.streams[w.GetSessionId()] {
			if wk := st.queueResponse(&batonpb.SessionResponse{Kind: &batonpb.SessionResponse_WaitEnded{WaitEnded: &batonpb.WaitEnded{
				Seq: w.GetAcquireSeq(), Name: w.GetLock(), Reason: reasonOfFSM(w.GetError()),
			}}}); wk != nil {
				h.wakes = append(h.wakes, wk)
			}
		}
	}
	for _, e := range res.GetHoldsEnded() {
		// Best effort, like every push: a session not connected now
		// learns it when its next Release of the hold fails.
		for st := range h.streams[e.GetSessionId()] {
			if wk := st.queueResponse(&batonpb.SessionResponse{Kind: &batonpb.SessionResponse_HoldLost{HoldLost: &batonpb.HoldLost{
				Name: e.GetLock(), OwnerKey: e.GetOwnerKey(), Token: e.GetToken(),
			}}}); wk != nil {
				h.wakes = append(h.wakes, wk)
			}
		}
	}
	for _, id := range res.GetSessionsEnded() {
		for st := range h.streams[id] {
			if st.closing.Load() {
				continue // the close's reply ends it
			}
			st.push(&batonpb.SessionResponse{Kind: &batonpb.SessionResponse_SessionLost{SessionLost: &batonpb.Error{
				Code: 5, Reason: batonpb.Reason_SESSION_EXPIRED, Message: "session ended",
			}}})
			st.end(nil)
		}
	}
}
