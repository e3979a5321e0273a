// Package gcfloor keeps the Go garbage collector from running on every few
// megabytes of allocation while the live heap is small.
//
// With GOGC=100 the collector runs whenever the heap has grown by as much
// as is live. A member under load with a small state (a few MB live)
// allocates that much in milliseconds, so it collects hundreds of times a
// second. After every collection, Start sets GOGC so that the heap may grow
// to about a floor before the next one, and leaves GOGC at the process's
// setting once the live heap passes the floor: a member holding a million
// locks collects as it would without it, and its memory is not doubled.
//
// Past the floor the only other intervention is raftnode's: a collection,
// returning the freed pages to the OS, right after saving a snapshot of
// 16 MiB or more, whose buffers would otherwise set the next goal (see
// docs/BENCHMARKS.md, "Memory at 1,000,000 locks").
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// MaxPercent caps the GOGC that Start sets.
const MaxPercent = 2000

// Percent is the GOGC that lets a heap with live bytes grow to about floor
// before the next collection, never below base (the process's own GOGC)
// and never above MaxPercent.
func Percent(live, floor uint64, base int) int {
	if live >= floor {
		return base
	}
	live = max(live, 1)
	p := int(min((floor-live)*100/live, MaxPercent))
	return max(p, base)
}

// Start tunes GOGC after every collection from the live heap, until the
// returned stop is called, which restores the process's setting. With
// floor 0, or GOGC=off, it does nothing.
func Start(floor uint64) (stop func()) {
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if base < 0 || floor == 0 {
		return func() {}
	}
	var stopped atomic.Bool
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	last := base
	// A cleanup runs (on the runtime's cleanup goroutine, one at a time)
	// after the collection that found its object unreachable; each run
	// arms the next, so tune follows every collection.
	var arm func()
	tune := func(struct{}) {
		if stopped.Load() {
			return
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			if p := Percent(sample[0].Value.Uint64(), floor, base); p != last {
				debug.SetGCPercent(p)
				last = p
			}
		}
		arm()
	}
	arm = func() {
		runtime.AddCleanup(new([16]byte), tune, struct{}{})
	}
	arm()
	return func() {
		if !stopped.Swap(true) {
			debug.SetGCPercent(base)
		}
	}
}
