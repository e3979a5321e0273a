package fence

import (
	"container/list"
	"context"
	"sync"
)

// DefaultMaxResources is how many resources a Guard remembers when
// NewGuard is given 0: at about a hundred bytes each (more for long
// names), a few megabytes, and more resources than most services have
// written under a lock recently.
const DefaultMaxResources = 1 << 16

// Guard remembers the highest fencing token it has admitted for each
// resource and refuses lower ones: a holder that lost its lock (it paused,
// its session expired, another process got the lock and wrote) cannot
// write after its successor. An equal token is the same holder and is
// admitted. A resource is whatever one lock protects; name it by the
// lock's name.
//
// Do fences a write: it runs the write only if the token is admitted, and
// runs the writes of one resource one at a time, in the order they were
// admitted, so that an admitted holder's write cannot land after a newer
// holder's. Check only admits a token and remembers it.
//
// Memory is bounded: a Guard remembers at most its limit of resources
// (more only while that many writes are under way), forgetting the
// least recently used. Forgetting must not let a stale token in, so the
// Guard keeps a floor, the highest token of any resource it forgot, and
// refuses a token below the floor for a resource it does not remember.
// That is safe because Baton's tokens increase across the whole cluster,
// one per grant: a resource's current holder got its token when it was
// granted, and every token below the floor was granted before the
// forgotten resource's. The price is that a holder that has held its lock
// since before the floor's grant and did not write for long enough to be
// forgotten is refused, as a stale holder would be; it must take the lock
// again (a new token) and retry. Size the limit above the number of
// resources written within the longest hold, and such refusals do not
// happen. Tokens of different Baton clusters are not comparable: use a
// Guard per cluster.
//
// A semaphore's holders hold their permits at once, each with the token
// of its grant, so a Guard keyed by a semaphore's name would refuse every
// holder but the newest. Guard what one holder alone may write: a mutex's
// or a write lock's resource (a read/write lock's readers do not write),
// or, for a semaphore, something each permit's holder owns alone.
//
// A Guard is safe for concurrent use. Its state is in memory only: a
// service that restarts must not admit tokens below those it admitted
// before, so it keeps them with the data (the SQL pattern of this
// package) or starts with SetFloor at the highest token it may have seen.
type Guard struct {
	mu      sync.Mutex
	max     int
	entries map[string]*entry
	lru     list.List // of *entry, most recently admitted at the front
	floor   uint64    // the highest token of a forgotten resource
}

// entry is one resource the Guard remembers.
type entry struct {
	resource string
	seen     uint64        // the highest token admitted; guarded by Guard.mu
	users    int           // Do calls that wait for or hold turn; guarded by Guard.mu
	elem     *list.Element // in Guard.lru; guarded by Guard.mu
	// turn is held (a value in it) by the one Do writing to the resource.
	turn chan struct{}
}

// NewGuard returns a Guard that remembers at most maxResources resources
// (0: DefaultMaxResources).
func NewGuard(maxResources int) *Guard {
	if maxResources <= 0 {
		maxResources = DefaultMaxResources
	}
	return &Guard{max: maxResources, entries: make(map[string]*entry)}
}

// Check admits token for resource and remembers it, or returns a
// *StaleTokenError (matching ErrStale) if a higher token was admitted for
// the resource, or the resource is forgotten and the token is below the
// floor. It does not fence a write made after it returns: a newer holder
// may be admitted and write in between. Use Do for the write, or Check
// where the storage orders the writes itself.
func (g *Guard) Check(resource string, token uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, err := g.admitLocked(resource, token, false)
	return err
}

// Do admits token for resource as Check does and, if it is admitted, runs
// write once no write of the resource is under way, and returns its
// error. While write runs, every other Do of the resource waits, and a Do
// admitted meanwhile with a higher token refuses the lower ones that
// still wait: writes land in the order of their tokens. A token refused
// runs nothing and returns a *StaleTokenError; ctx bounds the wait for
// the write before, not write itself (ctx.Err() then, and the token stays
// remembered).
func (g *Guard) Do(ctx context.Context, resource string, token uint64, write func() error) error {
	g.mu.Lock()
	e, err := g.admitLocked(resource, token, true)
	g.mu.Unlock()
	if err != nil {
		return err
	}
	defer g.unpin(e)
	select {
	case e.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-e.turn }()
	g.mu.Lock()
	seen := e.seen
	g.mu.Unlock()
	if token < seen {
		// A newer holder was admitted while this one waited.
		return &StaleTokenError{Resource: resource, Token: token, Seen: seen}
	}
	return write()
}

// admitLocked admits token for resource, remembering it, and returns the
// resource's entry; pin keeps the entry from being forgotten until
// unpin.
func (g *Guard) admitLocked(resource string, token uint64, pin bool) (*entry, error) {
	e := g.entries[resource]
	switch {
	case e == nil && token < g.floor:
		return nil, &StaleTokenError{Resource: resource, Token: token, Seen: g.floor, Forgotten: true}
	case e == nil:
		e = &entry{resource: resource, seen: token, turn: make(chan struct{}, 1)}
		e.elem = g.lru.PushFront(e)
		g.entries[resource] = e
	case token < e.seen:
		return nil, &StaleTokenError{Resource: resource, Token: token, Seen: e.seen}
	default:
		e.seen = token
		g.lru.MoveToFront(e.elem)
	}
	if pin {
		e.users++
	}
	g.forgetLocked()
	return e, nil
}

// unpin ends a Do's claim on e.
func (g *Guard) unpin(e *entry) {
	g.mu.Lock()
	e.users--
	g.forgetLocked()
	g.mu.Unlock()
}

// forgetLocked forgets the least recently admitted resources that no Do
// uses until at most max remain, raising the floor to their tokens.
func (g *Guard) forgetLocked() {
	for el := g.lru.Back(); el != nil && len(g.entries) > g.max; {
		e := el.Value.(*entry)
		el = el.Prev()
		if e.users > 0 {
			continue
		}
		g.lru.Remove(e.elem)
		delete(g.entries, e.resource)
		g.floor = max(g.floor, e.seen)
	}
}

// Seen is the highest token admitted for resource, and whether the Guard
// remembers the resource (if not, tokens below Floor are refused).
func (g *Guard) Seen(resource string) (token uint64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.entries[resource]; e != nil {
		return e.seen, true
	}
	return 0, false
}

// Floor is the highest token of a resource the Guard forgot: for a
// resource it does not remember, it refuses lower tokens.
func (g *Guard) Floor() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.floor
}

// SetFloor raises the floor to token (it never lowers it), for a service
// that restarts and knows the highest token it may have admitted before:
// the Guard then refuses every token below it for resources it has not
// seen since.
func (g *Guard) SetFloor(token uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.floor = max(g.floor, token)
}

// Len is the number of resources the Guard remembers.
func (g *Guard) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.entries)
}
