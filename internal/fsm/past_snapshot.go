package fsm

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/batonlock/baton/api/protofield"
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// The history's place in snapshots (past.go): Snapshot.history, one
// LockHistory per lock in eviction order, from log version HistoryVersion.

// The fields of fsmpb.Snapshot.history, LockHistory and PastHold, which
// appendPastLock writes itself (TestSnapshotFieldNumbers checks them).
const (
	snapshotHistory      protowire.Number = 100
	snapshotHistoryFloor protowire.Number = 101

	historyLock  protowire.Number = 1
	historyHolds protowire.Number = 2

	pastSessionID  protowire.Number = 1
	pastOwner      protowire.Number = 2
	pastOwnerKey   protowire.Number = 3
	pastToken      protowire.Number = 4
	pastShared     protowire.Number = 5
	pastSince      protowire.Number = 6
	pastEnded      protowire.Number = 7
	pastEndedIndex protowire.Number = 8
	pastHow        protowire.Number = 9
	pastValue      protowire.Number = 10
)

// appendPastLock appends pl as one element of the snapshot's history
// field, its ends oldest first, as the bytes proto's deterministic
// Marshal gives the fsmpb.LockHistory (as appendLock does a lock).
func appendPastLock(b []byte, pl *pastLock) []byte {
	var sizes [PastHoldsPerLock]int
	size := protofield.SizeString(historyLock, pl.name)
	for i := range pl.n {
		sizes[i] = pastHoldSize(pl.oldest(i))
		size += protofield.SizeMessage(historyHolds, sizes[i])
	}
	b = protofield.AppendMessageHeader(b, snapshotHistory, size)
	b = protofield.AppendString(b, historyLock, pl.name)
	for i := range pl.n {
		h := pl.oldest(i)
		b = protofield.AppendMessageHeader(b, historyHolds, sizes[i])
		b = protofield.AppendUint(b, pastSessionID, h.SessionID)
		b = protofield.AppendString(b, pastOwner, h.Owner)
		b = protofield.AppendString(b, pastOwnerKey, h.OwnerKey)
		b = protofield.AppendUint(b, pastToken, h.Token)
		b = protofield.AppendBool(b, pastShared, h.Shared)
		b = protofield.AppendUint(b, pastSince, uint64(h.Since))
		b = protofield.AppendUint(b, pastEnded, uint64(h.Ended))
		b = protofield.AppendUint(b, pastEndedIndex, h.EndedIndex)
		b = protofield.AppendUint(b, pastHow, uint64(h.How))
		b = protofield.AppendString(b, pastValue, h.Value) // "" below WatchHistoryVersion: left out
	}
	return b
}

// oldest returns pl's i-th end from the oldest (i < pl.n).
func (pl *pastLock) oldest(i int) *PastHold {
	return &pl.holds[(pl.next-pl.n+i+2*PastHoldsPerLock)%PastHoldsPerLock]
}

func pastHoldSize(h *PastHold) int {
	return protofield.SizeUint(pastSessionID, h.SessionID) + protofield.SizeString(pastOwner, h.Owner) +
		protofield.SizeString(pastOwnerKey, h.OwnerKey) + protofield.SizeUint(pastToken, h.Token) +
		protofield.SizeBool(pastShared, h.Shared) + protofield.SizeUint(pastSince, uint64(h.Since)) +
		protofield.SizeUint(pastEnded, uint64(h.Ended)) + protofield.SizeUint(pastEndedIndex, h.EndedIndex) +
		protofield.SizeUint(pastHow, uint64(h.How)) + protofield.SizeString(pastValue, h.Value)
}

// encodeHistory appends the history, if replicated, as Snapshot.history,
// and its floor.
func (m *Machine) encodeHistory(b []byte) []byte {
	if !m.historyReplicated() {
		return b
	}
	for pl := m.past.tail; pl != nil; pl = pl.prev {
		b = appendPastLock(b, pl)
	}
	return appendHistoryFloor(b, m.logVersion, m.past.floor)
}

// appendHistoryFloor appends Snapshot.history_floor: from
// WatchHistoryVersion, and not when 0 (as proto3 leaves it out). Below
// that version the floor is 0 anyway; the check keeps older snapshots'
// bytes whatever happens.
func appendHistoryFloor(b []byte, logVersion uint32, floor uint64) []byte {
	if logVersion < WatchHistoryVersion {
		return b
	}
	return protofield.AppendUint(b, snapshotHistoryFloor, floor)
}

// loadHistoryFloor restores the history's floor read from a snapshot:
// only from WatchHistoryVersion, and not above the snapshot's index (the
// floor is an end's index or the entry that raised the version).
func (m *Machine) loadHistoryFloor(floor uint64) error {
	switch {
	case floor == 0:
		return nil
	case m.logVersion < WatchHistoryVersion:
		return fmt.Errorf("a history floor in a snapshot of log version %d; it is kept from %d", m.LogVersion(), WatchHistoryVersion)
	case floor > m.applied:
		return fmt.Errorf("history floor %d above the applied index %d", floor, m.applied)
	}
	m.past.floor = floor
	return nil
}

// loadHistory restores the snapshot's history, checking what recordEnd
// keeps true: only from HistoryVersion, at most PastLocks locks of valid
// and distinct names with 1 to PastHoldsPerLock ends each, every end's
// holder, token and entry possible at the applied index, and ends in the
// order they were recorded (by ended index, within a lock and across the
// locks' last ends).
func (m *Machine) loadHistory(data []byte) error {
	var (
		lh        fsmpb.LockHistory
		lastEnded uint64
	)
	return eachRecord(data, func(num protowire.Number, _ uint64, rec []byte) error {
		if num != snapshotHistory {
			return nil
		}
		if !m.historyReplicated() {
			return fmt.Errorf("a lock history in a snapshot of log version %d; the history is replicated from %d",
				m.LogVersion(), HistoryVersion)
		}
		if err := decodeRecord(rec, &lh); err != nil {
			return err
		}
		name := lh.GetLock()
		if err := checkLockName(name); err != nil {
			return fmt.Errorf("lock history %d: %s", len(m.past.locks), err.Msg)
		}
		if m.past.locks[name] != nil {
			return fmt.Errorf("lock %q has two histories", name)
		}
		if len(m.past.locks) == PastLocks {
			return fmt.Errorf("more than %d lock histories", PastLocks)
		}
		ends := lh.GetHolds()
		if len(ends) == 0 || len(ends) > PastHoldsPerLock {
			return fmt.Errorf("lock %q: a history of %d ends; want 1 to %d", name, len(ends), PastHoldsPerLock)
		}
		pl := &pastLock{name: name, epoch: m.epoch, n: len(ends), next: len(ends) % PastHoldsPerLock}
		var prev uint64
		for i, e := range ends {
			if err := m.checkPastHold(e, prev); err != nil {
				return fmt.Errorf("lock %q: end %d: %w", name, i, err)
			}
			prev = e.GetEndedIndex()
			pl.holds[i] = PastHold{SessionID: e.GetSessionId(), Owner: e.GetOwner(), OwnerKey: e.GetOwnerKey(),
				Token: e.GetToken(), Shared: e.GetShared(), Since: e.GetSinceUnixNano(), Ended: e.GetEndedUnixNano(),
				EndedIndex: e.GetEndedIndex(), How: HoldEnd(e.GetHow()), Value: e.GetValue()}
		}
		if prev < lastEnded {
			return fmt.Errorf("lock %q: its last end, at %d, is older than the last end of the lock before it, at %d", name, prev, lastEnded)
		}
		lastEnded = prev
		if m.past.locks == nil {
			m.past.locks = make(map[string]*pastLock)
		}
		m.past.locks[name] = pl
		m.past.pushFront(pl)
		return nil
	})
}

// checkPastHold checks an end read from a snapshot: a session opened no
// later than the grant, granted no later than the end, by an entry no
// later than the applied index and not before after, the end recorded
// before it; a value only from WatchHistoryVersion, and one a hold could
// have had.
func (m *Machine) checkPastHold(e *fsmpb.PastHold, after uint64) error {
	switch {
	case e.GetHow() <= fsmpb.HoldEnd_HOLD_END_UNSPECIFIED || e.GetHow() > fsmpb.HoldEnd_HOLD_END_REVOKED:
		return fmt.Errorf("unknown way to end %d", e.GetHow())
	case e.GetEndedIndex() == 0 || e.GetEndedIndex() > m.applied:
		return fmt.Errorf("ended index %d outside 1..%d", e.GetEndedIndex(), m.applied)
	case e.GetEndedIndex() < after:
		return fmt.Errorf("ended index %d before the end recorded before it (%d)", e.GetEndedIndex(), after)
	case e.GetToken() == 0 || e.GetToken() > e.GetEndedIndex():
		return fmt.Errorf("token %d outside 1..%d (its end)", e.GetToken(), e.GetEndedIndex())
	case e.GetSessionId() == 0 || e.GetSessionId() > e.GetToken():
		return fmt.Errorf("session %d, opened after its grant %d", e.GetSessionId(), e.GetToken())
	}
	if err := checkOwner(e.GetOwner()); err != nil {
		return fmt.Errorf("%s", err.Msg)
	}
	if err := checkOwnerKey(e.GetOwnerKey()); err != nil {
		return fmt.Errorf("%s", err.Msg)
	}
	if v := e.GetValue(); v != "" {
		if m.logVersion < WatchHistoryVersion {
			return fmt.Errorf("a value in a snapshot of log version %d; ends keep their values from %d",
				m.LogVersion(), WatchHistoryVersion)
		}
		if err := rules.CheckHoldValue(v); err != nil {
			return err
		}
	}
	return nil
}
