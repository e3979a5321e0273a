package fsm

import (
	"crypto/sha256"
	"encoding/hex"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/batonlock/baton/api/protofield"
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
	snapshotSigningKeys  protowire.Number = 9
)

// Snapshot returns the whole state as an fsmpb.Snapshot in bytes. The bytes
// are deterministic: sessions sorted by id, their cached results by seq,
// locks by name, holders and waiters in their order, the history (from
// HistoryVersion) in eviction order, each record in the
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
	b = protofield.AppendUint(b, snapshotAppliedIndex, applied) // proto3 leaves out a zero
	m.sessionTree.Ascend(func(s *sessionState) bool {
		b = appendSession(b, s)
		return true
	})
	m.lockTree.Ascend(func(l *lockState) bool {
		b = appendLock(b, l)
		return true
	})
	b = appendClusterInfo(appendMembers(b, m.Members()), m.clusterID, m.logVersion)
	return m.encodeHistory(append(b, m.encodeTail()...))
}

// encodeTail is the snapshot's small fields after the cluster info, in
// field order: auth, audit and signing keys.
func (m *Machine) encodeTail() []byte {
	return append(m.encodeAuth(), m.encodeSigningKeys()...)
}

// The fields of fsmpb.Lock, fsmpb.Holder and fsmpb.Waiter, which appendLock
// writes itself (TestSnapshotFieldNumbers checks them against the proto).
const (
	lockName       protowire.Number = 1
	lockHolders    protowire.Number = 2
	lockWaiters    protowire.Number = 3
	lockLimit      protowire.Number = 4
	lockDelayFrom  protowire.Number = 5
	lockDelayNanos protowire.Number = 6
	lockDelayUntil protowire.Number = 7

	holderSessionID   protowire.Number = 1
	holderOwnerKey    protowire.Number = 2
	holderOwner       protowire.Number = 3
	holderToken       protowire.Number = 4
	holderCount       protowire.Number = 5
	holderSince       protowire.Number = 6
	holderAcquireSeq  protowire.Number = 7
	holderShared      protowire.Number = 8
	holderHoldLimit   protowire.Number = 9
	holderLockDelay   protowire.Number = 10
	holderRevokeFrom  protowire.Number = 50
	holderRevokeGrace protowire.Number = 51
	holderRevokeUntil protowire.Number = 52
	holderValue       protowire.Number = 60

	waiterSessionID  protowire.Number = 1
	waiterOwnerKey   protowire.Number = 2
	waiterOwner      protowire.Number = 3
	waiterAcquireSeq protowire.Number = 4
	waiterTimeout    protowire.Number = 5
	waiterSince      protowire.Number = 6
	waiterShared     protowire.Number = 7
	waiterHoldLimit  protowire.Number = 8
	waiterLockDelay  protowire.Number = 9
	waiterValue      protowire.Number = 60
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
	ws, d := l.waiters(), l.delay()
	size := protofield.SizeString(lockName, l.name) + protofield.SizeUint(lockLimit, uint64(encodeLimit(l.limit()))) +
		protofield.SizeUint(lockDelayFrom, d.from) + protofield.SizeUint(lockDelayNanos, uint64(d.nanos)) +
		protofield.SizeUint(lockDelayUntil, uint64(d.until))
	for i := range l.holders {
		h := &l.holders[i]
		size += protofield.SizeMessage(lockHolders, holderSize(h, l.revocationOf(h), l.holderValue(h)))
	}
	for i := range ws {
		size += protofield.SizeMessage(lockWaiters, waiterSize(&ws[i], l.waiterValue(&ws[i])))
	}
	b = protofield.AppendMessageHeader(b, snapshotLocks, size)
	b = protofield.AppendString(b, lockName, l.name)
	for i := range l.holders {
		h := &l.holders[i]
		r, v := l.revocationOf(h), l.holderValue(h)
		b = protofield.AppendMessageHeader(b, lockHolders, holderSize(h, r, v))
		b = protofield.AppendUint(b, holderSessionID, h.s.id)
		b = protofield.AppendString(b, holderOwnerKey, h.ownerKey)
		b = protofield.AppendString(b, holderOwner, h.s.owner)
		b = protofield.AppendUint(b, holderToken, h.token)
		b = protofield.AppendUint(b, holderCount, uint64(h.count))
		b = protofield.AppendUint(b, holderSince, uint64(h.since))
		b = protofield.AppendUint(b, holderAcquireSeq, h.acquireSeq)
		b = protofield.AppendBool(b, holderShared, h.shared)
		b = protofield.AppendUint(b, holderHoldLimit, uint64(msDuration(h.holdLimit)))
		b = protofield.AppendUint(b, holderLockDelay, uint64(secDuration(h.lockDelay)))
		if r != nil {
			b = protofield.AppendUint(b, holderRevokeFrom, r.from)
			b = protofield.AppendUint(b, holderRevokeGrace, uint64(r.grace))
			b = protofield.AppendUint(b, holderRevokeUntil, uint64(r.until))
		}
		b = protofield.AppendString(b, holderValue, v)
	}
	for i := range ws {
		w := &ws[i]
		v := l.waiterValue(w)
		b = protofield.AppendMessageHeader(b, lockWaiters, waiterSize(w, v))
		b = protofield.AppendUint(b, waiterSessionID, w.s.id)
		b = protofield.AppendString(b, waiterOwnerKey, w.ownerKey)
		b = protofield.AppendString(b, waiterOwner, w.s.owner)
		b = protofield.AppendUint(b, waiterAcquireSeq, w.acquireSeq)
		b = protofield.AppendUint(b, waiterTimeout, uint64(w.timeout))
		b = protofield.AppendUint(b, waiterSince, uint64(w.since))
		b = protofield.AppendBool(b, waiterShared, w.shared)
		b = protofield.AppendUint(b, waiterHoldLimit, uint64(msDuration(w.holdLimit)))
		b = protofield.AppendUint(b, waiterLockDelay, uint64(secDuration(w.lockDelay)))
		b = protofield.AppendString(b, waiterValue, v)
	}
	b = protofield.AppendUint(b, lockLimit, uint64(encodeLimit(l.limit())))
	b = protofield.AppendUint(b, lockDelayFrom, d.from)
	b = protofield.AppendUint(b, lockDelayNanos, uint64(d.nanos))
	return protofield.AppendUint(b, lockDelayUntil, uint64(d.until))
}

// holderSize is the encoded size of h with its revocation r (nil: none)
// and the value v.
func holderSize(h *holder, r *revocation, v string) int {
	n := 0
	if r != nil {
		n = protofield.SizeUint(holderRevokeFrom, r.from) + protofield.SizeUint(holderRevokeGrace, uint64(r.grace)) +
			protofield.SizeUint(holderRevokeUntil, uint64(r.until))
	}
	return n + protofield.SizeUint(holderSessionID, h.s.id) + protofield.SizeString(holderOwnerKey, h.ownerKey) +
		protofield.SizeString(holderOwner, h.s.owner) + protofield.SizeUint(holderToken, h.token) +
		protofield.SizeUint(holderCount, uint64(h.count)) + protofield.SizeUint(holderSince, uint64(h.since)) +
		protofield.SizeUint(holderAcquireSeq, h.acquireSeq) + protofield.SizeBool(holderShared, h.shared) +
		protofield.SizeUint(holderHoldLimit, uint64(msDuration(h.holdLimit))) +
		protofield.SizeUint(holderLockDelay, uint64(secDuration(h.lockDelay))) + protofield.SizeString(holderValue, v)
}

// waiterSize is the encoded size of w with the value v.
func waiterSize(w *waiter, v string) int {
	return protofield.SizeUint(waiterSessionID, w.s.id) + protofield.SizeString(waiterOwnerKey, w.ownerKey) +
		protofield.SizeString(waiterOwner, w.s.owner) + protofield.SizeUint(waiterAcquireSeq, w.acquireSeq) +
		protofield.SizeUint(waiterTimeout, uint64(w.timeout)) + protofield.SizeUint(waiterSince, uint64(w.since)) +
		protofield.SizeBool(waiterShared, w.shared) + protofield.SizeUint(waiterHoldLimit, uint64(msDuration(w.holdLimit))) +
		protofield.SizeUint(waiterLockDelay, uint64(secDuration(w.lockDelay))) + protofield.SizeString(waiterValue, v)
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
	cachedKeyed   protowire.Number = 4
	cachedKey     protowire.Number = 5

	resultError       protowire.Number = 1
	resultMessage     protowire.Number = 2
	resultAcquire     protowire.Number = 4
	resultAcquireMany protowire.Number = 5
	resultRemaining   protowire.Number = 9
	resultDeadlock    protowire.Number = 40

	cycleEdges protowire.Number = 1

	edgeSessionID   protowire.Number = 1
	edgeOwnerKey    protowire.Number = 2
	edgeLock        protowire.Number = 3
	edgeQueuedAhead protowire.Number = 4
	edgeBlockerID   protowire.Number = 5
	edgeBlockerKey  protowire.Number = 6

	outcomeLock     protowire.Number = 1
	outcomeStatus   protowire.Number = 2
	outcomeToken    protowire.Number = 3
	outcomeCount    protowire.Number = 4
	outcomeHolder   protowire.Number = 5
	outcomePosition protowire.Number = 6
	outcomeDelayed  protowire.Number = 7
)

// appendSession appends s, with its cached results, as one element of the
// snapshot's sessions field, as appendLock does a lock: the bytes proto's
// deterministic Marshal gives the fsmpb.Session that fill describes. A
// cached result always has its result message, empty or not, as fill
// sets it.
func appendSession(b []byte, s *sessionState) []byte {
	o := s.sess // what the session was opened with
	size := protofield.SizeUint(sessionID, o.id) + protofield.SizeString(sessionOwner, o.owner) +
		protofield.SizeUint(sessionTTL, uint64(o.ttl)) + protofield.SizeBool(sessionBlacklisted, s.blacklisted) +
		protofield.SizeUint(sessionCreated, uint64(o.created)) + protofield.SizeUint(sessionMinUnacked, s.minUnacked) +
		protofield.SizeUint(sessionHolds, uint64(s.numHolds())) + protofield.SizeUint(sessionNonce, o.nonce) +
		protofield.SizeBytes(sessionSecretHash, o.secretHashBytes()) + protofield.SizeString(sessionPrincipal, o.principal)
	for i := range s.results {
		size += protofield.SizeMessage(sessionResults, cachedSize(&s.results[i]))
	}
	b = protofield.AppendMessageHeader(b, snapshotSessions, size)
	b = protofield.AppendUint(b, sessionID, o.id)
	b = protofield.AppendString(b, sessionOwner, o.owner)
	b = protofield.AppendUint(b, sessionTTL, uint64(o.ttl))
	b = protofield.AppendBool(b, sessionBlacklisted, s.blacklisted)
	b = protofield.AppendUint(b, sessionCreated, uint64(o.created))
	b = protofield.AppendUint(b, sessionMinUnacked, s.minUnacked)
	for i := range s.results {
		c := &s.results[i]
		b = protofield.AppendMessageHeader(b, sessionResults, cachedSize(c))
		b = protofield.AppendUint(b, cachedSeq, c.seq)
		b = protofield.AppendMessageHeader(b, cachedResultF, resultSize(c))
		b = protofield.AppendUint(b, resultError, uint64(int64(c.code)))
		b = protofield.AppendString(b, resultMessage, c.message())
		if c.acquire != nil {
			b = appendOutcome(b, resultAcquire, c.acquire)
		}
		for j := range c.many {
			b = appendOutcome(b, resultAcquireMany, &c.many[j])
		}
		b = protofield.AppendUint(b, resultRemaining, uint64(c.remaining))
		if cycle := c.cycle(); len(cycle) > 0 {
			b = protofield.AppendMessageHeader(b, resultDeadlock, cycleSize(cycle))
			for _, e := range cycle {
				b = appendDeadlockEdge(b, &e)
			}
		}
		b = protofield.AppendBool(b, cachedClaimed, c.claimed)
		b = protofield.AppendBool(b, cachedKeyed, c.keyed)
		b = protofield.AppendString(b, cachedKey, c.ownerKey)
	}
	b = protofield.AppendUint(b, sessionHolds, uint64(s.numHolds()))
	b = protofield.AppendUint(b, sessionNonce, o.nonce)
	b = protofield.AppendBytes(b, sessionSecretHash, o.secretHashBytes())
	return protofield.AppendString(b, sessionPrincipal, o.principal)
}

func cachedSize(c *cachedResult) int {
	return protofield.SizeUint(cachedSeq, c.seq) + protofield.SizeMessage(cachedResultF, resultSize(c)) + protofield.SizeBool(cachedClaimed, c.claimed) +
		protofield.SizeBool(cachedKeyed, c.keyed) + protofield.SizeString(cachedKey, c.ownerKey)
}

func resultSize(c *cachedResult) int {
	n := protofield.SizeUint(resultError, uint64(int64(c.code))) + protofield.SizeString(resultMessage, c.message()) +
		protofield.SizeUint(resultRemaining, uint64(c.remaining))
	if c.acquire != nil {
		n += protofield.SizeMessage(resultAcquire, outcomeSize(c.acquire))
	}
	for j := range c.many {
		n += protofield.SizeMessage(resultAcquireMany, outcomeSize(&c.many[j]))
	}
	if cycle := c.cycle(); len(cycle) > 0 {
		n += protofield.SizeMessage(resultDeadlock, cycleSize(cycle))
	}
	return n
}

// cycleSize is the size of a DeadlockCycle of edges.
func cycleSize(edges []deadlockEdge) int {
	n := 0
	for _, e := range edges {
		n += protofield.SizeMessage(cycleEdges, deadlockEdgeSize(&e))
	}
	return n
}

// appendDeadlockEdge appends e as an element of a DeadlockCycle's edges.
func appendDeadlockEdge(b []byte, e *deadlockEdge) []byte {
	b = protofield.AppendMessageHeader(b, cycleEdges, deadlockEdgeSize(e))
	b = protofield.AppendUint(b, edgeSessionID, e.sessionID)
	b = protofield.AppendString(b, edgeOwnerKey, e.ownerKey)
	b = protofield.AppendString(b, edgeLock, e.lock)
	b = protofield.AppendBool(b, edgeQueuedAhead, e.queuedAhead)
	b = protofield.AppendUint(b, edgeBlockerID, e.blockerSessionID)
	return protofield.AppendString(b, edgeBlockerKey, e.blockerOwnerKey)
}

func deadlockEdgeSize(e *deadlockEdge) int {
	return protofield.SizeUint(edgeSessionID, e.sessionID) + protofield.SizeString(edgeOwnerKey, e.ownerKey) +
		protofield.SizeString(edgeLock, e.lock) + protofield.SizeBool(edgeQueuedAhead, e.queuedAhead) +
		protofield.SizeUint(edgeBlockerID, e.blockerSessionID) + protofield.SizeString(edgeBlockerKey, e.blockerOwnerKey)
}

// appendOutcome appends o as field num of a Result.
func appendOutcome(b []byte, num protowire.Number, o *outcome) []byte {
	b = protofield.AppendMessageHeader(b, num, outcomeSize(o))
	b = protofield.AppendString(b, outcomeLock, o.lock)
	b = protofield.AppendUint(b, outcomeStatus, uint64(int64(o.status)))
	b = protofield.AppendUint(b, outcomeToken, o.token)
	b = protofield.AppendUint(b, outcomeCount, uint64(o.count))
	if h := o.holder; h != nil {
		b = protofield.AppendMessageHeader(b, outcomeHolder, holderCopySize(h))
		b = protofield.AppendUint(b, holderSessionID, h.sessionID)
		b = protofield.AppendString(b, holderOwnerKey, h.ownerKey)
		b = protofield.AppendString(b, holderOwner, h.owner)
		b = protofield.AppendUint(b, holderToken, h.token)
		b = protofield.AppendUint(b, holderCount, uint64(h.count))
		b = protofield.AppendUint(b, holderSince, uint64(h.since))
		b = protofield.AppendUint(b, holderAcquireSeq, h.acquireSeq)
		b = protofield.AppendBool(b, holderShared, h.shared)
		b = protofield.AppendUint(b, holderHoldLimit, uint64(h.holdLimit))
		b = protofield.AppendUint(b, holderLockDelay, uint64(h.lockDelay))
		b = protofield.AppendString(b, holderValue, h.value)
	}
	b = protofield.AppendUint(b, outcomePosition, uint64(o.position))
	return protofield.AppendUint(b, outcomeDelayed, uint64(o.delayed))
}

func outcomeSize(o *outcome) int {
	n := protofield.SizeString(outcomeLock, o.lock) + protofield.SizeUint(outcomeStatus, uint64(int64(o.status))) +
		protofield.SizeUint(outcomeToken, o.token) + protofield.SizeUint(outcomeCount, uint64(o.count)) +
		protofield.SizeUint(outcomePosition, uint64(o.position)) + protofield.SizeUint(outcomeDelayed, uint64(o.delayed))
	if h := o.holder; h != nil {
		n += protofield.SizeMessage(outcomeHolder, holderCopySize(h))
	}
	return n
}

func holderCopySize(h *holderCopy) int {
	return protofield.SizeUint(holderSessionID, h.sessionID) + protofield.SizeString(holderOwnerKey, h.ownerKey) +
		protofield.SizeString(holderOwner, h.owner) + protofield.SizeUint(holderToken, h.token) +
		protofield.SizeUint(holderCount, uint64(h.count)) + protofield.SizeUint(holderSince, uint64(h.since)) +
		protofield.SizeUint(holderAcquireSeq, h.acquireSeq) + protofield.SizeBool(holderShared, h.shared) +
		protofield.SizeUint(holderHoldLimit, uint64(h.holdLimit)) + protofield.SizeUint(holderLockDelay, uint64(h.lockDelay)) +
		protofield.SizeString(holderValue, h.value)
}

// Hash returns the hex SHA-256 of the state's content: Snapshot's bytes
// without the applied index, so replicas (or one member before and after a
// restart) compare equal when they hold the same locks and sessions, even if
// one has applied more empty entries (leader no-ops) than the other.
func (m *Machine) Hash() string {
	sum := sha256.Sum256(m.marshal(0))
	return hex.EncodeToString(sum[:])
}
