package server

import (
	"slices"
	"testing"
	"time"
)

func TestRecentRates(t *testing.T) {
	var r recentRates
	const t0 = int64(1_764_000_000)
	sec := func(s int64) int64 { return s * int64(time.Second) }
	r.granted(sec(t0))
	r.granted(sec(t0) + 999_999_999) // still second t0
	r.granted(sec(t0 + 2))
	r.waited(time.Unix(t0+2, 0), 250*time.Millisecond)
	r.waited(time.Unix(t0+2, 5), 750*time.Millisecond)

	want := []RateSample{
		{Second: t0, Grants: 2},
		{Second: t0 + 2, Grants: 1, Waits: 2, WaitSum: 1},
	}
	if got := r.since(t0, t0+2); !slices.Equal(got, want) {
		t.Errorf("since(t0, t0+2) = %+v, want %+v", got, want)
	}

	// A second RecentSeconds later takes t0's slot over; t0 itself then
	// counts nothing, and a grant of t0 replayed late is not counted.
	later := t0 + RecentSeconds
	r.granted(sec(later))
	r.granted(sec(t0))
	if got := r.since(later, later); !slices.Equal(got, []RateSample{{Second: later, Grants: 1}}) {
		t.Errorf("since(later) = %+v, want one grant", got)
	}
	if got := r.since(t0, t0); len(got) != 0 {
		t.Errorf("since(t0) after its slot was taken over = %+v, want nothing", got)
	}
	// The window ends at last: t0+2's grant is still in it, t0's is not.
	want = []RateSample{{Second: t0 + 2, Grants: 1, Waits: 2, WaitSum: 1}, {Second: later, Grants: 1}}
	if got := r.since(0, later); !slices.Equal(got, want) {
		t.Errorf("since(0, later) = %+v, want %+v", got, want)
	}
	if got := r.since(5, 4); got != nil {
		t.Errorf("since(5, 4) = %+v, want nil", got)
	}
}
