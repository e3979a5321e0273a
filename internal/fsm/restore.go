package fsm

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Restore replaces the whole state with the snapshot data (from Snapshot).
// It checks the snapshot's consistency first; on error the Machine is
// unchanged.
func (m *Machine) Restore(data []byte) error {
	n := New()
	if err := n.load(data); err != nil {
		if de, ok := errors.AsType[*decodeError](err); ok {
			return fmt.Errorf("fsm: decode snapshot: %w", de.err)
		}
		return fmt.Errorf("fsm: restore snapshot at index %d: %w", n.applied, err)
	}
	*m = *n
	return nil
}

// decodeError is a snapshot that is not a well-formed fsmpb.Snapshot, as
// opposed to one that decodes but breaks an invariant.
type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }

// eachRecord calls fn with each top-level field of the encoded
// fsmpb.Snapshot data that the machine reads, in their order: the applied
// index and the other numbers (v) and each encoded session, lock or other
// record (rec). Like proto.Unmarshal it
// skips unknown fields (and known numbers with another wire type).
func eachRecord(data []byte, fn func(num protowire.Number, v uint64, rec []byte) error) error {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return &decodeError{protowire.ParseError(n)}
		}
		data = data[n:]
		var v uint64
		var rec []byte
		switch {
		case (num == snapshotAppliedIndex || num == snapshotClusterID || num == snapshotLogVersion || num == snapshotHistoryFloor) &&
			typ == protowire.VarintType:
			v, n = protowire.ConsumeVarint(data)
		case (num == snapshotSessions || num == snapshotLocks || num == snapshotMembers || num == snapshotAuth || num == snapshotAudit ||
			num == snapshotSigningKeys || num == snapshotHistory) && typ == protowire.BytesType:
			rec, n = protowire.ConsumeBytes(data)
		default:
			n = protowire.ConsumeFieldValue(num, typ, data)
			num = 0
		}
		if n < 0 {
			return &decodeError{protowire.ParseError(n)}
		}
		data = data[n:]
		if num != 0 {
			if err := fn(num, v, rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeRecord unmarshals one session or lock into msg (which it resets).
func decodeRecord(rec []byte, msg proto.Message) error {
	if err := proto.Unmarshal(rec, msg); err != nil {
		return &decodeError{err}
	}
	return nil
}

// decodeLock decodes rec into p as proto.Unmarshal would, without proto's
// reflection: a field of another number, or of a known number but another
// wire type, is skipped; the last of a scalar wins; strings must be UTF-8.
// It reuses p's holder and waiter messages (loadLock copies out what it
// keeps). Through proto, decoding was a large part of a restore at a
// million locks, and a restarting member serves nothing until its
// restore is done.
// TestDecodeLockMatchesProto compares it with proto.Unmarshal on valid and
// damaged records.
func decodeLock(rec []byte, p *fsmpb.Lock) error {
	holders, waiters := p.Holders[:0], p.Waiters[:0]
	var (
		name                string
		limit               uint32
		delayFrom           uint64
		delayNanos, delayed int64
	)
	for len(rec) > 0 {
		num, typ, n := protowire.ConsumeTag(rec)
		if n < 0 {
			return &decodeError{protowire.ParseError(n)}
		}
		rec = rec[n:]
		if num >= lockLimit && num <= lockDelayUntil && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(rec)
			if n < 0 {
				return &decodeError{protowire.ParseError(n)}
			}
			rec = rec[n:]
			switch num {
			case lockLimit:
				limit = uint32(v)
			case lockDelayFrom:
				delayFrom = v
			case lockDelayNanos:
				delayNanos = int64(v)
			case lockDelayUntil:
				delayed = int64(v)
			}
			continue
		}
		if typ != protowire.BytesType || num < lockName || num > lockWaiters {
			if n = protowire.ConsumeFieldValue(num, typ, rec); n < 0 {
				return &decodeError{protowire.ParseError(n)}
			}
			rec = rec[n:]
			continue
		}
		b, n := protowire.ConsumeBytes(rec)
		if n < 0 {
			return &decodeError{protowire.ParseError(n)}
		}
		rec = rec[n:]
		switch num {
		case lockName:
			if !utf8.Valid(b) {
				return errInvalidUTF8("fsmpb.Lock.name")
			}
			name = string(b)
		case lockHolders:
			var h *fsmpb.Holder
			holders, h = nextMessage(holders)
			if err := decodeHolder(b, h); err != nil {
				return err
			}
		case lockWaiters:
			var w *fsmpb.Waiter
			waiters, w = nextMessage(waiters)
			if err := decodeWaiter(b, w); err != nil {
				return err
			}
		}
	}
	*p = fsmpb.Lock{Name: name, Holders: holders, Waiters: waiters, Limit: limit,
		DelayFrom: delayFrom, DelayNanos: delayNanos, DelayedUntilUnixNano: delayed}
	return nil
}

// nextMessage appends a message to list, reusing one left beyond its
// length by an earlier record, and returns the list and that message,
// reset.
func nextMessage[M any, P interface {
	*M
	proto.Message
}](list []P) ([]P, P) {
	if len(list) < cap(list) && list[:len(list)+1][len(list)] != nil {
		list = list[:len(list)+1]
		m := list[len(list)-1]
		proto.Reset(m)
		return list, m
	}
	m := P(new(M))
	return append(list, m), m
}

func errInvalidUTF8(field string) error {
	return &decodeError{fmt.Errorf("string field %s contains invalid UTF-8", field)}
}

// decodeHolder decodes a Holder as decodeLock does a Lock.
func decodeHolder(b []byte, h *fsmpb.Holder) error {
	return decodeFields(b, func(num protowire.Number, v uint64, s []byte, isBytes bool) error {
		switch {
		case num == holderSessionID && !isBytes:
			h.SessionId = v
		case num == holderOwnerKey && isBytes:
			if !utf8.Valid(s) {
				return errInvalidUTF8("fsmpb.Holder.owner_key")
			}
			h.OwnerKey = string(s)
		case num == holderOwner && isBytes:
			if !utf8.Valid(s) {
				return errInvalidUTF8("fsmpb.Holder.owner")
			}
			h.Owner = string(s)
		case num == holderToken && !isBytes:
			h.Token = v
		case num == holderCount && !isBytes:
			h.Count = uint32(v)
		case num == holderSince && !isBytes:
			h.SinceUnixNano = int64(v)
		case num == holderAcquireSeq && !isBytes:
			h.AcquireSeq = v
		case num == holderShared && !isBytes:
			h.Shared = v != 0
		case num == holderHoldLimit && !isBytes:
			h.HoldLimitNanos = int64(v)
		case num == holderLockDelay && !isBytes:
			h.LockDelayNanos = int64(v)
		case num == holderRevokeFrom && !isBytes:
			h.RevokeFrom = v
		case num == holderRevokeGrace && !isBytes:
			h.RevokeGraceNanos = int64(v)
		case num == holderRevokeUntil && !isBytes:
			h.RevokeDeadlineUnixNano = int64(v)
		case num == holderValue && isBytes:
			if !utf8.Valid(s) {
				return errInvalidUTF8("fsmpb.Holder.value")
			}
			h.Value = string(s)
		}
		return nil
	})
}

// decodeWaiter decodes a Waiter as decodeLock does a Lock.
func decodeWaiter(b []byte, w *fsmpb.Waiter) error {
	return decodeFields(b, func(num protowire.Number, v uint64, s []byte, isBytes bool) error {
		switch {
		case num == waiterSessionID && !isBytes:
			w.SessionId = v
		case num == waiterOwnerKey && isBytes:
			if !utf8.Valid(s) {
				return errInvalidUTF8("fsmpb.Waiter.owner_key")
			}
			w.OwnerKey = string(s)
		case num == waiterOwner && isBytes:
			if !utf8.Valid(s) {
				return errInvalidUTF8("fsmpb.Waiter.owner")
			}
			w.Owner = string(s)
		case num == waiterAcquireSeq && !isBytes:
			w.AcquireSeq = v
		case num == waiterTimeout && !isBytes:
			w.WaitTimeoutNanos = int64(v)
		case num == waiterSince && !isBytes:
			w.SinceUnixNano = int64(v)
		case num == waiterShared && !isBytes:
			w.Shared = v != 0
		case num == waiterHoldLimit && !isBytes:
			w.HoldLimitNanos = int64(v)
		case num == waiterLockDelay && !isBytes:
			w.LockDelayNanos = int64(v)
		case num == waiterValue && isBytes:
			if !utf8.Valid(s) {
				return errInvalidUTF8("fsmpb.Waiter.value")
			}
			w.Value = string(s)
		}
		return nil
	})
}

// decodeFields calls fn with each varint field (v) and each length-
// delimited field (s, isBytes) of the message b, in order; fields of other
// wire types are skipped.
func decodeFields(b []byte, fn func(num protowire.Number, v uint64, s []byte, isBytes bool) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return &decodeError{protowire.ParseError(n)}
		}
		b = b[n:]
		var v uint64
		var s []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			s, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return &decodeError{protowire.ParseError(n)}
		}
		b = b[n:]
		if typ == protowire.VarintType || typ == protowire.BytesType {
			if err := fn(num, v, s, typ == protowire.BytesType); err != nil {
				return err
			}
		}
	}
	return nil
}

// load fills the empty machine m from the encoded fsmpb.Snapshot data,
// rebuilding the indexes and checking every invariant the apply path keeps.
// It decodes one session or lock at a time into a scratch message, so the
// messages of the whole state are never alive at once. It reads data three
// times, as proto.Unmarshal would see it whatever the order of its fields:
// the applied index (the last one wins) and the number of records first,
// then the sessions, then the locks, which refer to them.
func (m *Machine) load(data []byte) error {
	nSessions, nLocks, nHistory := 0, 0, 0
	var historyFloor uint64
	err := eachRecord(data, func(num protowire.Number, v uint64, _ []byte) error {
		switch num {
		case snapshotAppliedIndex:
			m.applied = v
		case snapshotHistoryFloor:
			historyFloor = v
		case snapshotClusterID:
			m.clusterID = v
		case snapshotLogVersion:
			m.logVersion = uint32(v)
		case snapshotSessions:
			nSessions++
		case snapshotLocks:
			nLocks++
		case snapshotHistory:
			nHistory++
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Sized once: growing a map to a million locks rehashes it over and
	// over. (The counts are bounded by the data: a record takes 2 bytes.)
	m.sessions = make(map[uint64]*session, nSessions)
	m.locks = make(map[string]*lock, nLocks)
	m.lastSize, m.lastRecords = len(data), nSessions+nLocks+nHistory

	var (
		sp    fsmpb.Session
		prev  uint64
		holds []uint32 // the holds each session says it has, in id order
	)
	err = eachRecord(data, func(num protowire.Number, _ uint64, rec []byte) error {
		if num != snapshotSessions {
			return nil
		}
		if err := decodeRecord(rec, &sp); err != nil {
			return err
		}
		if err := m.loadSession(&sp, prev); err != nil {
			return err
		}
		prev = sp.GetId()
		holds = append(holds, sp.GetHolds())
		return nil
	})
	if err != nil {
		return err
	}

	// Size each session's hold index for the holds it says it has (checked
	// once the locks are in), within what the lock records can hold.
	budget, i := len(data)/2, 0 // a holder record takes 2 bytes or more
	m.sessionTree.Ascend(func(s *sessionState) bool {
		if n := min(int(holds[i]), budget); n > 0 {
			s.sess.held = make([]*lock, 0, n)
			budget -= n
		}
		i++
		return true
	})

	var (
		lp       fsmpb.Lock
		prevName string
	)
	i = 0
	err = eachRecord(data, func(num protowire.Number, _ uint64, rec []byte) error {
		if num != snapshotLocks {
			return nil
		}
		if err := decodeLock(rec, &lp); err != nil {
			return err
		}
		if err := m.loadLock(&lp, i, prevName); err != nil {
			return err
		}
		i++
		prevName = lp.GetName()
		return nil
	})
	if err != nil {
		return err
	}

	var prevMember uint64
	err = eachRecord(data, func(num protowire.Number, _ uint64, rec []byte) error {
		if num != snapshotMembers {
			return nil
		}
		var err error
		prevMember, err = m.loadMember(rec, prevMember)
		return err
	})
	if err != nil {
		return err
	}

	if err := m.loadAuthRecords(data); err != nil {
		return err
	}
	if err := m.loadSigningKeys(data); err != nil {
		return err
	}
	if err := m.loadHistory(data); err != nil {
		return err
	}
	if err := m.loadHistoryFloor(historyFloor); err != nil {
		return err
	}

	// The sessions came in ascending id order, the order of holds.
	i = 0
	m.sessionTree.Ascend(func(st *sessionState) bool {
		s := st.sess
		if int(holds[i]) != s.numHolds() {
			err = fmt.Errorf("session %d says it holds %d locks, the locks say %d", s.id, holds[i], s.numHolds())
		} else if s.load() > MaxHoldsPerSession {
			err = fmt.Errorf("session %d holds or waits for %d locks; the limit is %d", s.id, s.load(), MaxHoldsPerSession)
		}
		i++
		return err == nil
	})
	return err
}

// cachedName returns name, as the string of the outcome that names it in
// the cached result of seq of s if there is one. A lock restored from a
// snapshot takes the string its holder's acquire (often still cached, an
// AcquireMany's outcome in the design point) decoded, so the two share it,
// as in a machine built by Apply, instead of each keeping a copy.
func (s *session) cachedName(seq uint64, name string) string {
	c := s.cachedEntry(seq)
	if c == nil {
		return name
	}
	if c.acquire != nil && c.acquire.lock == name {
		return c.acquire.lock
	}
	// Bounded: a big AcquireMany's locks would each scan all its outcomes.
	for i := range min(len(c.many), 64) {
		if c.many[i].lock == name {
			return c.many[i].lock
		}
	}
	return name
}

// loadSession adds the session p, which follows the session id prev.
func (m *Machine) loadSession(p *fsmpb.Session, prev uint64) error {
	id := p.GetId()
	switch {
	case id == 0 || id <= prev:
		return fmt.Errorf("session id %d after %d: ids must ascend from 1", id, prev)
	case id > m.applied:
		return fmt.Errorf("session %d is newer than applied index %d", id, m.applied)
	}
	if err := checkTTL(p.GetTtlNanos()); err != nil {
		return fmt.Errorf("session %d: %s", id, err.Msg)
	}
	if err := checkOwner(p.GetOwner()); err != nil {
		return fmt.Errorf("session %d: %s", id, err.Msg)
	}
	s := newSession(id, p.GetOwner(), p.GetTtlNanos(), p.GetCreatedUnixNano())
	if !s.setSecretHash(p.GetSecretHash()) {
		return fmt.Errorf("session %d: secret hash of %d bytes; want %d, not all zero, or none", id, len(p.GetSecretHash()), SecretHashLen)
	}
	s.principal = p.GetPrincipal()
	if !m.noteNonce(s, p.GetOpenNonce()) {
		return fmt.Errorf("session %d has the open nonce of session %d", id, m.opens[p.GetOpenNonce()].id)
	}
	s.blacklisted = p.GetBlacklisted()
	s.minUnacked = p.GetMinUnackedSeq()
	results := p.GetResults()
	if len(results) > MaxPending {
		return fmt.Errorf("session %d has %d cached results; the limit is %d", id, len(results), MaxPending)
	}
	if len(results) > 0 {
		s.results = make([]cachedResult, 0, len(results))
	}
	for i, c := range results {
		r := c.GetResult()
		if r == nil || c.GetSeq() < s.minUnacked || (i > 0 && c.GetSeq() <= s.results[i-1].seq) {
			return fmt.Errorf("session %d: cached result %d (seq %d) is missing, below min unacked %d or out of order",
				id, i, c.GetSeq(), s.minUnacked)
		}
		// The cache never keeps these (see cacheResult), so it could not
		// give them back.
		if r.GetSessionId() != 0 || len(r.GetGrants())+len(r.GetWaitsEnded())+len(r.GetSessionsEnded())+len(r.GetHoldsEnded()) > 0 ||
			r.GetLiveness() != nil {
			return fmt.Errorf("session %d: cached result %d (seq %d) has a session id or side effects", id, i, c.GetSeq())
		}
		if !c.GetKeyed() && c.GetOwnerKey() != "" {
			return fmt.Errorf("session %d: cached result %d (seq %d) has an owner key and is not keyed", id, i, c.GetSeq())
		}
		cr := cacheResult(c.GetSeq(), r)
		cr.claimed, cr.keyed, cr.ownerKey = c.GetClaimed(), c.GetKeyed(), c.GetOwnerKey()
		s.results = append(s.results, cr)
	}
	m.addSession(s)
	return nil
}

// loadLock adds the lock p, the i-th (from 0), which follows the lock
// prevName.
func (m *Machine) loadLock(p *fsmpb.Lock, i int, prevName string) error {
	name := p.GetName()
	if err := checkLockName(name); err != nil {
		return fmt.Errorf("lock %d: %s", i, err.Msg)
	}
	if i > 0 && name <= prevName {
		return fmt.Errorf("lock %q after %q: names must ascend", name, prevName)
	}
	holders, waiters := p.GetHolders(), p.GetWaiters()
	if err := checkDelay(p, m.applied); err != nil {
		return fmt.Errorf("lock %q: %s", name, err.Msg)
	}
	if len(holders) == 0 && len(waiters) == 0 && p.GetDelayFrom() == 0 {
		return fmt.Errorf("lock %q has no holder, no waiter and no lock-delay", name)
	}
	limit, lerr := checkLimit(p.GetLimit())
	switch {
	case lerr != nil:
		return fmt.Errorf("lock %q: %s", name, lerr.Msg)
	case p.GetLimit() == 1:
		return fmt.Errorf("lock %q has limit 1 written as 1, not 0", name) // one state, one encoding
	case len(holders) == 0 && len(waiters) == 0 && p.GetLimit() != 0:
		return fmt.Errorf("lock %q has limit %d and no holder or waiter to have it", name, p.GetLimit())
	case uint32(len(holders)) > limit:
		return fmt.Errorf("lock %q has %d holders; its limit is %d", name, len(holders), limit)
	case len(holders) > 1 && slices.ContainsFunc(holders, func(h *fsmpb.Holder) bool { return !h.GetShared() }):
		return fmt.Errorf("lock %q has an exclusive holder beside %d others", name, len(holders)-1)
	case len(waiters) > MaxWaitersPerLock:
		return fmt.Errorf("lock %q has %d waiters; the limit is %d", name, len(waiters), MaxWaitersPerLock)
	}
	l := newLock(name)
	if p.GetDelayFrom() != 0 {
		l.queue = &queue{delay: lockDelay{from: p.GetDelayFrom(), nanos: p.GetDelayNanos(), until: p.GetDelayedUntilUnixNano()}}
	}
	if len(holders) > 0 {
		l.useOne()
		if len(holders) > 1 {
			l.holders = make([]holder, 0, len(holders))
		}
		if s := m.sessions[holders[0].GetSessionId()]; s != nil {
			l.name = s.cachedName(holders[0].GetAcquireSeq(), name)
		}
	}
	for _, h := range holders {
		s := m.sessions[h.GetSessionId()]
		switch {
		case s == nil:
			return fmt.Errorf("lock %q is held by missing session %d", name, h.GetSessionId())
		case h.GetCount() == 0:
			return fmt.Errorf("lock %q has a holder with count 0", name)
		case h.GetToken() == 0 || h.GetToken() > m.applied:
			return fmt.Errorf("lock %q has token %d outside 1..%d", name, h.GetToken(), m.applied)
		case l.holderOf(s, h.GetOwnerKey()) != nil:
			return fmt.Errorf("lock %q is held twice by session %d key %q", name, s.id, h.GetOwnerKey())
		case h.GetOwner() != s.owner:
			// The record keeps no owner of its own: it is the session's.
			return fmt.Errorf("lock %q: holder of session %d has owner %q, its session %q", name, s.id, h.GetOwner(), s.owner)
		}
		if err := checkOwnerKey(h.GetOwnerKey()); err != nil {
			return fmt.Errorf("lock %q: %s", name, err.Msg)
		}
		holdLimit, herr := checkHoldLimit(h.GetHoldLimitNanos())
		if herr != nil {
			return fmt.Errorf("lock %q: holder of session %d: %s", name, s.id, herr.Msg)
		}
		lockDelay, derr := checkLockDelay(h.GetLockDelayNanos())
		if derr != nil {
			return fmt.Errorf("lock %q: holder of session %d: %s", name, s.id, derr.Msg)
		}
		l.holders = append(l.holders, holder{
			s:          s,
			ownerKey:   h.GetOwnerKey(),
			token:      h.GetToken(),
			since:      h.GetSinceUnixNano(),
			acquireSeq: h.GetAcquireSeq(),
			count:      h.GetCount(),
			idx:        s.addHold(l),
			limit:      uint16(limit),
			shared:     h.GetShared(),
			lockDelay:  lockDelay,
			holdLimit:  holdLimit,
		})
		if err := l.loadRevocation(h, &l.holders[len(l.holders)-1], m.applied); err != nil {
			return fmt.Errorf("lock %q: holder of session %d: %s", name, s.id, err.Msg)
		}
		if err := l.restoreValue(s, h.GetOwnerKey(), h.GetAcquireSeq(), h.GetValue()); err != nil {
			return err
		}
	}
	if len(waiters) > 0 {
		if l.queue == nil {
			l.queue = &queue{}
		}
		l.queue.waiters = make([]waiter, 0, len(waiters))
	}
	for _, w := range waiters {
		s := m.sessions[w.GetSessionId()]
		switch {
		case s == nil:
			return fmt.Errorf("lock %q has a waiter of missing session %d", name, w.GetSessionId())
		case w.GetAcquireSeq() == 0:
			return fmt.Errorf("lock %q has a waiter without acquire seq", name)
		case w.GetWaitTimeoutNanos() < 0:
			return fmt.Errorf("lock %q has a waiter with negative timeout", name)
		case s.blacklisted:
			return fmt.Errorf("lock %q has a waiter of blacklisted session %d", name, s.id)
		case w.GetOwner() != s.owner:
			return fmt.Errorf("lock %q: waiter of session %d has owner %q, its session %q", name, s.id, w.GetOwner(), s.owner)
		}
		key := waitKey{name, w.GetAcquireSeq()}
		if _, dup := s.waits[key]; dup {
			return fmt.Errorf("lock %q has waiter seq %d of session %d twice", name, key.seq, s.id)
		}
		if err := checkOwnerKey(w.GetOwnerKey()); err != nil {
			return fmt.Errorf("lock %q: %s", name, err.Msg)
		}
		holdLimit, herr := checkHoldLimit(w.GetHoldLimitNanos())
		if herr != nil {
			return fmt.Errorf("lock %q: waiter of session %d: %s", name, s.id, herr.Msg)
		}
		lockDelay, derr := checkLockDelay(w.GetLockDelayNanos())
		if derr != nil {
			return fmt.Errorf("lock %q: waiter of session %d: %s", name, s.id, derr.Msg)
		}
		l.enqueue(waiter{
			s:          s,
			ownerKey:   w.GetOwnerKey(),
			acquireSeq: w.GetAcquireSeq(),
			timeout:    w.GetWaitTimeoutNanos(),
			since:      w.GetSinceUnixNano(),
			limit:      uint16(limit),
			shared:     w.GetShared(),
			lockDelay:  lockDelay,
			holdLimit:  holdLimit,
		})
		if err := l.restoreValue(s, w.GetOwnerKey(), w.GetAcquireSeq(), w.GetValue()); err != nil {
			return err
		}
		s.addWait(key, w.GetOwnerKey())
	}
	if ws := l.waiters(); len(ws) > 0 && !l.delayed() && l.grantable(&ws[0]) {
		return fmt.Errorf("lock %q has room for its first waiter, which is still queued", name)
	}
	m.locks[l.name] = l
	m.lockTree.ReplaceOrInsert(l.lockState)
	return nil
}
