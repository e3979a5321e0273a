package fsm

import (
	"crypto/sha256"
	"encoding/hex"

	"google.golang.org/protobuf/encoding/protowire"
)

// The fields of fsmpb.Snapshot, which Snapshot and Restore encode and decode
// one at a time (TestSnapshotFieldNumbers checks them against the proto).
const (
	snapshotAppliedIndex protowire.Number = 1
	snapshotSessions     protowire.Number = 2
	snapshotLocks        protowire.Number = 3
	snapshotMembers      protowire.Number = 4
	snapshotClusterID    protowire.Number = 5
	snapshotLogVersion   protowire.Number = 6
	snapshotAuth         protowire.Number = 7
	snapshotAudit        protowire.Number = 8
)

// Snapshot returns the whole state as an fsmpb.Snapshot in bytes. The bytes
// are deterministic: sessions sorted by id, their cached results by seq,
// locks by name, holders and waiters in their order, each record in the
// bytes proto's deterministic Marshal gives it; so equal states give
// equal bytes on every replica. It cannot fail: the error is for
// implementations that can.
func (m *Machine) Snapshot() ([]byte, error) {
	return m.marshal(m.applied), nil
}

// marshal encodes the state one record at a time, straight into one
// buffer (appendSession, appendLock): that is the encoding proto.Marshal
// gives the whole fsmpb.Snapshot (a message's fields in number order, each
// element of a repeated message field as its own tag, length and bytes),
// without building messages. Through proto, records cost three times as
// much. A Frozen state (frozen.go) is encoded by the same functions.
func (m *Machine) marshal(applied uint64) []byte {
	b := make([]byte, 0, m.encodedSizeHint())
	if applied != 0 { // proto3 leaves out a zero
		b = protowire.AppendTag(b, snapshotAppliedIndex, protowire.VarintType)
		b = protowire.AppendVarint(b, applied)
	}
	m.sessionTree.Ascend(func(s *sessionState) bool {
		b = appendSession(b, s)
		return true
	})
	m.lockTree.Ascend(func(l *lockState) bool {
		b = appendLock(b, l)
		return true
	})
	b = appendClusterInfo(appendMembers(b, m.Members()), m.clusterID, m.logVersion)
	return append(b, m.encodeAuth()...)
}

// The fields of fsmpb.Lock, fsmpb.Holder and fsmpb.Waiter, which appendLock
// writes itself (TestSnapshotFieldNumbers checks them against the proto).
const (
	lockName    protowire.Number = 1
	lockHolders protowire.Number = 2
	lockWaiters protowire.Number = 3
	lockLimit   protowire.Number = 4

	holderSessionID  protowire.Number = 1
	holderOwnerKey   protowire.Number = 2
	holderOwner      protowire.Number = 3
	holderToken      protowire.Number = 4
	holderCount      protowire.Number = 5
	holderSince      protowire.Number = 6
	holderAcquireSeq protowire.Number = 7
	holderShared     protowire.Number = 8
	holderHoldLimit  protowire.Number = 9

	waiterSessionID  protowire.Number = 1
	waiterOwnerKey   protowire.Number = 2
	waiterOwner      protowire.Number = 3
	waiterAcquireSeq protowire.Number = 4
	waiterTimeout    protowire.Number = 5
	waiterSince      protowire.Number = 6
	waiterShared     protowire.Number = 7
	waiterHoldLimit  protowire.Number = 8
)

// appendLock appends l as one element of the snapshot's locks field, as
// the bytes proto's deterministic Marshal gives the fsmpb.Lock that fill
// describes: fields in number order, zero values left out, each holder
// and waiter a length-prefixed message. It writes them directly: through
// proto, locks were three quarters of the time a snapshot of a million
// locks took. checkRoundTrip (every
// model, fuzz and data-driven test) compares the whole snapshot with
// proto's encoding.
func appendLock(b []byte, l *lockState) []byte {
	ws := l.waiters()
	size := sizeString(lockName, l.name) + sizeUint(lockLimit, uint64(encodeLimit(l.limit())))
	for i := range l.holders {
		size += sizeMessage(lockHolders, holderSize(&l.holders[i]))
	}
	for i := range ws {
		size += sizeMessage(lockWaiters, waiterSize(&ws[i]))
	}
	b = protowire.AppendTag(b, snapshotLocks, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = appendString(b, lockName, l.name)
	for i := range l.holders {
		h := &l.holders[i]
		b = protowire.AppendTag(b, lockHolders, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(holderSize(h)))
		b = appendUint(b, holderSessionID, h.s.id)
		b = appendString(b, holderOwnerKey, h.ownerKey)
		b = appendString(b, holderOwner, h.s.owner)
		b = appendUint(b, holderToken, h.token)
		b = appendUint(b, holderCount, uint64(h.count))
		b = appendUint(b, holderSince, uint64(h.since))
		b = appendUint(b, holderAcquireSeq, h.acquireSeq)
		b = appendBool(b, holderShared, h.shared)
		b = appendUint(b, holderHoldLimit, uint64(msDuration(h.holdLimit)))
	}
	for i := range ws {
		w := &ws[i]
		b = protowire.AppendTag(b, lockWaiters, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(waiterSize(w)))
		b = appendUint(b, waiterSessionID, w.s.id)
		b = appendString(b, waiterOwnerKey, w.ownerKey)
		b = appendString(b, waiterOwner, w.s.owner)
		b = appendUint(b, waiterAcquireSeq, w.acquireSeq)
		b = appendUint(b, waiterTimeout, uint64(w.timeout))
		b = appendUint(b, waiterSince, uint64(w.since))
		b = appendBool(b, waiterShared, w.shared)
		b = appendUint(b, waiterHoldLimit, uint64(msDuration(w.holdLimit)))
	}
	return appendUint(b, lockLimit, uint64(encodeLimit(l.limit())))
}

func holderSize(h *holder) int {
	return sizeUint(holderSessionID, h.s.id) + sizeString(holderOwnerKey, h.ownerKey) +
		sizeString(holderOwner, h.s.owner) + sizeUint(holderToken, h.token) +
		sizeUint(holderCount, uint64(h.count)) + sizeUint(holderSince, uint64(h.since)) +
		sizeUint(holderAcquireSeq, h.acquireSeq) + sizeBool(holderShared, h.shared) +
		sizeUint(holderHoldLimit, uint64(msDuration(h.holdLimit)))
}

func waiterSize(w *waiter) int {
	return sizeUint(waiterSessionID, w.s.id) + sizeString(waiterOwnerKey, w.ownerKey) +
		sizeString(waiterOwner, w.s.owner) + sizeUint(waiterAcquireSeq, w.acquireSeq) +
		sizeUint(waiterTimeout, uint64(w.timeout)) + sizeUint(waiterSince, uint64(w.since)) +
		sizeBool(waiterShared, w.shared) + sizeUint(waiterHoldLimit, uint64(msDuration(w.holdLimit)))
}

// The fields of fsmpb.Session, CachedResult, Result and AcquireOutcome
// that appendSession writes (TestSnapshotFieldNumbers checks them). A
// cached Result never has session_id or the side-effect lists.
const (
	sessionID          protowire.Number = 1
	sessionOwner       protowire.Number = 2
	sessionTTL         protowire.Number = 3
	sessionBlacklisted protowire.Number = 4
	sessionCreated     protowire.Number = 5
	sessionMinUnacked  protowire.Number = 6
	sessionResults     protowire.Number = 7
	sessionHolds       protowire.Number = 8
	sessionNonce       protowire.Number = 9
	sessionSecretHash  protowire.Number = 10
	sessionPrincipal   protowire.Number = 11

	cachedSeq     protowire.Number = 1
	cachedResultF protowire.Number = 2
	cachedClaimed protowire.Number = 3

	resultError       protowire.Number = 1
	resultMessage     protowire.Number = 2
	resultAcquire     protowire.Number = 4
	resultAcquireMany protowire.Number = 5
	resultRemaining   protowire.Number = 9

	outcomeLock     protowire.Number = 1
	outcomeStatus   protowire.Number = 2
	outcomeToken    protowire.Number = 3
	outcomeCount    protowire.Number = 4
	outcomeHolder   protowire.Number = 5
	outcomePosition protowire.Number = 6
)

// appendSession appends s, with its cached results, as one element of the
// snapshot's sessions field, as appendLock does a lock: the bytes proto's
// deterministic Marshal gives the fsmpb.Session that fill describes. A
// cached result always has its result message, empty or not, as fill
// sets it.
func appendSession(b []byte, s *sessionState) []byte {
	o := s.sess // what the session was opened with
	size := sizeUint(sessionID, o.id) + sizeString(sessionOwner, o.owner) +
		sizeUint(sessionTTL, uint64(o.ttl)) + sizeBool(sessionBlacklisted, s.blacklisted) +
		sizeUint(sessionCreated, uint64(o.created)) + sizeUint(sessionMinUnacked, s.minUnacked) +
		sizeUint(sessionHolds, uint64(s.numHolds())) + sizeUint(sessionNonce, o.nonce) +
		sizeBytes(sessionSecretHash, o.secretHashBytes()) + sizeString(sessionPrincipal, o.principal)
	for i := range s.results {
		size += sizeMessage(sessionResults, cachedSize(&s.results[i]))
	}
	b = protowire.AppendTag(b, snapshotSessions, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = appendUint(b, sessionID, o.id)
	b = appendString(b, sessionOwner, o.owner)
	b = appendUint(b, sessionTTL, uint64(o.ttl))
	b = appendBool(b, sessionBlacklisted, s.blacklisted)
	b = appendUint(b, sessionCreated, uint64(o.created))
	b = appendUint(b, sessionMinUnacked, s.minUnacked)
	for i := range s.results {
		c := &s.results[i]
		b = protowire.AppendTag(b, sessionResults, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(cachedSize(c)))
		b = appendUint(b, cachedSeq, c.seq)
		b = protowire.AppendTag(b, cachedResultF, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(resultSize(c)))
		b = appendUint(b, resultError, uint64(int64(c.code)))
		b = appendString(b, resultMessage, c.message())
		if c.acquire != nil {
			b = appendOutcome(b, resultAcquire, c.acquire)
		}
		for j := range c.many {
			b = appendOutcome(b, resultAcquireMany, &c.many[j])
		}
		b = appendUint(b, resultRemaining, uint64(c.remaining))
		b = appendBool(b, cachedClaimed, c.claimed)
	}
	b = appendUint(b, sessionHolds, uint64(s.numHolds()))
	b = appendUint(b, sessionNonce, o.nonce)
	b = appendBytes(b, sessionSecretHash, o.secretHashBytes())
	return appendString(b, sessionPrincipal, o.principal)
}

func cachedSize(c *cachedResult) int {
	return sizeUint(cachedSeq, c.seq) + sizeMessage(cachedResultF, resultSize(c)) + sizeBool(cachedClaimed, c.claimed)
}

func resultSize(c *cachedResult) int {
	n := sizeUint(resultError, uint64(int64(c.code))) + sizeString(resultMessage, c.message()) +
		sizeUint(resultRemaining, uint64(c.remaining))
	if c.acquire != nil {
		n += sizeMessage(resultAcquire, outcomeSize(c.acquire))
	}
	for j := range c.many {
		n += sizeMessage(resultAcquireMany, outcomeSize(&c.many[j]))
	}
	return n
}

// appendOutcome appends o as field num of a Result.
func appendOutcome(b []byte, num protowire.Number, o *outcome) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(outcomeSize(o)))
	b = appendString(b, outcomeLock, o.lock)
	b = appendUint(b, outcomeStatus, uint64(int64(o.status)))
	b = appendUint(b, outcomeToken, o.token)
	b = appendUint(b, outcomeCount, uint64(o.count))
	if h := o.holder; h != nil {
		b = protowire.AppendTag(b, outcomeHolder, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(holderCopySize(h)))
		b = appendUint(b, holderSessionID, h.sessionID)
		b = appendString(b, holderOwnerKey, h.ownerKey)
		b = appendString(b, holderOwner, h.owner)
		b = appendUint(b, holderToken, h.token)
		b = appendUint(b, holderCount, uint64(h.count))
		b = appendUint(b, holderSince, uint64(h.since))
		b = appendUint(b, holderAcquireSeq, h.acquireSeq)
		b = appendBool(b, holderShared, h.shared)
		b = appendUint(b, holderHoldLimit, uint64(h.holdLimit))
	}
	return appendUint(b, outcomePosition, uint64(o.position))
}

func outcomeSize(o *outcome) int {
	n := sizeString(outcomeLock, o.lock) + sizeUint(outcomeStatus, uint64(int64(o.status))) +
		sizeUint(outcomeToken, o.token) + sizeUint(outcomeCount, uint64(o.count)) +
		sizeUint(outcomePosition, uint64(o.position))
	if h := o.holder; h != nil {
		n += sizeMessage(outcomeHolder, holderCopySize(h))
	}
	return n
}

func holderCopySize(h *holderCopy) int {
	return sizeUint(holderSessionID, h.sessionID) + sizeString(holderOwnerKey, h.ownerKey) +
		sizeString(holderOwner, h.owner) + sizeUint(holderToken, h.token) +
		sizeUint(holderCount, uint64(h.count)) + sizeUint(holderSince, uint64(h.since)) +
		sizeUint(holderAcquireSeq, h.acquireSeq) + sizeBool(holderShared, h.shared) +
		sizeUint(holderHoldLimit, uint64(h.holdLimit))
}

func appendBool(b []byte, num protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, 1)
}

func sizeBool(num protowire.Number, v bool) int {
	if !v {
		return 0
	}
	return protowire.SizeTag(num) + 1
}

// appendUint appends a varint field (uint64, uint32 or int64: a negative
// int64 is its two's complement, ten bytes, as proto writes it) unless it
// is zero.
func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func sizeUint(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

// appendString appends a string field unless it is empty. Every string in
// the state was checked to be UTF-8 when its command was applied.
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func sizeString(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

// appendBytes appends a bytes field unless it is empty.
func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func sizeBytes(num protowire.Number, v []byte) int {
	if len(v) == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(v))
}

func sizeMessage(num protowire.Number, size int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(size)
}

// Hash returns the hex SHA-256 of the state's content: Snapshot's bytes
// without the applied index, so replicas (or one member before and after a
// restart) compare equal when they hold the same locks and sessions, even if
// one has applied more empty entries (leader no-ops) than the other.
func (m *Machine) Hash() string {
	sum := sha256.Sum256(m.marshal(0))
	return hex.EncodeToString(sum[:])
}
