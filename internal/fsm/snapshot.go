package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Snapshot returns the whole state as an fsmpb.Snapshot in bytes. The bytes
// are deterministic: sessions sorted by id, their cached results by seq,
// locks by name, holders and waiters in their order, marshalled with
// proto's Deterministic option; so equal states give equal bytes on every
// replica.
func (m *Machine) Snapshot() ([]byte, error) {
	return m.marshal(m.applied)
}

func (m *Machine) marshal(applied uint64) ([]byte, error) {
	snap := &fsmpb.Snapshot{
		AppliedIndex: applied,
		Sessions:     make([]*fsmpb.Session, 0, len(m.sessions)),
		Locks:        make([]*fsmpb.Lock, 0, len(m.locks)),
	}
	m.sessionIDs.Ascend(func(id uint64) bool {
		s := m.sessions[id]
		p := s.toProto()
		for _, c := range s.results {
			p.Results = append(p.Results, &fsmpb.CachedResult{Seq: c.seq, Result: c.res, Claimed: c.claimed})
		}
		snap.Sessions = append(snap.Sessions, p)
		return true
	})
	m.lockNames.Ascend(func(name string) bool {
		l := m.locks[name]
		// The holder and waiter records are marshalled, not kept, so they
		// need no copy.
		snap.Locks = append(snap.Locks, &fsmpb.Lock{Name: name, Holders: l.holders, Waiters: l.waiters})
		return true
	})
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(snap)
	if err != nil {
		return nil, fmt.Errorf("fsm: marshal snapshot: %w", err)
	}
	return b, nil
}

// Hash returns the hex SHA-256 of the state's content: Snapshot's bytes
// without the applied index, so replicas (or one member before and after a
// restart) compare equal when they hold the same locks and sessions, even if
// one has applied more empty entries (leader no-ops) than the other.
func (m *Machine) Hash() string {
	b, err := m.marshal(0)
	if err != nil {
		// Every string in the state was validated as UTF-8 on the way in,
		// so marshalling cannot fail unless the state is corrupt.
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Restore replaces the whole state with the snapshot data (from Snapshot).
// It checks the snapshot's consistency first; on error the Machine is
// unchanged.
func (m *Machine) Restore(data []byte) error {
	var snap fsmpb.Snapshot
	if err := proto.Unmarshal(data, &snap); err != nil {
		return fmt.Errorf("fsm: decode snapshot: %w", err)
	}
	n := New()
	if err := n.load(&snap); err != nil {
		return fmt.Errorf("fsm: restore snapshot at index %d: %w", snap.GetAppliedIndex(), err)
	}
	*m = *n
	return nil
}

// load fills the empty machine m from snap, rebuilding the indexes and
// checking every invariant the apply path keeps.
func (m *Machine) load(snap *fsmpb.Snapshot) error {
	m.applied = snap.GetAppliedIndex()
	var prev uint64
	for _, p := range snap.GetSessions() {
		id := p.GetId()
		switch {
		case id == 0 || id <= prev:
			return fmt.Errorf("session id %d after %d: ids must ascend from 1", id, prev)
		case id > m.applied:
			return fmt.Errorf("session %d is newer than applied index %d", id, m.applied)
		}
		prev = id
		if err := checkTTL(time.Duration(p.GetTtlNanos())); err != nil {
			return fmt.Errorf("session %d: %s", id, err.Msg)
		}
		if err := checkLabel("owner", p.GetOwner()); err != nil {
			return fmt.Errorf("session %d: %s", id, err.Msg)
		}
		s := newSession(id, p.GetOwner(), p.GetTtlNanos(), p.GetCreatedUnixNano())
		s.blacklisted = p.GetBlacklisted()
		s.minUnacked = p.GetMinUnackedSeq()
		if len(p.GetResults()) > MaxPending {
			return fmt.Errorf("session %d has %d cached results; the limit is %d", id, len(p.GetResults()), MaxPending)
		}
		for i, c := range p.GetResults() {
			if c.GetResult() == nil || c.GetSeq() < s.minUnacked || (i > 0 && c.GetSeq() <= s.results[i-1].seq) {
				return fmt.Errorf("session %d: cached result %d (seq %d) is missing, below min unacked %d or out of order",
					id, i, c.GetSeq(), s.minUnacked)
			}
			s.results = append(s.results, cachedResult{seq: c.GetSeq(), res: c.GetResult(), claimed: c.GetClaimed()})
		}
		m.sessions[id] = s
		m.sessionIDs.ReplaceOrInsert(id)
	}

	prevName := ""
	for i, p := range snap.GetLocks() {
		name := p.GetName()
		if err := checkLockName(name); err != nil {
			return fmt.Errorf("lock %d: %s", i, err.Msg)
		}
		if i > 0 && name <= prevName {
			return fmt.Errorf("lock %q after %q: names must ascend", name, prevName)
		}
		prevName = name
		if len(p.GetHolders()) == 0 && len(p.GetWaiters()) == 0 {
			return fmt.Errorf("lock %q has no holder and no waiter", name)
		}
		if len(p.GetHolders()) > holderLimit {
			return fmt.Errorf("lock %q has %d holders; the limit is %d", name, len(p.GetHolders()), holderLimit)
		}
		if len(p.GetWaiters()) > MaxWaitersPerLock {
			return fmt.Errorf("lock %q has %d waiters; the limit is %d", name, len(p.GetWaiters()), MaxWaitersPerLock)
		}
		if len(p.GetWaiters()) > 0 && len(p.GetHolders()) < holderLimit {
			return fmt.Errorf("lock %q has room for a holder but waiters queued", name)
		}
		l := &lock{name: name}
		for _, h := range p.GetHolders() {
			s := m.sessions[h.GetSessionId()]
			switch {
			case s == nil:
				return fmt.Errorf("lock %q is held by missing session %d", name, h.GetSessionId())
			case h.GetCount() == 0:
				return fmt.Errorf("lock %q has a holder with count 0", name)
			case h.GetToken() == 0 || h.GetToken() > m.applied:
				return fmt.Errorf("lock %q has token %d outside 1..%d", name, h.GetToken(), m.applied)
			case l.holderOf(s.id, h.GetOwnerKey()) != nil:
				return fmt.Errorf("lock %q is held twice by session %d key %q", name, s.id, h.GetOwnerKey())
			}
			if err := checkLabel("owner key", h.GetOwnerKey()); err != nil {
				return fmt.Errorf("lock %q: %s", name, err.Msg)
			}
			l.holders = append(l.holders, h)
			s.addHold(name)
		}
		for _, w := range p.GetWaiters() {
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
			}
			key := waitKey{name, w.GetAcquireSeq()}
			if _, dup := s.waits[key]; dup {
				return fmt.Errorf("lock %q has waiter seq %d of session %d twice", name, key.seq, s.id)
			}
			if err := checkLabel("owner key", w.GetOwnerKey()); err != nil {
				return fmt.Errorf("lock %q: %s", name, err.Msg)
			}
			l.waiters = append(l.waiters, w)
			s.waits[key] = struct{}{}
		}
		m.locks[name] = l
		m.lockNames.ReplaceOrInsert(name)
	}

	for _, p := range snap.GetSessions() {
		s := m.sessions[p.GetId()]
		if int(p.GetHolds()) != s.numHolds {
			return fmt.Errorf("session %d says it holds %d locks, the locks say %d", s.id, p.GetHolds(), s.numHolds)
		}
		if s.load() > MaxHoldsPerSession {
			return fmt.Errorf("session %d holds or waits for %d locks; the limit is %d", s.id, s.load(), MaxHoldsPerSession)
		}
	}
	return nil
}
