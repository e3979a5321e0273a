package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

var rewriteGolden = flag.Bool("rewrite-snapshot", false, "rewrite testdata/snapshot*.golden from the current encoding")

// goldenPaths hold the snapshots of goldenMachine's state at two log
// versions, in hex: the last before the history was replicated, whose
// bytes every release since encodes alike, and the current one.
var goldenPaths = map[uint32]string{
	SignedTokensVersion: "testdata/snapshot.golden",
	LogVersion:          "testdata/snapshot-current.golden",
}

// TestSnapshotBytesArePinned pins the bytes of the snapshot of one state
// with every kind of record. Members of different releases restore each
// other's snapshots and compare each other's Hash, so one state must
// encode to the same bytes in every release: a change here is a change of
// the snapshot format, which needs a log version (version.go), not a new
// golden file. The state is also frozen with entries applied after the
// freeze, and the frozen encoding must be the same bytes.
//
// Regenerate (only for a deliberate format change):
// go test ./internal/fsm -run TestSnapshotBytesArePinned -rewrite-snapshot
func TestSnapshotBytesArePinned(t *testing.T) {
	for version, path := range goldenPaths {
		t.Run(path, func(t *testing.T) { testSnapshotBytesArePinned(t, version, path) })
	}
}

func testSnapshotBytesArePinned(t *testing.T, version uint32, goldenPath string) {
	m := goldenMachine(t, version)
	got, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if *rewriteGolden {
		if err := os.WriteFile(goldenPath, []byte(hexLines(got)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	want, err := hex.DecodeString(strings.ReplaceAll(string(text), "\n", ""))
	if err != nil {
		t.Fatalf("%s: %v", goldenPath, err)
	}
	if !bytes.Equal(got, want) {
		var g, w fsmpb.Snapshot
		_ = proto.Unmarshal(got, &g)
		_ = proto.Unmarshal(want, &w)
		t.Fatalf("the snapshot is %d bytes (sha256 %x), the pinned one %d (sha256 %x); first difference at %d\ngot:\n%s\nwant:\n%s",
			len(got), sha256.Sum256(got), len(want), sha256.Sum256(want), firstDiff(got, want),
			prototext.Format(&g), prototext.Format(&w))
	}
	if n := len(fullSnapshot(m).GetLocks()); n < 5 {
		t.Fatalf("the golden state has %d locks", n)
	}
	if keys := m.SigningKeys(); len(keys) != 2 || keys[0].Current || !keys[1].Current {
		t.Fatalf("the golden state's signing keys: %+v, want a retired and a current one", keys)
	}
	if ends := m.PastHolds("e/2"); version >= WatchHistoryVersion && (len(ends) != 1 || ends[0].Value != "10.0.0.4:80") {
		t.Fatalf("the golden state's history of e/2: %+v, want one end with its value", ends)
	}
	wantFloor := uint64(0)
	if version >= WatchHistoryVersion {
		wantFloor = 1 // entry 1 raised the version: the floor starts there
	}
	if floor := m.HistoryFloor(); floor != wantFloor {
		t.Fatalf("the golden state's history floor is %d, want %d", floor, wantFloor)
	}

	// Frozen, then changed in every record: the frozen state still
	// encodes to the pinned bytes.
	f := m.Freeze()
	index := m.AppliedIndex()
	for _, cmd := range []*fsmpb.Command{
		{SessionId: 4, Seq: 8, Principal: "alice", Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "sem", OwnerKey: "k", Token: 12}}},
		{SessionId: 2, Seq: 6, Op: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{}}},
		{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: 3}}},
		{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: 5}}},
		{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "later"}}},
	} {
		index++
		if err := ErrorOf(m.Apply(index, cmd)); err != nil {
			t.Fatalf("entry %d after the freeze: %v", index, err)
		}
	}
	if m.NumSessions() != 2 {
		t.Fatalf("%d sessions after the freeze, want 2", m.NumSessions())
	}
	m.SetMember(Member{ID: 99, Name: "later", PeerAddr: "10.0.0.99:7701"})
	if frozen := f.Encode(); !bytes.Equal(frozen, want) {
		t.Fatalf("the frozen state encodes to %d bytes, the pinned snapshot is %d; first difference at %d",
			len(frozen), len(want), firstDiff(frozen, want))
	}
	m.Thaw(f)
}

// goldenMachine applies a fixed log that leaves every kind of record in
// the state: sessions with a nonce, a secret, a user, or blacklisted;
// cached results (granted, queued and busy answers naming a holder with a
// hold limit, acquire_many outcomes, refusals, claimed answers, answers
// rewritten when their hold ended); exclusive, reentrant, limited and
// shared holds; waiters with timeouts, shared and limited; members, the
// cluster id, the log version, users, roles, audit records, and a current
// and a retired signing key; at version HoldValueVersion or above, an
// election's holder and waiter with values; at version RevocationVersion
// or above, a hold being revoked; at version HistoryVersion or above, the
// history of the holds that ended (released, cas-released, expired); at
// DeadlockVersion or above, a cached DEADLOCK refusal naming its cycle;
// and at WatchHistoryVersion or above, an end in the history with the
// value its hold had, and the history's floor (entry 1, which raised the
// version).
func goldenMachine(t *testing.T, version uint32) *Machine {
	m := New()
	m.SetMember(Member{ID: 7, Name: "n2", PeerAddr: "10.0.0.2:7701"})
	m.SetMember(Member{ID: 3, Name: "n1", PeerAddr: "10.0.0.1:7701"})
	m.SetMember(Member{ID: 9, Name: "n3", PeerAddr: "10.0.0.3:7701", Removed: true})
	m.SetClusterID(0x5eed)
	secret := sha256.Sum256([]byte("golden secret"))
	minute, second := int64(60e9), int64(1e9)
	acq := func(a *fsmpb.Acquire) *fsmpb.Command_Acquire { return &fsmpb.Command_Acquire{Acquire: a} }
	rotate := func(seed byte, retention int64, first bool) *fsmpb.Command_RotateSigningKey {
		return &fsmpb.Command_RotateSigningKey{RotateSigningKey: &fsmpb.RotateSigningKey{
			Seed: bytes.Repeat([]byte{seed}, SigningKeySeedLen), RetentionNanos: retention, First: first}}
	}
	cmds := []*fsmpb.Command{
		{Op: &fsmpb.Command_SetLogVersion{SetLogVersion: &fsmpb.SetLogVersion{Version: version}}},
		// Sessions 2, 3, 4, 5.
		{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "host-a/worker", TtlNanos: 15 * second, Nonce: 77}}},
		{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "host-b/worker", SecretHash: secret[:]}}},
		{Principal: "alice", Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "host-c"}}},
		{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "doomed"}}},
		// 6: session 2 holds "a" with a hold limit; 7: again (count 2).
		{SessionId: 2, Seq: 1, Op: acq(&fsmpb.Acquire{Lock: "a", HoldLimitNanos: minute})},
		{SessionId: 2, Seq: 2, Op: acq(&fsmpb.Acquire{Lock: "a", HoldLimitNanos: minute})},
		// 8: session 3 queues for "a" with a timeout (QUEUED, naming 2).
		{SessionId: 3, Seq: 1, SecretHash: secret[:], Op: acq(&fsmpb.Acquire{Lock: "a", Wait: true, WaitTimeoutNanos: 30 * second, HoldLimitNanos: minute})},
		// 9: session 4 tries "a" (BUSY), 10: a refusal (bad name).
		{SessionId: 4, Seq: 1, Principal: "alice", Op: acq(&fsmpb.Acquire{Lock: "a", HoldLimitNanos: minute})},
		{SessionId: 4, Seq: 2, Principal: "alice", Op: acq(&fsmpb.Acquire{Lock: ""})},
		// 11-12: a semaphore of 3 with two shared holders; 13: a shared waiter of "a".
		{SessionId: 2, Seq: 3, Op: acq(&fsmpb.Acquire{Lock: "sem", Limit: 3, Shared: true})},
		{SessionId: 4, Seq: 3, Principal: "alice", Op: acq(&fsmpb.Acquire{Lock: "sem", Limit: 3, Shared: true, OwnerKey: "k"})},
		{SessionId: 4, Seq: 4, Principal: "alice", Op: acq(&fsmpb.Acquire{Lock: "a", Wait: true, HoldLimitNanos: minute, OwnerKey: "reader"})},
		// 14: acquire_many, some granted and one busy.
		{SessionId: 3, Seq: 2, SecretHash: secret[:], Op: &fsmpb.Command_AcquireMany{AcquireMany: &fsmpb.AcquireMany{Locks: []string{"a", "m/1", "m/2"}, HoldLimitNanos: minute}}},
		// 15: a retry of seq 1 of session 3 claims its answer.
		{SessionId: 3, Seq: 1, SecretHash: secret[:], Op: acq(&fsmpb.Acquire{Lock: "a", Wait: true, WaitTimeoutNanos: 30 * second, HoldLimitNanos: minute})},
		// 16-17: session 5 takes "z" and queues for "m/1"; 18: it is blacklisted (its wait ends).
		{SessionId: 5, Seq: 1, Op: acq(&fsmpb.Acquire{Lock: "z"})},
		{SessionId: 5, Seq: 2, Op: acq(&fsmpb.Acquire{Lock: "m/1", Wait: true})},
		{Op: &fsmpb.Command_BlacklistSession{BlacklistSession: &fsmpb.BlacklistSession{SessionId: 5}}},
		// 19: a release of one of two counts (remaining 1); 20: a hold ended by an operator.
		{SessionId: 2, Seq: 4, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "a", Token: 6}}},
		{Op: &fsmpb.Command_CasRelease{CasRelease: &fsmpb.CasRelease{Lock: "m/2", SessionId: 3}}},
		// 21-22: an exclusive and a shared, limited waiter of the semaphore.
		{SessionId: 2, Seq: 5, Op: acq(&fsmpb.Acquire{Lock: "sem", Limit: 3, Wait: true, OwnerKey: "w"})},
		{SessionId: 3, Seq: 3, SecretHash: secret[:], Op: acq(&fsmpb.Acquire{Lock: "sem", Limit: 3, Shared: true, Wait: true, WaitTimeoutNanos: minute, HoldLimitNanos: 2 * minute})},
		// 23-24: a hold taken and released (its cached grant is rewritten); 25: one kept.
		{SessionId: 4, Seq: 5, Principal: "alice", Op: acq(&fsmpb.Acquire{Lock: "gone"})},
		{SessionId: 4, Seq: 6, Principal: "alice", Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "gone", Token: 23}}},
		{SessionId: 4, Seq: 7, Principal: "alice", Op: acq(&fsmpb.Acquire{Lock: "solo/é", HoldLimitNanos: 90 * second})},
		// Users, a role, an audit note.
		{Op: &fsmpb.Command_AuthChange{AuthChange: &fsmpb.AuthChange{Kind: fsmpb.AuthChange_ADD_ROLE, Role: "jobs"}}},
		{Op: &fsmpb.Command_AuthChange{AuthChange: &fsmpb.AuthChange{Kind: fsmpb.AuthChange_GRANT, Role: "jobs", Prefix: "m/", Perms: uint32(PermLock | PermRead)}}},
		{Op: &fsmpb.Command_AuthChange{AuthChange: &fsmpb.AuthChange{Kind: fsmpb.AuthChange_ADD_USER, User: "alice"}}},
		{Principal: "root", Op: &fsmpb.Command_AuditNote{AuditNote: &fsmpb.AuditNote{Action: "golden note"}}},
		// 30: session 30 opens; 31-32: it holds "d" and "e" with lock-delays;
		// 33: session 4 queues for "d" with a lock-delay of its own.
		{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "delayed"}}},
		{SessionId: 30, Seq: 1, Op: acq(&fsmpb.Acquire{Lock: "d", LockDelayNanos: 15 * second})},
		{SessionId: 30, Seq: 2, Op: acq(&fsmpb.Acquire{Lock: "e", LockDelayNanos: 5 * second})},
		{SessionId: 4, Seq: 8, Principal: "alice", Op: acq(&fsmpb.Acquire{Lock: "d", Wait: true, LockDelayNanos: minute})},
		// 34: session 30 expires: "d" (its waiter queued) and "e" (nobody)
		// are in their lock-delays; 35: a try of "d" is BUSY until its end.
		{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: 30}}},
		{SessionId: 2, Seq: 7, Op: acq(&fsmpb.Acquire{Lock: "d"})},
		// 36: a hold with a lock-delay that stays.
		{SessionId: 3, Seq: 4, SecretHash: secret[:], Op: acq(&fsmpb.Acquire{Lock: "ld", LockDelayNanos: 30 * second})},
		// 37: the first signing key; 38: a rotation retires it for a
		// second; 39: the next drops it and retires key 38 for a day.
		{Op: rotate(1, 0, true)},
		{Principal: "root", Op: rotate(2, second, false)},
		{Op: rotate(3, 24*60*minute, false)},
	}
	if version >= HoldValueVersion {
		cmds = append(cmds, []*fsmpb.Command{
			// 40: session 2 leads the election "e/1" with a value; 41:
			// session 3 campaigns behind it with its own; 42: the leader
			// proclaims a new value; 43: session 4's try is BUSY, naming it.
			{SessionId: 2, Seq: 8, Op: acq(&fsmpb.Acquire{Lock: "e/1", Value: "10.0.0.1:80"})},
			{SessionId: 3, Seq: 5, SecretHash: secret[:], Op: acq(&fsmpb.Acquire{Lock: "e/1", Wait: true, Value: "10.0.0.2:80"})},
			{SessionId: 2, Seq: 9, Op: &fsmpb.Command_Proclaim{Proclaim: &fsmpb.Proclaim{Lock: "e/1", Token: 40, Value: "10.0.0.1:81"}}},
			{SessionId: 4, Seq: 9, Principal: "alice", Op: acq(&fsmpb.Acquire{Lock: "e/1"})},
		}...)
	}
	if version >= DeadlockVersion {
		// 44: session 2 would wait for "m/1", held by session 3, which
		// waits for "a" (and "e/1"), held by session 2: refused, the
		// cycle cached.
		cmds = append(cmds, &fsmpb.Command{SessionId: 2, Seq: 10, Op: acq(&fsmpb.Acquire{Lock: "m/1", Wait: true})})
	}
	if version >= RevocationVersion {
		// Then: the hold of "ld" (36) is asked to let go within 30s.
		cmds = append(cmds, &fsmpb.Command{Principal: "root", Op: &fsmpb.Command_RevokeHold{RevokeHold: &fsmpb.RevokeHold{Lock: "ld", Token: 36, GraceNanos: 30 * second}}})
	}
	if version >= WatchHistoryVersion {
		// 46: session 4 leads the election "e/2" with a value; 47: it
		// resigns, and the history keeps the value its hold ended with.
		cmds = append(cmds, []*fsmpb.Command{
			{SessionId: 4, Seq: 10, Principal: "alice", Op: acq(&fsmpb.Acquire{Lock: "e/2", Value: "10.0.0.4:80"})},
			{SessionId: 4, Seq: 11, Principal: "alice", Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "e/2", Token: 46}}},
		}...)
	}
	index := uint64(0)
	for _, cmd := range cmds {
		index++
		cmd.WallTimeUnixNano = 1_700_000_000_000_000_000 + int64(index)*second
		if cmd.GetSessionId() != 0 {
			cmd.MinUnackedSeq = 1 // every answer stays cached
		}
		m.Apply(index, cmd)
	}
	if err := checkInvariants(m); err != nil {
		t.Fatal(err)
	}
	return m
}

// hexLines writes b in hex, 32 bytes a line.
func hexLines(b []byte) string {
	var s strings.Builder
	for len(b) > 0 {
		n := min(len(b), 32)
		s.WriteString(hex.EncodeToString(b[:n]))
		s.WriteByte('\n')
		b = b[n:]
	}
	return s.String()
}
