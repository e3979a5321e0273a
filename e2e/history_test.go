package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// history is what the clients of a run saw, recorded in one process on
// one monotonic clock, so times are comparable.
type history struct {
	mu     sync.Mutex
	acks   []ackRec   // indices the cluster acknowledged as committed
	ops    []opRec    // acknowledged mutating operations
	writes []writeRec // every write offered to the fenced resources
	// highest accepted token per lock (the fenced resource's state).
	highest map[string]uint64
}

// ackRec: the entry at index (or one after it) was committed by at. Every
// token and every session id is the index of its entry, so each answer
// that carries one bounds when that index committed.
type ackRec struct {
	index uint64
	at    time.Time
}

type opKind int

const (
	opOpen opKind = iota + 1
	opAcquire
	opRelease
	opClose
)

func (k opKind) String() string {
	return [...]string{"?", "open", "acquire", "release", "close"}[k]
}

// opRec is one acknowledged operation and its answer.
type opRec struct {
	kind     opKind
	client   int
	session  uint64
	seq      uint64
	lock     string
	acquired bool      // acquire: granted
	token    uint64    // acquire: token granted; release: token released
	refused  string    // a definite refusal's reason ("" if it succeeded)
	sent     time.Time // acquire: before its first attempt
	at       time.Time
}

// writeRec is one write offered to the fenced resource of lock.
type writeRec struct {
	lock     string
	token    uint64
	client   int
	session  uint64
	at       time.Time // taken under the resource's lock, in accept order
	accepted bool
	// deadline is the writer's deadline for its session as it wrote
	// (sendTime of its last acknowledged keepalive + TTL - margin); zero
	// if the server had refused the session.
	deadline time.Time
	// zombie: written after a simulated pause, knowingly past the
	// client's deadline (see worker.zombie).
	zombie bool
}

func newHistory() *history { return &history{highest: map[string]uint64{}} }

func (h *history) ack(index uint64, at time.Time) {
	h.mu.Lock()
	h.acks = append(h.acks, ackRec{index, at})
	h.mu.Unlock()
}

func (h *history) op(r opRec) {
	h.mu.Lock()
	h.ops = append(h.ops, r)
	h.mu.Unlock()
}

// write is the fenced resource: it accepts a write only if token is at
// least the highest token it accepted for lock, and records every offer
// with the writer's session deadline.
func (h *history) write(lock string, token uint64, client int, session uint64, deadline time.Time) bool {
	return h.offer(writeRec{lock: lock, token: token, client: client, session: session, deadline: deadline})
}

// writeZombie is write from a client that knows it may no longer hold.
func (h *history) writeZombie(lock string, token uint64, client int, session uint64, deadline time.Time) bool {
	return h.offer(writeRec{lock: lock, token: token, client: client, session: session, deadline: deadline, zombie: true})
}

func (h *history) offer(w writeRec) bool {
	lock, token := w.lock, w.token
	h.mu.Lock()
	defer h.mu.Unlock()
	ok := token >= h.highest[lock]
	if ok {
		h.highest[lock] = token
	}
	w.at, w.accepted = time.Now(), ok
	h.writes = append(h.writes, w)
	return ok
}

// checkFencing checks the fenced resources' writes against the grants the
// clients were acknowledged, with no help from the log (checkLogs has
// that):
//
//   - a write made before its writer's session deadline is never refused:
//     the resource refuses only a token below one it accepted, so a
//     refusal means another session got the lock and wrote while this
//     writer still held it by its own reckoning, which the server must
//     never allow (its deadline is at least the client's);
//   - one token of a lock is only ever granted to, and written by, one
//     session (two would be a double grant, whether or not their writes
//     overlapped in time);
//   - a grant's token exceeds that of every grant of the lock acknowledged
//     before it was asked for (equals it, for a re-entry of the same
//     session): that grant's entry committed before this one's was
//     proposed, and tokens of successive holders strictly increase.
//     (Grants acknowledged while another was in flight may come in either
//     order.)
func (h *history) checkFencing() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var bad []string
	owner := map[string]map[uint64]uint64{} // lock -> token -> session
	owns := func(lock string, token, session uint64, what string) {
		if owner[lock] == nil {
			owner[lock] = map[uint64]uint64{}
		}
		if s, ok := owner[lock][token]; ok && s != session {
			bad = append(bad, fmt.Sprintf("lock %s token %d: %s session %d, and earlier to session %d", lock, token, what, session, s))
		}
		owner[lock][token] = session
	}
	for _, w := range h.writes {
		if !w.accepted && w.at.Before(w.deadline) {
			bad = append(bad, fmt.Sprintf("lock %s: the write of session %d with token %d was refused %v before its deadline: another holder had written",
				w.lock, w.session, w.token, w.deadline.Sub(w.at)))
		}
		if w.accepted {
			owns(w.lock, w.token, w.session, "a write accepted from")
		}
	}
	grants := map[string][]opRec{}
	for _, o := range h.ops {
		if o.kind == opAcquire && o.acquired {
			owns(o.lock, o.token, o.session, "granted to")
			grants[o.lock] = append(grants[o.lock], o)
		}
	}
	for lock, gs := range grants {
		acked := slices.SortedFunc(slices.Values(gs), func(a, b opRec) int { return a.at.Compare(b.at) })
		asked := slices.SortedFunc(slices.Values(gs), func(a, b opRec) int { return a.sent.Compare(b.sent) })
		var top opRec // the highest token acknowledged so far
		i := 0
		for _, g := range asked {
			for ; i < len(acked) && acked[i].at.Before(g.sent); i++ {
				if acked[i].token > top.token {
					top = acked[i]
				}
			}
			// Equal is a re-entry if the session is the same.
			if g.token < top.token || g.token == top.token && g.session != top.session {
				bad = append(bad, fmt.Sprintf("lock %s: session %d was granted token %d, not above token %d acknowledged to session %d %v before it asked",
					lock, g.session, g.token, top.token, top.session, g.sent.Sub(top.at)))
			}
		}
	}
	return bad
}

// committedBy returns f(E) = the earliest time at which some answer proved
// an index >= E committed, or the zero time if none did.
func (h *history) committedBy() func(index uint64) time.Time {
	h.mu.Lock()
	acks := slices.Clone(h.acks)
	h.mu.Unlock()
	sort.Slice(acks, func(i, j int) bool { return acks[i].index < acks[j].index })
	// suffix minimum of times
	minAt := make([]time.Time, len(acks))
	for i := len(acks) - 1; i >= 0; i-- {
		minAt[i] = acks[i].at
		if i+1 < len(acks) && minAt[i+1].Before(minAt[i]) {
			minAt[i] = minAt[i+1]
		}
	}
	return func(index uint64) time.Time {
		i := sort.Search(len(acks), func(i int) bool { return acks[i].index >= index })
		if i == len(acks) {
			return time.Time{}
		}
		return minAt[i]
	}
}

func (h *history) counts() (ops, writes, accepted, rejected int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.writes {
		if w.accepted {
			accepted++
		} else {
			rejected++
		}
	}
	return len(h.ops), len(h.writes), accepted, rejected
}

// TestCheckFencing: checkFencing passes a history the rules allow, and
// finds each kind of violation in one doctored to break it.
func TestCheckFencing(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	grant := func(session, token uint64, sent, acked int) opRec {
		return opRec{kind: opAcquire, session: session, lock: "x", acquired: true, token: token, sent: at(sent), at: at(acked)}
	}
	write := func(session, token uint64, when, deadline int, accepted bool) writeRec {
		return writeRec{lock: "x", session: session, token: token, at: at(when), deadline: at(deadline), accepted: accepted}
	}
	good := func() *history {
		return &history{
			ops: []opRec{
				grant(1, 10, 0, 5),
				// Asked while 10 was held; granted after it ended.
				grant(2, 20, 1, 400),
				// Asked before 20 was acknowledged: may be granted first.
				grant(3, 15, 300, 350),
				grant(3, 15, 355, 358), // a re-entry
				{kind: opAcquire, session: 4, lock: "x", sent: at(500), at: at(600)}, // not granted
			},
			writes: []writeRec{
				write(1, 10, 6, 100, true),
				// Session 1's deadline passed: 15 may be granted and written.
				write(3, 15, 360, 2000, true),
				write(1, 10, 370, 100, false),
				write(2, 20, 410, 2000, true),
				// Written without a session (refused by the server).
				{lock: "x", session: 3, token: 15, at: at(420), accepted: false},
			},
		}
	}
	if bad := good().checkFencing(); len(bad) != 0 {
		t.Fatalf("a history the rules allow: %q", bad)
	}
	for _, c := range []struct {
		name   string
		doctor func(h *history)
		want   string
	}{
		{"a write refused before its deadline", func(h *history) {
			h.writes[2].deadline = at(1000)
		}, "refused 630ms before its deadline"},
		{"one token written by two sessions", func(h *history) {
			h.writes = append(h.writes, write(4, 20, 500, 2000, true))
		}, "token 20: a write accepted from session 4, and earlier to session 2"},
		{"one token granted to two sessions", func(h *history) {
			h.ops = append(h.ops, grant(4, 10, 500, 510))
		}, "token 10: granted to session 4, and earlier to session 1"},
		{"a token below one acknowledged before it was asked for", func(h *history) {
			h.ops[2].token, h.writes[1].token = 5, 5
		}, "session 3 was granted token 5, not above token 10 acknowledged to session 1 295ms before it asked"},
		{"a token equal to one acknowledged before", func(h *history) {
			h.ops = append(h.ops, grant(4, 20, 450, 460))
		}, "session 4 was granted token 20, not above token 20 acknowledged to session 2"},
	} {
		h := good()
		c.doctor(h)
		bad := h.checkFencing()
		if len(bad) == 0 || !slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(b, c.want) }) {
			t.Errorf("%s: found %q, want %q", c.name, bad, c.want)
		}
	}
}
