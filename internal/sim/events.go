package sim

// event is fn, due at virtual time at; seq orders events due at the same
// time by when they were scheduled, so the order of a run is total and a
// seed replays it exactly. A routine event is the cluster's own traffic
// (Sim.afterRoutine).
type event struct {
	at      int64
	seq     uint64
	fn      func()
	routine bool
}

func (e *event) before(o *event) bool {
	if e.at != o.at {
		return e.at < o.at
	}
	return e.seq < o.seq
}

// eventQueue is a binary min-heap of events by (at, seq). It holds them
// by value: a scenario schedules tens of thousands, and container/heap
// would box each one.
type eventQueue []event

func (q eventQueue) Len() int { return len(q) }

func (q *eventQueue) push(e event) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h[i].before(&h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

// pop removes and returns the earliest event; the queue must not be empty.
func (q *eventQueue) pop() event {
	h := *q
	e := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = event{} // drop the closure for the collector
	h = h[:last]
	for i := 0; ; {
		first, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h[l].before(&h[first]) {
			first = l
		}
		if r < len(h) && h[r].before(&h[first]) {
			first = r
		}
		if first == i {
			break
		}
		h[i], h[first] = h[first], h[i]
		i = first
	}
	*q = h
	return e
}
