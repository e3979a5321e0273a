package raftnode

import (
	"slices"
	"sync/atomic"
	"time"
)

// LatencyBounds are the upper bounds of the buckets of the node's latency
// histograms (Metrics.FsyncLatency, ApplyLatency, CommitLatency): from a
// fast SSD's fsync to a stalled disk's.
var LatencyBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second,
}

// Latency is a histogram of durations over LatencyBounds.
type Latency struct {
	// Counts[i] counts the durations at most LatencyBounds[i] and above
	// the bound before; the last counts those above every bound.
	Counts [len(LatencyBounds) + 1]uint64
	// Sum is the sum of every duration counted.
	Sum time.Duration
}

// Count is the number of durations counted.
func (l Latency) Count() uint64 {
	var n uint64
	for _, c := range l.Counts {
		n += c
	}
	return n
}

// latencyRecorder counts durations into a Latency. One goroutine
// observes while others load, hence atomics: an observation costs a
// search of 15 bounds and two atomic adds.
type latencyRecorder struct {
	counts [len(LatencyBounds) + 1]atomic.Uint64
	sum    atomic.Int64
}

func (r *latencyRecorder) observe(d time.Duration) {
	i, _ := slices.BinarySearch(LatencyBounds[:], d)
	r.counts[i].Add(1)
	r.sum.Add(int64(d))
}

func (r *latencyRecorder) load() Latency {
	var l Latency
	for i := range r.counts {
		l.Counts[i] = r.counts[i].Load()
	}
	l.Sum = time.Duration(r.sum.Load())
	return l
}

// commitClock times how long a leader's entries take to commit: the loop
// notes the last index of each batch of entries it hands to the log
// writer, and when a batch's last entry comes back committed, the time
// since it was handed over is one observation. Loop-owned; a batch is
// noted only while leading, and leadership lost forgets the batches.
type commitClock struct {
	pending []appendedBatch // oldest first, from head on
	head    int
	latency latencyRecorder
}

type appendedBatch struct {
	last uint64 // the batch's last index
	at   time.Time
}

// appended notes a batch of entries ending at index last handed over at.
// The committed batches before head are dropped once they are half the
// slice, so that a leader always appending before its last batch
// committed reuses the slice's array rather than growing it.
func (c *commitClock) appended(last uint64, at time.Time) {
	if c.head > 0 && c.head*2 >= len(c.pending) {
		n := copy(c.pending, c.pending[c.head:])
		c.pending, c.head = c.pending[:n], 0
	}
	c.pending = append(c.pending, appendedBatch{last: last, at: at})
}

// committed observes every noted batch whose entries are committed up to
// index commit, at now.
func (c *commitClock) committed(commit uint64, now time.Time) {
	for c.head < len(c.pending) && c.pending[c.head].last <= commit {
		c.latency.observe(now.Sub(c.pending[c.head].at))
		c.head++
	}
}

// forget drops the noted batches (leadership changed: what this member
// appended as leader may never commit).
func (c *commitClock) forget() { c.pending, c.head = c.pending[:0], 0 }
