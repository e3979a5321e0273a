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

// hub routes answers to their listeners: apply-time events (publish) to
// the unary acquires waiting for them and to the channels of their
// sessions, and every answer and push for a channel out through send.
// Nothing in it blocks.
//
// Locks: a stream's sendMu, then mu, then a stream's mu, then wakeMu.
type hub struct {
	mu sync.Mutex
	// waits has every listener of a queued acquire: more than one when a
	// retry of the same request waits too, or when someone else's request
	// names the same session and seq (the log refuses it, and its handler
	// then forgets its own listener, not the owner's).
	waits map[waitID][]chan waitEvent
	// channels has every attached channel, by session: a session may be
	// on more than one while a resume replaces a broken stream.
	channels map[uint64]map[*channel]struct{}
	streams  map[*sessionsStream]struct{} // dropAll ends them

	// signs: grants pushed carry their mode for the sender to sign
	// (Config.SignedTokens).
	signs bool

	wakeMu sync.Mutex
	// wakes are the stream senders to wake at the end of the Ready
	// loop's batch (flush): each at most once.
	wakes []*sessionsStream
	// flushQ are the streams the flusher sends for (flush.go), and
	// flushReady wakes it.
	flushQ     []*sessionsStream
	flushReady chan struct{}
}

func newHub() *hub {
	return &hub{
		waits:    make(map[waitID][]chan waitEvent),
		channels: make(map[uint64]map[*channel]struct{}),
		streams:  make(map[*sessionsStream]struct{}),

		flushReady: make(chan struct{}, 1),
	}
}

// send queues r on its channel's stream without blocking: every answer
// and every push for a channel, and its end, leaves the server through
// here, in the order sent. The stream's sender is woken when r is the
// first thing queued since it last took: at once, or, with later (the
// caller is the Ready loop), at the end of the loop's batch (flush), so
// that the answers of one applied batch leave together, in one message
// per stream. A full queue fails the whole stream (its client reads too
// slowly); what comes for a channel after its end is dropped.
func (h *hub) send(r reply, later bool) {
	st := r.ch.stream
	st.mu.Lock()
	wake := false
	switch {
	case r.ch.ended || st.overflow:
	case len(st.queue) >= StreamBuffer:
		st.overflow, wake = true, true
	default:
		st.queue = append(st.queue, r)
		wake = len(st.queue) == 1
	}
	if r.end {
		r.ch.ended = true
	}
	st.mu.Unlock()
	if !wake {
		return
	}
	if later {
		h.wakeMu.Lock()
		h.wakes = append(h.wakes, st)
		h.wakeMu.Unlock()
		return
	}
	poke(st.ready)
}

// end ends ch after everything sent to it before: cleanly with a nil
// err, else with err.
func (h *hub) end(ch *channel, err error) {
	h.send(reply{ch: ch, end: true, err: err}, false)
}

// flush wakes the senders of everything queued since the last flush:
// the flusher once for the streams it may send for (fast), each other
// stream's sender for its own.
func (h *hub) flush() {
	h.wakeMu.Lock()
	defer h.wakeMu.Unlock()
	fast := false
	for i, st := range h.wakes {
		if st.fast != nil {
			h.flushQ = append(h.flushQ, st)
			fast = true
		} else {
			poke(st.ready)
		}
		h.wakes[i] = nil
	}
	h.wakes = h.wakes[:0]
	if fast {
		poke(h.flushReady)
	}
}

// takeFlush returns the streams queued for the flusher, and keeps spare
// (emptied) for the next ones.
func (h *hub) takeFlush(spare []*sessionsStream) []*sessionsStream {
	h.wakeMu.Lock()
	defer h.wakeMu.Unlock()
	q := h.flushQ
	h.flushQ = spare[:0]
	return q
}

// poke signals a capacity-1 wake-up channel without blocking.
func poke(w chan struct{}) {
	select {
	case w <- struct{}{}:
	default:
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

func (h *hub) attach(ch *channel) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.channels[ch.session]
	if m == nil {
		m = make(map[*channel]struct{})
		h.channels[ch.session] = m
	}
	m[ch] = struct{}{}
}

func (h *hub) detach(ch *channel) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.channels[ch.session]; m != nil {
		delete(m, ch)
		if len(m) == 0 {
			delete(h.channels, ch.session)
		}
	}
}

func (h *hub) attachStream(st *sessionsStream) {
	h.mu.Lock()
	h.streams[st] = struct{}{}
	h.mu.Unlock()
}

func (h *hub) detachStream(st *sessionsStream) {
	h.mu.Lock()
	delete(h.streams, st)
	h.mu.Unlock()
}

// dropAll ends every attached channel with err (this node stopped
// leading), then every Sessions stream, after the ends of its channels.
func (h *hub) dropAll(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.channels {
		for ch := range m {
			h.end(ch, err)
		}
	}
	for st := range h.streams {
		st.drop(err)
	}
}

// publish routes what one applied command ended or granted to whoever
// waits for it: the unary acquires waiting for a queued grant, and the
// channels of the sessions it names. It runs on the Ready loop.
func (h *hub) publish(res *fsmpb.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var modeIn func(*fsmpb.Grant) grantMode
	if h.signs && len(res.GetGrants()) > 0 {
		modeIn = grantModesIn(res)
	}
	for _, g := range res.GetGrants() {
		id := waitID{g.GetSessionId(), g.GetAcquireSeq()}
		for _, w := range h.waits[id] {
			w <- waitEvent{grant: g}
		}
		delete(h.waits, id)
		var sign *grantMode
		if h.signs {
			mode := modeIn(g)
			sign = &mode
		}
		for ch := range h.channels[g.GetSessionId()] {
			h.send(reply{ch: ch, resp: &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Grant{Grant: &batonpb.Grant{
				Seq: g.GetAcquireSeq(), Name: g.GetLock(), Token: g.GetToken(),
			}}}, sign: sign}, true)
		}
	}
	for _, e := range res.GetWaitsEnded() {
		id := waitID{e.GetSessionId(), e.GetAcquireSeq()}
		for _, w := range h.waits[id] {
			w <- waitEvent{ended: e}
		}
		delete(h.waits, id)
		for ch := range h.channels[e.GetSessionId()] {
			h.send(reply{ch: ch, resp: &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_WaitEnded{WaitEnded: &batonpb.WaitEnded{
				Seq: e.GetAcquireSeq(), Name: e.GetLock(), Reason: reasonOfFSM(e.GetError()),
				DeadlockCycle: cycleToWire(e.GetDeadlock().GetEdges()),
			}}}}, true)
		}
	}
	for _, e := range res.GetHoldsEnded() {
		// Best effort, like every push: a session not connected now
		// learns it when its next Release of the hold fails.
		for ch := range h.channels[e.GetSessionId()] {
			h.send(reply{ch: ch, resp: &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_HoldLost{HoldLost: &batonpb.HoldLost{
				Name: e.GetLock(), OwnerKey: e.GetOwnerKey(), Token: e.GetToken(),
			}}}}, true)
		}
	}
	for _, r := range res.GetHoldsRevoked() {
		// Best effort too: a session not connected now learns it from
		// the SessionHolds that follows its resume.
		for ch := range h.channels[r.GetSessionId()] {
			h.send(reply{ch: ch, resp: revokeRequested(r.GetLock(), r.GetOwnerKey(), r.GetToken(), r.GetGraceNanos(), r.GetDeadlineUnixNano())}, true)
		}
	}
	for _, id := range res.GetSessionsEnded() {
		for ch := range h.channels[id] {
			if ch.closing.Load() {
				continue // the close's reply ends it
			}
			h.send(reply{ch: ch, resp: &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_SessionLost{SessionLost: &batonpb.Error{
				Code: 5, Reason: batonpb.Reason_SESSION_EXPIRED, Message: "session ended",
			}}}}, true)
			h.end(ch, nil)
		}
	}
}
