package fsm

import (
	"slices"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Conversions between the machine's compact records (holder, waiter,
// cachedResult, outcome, holderCopy) and the fsmpb messages it hands out and
// snapshots. The machine keeps no message of its own: it builds them at the
// edges (results, reads, snapshots). TestConversionsKeepEveryField fails
// when a field is added to one of these messages and not here.

// protoAlloc hands out the messages a conversion fills. A nil *protoAlloc
// allocates fresh ones (results and reads, which the caller keeps); the
// snapshot encoder's reuses the same few for every record it marshals.
type protoAlloc struct {
	holders  scratch[fsmpb.Holder]
	waiters  scratch[fsmpb.Waiter]
	outcomes scratch[fsmpb.AcquireOutcome]
	results  scratch[fsmpb.Result]
	cached   scratch[fsmpb.CachedResult]
}

// scratch is a list of messages handed out in turn and handed out again
// after reset.
type scratch[T any] struct {
	all  []*T
	used int
}

func (p *scratch[T]) next() *T {
	if p.used == len(p.all) {
		p.all = append(p.all, new(T))
	}
	p.used++
	return p.all[p.used-1]
}

// reset makes every message available again: the record that used them
// has been marshalled.
func (pa *protoAlloc) reset() {
	pa.holders.used, pa.waiters.used, pa.outcomes.used, pa.results.used, pa.cached.used = 0, 0, 0, 0, 0
}

func (pa *protoAlloc) holder() *fsmpb.Holder {
	if pa == nil {
		return new(fsmpb.Holder)
	}
	return pa.holders.next()
}

func (pa *protoAlloc) waiter() *fsmpb.Waiter {
	if pa == nil {
		return new(fsmpb.Waiter)
	}
	return pa.waiters.next()
}

func (pa *protoAlloc) outcome() *fsmpb.AcquireOutcome {
	if pa == nil {
		return new(fsmpb.AcquireOutcome)
	}
	return pa.outcomes.next()
}

func (pa *protoAlloc) result() *fsmpb.Result {
	if pa == nil {
		return new(fsmpb.Result)
	}
	return pa.results.next()
}

func (pa *protoAlloc) cachedResult() *fsmpb.CachedResult {
	if pa == nil {
		return new(fsmpb.CachedResult)
	}
	return pa.cached.next()
}

// The fill methods overwrite every field of p (a reused message must not
// keep anything of the record it described before) and reuse the arrays of
// its lists.

func (h *holder) toProto(pa *protoAlloc) *fsmpb.Holder {
	p := pa.holder()
	*p = fsmpb.Holder{
		SessionId:      h.s.id,
		OwnerKey:       h.ownerKey,
		Owner:          h.s.owner,
		Token:          h.token,
		Count:          h.count,
		SinceUnixNano:  h.since,
		AcquireSeq:     h.acquireSeq,
		Shared:         h.shared,
		HoldLimitNanos: int64(msDuration(h.holdLimit)),
		LockDelayNanos: int64(secDuration(h.lockDelay)),
	}
	return p
}

func (w *waiter) toProto(pa *protoAlloc) *fsmpb.Waiter {
	p := pa.waiter()
	*p = fsmpb.Waiter{
		SessionId:        w.s.id,
		OwnerKey:         w.ownerKey,
		Owner:            w.s.owner,
		AcquireSeq:       w.acquireSeq,
		WaitTimeoutNanos: w.timeout,
		SinceUnixNano:    w.since,
		Shared:           w.shared,
		HoldLimitNanos:   int64(msDuration(w.holdLimit)),
		LockDelayNanos:   int64(secDuration(w.lockDelay)),
	}
	return p
}

// fill describes l in p.
func (l *lockState) fill(p *fsmpb.Lock, pa *protoAlloc) {
	holders, waiters := p.Holders[:0], p.Waiters[:0]
	d := l.delay()
	*p = fsmpb.Lock{Name: l.name, Limit: encodeLimit(l.limit()), DelayFrom: d.from, DelayNanos: d.nanos, DelayedUntilUnixNano: d.until}
	if len(l.holders) > 0 {
		p.Holders = slices.Grow(holders, len(l.holders))
		for i := range l.holders {
			h := l.holders[i].toProto(pa)
			h.Value = l.holderValue(&l.holders[i])
			l.fillRevocation(&l.holders[i], h)
			p.Holders = append(p.Holders, h)
		}
	}
	if ws := l.waiters(); len(ws) > 0 {
		p.Waiters = slices.Grow(waiters, len(ws))
		for i := range ws {
			p.Waiters = append(p.Waiters, ws[i].toProto(pa))
			p.Waiters[i].Value = l.waiterValue(&ws[i])
		}
	}
}

func (l *lockState) toProto() *fsmpb.Lock {
	p := &fsmpb.Lock{}
	l.fill(p, nil)
	return p
}

// fill describes s in p, with its cached results if withResults.
func (s *sessionState) fill(p *fsmpb.Session, pa *protoAlloc, withResults bool) {
	results := p.Results[:0]
	o := s.sess
	*p = fsmpb.Session{
		Id:              o.id,
		Owner:           o.owner,
		TtlNanos:        o.ttl,
		Blacklisted:     s.blacklisted,
		CreatedUnixNano: o.created,
		MinUnackedSeq:   s.minUnacked,
		Holds:           uint32(s.numHolds()),
		OpenNonce:       o.nonce,
		SecretHash:      o.secretHashBytes(),
		Principal:       o.principal,
	}
	if withResults && len(s.results) > 0 {
		p.Results = slices.Grow(results, len(s.results))
		for i := range s.results {
			c := &s.results[i]
			cp := pa.cachedResult()
			*cp = fsmpb.CachedResult{Seq: c.seq, Result: c.toProto(pa), Claimed: c.claimed, Keyed: c.keyed, OwnerKey: c.ownerKey}
			p.Results = append(p.Results, cp)
		}
	}
}

// toProto describes s without its cached results.
func (s *sessionState) toProto() *fsmpb.Session {
	p := &fsmpb.Session{}
	s.fill(p, nil, false)
	return p
}

// cacheResult returns the exactly-once cache's copy of res, the result of
// seq: all but the side-effect lists, which concern other requests, the
// report to the leader's tracker (liveness), which only the entry that did
// it makes, and session_id, which no deduplicated command sets. It shares
// res's strings (they are immutable) and nothing else.
func cacheResult(seq uint64, res *fsmpb.Result) cachedResult {
	c := cachedResult{
		seq:       seq,
		code:      res.GetError(),
		msg:       res.GetMessage(),
		remaining: res.GetRemainingCount(),
	}
	if o := res.GetAcquire(); o != nil {
		c.acquire = new(outcome)
		*c.acquire = outcomeOf(o)
	}
	if many := res.GetAcquireMany(); len(many) > 0 {
		c.many = make([]outcome, len(many))
		for i, o := range many {
			c.many[i] = outcomeOf(o)
		}
	}
	if cycle := res.GetDeadlock().GetEdges(); len(cycle) > 0 {
		edges := make([]deadlockEdge, len(cycle))
		c.deadlock = &edges
		for i, e := range cycle {
			edges[i] = deadlockEdge{sessionID: e.GetSessionId(), ownerKey: e.GetOwnerKey(), lock: e.GetLock(), queuedAhead: e.GetQueuedAhead(),
				blockerSessionID: e.GetBlockerSessionId(), blockerOwnerKey: e.GetBlockerOwnerKey()}
		}
	}
	return c
}

func outcomeOf(o *fsmpb.AcquireOutcome) outcome {
	out := outcome{
		lock:     o.GetLock(),
		token:    o.GetToken(),
		status:   o.GetStatus(),
		count:    o.GetCount(),
		position: o.GetPosition(),
		delayed:  o.GetDelayedUntilUnixNano(),
	}
	if h := o.GetHolder(); h != nil {
		out.holder = &holderCopy{
			sessionID:  h.GetSessionId(),
			ownerKey:   h.GetOwnerKey(),
			owner:      h.GetOwner(),
			token:      h.GetToken(),
			since:      h.GetSinceUnixNano(),
			acquireSeq: h.GetAcquireSeq(),
			count:      h.GetCount(),
			shared:     h.GetShared(),
			holdLimit:  h.GetHoldLimitNanos(),
			lockDelay:  h.GetLockDelayNanos(),
			value:      h.GetValue(),
		}
	}
	return out
}

// toProto rebuilds the cached fsmpb.Result.
func (c *cachedResult) toProto(pa *protoAlloc) *fsmpb.Result {
	p := pa.result()
	many := p.AcquireMany[:0]
	*p = fsmpb.Result{
		Error:          c.code,
		Message:        c.message(),
		RemainingCount: c.remaining,
	}
	if c.acquire != nil {
		p.Acquire = c.acquire.toProto(pa)
	}
	if len(c.many) > 0 {
		p.AcquireMany = slices.Grow(many, len(c.many))
		for i := range c.many {
			p.AcquireMany = append(p.AcquireMany, c.many[i].toProto(pa))
		}
	}
	if cycle := c.cycle(); len(cycle) > 0 {
		edges := make([]*fsmpb.DeadlockEdge, len(cycle))
		p.Deadlock = &fsmpb.DeadlockCycle{Edges: edges}
		for i, e := range cycle {
			edges[i] = &fsmpb.DeadlockEdge{SessionId: e.sessionID, OwnerKey: e.ownerKey, Lock: e.lock, QueuedAhead: e.queuedAhead,
				BlockerSessionId: e.blockerSessionID, BlockerOwnerKey: e.blockerOwnerKey}
		}
	}
	return p
}

func (o *outcome) toProto(pa *protoAlloc) *fsmpb.AcquireOutcome {
	p := pa.outcome()
	*p = fsmpb.AcquireOutcome{
		Lock:     o.lock,
		Status:   o.status,
		Token:    o.token,
		Count:    o.count,
		Position: o.position,

		DelayedUntilUnixNano: o.delayed,
	}
	if h := o.holder; h != nil {
		p.Holder = pa.holder()
		*p.Holder = fsmpb.Holder{
			SessionId:      h.sessionID,
			OwnerKey:       h.ownerKey,
			Owner:          h.owner,
			Token:          h.token,
			Count:          h.count,
			SinceUnixNano:  h.since,
			AcquireSeq:     h.acquireSeq,
			Shared:         h.shared,
			HoldLimitNanos: h.holdLimit,
			LockDelayNanos: h.lockDelay,
			Value:          h.value,
		}
	}
	return p
}

// encodeLimit is a holder limit as fsmpb.Lock.limit keeps it: 0 for 1, so
// a mutex's record is what it was before locks had limits.
func encodeLimit(limit uint32) uint32 {
	if limit == 1 {
		return 0
	}
	return limit
}
