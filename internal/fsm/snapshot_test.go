package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

func TestRestoreRefusesCorruptSnapshots(t *testing.T) {
	m, _ := fuzzMachine(t)
	good, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		tamper func(s *fsmpb.Snapshot)
	}{
		{"holder of missing session", func(s *fsmpb.Snapshot) { s.Locks[0].Holders[0].SessionId = 99 }},
		{"waiter of missing session", func(s *fsmpb.Snapshot) { s.Locks[0].Waiters[0].SessionId = 99 }},
		{"two holders", func(s *fsmpb.Snapshot) {
			s.Locks[0].Holders = append(s.Locks[0].Holders, &fsmpb.Holder{SessionId: 2, Token: 4, Count: 1})
		}},
		{"token from the future", func(s *fsmpb.Snapshot) { s.Locks[0].Holders[0].Token = 1000 }},
		{"count 0", func(s *fsmpb.Snapshot) { s.Locks[0].Holders[0].Count = 0 }},
		{"free lock with waiters", func(s *fsmpb.Snapshot) { s.Locks[0].Holders = nil }},
		{"unsorted sessions", func(s *fsmpb.Snapshot) { s.Sessions[0], s.Sessions[1] = s.Sessions[1], s.Sessions[0] }},
		{"wrong hold count", func(s *fsmpb.Snapshot) { s.Sessions[0].Holds = 5 }},
		{"bad lock name", func(s *fsmpb.Snapshot) { s.Locks[0].Name = "" }},
		{"cached result below min unacked", func(s *fsmpb.Snapshot) { s.Sessions[0].MinUnackedSeq = 9 }},
		{"holder owner not its session's", func(s *fsmpb.Snapshot) { s.Locks[0].Holders[0].Owner = "b" }},
		{"waiter owner not its session's", func(s *fsmpb.Snapshot) { s.Locks[0].Waiters[0].Owner = "a" }},
		{"cached side effects", func(s *fsmpb.Snapshot) {
			s.Sessions[0].Results[0].Result.SessionsEnded = []uint64{2}
		}},
		{"cached liveness", func(s *fsmpb.Snapshot) {
			s.Sessions[0].Results[0].Result.Liveness = &fsmpb.Liveness{SessionBlacklisted: 2}
		}},
		{"session newer than the applied index", func(s *fsmpb.Snapshot) { s.AppliedIndex = 1 }},
		{"an open nonce twice", func(s *fsmpb.Snapshot) { s.Sessions[0].OpenNonce, s.Sessions[1].OpenNonce = 7, 7 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var snap fsmpb.Snapshot
			if err := proto.Unmarshal(good, &snap); err != nil {
				t.Fatal(err)
			}
			tt.tamper(&snap)
			bad, err := proto.Marshal(&snap)
			if err != nil {
				t.Fatal(err)
			}
			r := New()
			r.SetApplied(1)
			before := r.Hash()
			if err := r.Restore(bad); err == nil {
				t.Fatal("restored a corrupt snapshot")
			} else {
				t.Log(err)
			}
			if r.Hash() != before {
				t.Fatal("a failed restore changed the machine")
			}
		})
	}
	if err := New().Restore([]byte{0xff, 0xff}); err == nil {
		t.Fatal("restored garbage")
	}
	if err := New().Restore(good[:len(good)-1]); err == nil {
		t.Fatal("restored a truncated snapshot")
	}
	// A well-framed snapshot whose last lock does not decode.
	bad := protowire.AppendTag(slices.Clone(good), snapshotLocks, protowire.BytesType)
	bad = protowire.AppendBytes(bad, []byte{0x0a, 0x05, 'x'})
	if err := New().Restore(bad); err == nil || !strings.Contains(err.Error(), "decode snapshot") {
		t.Fatalf("restored a snapshot with a broken lock: %v", err)
	}
}

func TestSnapshotFieldNumbers(t *testing.T) {
	for msg, want := range map[proto.Message]map[protoreflect.Name]protowire.Number{
		&fsmpb.Snapshot{}: {"applied_index": snapshotAppliedIndex, "sessions": snapshotSessions, "locks": snapshotLocks, "members": snapshotMembers, "cluster_id": snapshotClusterID, "log_version": snapshotLogVersion,
			"auth": snapshotAuth, "audit": snapshotAudit, "signing_keys": snapshotSigningKeys, "history": snapshotHistory,
			"history_floor": snapshotHistoryFloor},
		&fsmpb.LockHistory{}: {"lock": historyLock, "holds": historyHolds},
		&fsmpb.PastHold{}: {"session_id": pastSessionID, "owner": pastOwner, "owner_key": pastOwnerKey, "token": pastToken,
			"shared": pastShared, "since_unix_nano": pastSince, "ended_unix_nano": pastEnded, "ended_index": pastEndedIndex, "how": pastHow,
			"value": pastValue},
		&fsmpb.Lock{}: {"name": lockName, "holders": lockHolders, "waiters": lockWaiters, "limit": lockLimit,
			"delay_from": lockDelayFrom, "delay_nanos": lockDelayNanos, "delayed_until_unix_nano": lockDelayUntil},
		&fsmpb.Holder{}: {"session_id": holderSessionID, "owner_key": holderOwnerKey, "owner": holderOwner,
			"token": holderToken, "count": holderCount, "since_unix_nano": holderSince, "acquire_seq": holderAcquireSeq,
			"shared": holderShared, "hold_limit_nanos": holderHoldLimit, "lock_delay_nanos": holderLockDelay,
			"revoke_from": holderRevokeFrom, "revoke_grace_nanos": holderRevokeGrace, "revoke_deadline_unix_nano": holderRevokeUntil,
			"value": holderValue},
		&fsmpb.Waiter{}: {"session_id": waiterSessionID, "owner_key": waiterOwnerKey, "owner": waiterOwner,
			"acquire_seq": waiterAcquireSeq, "wait_timeout_nanos": waiterTimeout, "since_unix_nano": waiterSince,
			"shared": waiterShared, "hold_limit_nanos": waiterHoldLimit, "lock_delay_nanos": waiterLockDelay, "value": waiterValue},
		&fsmpb.Session{}: {"id": sessionID, "owner": sessionOwner, "ttl_nanos": sessionTTL, "blacklisted": sessionBlacklisted,
			"created_unix_nano": sessionCreated, "min_unacked_seq": sessionMinUnacked, "results": sessionResults, "holds": sessionHolds, "open_nonce": sessionNonce,
			"secret_hash": sessionSecretHash, "principal": sessionPrincipal},
		&fsmpb.CachedResult{}: {"seq": cachedSeq, "result": cachedResultF, "claimed": cachedClaimed, "keyed": cachedKeyed, "owner_key": cachedKey},
		// 0: a field the exactly-once cache never keeps, so never written.
		&fsmpb.Result{}: {"error": resultError, "message": resultMessage, "session_id": 0, "acquire": resultAcquire,
			"acquire_many": resultAcquireMany, "grants": 0, "waits_ended": 0, "sessions_ended": 0, "remaining_count": resultRemaining,
			"holds_ended": 0, "liveness": 0, "holds_revoked": 0, "deadlock": resultDeadlock},
		&fsmpb.DeadlockCycle{}: {"edges": cycleEdges},
		&fsmpb.DeadlockEdge{}: {"session_id": edgeSessionID, "owner_key": edgeOwnerKey, "lock": edgeLock, "queued_ahead": edgeQueuedAhead,
			"blocker_session_id": edgeBlockerID, "blocker_owner_key": edgeBlockerKey},
		&fsmpb.AcquireOutcome{}: {"lock": outcomeLock, "status": outcomeStatus, "token": outcomeToken, "count": outcomeCount,
			"holder": outcomeHolder, "position": outcomePosition, "delayed_until_unix_nano": outcomeDelayed},
	} {
		fields := msg.ProtoReflect().Descriptor().Fields()
		if fields.Len() != len(want) {
			t.Errorf("%s has %d fields, the encoder knows %d", msg.ProtoReflect().Descriptor().FullName(), fields.Len(), len(want))
		}
		for name, num := range want {
			if fd := fields.ByName(name); fd == nil || num != 0 && fd.Number() != num {
				t.Errorf("field %s of %s is %v, the encoder says %d", name, msg.ProtoReflect().Descriptor().FullName(), fd, num)
			}
		}
	}
}

// TestSnapshotMatchesProtoMarshal checks, on randomized states with every
// kind of record (holds, reentrant counts, waiters with timeouts, cached
// grants, BUSY and QUEUED answers naming holders, claimed and rewritten
// results, blacklisted sessions), that the record-at-a-time encoder gives
// exactly the bytes proto.Marshal gives the whole fsmpb.Snapshot, both for
// Snapshot and for Hash (applied index 0), and that Restore rebuilds it.
func TestSnapshotMatchesProtoMarshal(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			m := randomMachine(t, seed)
			full := fullSnapshot(m)
			if len(full.GetSessions()) < 50 || len(full.GetLocks()) < 100 {
				t.Fatalf("state too small: %d sessions, %d locks", len(full.GetSessions()), len(full.GetLocks()))
			}
			if kinds := recordKinds(full); len(kinds) < 9 {
				t.Fatalf("the state lacks some kind of record; it has %v", kinds)
			}
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(full)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Snapshot gives %d bytes, proto.Marshal %d; first difference at %d",
					len(got), len(want), firstDiff(got, want))
			}
			full.AppliedIndex = 0
			want0, _ := proto.MarshalOptions{Deterministic: true}.Marshal(full)
			if sum := sha256.Sum256(want0); m.Hash() != hex.EncodeToString(sum[:]) {
				t.Fatal("Hash is not the hash of the marshalled state without its applied index")
			}
			if err := checkInvariants(m); err != nil {
				t.Fatal(err)
			}
			// A restored machine sizes its next encoding's buffer by the
			// snapshot it came from: enough, with little to spare.
			r := New()
			if err := r.Restore(got); err != nil {
				t.Fatal(err)
			}
			hint := r.encodedSizeHint()
			t.Logf("%d sessions, %d locks: %d bytes, size hint %d", len(full.GetSessions()), len(full.GetLocks()), len(got), hint)
			if hint < len(got) || hint > len(got)*11/10+4096 {
				t.Errorf("size hint %d for a snapshot of %d bytes", hint, len(got))
			}
		})
	}
}

// recordKinds counts the kinds of records of snap that the encoder treats
// differently.
func recordKinds(snap *fsmpb.Snapshot) map[string]int {
	k := map[string]int{}
	for _, s := range snap.GetSessions() {
		if s.GetBlacklisted() {
			k["blacklisted"]++
		}
		for _, c := range s.GetResults() {
			r := c.GetResult()
			if c.GetClaimed() {
				k["claimed"]++
			}
			if r.GetError() != fsmpb.Error_ERROR_NONE {
				k["cached error"]++
			}
			if r.GetAcquire().GetHolder() != nil {
				k["cached holder"]++
			}
			if r.GetAcquire().GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
				k["cached queued"]++
			}
			if len(r.GetAcquireMany()) > 1 {
				k["cached many"]++
			}
		}
	}
	for _, l := range snap.GetLocks() {
		for _, h := range l.GetHolders() {
			if h.GetCount() > 1 {
				k["reentrant"]++
			}
		}
		for _, w := range l.GetWaiters() {
			k["waiter"]++
			if w.GetWaitTimeoutNanos() > 0 {
				k["waiter timeout"]++
			}
		}
	}
	return k
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// randomMachine applies a seeded random stream of commands (with wall
// clocks) from 60 sessions over 400 lock names, keeping their results
// cached, and leaves the machine with a few blacklisted and ended sessions.
func randomMachine(t *testing.T, seed uint64) *Machine {
	rng := rand.New(rand.NewPCG(seed, 42))
	m := New()
	for i := range 1 + rng.IntN(5) {
		m.SetMember(Member{ID: rng.Uint64N(1 << 60), Name: fmt.Sprintf("n%d", i), PeerAddr: fmt.Sprintf("10.0.0.%d:7701", i), Removed: i == 2})
	}
	m.SetClusterID(rng.Uint64())
	m.SetLogVersion([]uint32{0, 1, 2, HistoryVersion}[rng.IntN(4)])
	index := uint64(0)
	apply := func(cmd *fsmpb.Command) *fsmpb.Result {
		index++
		cmd.WallTimeUnixNano = 1_700_000_000_000_000_000 + int64(index)*1000
		return m.Apply(index, cmd)
	}
	var ids []uint64
	seqs := map[uint64]uint64{}
	for i := range 60 {
		res := apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{
			Owner: fmt.Sprintf("host-%d/%d", i%7, rng.IntN(1000))}}})
		ids = append(ids, res.GetSessionId())
	}
	name := func() string { return fmt.Sprintf("row/%d/é", rng.IntN(400)) }
	for range 3000 {
		id := ids[rng.IntN(len(ids))]
		seqs[id]++
		cmd := &fsmpb.Command{SessionId: id, Seq: seqs[id], MinUnackedSeq: seqs[id] - min(seqs[id]-1, uint64(rng.IntN(20)))}
		key := []string{"", "k", "worker-7"}[rng.IntN(3)]
		switch n := rng.IntN(100); {
		case n < 45:
			cmd.Op = &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: name(), OwnerKey: key,
				Wait: rng.IntN(2) == 0, WaitTimeoutNanos: int64(rng.IntN(3)) * 1e9}}
		case n < 70:
			locks := make([]string, 1+rng.IntN(10))
			for j := range locks {
				locks[j] = fmt.Sprintf("many/%d/%d", j, rng.IntN(60))
			}
			slices.Sort(locks)
			cmd.Op = &fsmpb.Command_AcquireMany{AcquireMany: &fsmpb.AcquireMany{Locks: slices.Compact(locks), OwnerKey: key}}
		case n < 85:
			lk := name()
			tok := uint64(0)
			if l, ok := m.Lock(lk); ok && len(l.GetHolders()) > 0 {
				tok = l.GetHolders()[0].GetToken()
			}
			cmd.Op = &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: lk, OwnerKey: key, Token: tok}}
		case n < 95:
			// A retry of an earlier seq: claims cached acquires.
			cmd.Seq = max(1, seqs[id]-uint64(rng.IntN(3)))
			cmd.Op = &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: name()}}
		default:
			cmd.Op = &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{Lock: name(), SessionId: id,
				AcquireSeq: max(1, seqs[id]-uint64(rng.IntN(5))), Abandoned: rng.IntN(2) == 0}}
		}
		apply(cmd)
	}
	for range 3 {
		apply(&fsmpb.Command{Op: &fsmpb.Command_BlacklistSession{BlacklistSession: &fsmpb.BlacklistSession{SessionId: ids[rng.IntN(len(ids))]}}})
		apply(&fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: ids[rng.IntN(len(ids))]}}})
	}
	return m
}

// TestRestoreReadsFieldsInAnyOrder checks that Restore, which decodes the
// snapshot one field at a time, takes any valid encoding of the message
// as proto.Unmarshal would: locks before sessions, the applied index last
// (and given twice: the last wins), unknown fields skipped.
func TestRestoreReadsFieldsInAnyOrder(t *testing.T) {
	m := randomMachine(t, 7)
	full := fullSnapshot(m)
	var b []byte
	b = protowire.AppendTag(b, snapshotAppliedIndex, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, snapshotClusterID, protowire.VarintType)
	b = protowire.AppendVarint(b, full.GetClusterId())
	b = protowire.AppendTag(b, snapshotLogVersion, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(full.GetLogVersion()))
	for _, mb := range full.GetMembers() {
		rec, _ := proto.Marshal(mb)
		b = protowire.AppendTag(b, snapshotMembers, protowire.BytesType)
		b = protowire.AppendBytes(b, rec)
	}
	for _, l := range full.GetLocks() {
		rec, _ := proto.Marshal(l)
		b = protowire.AppendTag(b, snapshotLocks, protowire.BytesType)
		b = protowire.AppendBytes(b, rec)
	}
	b = protowire.AppendTag(b, 99, protowire.BytesType)
	b = protowire.AppendString(b, "unknown")
	b = protowire.AppendTag(b, snapshotSessions, protowire.VarintType) // another wire type: unknown
	b = protowire.AppendVarint(b, 5)
	for _, s := range full.GetSessions() {
		rec, _ := proto.Marshal(s)
		b = protowire.AppendTag(b, snapshotSessions, protowire.BytesType)
		b = protowire.AppendBytes(b, rec)
	}
	for _, r := range full.GetAudit() {
		rec, _ := proto.Marshal(r)
		b = protowire.AppendTag(b, snapshotAudit, protowire.BytesType)
		b = protowire.AppendBytes(b, rec)
	}
	b = protowire.AppendTag(b, snapshotAppliedIndex, protowire.VarintType)
	b = protowire.AppendVarint(b, m.AppliedIndex())

	var viaProto fsmpb.Snapshot
	if err := proto.Unmarshal(b, &viaProto); err != nil {
		t.Fatal(err)
	}
	if len(viaProto.ProtoReflect().GetUnknown()) == 0 {
		t.Fatal("proto.Unmarshal kept no unknown field")
	}
	viaProto.ProtoReflect().SetUnknown(nil)
	if !proto.Equal(&viaProto, full) {
		t.Fatal("the reordered encoding is not the same message")
	}
	r := New()
	if err := r.Restore(b); err != nil {
		t.Fatal(err)
	}
	want, _ := m.Snapshot()
	if got, _ := r.Snapshot(); !bytes.Equal(got, want) {
		t.Fatal("restoring the reordered encoding gave another state")
	}
}

func TestReadsReturnCopies(t *testing.T) {
	m, _ := fuzzMachine(t)
	h := m.Hash()
	l, ok := m.Lock("x")
	if !ok || len(l.GetHolders()) != 1 || len(l.GetWaiters()) != 1 {
		t.Fatalf("Lock(x) = %v, %v", l, ok)
	}
	l.Holders[0].Count = 9
	l.Waiters[0].AcquireSeq = 9
	s, _ := m.Session(1)
	s.Owner = "changed"
	_, holder := m.Check("x", 3)
	holder.Token = 1
	m.Locks("", "", 0)[0].Holders[0].Token = 1
	if m.Hash() != h {
		t.Fatal("changing a read's result changed the machine")
	}
}

func TestSessionsPaging(t *testing.T) {
	m := New()
	for i := uint64(1); i <= 5; i++ {
		m.Apply(i, &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{}}})
	}
	var got []uint64
	for after := uint64(0); ; {
		page := m.Sessions(after, 2)
		if len(page) == 0 {
			break
		}
		for _, s := range page {
			got = append(got, s.GetId())
		}
		after = page[len(page)-1].GetId()
	}
	if len(got) != 5 || got[0] != 1 || got[4] != 5 {
		t.Fatalf("paged sessions %v", got)
	}
	if m.NumSessions() != 5 || len(m.SessionIDs()) != 5 || m.Sessions(^uint64(0), 0) != nil {
		t.Fatal("session counts disagree")
	}
	if s, ok := m.Session(3); !ok || s.GetTtlNanos() != int64(rules.DefaultTTL) {
		t.Fatalf("Session(3) = %v, %v", s, ok)
	}
}

func TestApplyOutOfOrderPanics(t *testing.T) {
	m := New()
	m.SetApplied(5)
	defer func() {
		if recover() == nil {
			t.Fatal("applying index 5 twice did not panic")
		}
	}()
	m.Apply(5, &fsmpb.Command{})
}

// TestDecodeLockMatchesProto: decodeLock agrees with proto.Unmarshal on
// every lock record of randomized states and on seeded damage to them
// (bytes flipped, cut, inserted, unknown fields added): both fail, or
// both give equal messages. The scratch message is reused throughout, as
// restore reuses it.
func TestDecodeLockMatchesProto(t *testing.T) {
	var recs [][]byte
	for seed := range uint64(4) {
		data, err := randomMachine(t, seed).Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if err := eachRecord(data, func(num protowire.Number, _ uint64, rec []byte) error {
			if num == snapshotLocks {
				recs = append(recs, rec)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(recs) < 100 {
		t.Fatalf("only %d lock records", len(recs))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var scratch fsmpb.Lock
	agreed, failed := 0, 0
	check := func(rec []byte) {
		t.Helper()
		var want fsmpb.Lock
		werr := proto.Unmarshal(rec, &want)
		// Unknown fields mean nothing to restore; proto keeps them.
		want.ProtoReflect().SetUnknown(nil)
		for _, h := range want.GetHolders() {
			h.ProtoReflect().SetUnknown(nil)
		}
		for _, w := range want.GetWaiters() {
			w.ProtoReflect().SetUnknown(nil)
		}
		gerr := decodeLock(rec, &scratch)
		switch {
		case (werr == nil) != (gerr == nil):
			t.Fatalf("record %x: proto says %v, decodeLock %v", rec, werr, gerr)
		case werr == nil && !proto.Equal(&want, &scratch):
			t.Fatalf("record %x: proto gives %v, decodeLock %v", rec, &want, &scratch)
		case werr != nil:
			failed++
		default:
			agreed++
		}
	}
	for _, rec := range recs {
		check(rec)
		for range 20 {
			r := slices.Clone(rec)
			switch rng.IntN(5) {
			case 0:
				r[rng.IntN(len(r))] ^= byte(1 << rng.IntN(8))
			case 1:
				r = r[:rng.IntN(len(r))]
			case 2:
				i := rng.IntN(len(r) + 1)
				r = slices.Insert(r, i, byte(rng.IntN(256)))
			case 3: // an unknown field, or a known number of another wire type
				num := protowire.Number(1 + rng.IntN(9))
				switch rng.IntN(3) {
				case 0:
					r = protowire.AppendVarint(protowire.AppendTag(r, num, protowire.VarintType), rng.Uint64())
				case 1:
					r = protowire.AppendBytes(protowire.AppendTag(r, num, protowire.BytesType), []byte{0xff, 0x01})
				default:
					r = protowire.AppendFixed32(protowire.AppendTag(r, num, protowire.Fixed32Type), rng.Uint32())
				}
			case 4: // a holder field with invalid UTF-8 or another wire type
				h := protowire.AppendTag(nil, protowire.Number(1+rng.IntN(7)), protowire.BytesType)
				h = protowire.AppendBytes(h, []byte{'a', 0xc3})
				r = protowire.AppendBytes(protowire.AppendTag(r, lockHolders, protowire.BytesType), h)
			}
			check(r)
		}
	}
	t.Logf("%d records agreed, %d failed both ways", agreed, failed)
	if failed < 100 || agreed < 100 {
		t.Fatalf("too few of each: %d agreed, %d failed", agreed, failed)
	}
}

// Members travel in snapshots (to members that never saw the membership
// changes) and are checked on restore.
func TestMembersInSnapshots(t *testing.T) {
	m := New()
	m.SetMember(Member{ID: 7, Name: "n2", PeerAddr: "10.0.0.2:7701"})
	m.SetMember(Member{ID: 3, Name: "n1", PeerAddr: "10.0.0.1:7701"})
	m.SetMember(Member{ID: 9, Name: "n3", PeerAddr: "10.0.0.3:7701"})
	m.RemoveMember(9)
	f := m.Freeze()
	m.SetMember(Member{ID: 11, Name: "n4", PeerAddr: "10.0.0.4:7701"}) // after the freeze
	frozen := f.Encode()
	m.Thaw(f)
	r := New()
	if err := r.Restore(frozen); err != nil {
		t.Fatal(err)
	}
	want := []Member{{3, "n1", "10.0.0.1:7701", false}, {7, "n2", "10.0.0.2:7701", false}, {9, "n3", "10.0.0.3:7701", true}}
	if got := r.Members(); !slices.Equal(got, want) {
		t.Fatalf("members after restore %v, want %v", got, want)
	}
	if got := m.Members(); len(got) != 4 || got[3].ID != 11 {
		t.Fatalf("members %v", got)
	}
	for _, bad := range []*fsmpb.Member{{Id: 0, Name: "zero"}, {Id: 5, Name: "n"}, {Id: 12, Name: "\xff"}} {
		snap, _ := r.Snapshot()
		rec, _ := proto.Marshal(bad)
		snap = protowire.AppendTag(snap, snapshotMembers, protowire.BytesType)
		snap = protowire.AppendBytes(snap, rec)
		if err := New().Restore(snap); err == nil {
			t.Errorf("restored a snapshot with member %v after %v", bad, r.Members())
		}
	}
}

// Reseed replaces the members and the cluster id, and nothing else: a
// snapshot of the reseeded state restores to the same sessions, locks,
// tokens and applied index, under the new identity.
func TestReseedChangesOnlyTheIdentity(t *testing.T) {
	m := New()
	m.SetClusterID(0xabc)
	m.SetMember(Member{ID: 3, Name: "n1", PeerAddr: "10.0.0.1:7701"})
	m.SetMember(Member{ID: 9, Name: "old", PeerAddr: "10.0.0.9:7701"})
	m.RemoveMember(9)
	res := m.Apply(10, &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{TtlNanos: 10e9, Owner: "a"}}})
	s := res.GetSessionId()
	if r := m.Apply(11, &fsmpb.Command{SessionId: s, Seq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "jobs/1"}}}); r.GetAcquire().GetToken() != 11 {
		t.Fatalf("acquire: %v", r)
	}
	before, _ := m.Snapshot()
	r := New()
	if err := r.Restore(before); err != nil {
		t.Fatal(err)
	}
	members := []Member{{ID: 5, Name: "r1", PeerAddr: "10.1.0.1:7701"}, {ID: 6, Name: "r2", PeerAddr: "10.1.0.2:7701"}}
	r.Reseed(0xdef, members)
	after, _ := r.Snapshot()
	back := New()
	if err := back.Restore(after); err != nil {
		t.Fatal(err)
	}
	if back.ClusterID() != 0xdef || !slices.Equal(back.Members(), members) {
		t.Fatalf("reseeded: cluster %x members %v", back.ClusterID(), back.Members())
	}
	if back.AppliedIndex() != 11 || back.NumSessions() != 1 {
		t.Fatalf("reseeded: applied %d, %d sessions", back.AppliedIndex(), back.NumSessions())
	}
	if held, h := back.Check("jobs/1", 11); !held || h.GetSessionId() != s {
		t.Fatalf("reseeded: jobs/1 held %v by %v", held, h)
	}
	// The old identity put back gives the old bytes: nothing else moved.
	back.Reseed(0xabc, m.Members())
	if again, _ := back.Snapshot(); !bytes.Equal(again, before) {
		t.Fatal("reseeding back to the old identity does not give the old snapshot")
	}
}
