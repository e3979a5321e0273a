package fsm

import "github.com/batonlock/baton/internal/fsm/fsmpb"

// Hand-written copies of the messages the machine hands out. They are on the
// apply path (every cached result is a copy), where proto.Clone's reflection
// costs more than the work itself. TestClonesCopyEveryField fails when a field
// is added to one of these messages and not here.

func cloneHolder(h *fsmpb.Holder) *fsmpb.Holder {
	if h == nil {
		return nil
	}
	return &fsmpb.Holder{
		SessionId:     h.GetSessionId(),
		OwnerKey:      h.GetOwnerKey(),
		Owner:         h.GetOwner(),
		Token:         h.GetToken(),
		Count:         h.GetCount(),
		SinceUnixNano: h.GetSinceUnixNano(),
		AcquireSeq:    h.GetAcquireSeq(),
	}
}

func cloneWaiter(w *fsmpb.Waiter) *fsmpb.Waiter {
	if w == nil {
		return nil
	}
	return &fsmpb.Waiter{
		SessionId:        w.GetSessionId(),
		OwnerKey:         w.GetOwnerKey(),
		Owner:            w.GetOwner(),
		AcquireSeq:       w.GetAcquireSeq(),
		WaitTimeoutNanos: w.GetWaitTimeoutNanos(),
		SinceUnixNano:    w.GetSinceUnixNano(),
	}
}

func cloneOutcome(o *fsmpb.AcquireOutcome) *fsmpb.AcquireOutcome {
	if o == nil {
		return nil
	}
	return &fsmpb.AcquireOutcome{
		Lock:     o.GetLock(),
		Status:   o.GetStatus(),
		Token:    o.GetToken(),
		Count:    o.GetCount(),
		Holder:   cloneHolder(o.GetHolder()),
		Position: o.GetPosition(),
	}
}

func cloneOutcomes(os []*fsmpb.AcquireOutcome) []*fsmpb.AcquireOutcome {
	if os == nil {
		return nil
	}
	out := make([]*fsmpb.AcquireOutcome, len(os))
	for i, o := range os {
		out[i] = cloneOutcome(o)
	}
	return out
}

// cachedCopy copies the part of r that the exactly-once cache keeps: all
// but the side-effect lists, which concern other requests.
func cachedCopy(r *fsmpb.Result) *fsmpb.Result {
	return &fsmpb.Result{
		Error:          r.GetError(),
		Message:        r.GetMessage(),
		SessionId:      r.GetSessionId(),
		Acquire:        cloneOutcome(r.GetAcquire()),
		AcquireMany:    cloneOutcomes(r.GetAcquireMany()),
		RemainingCount: r.GetRemainingCount(),
	}
}

// cloneResult copies r entirely.
func cloneResult(r *fsmpb.Result) *fsmpb.Result {
	c := cachedCopy(r)
	for _, g := range r.GetGrants() {
		c.Grants = append(c.Grants, &fsmpb.Grant{
			SessionId:  g.GetSessionId(),
			AcquireSeq: g.GetAcquireSeq(),
			Lock:       g.GetLock(),
			Token:      g.GetToken(),
		})
	}
	for _, w := range r.GetWaitsEnded() {
		c.WaitsEnded = append(c.WaitsEnded, &fsmpb.WaitEnded{
			SessionId:  w.GetSessionId(),
			AcquireSeq: w.GetAcquireSeq(),
			Lock:       w.GetLock(),
			Error:      w.GetError(),
		})
	}
	if r.GetSessionsEnded() != nil {
		c.SessionsEnded = append([]uint64(nil), r.GetSessionsEnded()...)
	}
	return c
}

func (l *lock) toProto() *fsmpb.Lock {
	p := &fsmpb.Lock{Name: l.name}
	if len(l.holders) > 0 {
		p.Holders = make([]*fsmpb.Holder, len(l.holders))
		for i, h := range l.holders {
			p.Holders[i] = cloneHolder(h)
		}
	}
	if len(l.waiters) > 0 {
		p.Waiters = make([]*fsmpb.Waiter, len(l.waiters))
		for i, w := range l.waiters {
			p.Waiters[i] = cloneWaiter(w)
		}
	}
	return p
}

// toProto describes s without its cached results.
func (s *session) toProto() *fsmpb.Session {
	return &fsmpb.Session{
		Id:              s.id,
		Owner:           s.owner,
		TtlNanos:        s.ttl,
		Blacklisted:     s.blacklisted,
		CreatedUnixNano: s.created,
		MinUnackedSeq:   s.minUnacked,
		Holds:           uint32(s.numHolds),
	}
}
