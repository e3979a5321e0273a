package raftnode

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton/internal/fsm"
)

func TestLatencyBuckets(t *testing.T) {
	for _, tt := range []struct {
		d      time.Duration
		bucket int
	}{
		{0, 0},
		{100 * time.Microsecond, 0}, // a bound is in its own bucket
		{100*time.Microsecond + 1, 1},
		{3 * time.Millisecond, 5},
		{5 * time.Second, len(LatencyBounds) - 1},
		{time.Minute, len(LatencyBounds)},
	} {
		t.Run(tt.d.String(), func(t *testing.T) {
			var r latencyRecorder
			r.observe(tt.d)
			l := r.load()
			if l.Counts[tt.bucket] != 1 || l.Count() != 1 || l.Sum != tt.d {
				t.Fatalf("%v counted as %+v, want only bucket %d", tt.d, l, tt.bucket)
			}
		})
	}
}

func TestCommitClock(t *testing.T) {
	var c commitClock
	t0 := time.Unix(0, 0)
	c.appended(5, t0)
	c.appended(9, t0.Add(time.Millisecond))
	c.committed(7, t0.Add(3*time.Millisecond)) // the first batch only
	if l := c.latency.load(); l.Count() != 1 || l.Sum != 3*time.Millisecond {
		t.Fatalf("after the first batch committed: %+v", l)
	}
	c.committed(9, t0.Add(4*time.Millisecond))
	if l := c.latency.load(); l.Count() != 2 || l.Sum != 6*time.Millisecond {
		t.Fatalf("after both committed: %+v", l)
	}
	// A leader that always appends before its last batch committed
	// keeps the array it has.
	for i := range uint64(1000) {
		c.appended(10+2*i, t0)
		c.committed(9+2*i, t0)
	}
	if len(c.pending)-c.head != 1 || cap(c.pending) > 4 {
		t.Fatalf("%d batches pending in an array of %d", len(c.pending)-c.head, cap(c.pending))
	}
	c.appended(12, t0)
	c.forget()
	c.committed(2012, t0.Add(time.Second))
	if l := c.latency.load(); l.Count() != 2+999 {
		t.Fatalf("a forgotten batch was timed: %+v", l)
	}
}

// Each command proposed alone on a lone member is at least one synced
// write, one batch committed and one applied (the member may propose
// entries of its own meanwhile, a log version raise), at most one of each
// a Ready; every synced write is timed; the member saw one leader.
func TestMetricsTimeWritesCommitsAndApplies(t *testing.T) {
	n := startLone(t, &memStore{})
	s := open(t, n, "a")
	before := n.Metrics()
	const commands = 5
	for i := range commands {
		res, _, err := n.Propose(context.Background(), acquire(s, uint64(i+1), fmt.Sprintf("k%d", i)))
		if err == nil {
			err = fsm.ErrorOf(res)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// The last Ready's timing and counters are done once a read has made
	// its round after it.
	if err := n.ReadBarrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := n.Metrics()
	// A write of the member's own may end between the two reads.
	if got, want := after.FsyncLatency.Count()-before.FsyncLatency.Count(), after.Fsyncs-before.Fsyncs; got < want || got > want+1 || got < commands {
		t.Errorf("%d synced writes timed, %d synced for %d commands", got, want, commands)
	}
	readies := after.Readies - before.Readies
	for _, l := range []struct {
		what          string
		before, after Latency
	}{
		{"commits", before.CommitLatency, after.CommitLatency},
		{"applies", before.ApplyLatency, after.ApplyLatency},
	} {
		if got := l.after.Count() - l.before.Count(); got < commands || got > readies {
			t.Errorf("%d %s timed for %d commands proposed one at a time in %d Readies", got, l.what, commands, readies)
		}
	}
	if after.LeaderChanges != 1 {
		t.Errorf("a lone member saw %d leader changes, want 1", after.LeaderChanges)
	}
}
