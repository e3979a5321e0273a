package transport

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// RepeatInterval is how often a line that repeats is logged at most
// (repeats): a peer refused as another cluster's reconnects about once a
// second and would log as often, for as long as nobody fixes it; one line
// every half minute, with a count, says the same.
const RepeatInterval = 30 * time.Second

// maxRepeatKeys bounds the lines repeats remembers; past it, it forgets
// those not logged within the interval.
const maxRepeatKeys = 1024

// repeats rate-limits log lines that repeat, by key (a kind of line and
// the peer it is about): the first is logged, then at most one each
// RepeatInterval, which says how many were left out since the one before
// ("... (and 29 more since 10:04:05)"). It is safe for concurrent use.
type repeats struct {
	mu   sync.Mutex
	seen map[string]*repeat
}

type repeat struct {
	logged  time.Time // when the last line of the key was logged
	skipped int       // lines left out since
}

// log logs msg at level with args, unless a line of key was logged less
// than RepeatInterval ago; then it only counts it.
func (r *repeats) log(lg *slog.Logger, level slog.Level, key, msg string, args ...any) {
	now := time.Now()
	r.mu.Lock()
	if r.seen == nil {
		r.seen = make(map[string]*repeat)
	}
	rp := r.seen[key]
	if rp != nil && now.Sub(rp.logged) < RepeatInterval {
		rp.skipped++
		r.mu.Unlock()
		return
	}
	if rp != nil && rp.skipped > 0 {
		msg = fmt.Sprintf("%s (and %d more since %s)", msg, rp.skipped, rp.logged.Format(time.TimeOnly))
	}
	if rp == nil {
		if len(r.seen) >= maxRepeatKeys {
			for k, old := range r.seen {
				if now.Sub(old.logged) >= RepeatInterval {
					delete(r.seen, k)
				}
			}
		}
		rp = &repeat{}
		r.seen[key] = rp
	}
	rp.logged, rp.skipped = now, 0
	r.mu.Unlock()
	lg.Log(context.Background(), level, msg, args...)
}
