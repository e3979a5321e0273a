package server

import (
	"sync"
	"time"
)

// RecentSeconds is how far back a member remembers its grants and
// acquire waits second by second, for the dashboard's chart.
const RecentSeconds = 600

// recentRates counts grants and granted acquires' waits per wall-clock
// second over the last RecentSeconds, in a ring indexed by the second: a
// slot is reused when its second comes round again, so nothing needs to
// run between events. Grants are counted by every member as it applies
// them; waits are timed by the leader that received the acquires (as
// baton_lock_wait_seconds), so a follower's ring has none.
type recentRates struct {
	mu    sync.Mutex
	slots [RecentSeconds]rateSlot
}

// rateSlot is what happened in one second.
type rateSlot struct {
	second  int64 // Unix seconds; a slot of another second counts nothing
	grants  uint64
	waits   uint64  // granted acquires whose wait was timed
	waitSum float64 // their waits, in seconds
}

// RateSample is one second of a member's recent rates.
type RateSample struct {
	Second  int64   `json:"second"`           // Unix seconds
	Grants  uint64  `json:"grants"`           // holds granted (applied) in that second
	Waits   uint64  `json:"waits"`            // acquires granted that this member timed as leader
	WaitSum float64 `json:"wait_seconds_sum"` // their waits, in seconds
}

// slot is the slot of second sec, emptied if it held an older second,
// or nil if it holds a later one (sec is over RecentSeconds old).
func (r *recentRates) slot(sec int64) *rateSlot {
	s := &r.slots[uint64(sec)%RecentSeconds]
	switch {
	case s.second > sec:
		return nil
	case s.second < sec:
		*s = rateSlot{second: sec}
	}
	return s
}

// granted counts a grant made by the entry proposed at wall (Unix
// nanoseconds, the proposing leader's clock): every member that applies
// the entry counts it in the same second, a restarted one too as it
// replays its log.
func (r *recentRates) granted(wall int64) {
	r.mu.Lock()
	if s := r.slot(wall / int64(time.Second)); s != nil {
		s.grants++
	}
	r.mu.Unlock()
}

// waited counts a granted acquire that waited d, granted at now.
func (r *recentRates) waited(now time.Time, d time.Duration) {
	r.mu.Lock()
	if s := r.slot(now.Unix()); s != nil {
		s.waits++
		s.waitSum += d.Seconds()
	}
	r.mu.Unlock()
}

// since returns the samples of the seconds from first to last inclusive
// (at most RecentSeconds, the latest) in which something was counted,
// oldest first.
func (r *recentRates) since(first, last int64) []RateSample {
	first = max(first, last-RecentSeconds+1)
	var out []RateSample
	r.mu.Lock()
	defer r.mu.Unlock()
	for sec := first; sec <= last; sec++ {
		if slot := &r.slots[uint64(sec)%RecentSeconds]; slot.second == sec && (slot.grants > 0 || slot.waits > 0) {
			out = append(out, RateSample{Second: sec, Grants: slot.grants, Waits: slot.waits, WaitSum: slot.waitSum})
		}
	}
	return out
}
