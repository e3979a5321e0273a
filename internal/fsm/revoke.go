package fsm

import (
	"slices"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Cooperative revocation with a fence (Curator's revocable locks, paired
// with a fence): an operator asks the holders of a lock to let go
// (RevokeHold); each hold asked gets a revocation with a grace, and the
// server tells its session at once (holds_revoked). A holder that lets go
// in time ends its hold as it likes (a release, a close). A hold still
// there when the grace passes on the leader's clock is ended by the
// leader's EndRevokedHold: the hold ends as EndRevoked, Check of its
// token turns false, and the next holder's token is the index of a later
// entry, as after any end. Such an end starts the hold's lock-delay: the
// holder did not say it was done (delay.go).
//
// Time enters as everywhere else (DESIGN.md §2): the RevokeHold entry
// records the grace; the leader's liveness tracker times it and proposes
// EndRevokedHold; a new leader times every pending revocation afresh, in
// full, from its promotion (Revocations).

// revocation is a hold's pending revocation. It is kept in its lock's
// queue record, as a lock-delay is: a holder record has no room left
// (TestRecordSizes), and few holds are ever revoked. A hold is named by
// its session and owner key, as in its lock's holders.
type revocation struct {
	s        *session
	ownerKey string
	from     uint64 // the RevokeHold entry
	grace    int64  // nanos
	until    int64  // from's wall clock plus grace, display only
}

// revocations returns l's pending revocations.
func (l *lockState) revocations() []revocation {
	if l.queue == nil {
		return nil
	}
	return l.queue.revokes
}

// revocationOf returns h's pending revocation, or nil.
func (l *lockState) revocationOf(h *holder) *revocation {
	rs := l.revocations()
	for i := range rs {
		if r := &rs[i]; r.s == h.s && r.ownerKey == h.ownerKey {
			return r
		}
	}
	return nil
}

// dropRevocation forgets h's revocation, if any, as h ends this entry,
// and reports it in liveness.revocations_ended. The caller has made l's
// state its own (changeLock).
func (m *Machine) dropRevocation(a *apply, l *lock, h *holder) {
	r := l.revocationOf(h)
	if r == nil {
		return
	}
	lv := a.liveness()
	lv.RevocationsEnded = append(lv.RevocationsEnded, l.holdRevoked(h, r))
	l.queue.revokes = slices.DeleteFunc(l.queue.revokes, func(r revocation) bool {
		return r.s == h.s && r.ownerKey == h.ownerKey
	})
}

// dropRevocationsOf forgets every revocation of s's holds of l, as s
// ends. The caller has made l's state its own (changeLock).
func (l *lock) dropRevocationsOf(s *session) {
	if l.queue != nil && len(l.queue.revokes) > 0 {
		l.queue.revokes = slices.DeleteFunc(l.queue.revokes, func(r revocation) bool { return r.s == s })
	}
}

// holdRevoked describes h, a hold of l, and its revocation r, for the
// server and the leader's liveness tracker.
func (l *lockState) holdRevoked(h *holder, r *revocation) *fsmpb.HoldRevoked {
	return &fsmpb.HoldRevoked{
		SessionId: h.s.id, Lock: l.name, OwnerKey: h.ownerKey, Token: h.token,
		RevokeFrom: r.from, GraceNanos: r.grace, DeadlineUnixNano: r.until,
	}
}

// fillRevocation sets p's revocation fields from h's revocation, if any.
func (l *lockState) fillRevocation(h *holder, p *fsmpb.Holder) {
	if r := l.revocationOf(h); r != nil {
		p.RevokeFrom, p.RevokeGraceNanos, p.RevokeDeadlineUnixNano = r.from, r.grace, r.until
	}
}

// revokeHold applies an operator's RevokeHold.
func (m *Machine) revokeHold(a *apply, op *fsmpb.RevokeHold) {
	name, token := op.GetLock(), op.GetToken()
	if err := checkLockName(name); err != nil {
		a.refuse(err)
		return
	}
	if err := refusal(rules.CheckRevokeGraceNanos(op.GetGraceNanos())); err != nil {
		a.refuse(err)
		return
	}
	l := m.locks[name]
	if l == nil || len(l.holders) == 0 {
		a.refuse(errorf(fsmpb.Error_ERROR_LOCK_NOT_FOUND, "lock %s is not held", quote(name)))
		return
	}
	if token != 0 && !slices.ContainsFunc(l.holders, func(h holder) bool { return h.token == token }) {
		a.refuse(errorf(fsmpb.Error_ERROR_TOKEN_MISMATCH,
			"lock %s has no hold with token %d (it is held with token %d)", quote(name), token, l.holders[0].token))
		return
	}
	m.changeLock(l)
	if l.queue == nil {
		l.queue = &queue{}
	}
	for i := range l.holders {
		h := &l.holders[i]
		if token != 0 && h.token != token {
			continue
		}
		r := l.revocationOf(h)
		if r == nil {
			grace := op.GetGraceNanos()
			l.queue.revokes = append(l.queue.revokes, revocation{s: h.s, ownerKey: h.ownerKey, from: a.index, grace: grace, until: a.wall + grace})
			r = &l.queue.revokes[len(l.queue.revokes)-1]
		}
		a.res.HoldsRevoked = append(a.res.HoldsRevoked, l.holdRevoked(h, r))
	}
}

// endRevokedHold applies the leader's EndRevokedHold: the hold's grace
// passed and it is still there, so it ends, fenced like any end.
//
// The command names no owner key, and one session's holds of a lock with
// different owner keys granted by one entry share the token. Such holds
// are revoked together (by the same RevokeHold, with the same grace); an
// EndRevokedHold ends the first of them in holder order, and one apiece.
// The leader's tracker times each of them on its own (by owner key too)
// and proposes an EndRevokedHold apiece, so each ends at its grace.
func (m *Machine) endRevokedHold(a *apply, s *session, op *fsmpb.EndRevokedHold) {
	name := op.GetLock()
	if !a.leaderCommand(s, "end_revoked_hold", name) {
		return
	}
	if op.GetSessionId() == 0 || op.GetToken() == 0 {
		a.refuse(invalid("end_revoked_hold of lock %s needs the hold's session id and token", quote(name)))
		return
	}
	l := m.locks[name]
	var h *holder
	if l != nil {
		for i := range l.holders {
			if c := &l.holders[i]; c.s.id == op.GetSessionId() && c.token == op.GetToken() && l.revocationOf(c) != nil {
				h = c
				break
			}
		}
	}
	if h == nil {
		a.refuse(errorf(fsmpb.Error_ERROR_NOT_HOLDER,
			"lock %s has no revoked hold of session %d with token %d (it ended first)", quote(name), op.GetSessionId(), op.GetToken()))
		return
	}
	m.endHoldOfAnother(a, l, h, EndRevoked)
}

// RevocationRef names a pending revocation: the hold (lock, session,
// token) and its grace.
type RevocationRef struct {
	Lock       string
	SessionID  uint64
	OwnerKey   string
	Token      uint64
	GraceNanos int64
}

// Revocations returns every pending revocation, by lock name and then
// in holder order. A new leader uses it to arm the timers that end the
// holds with EndRevokedHold; it gives each its full grace, since it
// cannot know how long the grace has run on the old leader.
func (m *Machine) Revocations() []RevocationRef {
	var out []RevocationRef
	m.lockTree.Ascend(func(l *lockState) bool {
		if len(l.revocations()) == 0 {
			return true
		}
		for i := range l.holders {
			if r := l.revocationOf(&l.holders[i]); r != nil {
				out = append(out, RevocationRef{Lock: l.name, SessionID: r.s.id, OwnerKey: l.holders[i].ownerKey, Token: l.holders[i].token, GraceNanos: r.grace})
			}
		}
		return true
	})
	return out
}

// loadRevocation adds the revocation a snapshot's holder p states, if
// any, for l's holder h, or returns why it cannot be one.
func (l *lock) loadRevocation(p *fsmpb.Holder, h *holder, applied uint64) *Error {
	from, grace, until := p.GetRevokeFrom(), p.GetRevokeGraceNanos(), p.GetRevokeDeadlineUnixNano()
	switch {
	case from == 0 && (grace != 0 || until != 0):
		return invalid("a revocation with a grace of %v and no entry that asked it", nanos(grace))
	case from == 0:
		return nil
	case from > applied || from < h.token:
		return invalid("a revocation asked by entry %d, outside its hold's %d..%d", from, h.token, applied)
	}
	if err := refusal(rules.CheckRevokeGraceNanos(grace)); err != nil {
		return err
	}
	if l.queue == nil {
		l.queue = &queue{}
	}
	l.queue.revokes = append(l.queue.revokes, revocation{s: h.s, ownerKey: h.ownerKey, from: from, grace: grace, until: until})
	return nil
}
