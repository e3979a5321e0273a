package baton

import (
	"context"
	"fmt"
	"time"

	"github.com/batonlock/baton/api/rules"
)

// MaxHolders is the largest holder limit a lock can have: the most permits
// of a Semaphore, the most readers of an RWMutex at once.
const MaxHolders = rules.MaxHoldersPerLock

// DefaultMaxReaders is the reader limit of an RWMutex made without
// WithMaxReaders. Every handle on one lock must state the same limit, so
// change it only for all of a lock's users at once.
const DefaultMaxReaders = MaxHolders

// Semaphore is a handle on a lock that admits up to a number of holders
// at once, each holding one permit: a pool of N connections, N concurrent
// jobs. Every permit is a hold of its own, with its own fencing token and
// Lease, granted in FIFO order (a release wakes exactly the next waiter).
// Like a Mutex, the handle belongs to one (session, owner key): acquiring
// again under the same key re-enters the permit it holds (count + 1)
// instead of taking a second one; a second permit for the same session
// needs another key (WithOwnerKey).
//
// Every handle on one lock name must state the same number of permits
// while anyone holds or waits for it; an acquire stating another fails
// with ErrLimitMismatch.
type Semaphore struct {
	m   Mutex
	err error
}

// Semaphore returns a handle on the lock name as a semaphore of permits
// holders. Nothing is sent until a permit is acquired. A name, a number of
// permits or an option no member would accept, or an option a Semaphore
// does not take (see Mutex), makes every acquire fail at once with an
// error matching ErrInvalidArgument.
func (s *Session) Semaphore(name string, permits int, opts ...HoldOption) *Semaphore {
	sem := &Semaphore{m: *s.mutex(name, newHoldConfig(opts), "Semaphore")}
	if permits < 1 || permits > MaxHolders {
		sem.err = fmt.Errorf("%w: semaphore %q of %d permits; want 1..%d", ErrInvalidArgument, name, permits, MaxHolders)
	}
	sem.m.shared, sem.m.limit = true, uint32(permits)
	return sem
}

// Name is the lock's name.
func (sem *Semaphore) Name() string { return sem.m.name }

// Permits is the number of holders the semaphore admits.
func (sem *Semaphore) Permits() int { return int(sem.m.limit) }

// Acquire takes a permit, waiting in the FIFO queue as long as it takes;
// ctx bounds the wait as for Mutex.Lock.
func (sem *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	if sem.err != nil {
		return nil, sem.err
	}
	return sem.m.Lock(ctx)
}

// TryAcquire takes a permit if one is free and nobody waits, and answers
// at once: a *BusyError (matching ErrLockBusy) names a holder otherwise.
func (sem *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) {
	if sem.err != nil {
		return nil, sem.err
	}
	return sem.m.TryLock(ctx)
}

// AcquireWithin is Acquire with the wait bounded by d on the server (see
// Mutex.LockWithin).
func (sem *Semaphore) AcquireWithin(ctx context.Context, d time.Duration) (*Lease, error) {
	if sem.err != nil {
		return nil, sem.err
	}
	return sem.m.LockWithin(ctx, d)
}

// Release gives back one count of this handle's permit (see
// Mutex.Unlock); Lease.Release does the same for one Lease.
func (sem *Semaphore) Release(ctx context.Context) error { return sem.m.Unlock(ctx) }

// RWMutex is a handle on a read/write lock: many readers at once (up to
// its reader limit) or one writer. The queue is FIFO across both: a reader
// that arrives after a waiting writer waits for that writer, so a stream
// of readers cannot starve writers, and a writer's release lets in the
// whole run of readers queued behind it at once.
//
// Reads and writes of one handle share its (session, owner key): while
// the key holds the lock in one mode, acquiring it in the other fails
// with ErrLimitMismatch (a reader cannot upgrade: two readers doing so
// would wait for each other forever). Use two keys, or release first.
//
// Every handle on one lock name must state the same reader limit
// (WithMaxReaders) while anyone holds or waits for it.
type RWMutex struct {
	r, w Mutex
	err  error
}

// RWMutex returns a handle on the lock name as a read/write lock, of
// DefaultMaxReaders readers unless WithMaxReaders says otherwise. Nothing
// is sent until it is locked. A name or an option no member would accept
// (see Mutex) makes every acquire fail at once with an error matching
// ErrInvalidArgument.
func (s *Session) RWMutex(name string, opts ...HoldOption) *RWMutex {
	cfg := newHoldConfig(opts)
	readers := DefaultMaxReaders
	if cfg.readersSet {
		readers = cfg.maxReaders
	}
	rw := &RWMutex{r: *s.mutex(name, cfg, "RWMutex")}
	if readers < 1 || readers > MaxHolders {
		rw.err = fmt.Errorf("%w: read/write lock %q with %d readers; want 1..%d", ErrInvalidArgument, name, readers, MaxHolders)
	}
	rw.r.limit = uint32(readers)
	rw.w = rw.r
	rw.r.shared = true
	return rw
}

// Name is the lock's name.
func (rw *RWMutex) Name() string { return rw.r.name }

// RLock acquires the lock as a reader, waiting as Mutex.Lock does.
func (rw *RWMutex) RLock(ctx context.Context) (*Lease, error) {
	if rw.err != nil {
		return nil, rw.err
	}
	return rw.r.Lock(ctx)
}

// TryRLock acquires the lock as a reader if no writer holds or waits for
// it and there is room, and answers at once.
func (rw *RWMutex) TryRLock(ctx context.Context) (*Lease, error) {
	if rw.err != nil {
		return nil, rw.err
	}
	return rw.r.TryLock(ctx)
}

// RLockWithin is RLock with the wait bounded by d on the server.
func (rw *RWMutex) RLockWithin(ctx context.Context, d time.Duration) (*Lease, error) {
	if rw.err != nil {
		return nil, rw.err
	}
	return rw.r.LockWithin(ctx, d)
}

// RUnlock releases one count of the handle's read hold.
func (rw *RWMutex) RUnlock(ctx context.Context) error { return rw.r.Unlock(ctx) }

// Lock acquires the lock as the writer, alone, waiting as Mutex.Lock does.
func (rw *RWMutex) Lock(ctx context.Context) (*Lease, error) {
	if rw.err != nil {
		return nil, rw.err
	}
	return rw.w.Lock(ctx)
}

// TryLock acquires the lock as the writer if nobody holds or waits for
// it, and answers at once.
func (rw *RWMutex) TryLock(ctx context.Context) (*Lease, error) {
	if rw.err != nil {
		return nil, rw.err
	}
	return rw.w.TryLock(ctx)
}

// LockWithin is Lock with the wait bounded by d on the server.
func (rw *RWMutex) LockWithin(ctx context.Context, d time.Duration) (*Lease, error) {
	if rw.err != nil {
		return nil, rw.err
	}
	return rw.w.LockWithin(ctx, d)
}

// Unlock releases one count of the handle's write hold.
func (rw *RWMutex) Unlock(ctx context.Context) error { return rw.w.Unlock(ctx) }
