package main

// The locks one `baton lock` takes: its NAMEs in the mode --permits,
// --read or --write give them, and the locks of --reader, --writer and
// --permit in their own modes, together, all or none.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/api/rules"
)

// lockMember is one lock of a `baton lock`: a mutex, a permit of a
// semaphore of permits (> 0), or a reader or the writer of a read/write
// lock.
type lockMember struct {
	name        string
	permits     int
	read, write bool
	// flag is how the command line named it: "NAME", "--reader" ...
	flag string
}

// shared reports whether the lock may have several holders.
func (mb lockMember) shared() bool { return mb.permits > 1 || mb.read || mb.write }

// String says what the member holds, for errors.
func (mb lockMember) String() string {
	switch {
	case mb.permits > 0:
		return fmt.Sprintf("a permit of %s (a semaphore of %d)", mb.name, mb.permits)
	case mb.read:
		return fmt.Sprintf("a read of %s", mb.name)
	case mb.write:
		return fmt.Sprintf("the write of %s", mb.name)
	}
	return mb.name
}

// memberFlag is a repeatable flag that adds a lock to the set: --reader
// NAME, --writer NAME or --permit NAME=N.
type memberFlag struct {
	members *[]lockMember
	kind    string // "reader", "writer" or "permit"
}

func (f memberFlag) String() string { return "" }

func (f memberFlag) Set(v string) error {
	mb := lockMember{name: v, flag: "--" + f.kind}
	switch f.kind {
	case "reader":
		mb.read = true
	case "writer":
		mb.write = true
	case "permit":
		// The last "=" splits: a lock name may hold one, N cannot.
		i := strings.LastIndex(v, "=")
		if i < 0 {
			return fmt.Errorf("want NAME=N (a semaphore of N permits), e.g. pool/encoders=4")
		}
		n, err := strconv.Atoi(v[i+1:])
		if err != nil || n < 1 || n > baton.MaxHolders {
			return fmt.Errorf("%q is not a number of permits 1..%d", v[i+1:], baton.MaxHolders)
		}
		mb.name, mb.permits = v[:i], n
	}
	*f.members = append(*f.members, mb)
	return nil
}

// checkMembers refuses a set no member would take, before anything is
// sent: a name no lock may have, or a lock named twice (a semaphore with
// two sizes said so).
func checkMembers(members []lockMember) error {
	seen := make(map[string]lockMember, len(members))
	for _, mb := range members {
		if err := rules.CheckLockName(mb.name); err != nil {
			return fmt.Errorf("%w: %w", baton.ErrInvalidArgument, err)
		}
		prev, dup := seen[mb.name]
		switch {
		case dup && prev.permits > 0 && mb.permits > 0 && prev.permits != mb.permits:
			return usagef("semaphore %q is named twice, with %d and %d permits: a lock has one size, and a set holds it once", mb.name, prev.permits, mb.permits)
		case dup:
			return usagef("lock %q is named twice (%s and %s): a set holds each lock once", mb.name, prev, mb)
		}
		seen[mb.name] = mb
	}
	return nil
}

// handle is mb's handle in the session, as a member of a lock set.
func (k lockKind) handle(s *baton.Session, mb lockMember) baton.LockSetMember {
	hold := k.holdOptions()
	switch {
	case mb.permits > 0:
		return s.Semaphore(mb.name, mb.permits, hold...)
	case mb.read:
		return s.RWMutex(mb.name, append(hold, baton.WithMaxReaders(k.maxReaders))...).Reader()
	case mb.write:
		return s.RWMutex(mb.name, append(hold, baton.WithMaxReaders(k.maxReaders))...).Writer()
	}
	return s.Mutex(mb.name, hold...)
}

// acquireSet takes every member or none: at once with --no-wait, else
// waiting (at most wait, if not 0) in each lock's FIFO queue, in name
// order (baton.LockSet.LockAll). A wait that runs out is
// baton.ErrWaitTimedOut.
func acquireSet(ctx context.Context, s *baton.Session, members []lockMember, kind lockKind, wait time.Duration, noWait bool) ([]*baton.Lease, error) {
	handles := make([]baton.LockSetMember, len(members))
	for i, mb := range members {
		handles[i] = kind.handle(s, mb)
	}
	set := s.LockSetOf(handles...)
	if noWait {
		return set.TryLockAll(ctx)
	}
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if wait > 0 {
		wctx, cancel = context.WithTimeout(ctx, wait)
	}
	defer cancel()
	leases, err := set.LockAll(wctx)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, fmt.Errorf("%w: %w", baton.ErrWaitTimedOut, err)
	}
	return leases, err
}

// blocker is the first of members held by another session than s, and
// that holder described, for a set that waited in vain ("" if none is
// now).
func blocker(ctx context.Context, c *baton.Client, s *baton.Session, members []lockMember) (name, who string) {
	for _, mb := range members {
		info, err := c.Get(ctx, mb.name)
		if err != nil {
			continue
		}
		for _, h := range info.Holders {
			if h.SessionID != s.ID() {
				return mb.name, fmt.Sprintf("%s, token %d, since %s", owner4(h), h.Token, ago(h.Since))
			}
		}
	}
	return "", ""
}

// anyLost delivers each of leases that is lost, until stop is closed;
// wait waits for its goroutines.
func anyLost(leases []*baton.Lease, stop <-chan struct{}) (lost <-chan *baton.Lease, wait func()) {
	return anyClosed(leases, (*baton.Lease).Lost, stop)
}

// anyRevoked delivers each of leases whose hold a revoke asks to end
// (Lease.RevokeRequested), until stop is closed; wait waits for its
// goroutines.
func anyRevoked(leases []*baton.Lease, stop <-chan struct{}) (revoked <-chan *baton.Lease, wait func()) {
	return anyClosed(leases, (*baton.Lease).RevokeRequested, stop)
}

// anyClosed delivers each of leases as its channel (which) closes, until
// stop is closed; wait waits for its goroutines.
func anyClosed(leases []*baton.Lease, which func(*baton.Lease) <-chan struct{}, stop <-chan struct{}) (<-chan *baton.Lease, func()) {
	ch := make(chan *baton.Lease, len(leases))
	done := make(chan struct{}, len(leases))
	for _, l := range leases {
		c := which(l)
		go func() {
			defer func() { done <- struct{}{} }()
			select {
			case <-c:
				ch <- l
			case <-stop:
			}
		}()
	}
	return ch, func() {
		for range leases {
			<-done
		}
	}
}

// setKillGrace is killGrace for several holds: SIGKILL must come before
// the shortest lock-delay among them ends, as the next holder of that
// lock may start then.
func setKillGrace(cmdName string, grace time.Duration, set bool, leases []*baton.Lease) time.Duration {
	var shortest time.Duration
	for _, l := range leases {
		if d := l.LockDelay(); d > 0 && (shortest == 0 || d < shortest) {
			shortest = d
		}
	}
	return killGrace(cmdName, grace, set, shortest)
}

// lockEnv is the command's environment for its holds: BATON_LOCK,
// BATON_TOKEN and BATON_SIGNED_TOKEN of the first, and BATON_LOCKS,
// BATON_TOKENS (and BATON_SIGNED_TOKENS) of all, one a line, in the
// set's order.
func lockEnv(leases []*baton.Lease) []string {
	names, tokens, signed := make([]string, len(leases)), make([]string, len(leases)), make([]string, len(leases))
	for i, l := range leases {
		names[i], tokens[i], signed[i] = l.Name(), strconv.FormatUint(l.Token(), 10), l.SignedToken()
	}
	env := []string{
		"BATON_LOCK=" + names[0],
		"BATON_TOKEN=" + tokens[0],
		"BATON_LOCKS=" + strings.Join(names, "\n"),
		"BATON_TOKENS=" + strings.Join(tokens, "\n"),
	}
	if signed[0] != "" {
		env = append(env, "BATON_SIGNED_TOKEN="+signed[0], "BATON_SIGNED_TOKENS="+strings.Join(signed, "\n"))
	}
	return env
}
