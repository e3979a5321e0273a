package e2e

import (
	"fmt"
	"slices"
	"sort"
	"sync"
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
	acquired bool   // acquire: granted
	token    uint64 // acquire: token granted; release: token released
	refused  string // a definite refusal's reason ("" if it succeeded)
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
// least the highest token it accepted for lock, and records every offer.
func (h *history) write(lock string, token uint64, client int, session uint64) bool {
	return h.offer(writeRec{lock: lock, token: token, client: client, session: session})
}

// writeZombie is write from a client that knows it may no longer hold.
func (h *history) writeZombie(lock string, token uint64, client int, session uint64) bool {
	return h.offer(writeRec{lock: lock, token: token, client: client, session: session, zombie: true})
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

// checkFencing checks what the fenced resources alone can show: accepted
// tokens per lock never decrease, and one token is only ever used by one
// session (two sessions writing with the same token would be a double
// grant, whether or not their writes overlapped in time).
func (h *history) checkFencing() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var bad []string
	last := map[string]uint64{}
	owner := map[string]map[uint64]uint64{}
	for _, w := range h.writes {
		if !w.accepted {
			continue
		}
		if w.token < last[w.lock] {
			bad = append(bad, fmt.Sprintf("lock %s: accepted token %d after %d", w.lock, w.token, last[w.lock]))
		}
		last[w.lock] = w.token
		if owner[w.lock] == nil {
			owner[w.lock] = map[uint64]uint64{}
		}
		if s, ok := owner[w.lock][w.token]; ok && s != w.session {
			bad = append(bad, fmt.Sprintf("lock %s token %d: accepted writes from sessions %d and %d", w.lock, w.token, s, w.session))
		}
		owner[w.lock][w.token] = w.session
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
