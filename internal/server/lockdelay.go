package server

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// LockDelays are the lock-delays a member gives the holds of acquires
// that state none (`baton server --lock-delay`): Default, or the delay of
// the longest prefix in ByPrefix that a lock name starts with. The leader
// that proposes an acquire decides, and the log carries its choice, so a
// member's setting changes no hold granted before. Zero values: none.
type LockDelays struct {
	Default  time.Duration
	ByPrefix map[string]time.Duration
}

// Validate reports a delay a hold could not have (rules.CheckLockDelay),
// naming its prefix.
func (d LockDelays) Validate() error {
	if err := rules.CheckLockDelay(d.Default); err != nil {
		return fmt.Errorf("default lock-delay: %w", err)
	}
	for p, v := range d.ByPrefix {
		if err := rules.CheckLockDelay(v); err != nil {
			return fmt.Errorf("lock-delay of prefix %q: %w", p, err)
		}
	}
	return nil
}

// For returns the lock-delay of a hold of name that stated none.
func (d LockDelays) For(name string) time.Duration {
	best, v := -1, d.Default
	for p, pv := range d.ByPrefix {
		if len(p) > best && strings.HasPrefix(name, p) {
			best, v = len(p), pv
		}
	}
	return v
}

// String is the form ParseLockDelays reads, prefixes sorted.
func (d LockDelays) String() string {
	var b strings.Builder
	b.WriteString(d.Default.String())
	for _, p := range slices.Sorted(maps.Keys(d.ByPrefix)) {
		fmt.Fprintf(&b, ",%s=%s", p, d.ByPrefix[p])
	}
	return b.String()
}

// ParseLockDelays reads "DELAY[,PREFIX=DELAY...]": the default, then a
// delay for each prefix ("15s,jobs/=30s,cache/=0s"). Each delay is 0 s ..
// rules.MaxLockDelay in whole seconds.
func ParseLockDelays(s string) (LockDelays, error) {
	var d LockDelays
	parts := strings.Split(s, ",")
	def, err := time.ParseDuration(strings.TrimSpace(parts[0]))
	if err != nil {
		return LockDelays{}, fmt.Errorf("lock-delay %q: the first item is the default, a duration such as 15s", s)
	}
	d.Default = def
	for _, p := range parts[1:] {
		prefix, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || prefix == "" {
			return LockDelays{}, fmt.Errorf("lock-delay %q: %q is not PREFIX=DELAY", s, p)
		}
		dv, err := time.ParseDuration(v)
		if err != nil {
			return LockDelays{}, fmt.Errorf("lock-delay %q: prefix %q: %q is not a duration", s, prefix, v)
		}
		if _, dup := d.ByPrefix[prefix]; dup {
			return LockDelays{}, fmt.Errorf("lock-delay %q: prefix %q twice", s, prefix)
		}
		if d.ByPrefix == nil {
			d.ByPrefix = make(map[string]time.Duration)
		}
		d.ByPrefix[prefix] = dv
	}
	return d, d.Validate()
}

// checkLockDelay validates an acquire's lock_delay (unset: the member's
// default, which the caller fills in).
func checkLockDelay(d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, invalidf("lock_delay: %v", err)
	}
	if err := invalidField("lock_delay", rules.CheckLockDelay(d.AsDuration())); err != nil {
		return 0, err
	}
	return d.AsDuration(), nil
}

// defaultLockDelay gives cmd, an Acquire or AcquireMany, the member's
// default lock-delay for its names (the longest of them for a set) unless
// its request stated one. Below fsm.LockDelayVersion it gives none: the
// cluster has a member that would not read it.
func (s *Server) defaultLockDelay(cmd *fsmpb.Command, stated bool) {
	if stated || s.node.LogVersion() < fsm.LockDelayVersion {
		return
	}
	d := s.cfg.LockDelays
	if d.Default == 0 && len(d.ByPrefix) == 0 {
		return
	}
	if op := cmd.GetAcquire(); op != nil {
		op.LockDelayNanos = int64(d.For(op.GetLock()))
		return
	}
	op := cmd.GetAcquireMany()
	var longest time.Duration
	for _, name := range op.GetLocks() {
		longest = max(longest, d.For(name))
	}
	op.LockDelayNanos = int64(longest)
}
