package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
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
	m.sessionTree.Ascend(func(s *session) bool {
		b = appendSession(b, s)
		return true
	})
	m.lockTree.Ascend(func(l *lock) bool {
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
func appendLock(b []byte, l *lock) []byte {
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
func appendSession(b []byte, s *session) []byte {
	size := sizeUint(sessionID, s.id) + sizeString(sessionOwner, s.owner) +
		sizeUint(sessionTTL, uint64(s.ttl)) + sizeBool(sessionBlacklisted, s.blacklisted) +
		sizeUint(sessionCreated, uint64(s.created)) + sizeUint(sessionMinUnacked, s.minUnacked) +
		sizeUint(sessionHolds, uint64(s.numHolds())) + sizeUint(sessionNonce, s.nonce) +
		sizeBytes(sessionSecretHash, s.secretHashBytes()) + sizeString(sessionPrincipal, s.principal)
	for i := range s.results {
		size += sizeMessage(sessionResults, cachedSize(&s.results[i]))
	}
	b = protowire.AppendTag(b, snapshotSessions, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = appendUint(b, sessionID, s.id)
	b = appendString(b, sessionOwner, s.owner)
	b = appendUint(b, sessionTTL, uint64(s.ttl))
	b = appendBool(b, sessionBlacklisted, s.blacklisted)
	b = appendUint(b, sessionCreated, uint64(s.created))
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
	b = appendUint(b, sessionNonce, s.nonce)
	b = appendBytes(b, sessionSecretHash, s.secretHashBytes())
	return appendString(b, sessionPrincipal, s.principal)
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
// index (v) and each encoded session or lock (rec). Like proto.Unmarshal it
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
		case (num == snapshotAppliedIndex || num == snapshotClusterID || num == snapshotLogVersion) && typ == protowire.VarintType:
			v, n = protowire.ConsumeVarint(data)
		case (num == snapshotSessions || num == snapshotLocks || num == snapshotMembers || num == snapshotAuth || num == snapshotAudit) && typ == protowire.BytesType:
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
// keeps). Through proto, decoding was 40% of a restore at a million locks,
// and a restarting member serves nothing until its restore is done.
// TestDecodeLockMatchesProto compares it with proto.Unmarshal on valid and
// damaged records.
func decodeLock(rec []byte, p *fsmpb.Lock) error {
	holders, waiters := p.Holders[:0], p.Waiters[:0]
	var (
		name  string
		limit uint32
	)
	for len(rec) > 0 {
		num, typ, n := protowire.ConsumeTag(rec)
		if n < 0 {
			return &decodeError{protowire.ParseError(n)}
		}
		rec = rec[n:]
		if num == lockLimit && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(rec)
			if n < 0 {
				return &decodeError{protowire.ParseError(n)}
			}
			rec = rec[n:]
			limit = uint32(v)
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
	*p = fsmpb.Lock{Name: name, Holders: holders, Waiters: waiters, Limit: limit}
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
	nSessions, nLocks := 0, 0
	err := eachRecord(data, func(num protowire.Number, v uint64, _ []byte) error {
		switch num {
		case snapshotAppliedIndex:
			m.applied = v
		case snapshotClusterID:
			m.clusterID = v
		case snapshotLogVersion:
			m.logVersion = uint32(v)
		case snapshotSessions:
			nSessions++
		case snapshotLocks:
			nLocks++
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
	m.lastSize, m.lastRecords = len(data), nSessions+nLocks

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
	m.sessionTree.Ascend(func(s *session) bool {
		if n := min(int(holds[i]), budget); n > 0 {
			s.held = make([]*lock, 0, n)
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

	// The sessions came in ascending id order, the order of holds.
	i = 0
	m.sessionTree.Ascend(func(s *session) bool {
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
	if err := checkTTL(time.Duration(p.GetTtlNanos())); err != nil {
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
		if r.GetSessionId() != 0 || len(r.GetGrants())+len(r.GetWaitsEnded())+len(r.GetSessionsEnded())+len(r.GetHoldsEnded()) > 0 {
			return fmt.Errorf("session %d: cached result %d (seq %d) has a session id or side effects", id, i, c.GetSeq())
		}
		cr := cacheResult(c.GetSeq(), r)
		cr.claimed = c.GetClaimed()
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
	if len(holders) == 0 && len(waiters) == 0 {
		return fmt.Errorf("lock %q has no holder and no waiter", name)
	}
	limit, lerr := checkLimit(p.GetLimit())
	switch {
	case lerr != nil:
		return fmt.Errorf("lock %q: %s", name, lerr.Msg)
	case p.GetLimit() == 1:
		return fmt.Errorf("lock %q has limit 1 written as 1, not 0", name) // one state, one encoding
	case uint32(len(holders)) > limit:
		return fmt.Errorf("lock %q has %d holders; its limit is %d", name, len(holders), limit)
	case len(holders) > 1 && slices.ContainsFunc(holders, func(h *fsmpb.Holder) bool { return !h.GetShared() }):
		return fmt.Errorf("lock %q has an exclusive holder beside %d others", name, len(holders)-1)
	case len(waiters) > MaxWaitersPerLock:
		return fmt.Errorf("lock %q has %d waiters; the limit is %d", name, len(waiters), MaxWaitersPerLock)
	}
	l := &lock{name: name}
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
			holdLimit:  holdLimit,
		})
	}
	if len(waiters) > 0 {
		l.queue = &queue{waiters: make([]waiter, 0, len(waiters))}
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
		l.enqueue(waiter{
			s:          s,
			ownerKey:   w.GetOwnerKey(),
			acquireSeq: w.GetAcquireSeq(),
			timeout:    w.GetWaitTimeoutNanos(),
			since:      w.GetSinceUnixNano(),
			limit:      uint16(limit),
			shared:     w.GetShared(),
			holdLimit:  holdLimit,
		})
		s.addWait(key)
	}
	if ws := l.waiters(); len(ws) > 0 && l.grantable(&ws[0]) {
		return fmt.Errorf("lock %q has room for its first waiter, which is still queued", name)
	}
	m.locks[l.name] = l
	m.lockTree.ReplaceOrInsert(l)
	return nil
}
