package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// fieldsAddedIn is every field of a log or snapshot message added after
// log version 1, with the version that added it.
var fieldsAddedIn = map[protoreflect.FullName]uint32{
	"baton.fsm.v1.OpenSession.nonce":                      2,
	"baton.fsm.v1.Session.open_nonce":                     2,
	"baton.fsm.v1.AcquireMany.hold_limit_nanos":           2,
	"baton.fsm.v1.Command.set_log_version":                2,
	"baton.fsm.v1.SetLogVersion.version":                  2,
	"baton.fsm.v1.Snapshot.log_version":                   2,
	"baton.fsm.v1.OpenSession.secret_hash":                3,
	"baton.fsm.v1.Command.secret_hash":                    3,
	"baton.fsm.v1.Session.secret_hash":                    3,
	"baton.fsm.v1.Command.principal":                      4,
	"baton.fsm.v1.Command.auth_change":                    4,
	"baton.fsm.v1.Command.audit_note":                     4,
	"baton.fsm.v1.AuditNote.action":                       4,
	"baton.fsm.v1.Session.principal":                      4,
	"baton.fsm.v1.Snapshot.auth":                          4,
	"baton.fsm.v1.Snapshot.audit":                         4,
	"baton.fsm.v1.Acquire.lock_delay_nanos":               5,
	"baton.fsm.v1.AcquireMany.lock_delay_nanos":           5,
	"baton.fsm.v1.Command.end_lock_delay":                 5,
	"baton.fsm.v1.EndLockDelay.lock":                      5,
	"baton.fsm.v1.EndLockDelay.delay_from":                5,
	"baton.fsm.v1.Lock.delay_from":                        5,
	"baton.fsm.v1.Lock.delay_nanos":                       5,
	"baton.fsm.v1.Lock.delayed_until_unix_nano":           5,
	"baton.fsm.v1.Holder.lock_delay_nanos":                5,
	"baton.fsm.v1.Waiter.lock_delay_nanos":                5,
	"baton.fsm.v1.AcquireOutcome.delayed_until_unix_nano": 5,
	"baton.fsm.v1.Command.rotate_signing_key":             6,
	"baton.fsm.v1.RotateSigningKey.seed":                  6,
	"baton.fsm.v1.RotateSigningKey.retention_nanos":       6,
	"baton.fsm.v1.RotateSigningKey.first":                 6,
	"baton.fsm.v1.Snapshot.signing_keys":                  6,
	"baton.fsm.v1.SigningKey.id":                          6,
	"baton.fsm.v1.SigningKey.seed":                        6,
	"baton.fsm.v1.SigningKey.created_unix_nano":           6,
	"baton.fsm.v1.SigningKey.retired_unix_nano":           6,
	"baton.fsm.v1.SigningKey.retention_nanos":             6,
	"baton.fsm.v1.Command.revoke_hold":                    8,
	"baton.fsm.v1.Command.end_revoked_hold":               8,
	"baton.fsm.v1.RevokeHold.lock":                        8,
	"baton.fsm.v1.RevokeHold.token":                       8,
	"baton.fsm.v1.RevokeHold.grace_nanos":                 8,
	"baton.fsm.v1.EndRevokedHold.lock":                    8,
	"baton.fsm.v1.EndRevokedHold.session_id":              8,
	"baton.fsm.v1.EndRevokedHold.token":                   8,
	"baton.fsm.v1.Holder.revoke_from":                     8,
	"baton.fsm.v1.Holder.revoke_grace_nanos":              8,
	"baton.fsm.v1.Holder.revoke_deadline_unix_nano":       8,
	"baton.fsm.v1.AcquireMany.modes":                      7,
	"baton.fsm.v1.LockMode.shared":                        7,
	"baton.fsm.v1.LockMode.limit":                         7,
	"baton.fsm.v1.Snapshot.history":                       HistoryVersion,
	"baton.fsm.v1.LockHistory.lock":                       HistoryVersion,
	"baton.fsm.v1.LockHistory.holds":                      HistoryVersion,
	"baton.fsm.v1.PastHold.session_id":                    HistoryVersion,
	"baton.fsm.v1.PastHold.owner":                         HistoryVersion,
	"baton.fsm.v1.PastHold.owner_key":                     HistoryVersion,
	"baton.fsm.v1.PastHold.token":                         HistoryVersion,
	"baton.fsm.v1.PastHold.shared":                        HistoryVersion,
	"baton.fsm.v1.PastHold.since_unix_nano":               HistoryVersion,
	"baton.fsm.v1.PastHold.ended_unix_nano":               HistoryVersion,
	"baton.fsm.v1.PastHold.ended_index":                   HistoryVersion,
	"baton.fsm.v1.PastHold.how":                           HistoryVersion,
	"baton.fsm.v1.PastHold.value":                         WatchHistoryVersion,
	"baton.fsm.v1.Snapshot.history_floor":                 WatchHistoryVersion,
	"baton.fsm.v1.Acquire.value":                          HoldValueVersion,
	"baton.fsm.v1.Holder.value":                           HoldValueVersion,
	"baton.fsm.v1.Waiter.value":                           HoldValueVersion,
	"baton.fsm.v1.Command.proclaim":                       HoldValueVersion,
	"baton.fsm.v1.Proclaim.lock":                          HoldValueVersion,
	"baton.fsm.v1.Proclaim.token":                         HoldValueVersion,
	"baton.fsm.v1.Proclaim.owner_key":                     HoldValueVersion,
	"baton.fsm.v1.Proclaim.value":                         HoldValueVersion,
	"baton.fsm.v1.Result.deadlock":                        DeadlockVersion,
	"baton.fsm.v1.DeadlockCycle.edges":                    DeadlockVersion,
	"baton.fsm.v1.DeadlockEdge.session_id":                DeadlockVersion,
	"baton.fsm.v1.DeadlockEdge.owner_key":                 DeadlockVersion,
	"baton.fsm.v1.DeadlockEdge.lock":                      DeadlockVersion,
	"baton.fsm.v1.DeadlockEdge.queued_ahead":              DeadlockVersion,
	"baton.fsm.v1.DeadlockEdge.blocker_session_id":        DeadlockVersion,
	"baton.fsm.v1.DeadlockEdge.blocker_owner_key":         DeadlockVersion,
	"baton.fsm.v1.WaitEnded.deadlock":                     DeadlockAtGrantVersion,
	"baton.fsm.v1.CachedResult.keyed":                     SameTokenHoldsVersion,
	"baton.fsm.v1.ExpireHold.owner_key":                   SameTokenHoldsVersion,
	"baton.fsm.v1.LimitedHold.owner_key":                  SameTokenHoldsVersion,
	"baton.fsm.v1.CachedResult.owner_key":                 SameTokenHoldsVersion,
}

// fieldCounts is how many fields each message of the log and snapshots
// has at LogVersion. Result's side-effect lists and its report to the
// leader's tracker (Grant to LimitedHold) are never written: a snapshot's
// cached results have none (cacheResult; Restore refuses them), so they
// change no format.
var fieldCounts = map[protoreflect.FullName]int{
	"baton.fsm.v1.Command": 26, "baton.fsm.v1.OpenSession": 4, "baton.fsm.v1.CloseSession": 0,
	"baton.fsm.v1.ExpireSession": 1, "baton.fsm.v1.BlacklistSession": 1, "baton.fsm.v1.Acquire": 9, "baton.fsm.v1.Proclaim": 4,
	"baton.fsm.v1.Release": 3, "baton.fsm.v1.CasRelease": 3, "baton.fsm.v1.CancelWait": 5,
	"baton.fsm.v1.AcquireMany": 8, "baton.fsm.v1.LockMode": 2, "baton.fsm.v1.ExpireHold": 4, "baton.fsm.v1.SetLogVersion": 1,
	"baton.fsm.v1.Snapshot": 11, "baton.fsm.v1.LockHistory": 2, "baton.fsm.v1.PastHold": 10, "baton.fsm.v1.Session": 11, "baton.fsm.v1.CachedResult": 5,
	"baton.fsm.v1.Result": 13, "baton.fsm.v1.DeadlockEdge": 6, "baton.fsm.v1.DeadlockCycle": 1, "baton.fsm.v1.AcquireOutcome": 7, "baton.fsm.v1.Holder": 14,
	"baton.fsm.v1.Waiter": 10, "baton.fsm.v1.Lock": 7, "baton.fsm.v1.EndLockDelay": 2, "baton.fsm.v1.Member": 5,
	"baton.fsm.v1.AuthChange": 6, "baton.fsm.v1.AuditNote": 1, "baton.fsm.v1.AuthState": 3, "baton.fsm.v1.User": 3, "baton.fsm.v1.Role": 2,
	"baton.fsm.v1.Permission": 2, "baton.fsm.v1.AuditRecord": 4,
	"baton.fsm.v1.RotateSigningKey": 3, "baton.fsm.v1.SigningKey": 5,
	"baton.fsm.v1.RevokeHold": 3, "baton.fsm.v1.EndRevokedHold": 3, "baton.fsm.v1.HoldRevoked": 7,
	"baton.fsm.v1.Grant": 6, "baton.fsm.v1.WaitEnded": 5, "baton.fsm.v1.HoldEnded": 4,
	"baton.fsm.v1.Liveness": 8, "baton.fsm.v1.LockDelay": 3, "baton.fsm.v1.SessionOpened": 3, "baton.fsm.v1.WaitQueued": 4, "baton.fsm.v1.LimitedHold": 5,
}

// TestEveryLogFieldHasAVersion: members of an older release stop at a
// field they do not know, so a field added to a log entry or snapshot
// must come with a new LogVersion (and VersionNeeded and ForLogVersion
// must know it), or a rolling upgrade stops the members not yet upgraded.
// This fails when a message reachable from Command or Snapshot changes
// its number of fields.
func TestEveryLogFieldHasAVersion(t *testing.T) {
	seen := map[protoreflect.FullName]bool{}
	var walk func(md protoreflect.MessageDescriptor)
	walk = func(md protoreflect.MessageDescriptor) {
		if seen[md.FullName()] {
			return
		}
		seen[md.FullName()] = true
		if want, ok := fieldCounts[md.FullName()]; !ok || want != md.Fields().Len() {
			t.Errorf("%s has %d fields; fieldCounts says %d. A new field of the log or snapshots needs a new fsm.LogVersion, "+
				"its entry in fieldsAddedIn, VersionNeeded and ForLogVersion, and then this count", md.FullName(), md.Fields().Len(), want)
		}
		for i := range md.Fields().Len() {
			fd := md.Fields().Get(i)
			if v := fieldsAddedIn[fd.FullName()]; v > LogVersion {
				t.Errorf("%s was added in log version %d, beyond LogVersion %d", fd.FullName(), v, LogVersion)
			}
			if fd.Message() != nil {
				walk(fd.Message())
			}
		}
	}
	walk((&fsmpb.Command{}).ProtoReflect().Descriptor())
	walk((&fsmpb.Snapshot{}).ProtoReflect().Descriptor())
	walk((&fsmpb.Member{}).ProtoReflect().Descriptor())
	for name := range fieldCounts {
		if !seen[name] {
			t.Errorf("fieldCounts lists %s, which is not in the log", name)
		}
	}
	for name := range fieldsAddedIn {
		if !seen[name.Parent()] {
			t.Errorf("fieldsAddedIn lists %s, whose message is not in the log", name)
		}
	}
}

// TestVersionNeeded sets each operation's fields one at a time and holds
// VersionNeeded to fieldsAddedIn: a command needs the newest version of a
// field it sets.
func TestVersionNeeded(t *testing.T) {
	cmd := (&fsmpb.Command{}).ProtoReflect()
	oneof := cmd.Descriptor().Oneofs().ByName("op")
	for i := range oneof.Fields().Len() {
		opField := oneof.Fields().Get(i)
		opMsg := cmd.NewField(opField).Message()
		for j := range opMsg.Descriptor().Fields().Len() {
			fd := opMsg.Descriptor().Fields().Get(j)
			c := &fsmpb.Command{}
			op := c.ProtoReflect().NewField(opField).Message()
			op.Set(fd, nonZero(op, fd))
			c.ProtoReflect().Set(opField, protoreflect.ValueOfMessage(op))
			want := max(uint32(1), fieldsAddedIn[opField.FullName()], fieldsAddedIn[fd.FullName()])
			if fd.FullName() == "baton.fsm.v1.SetLogVersion.version" {
				want = max(want, uint32(op.Get(fd).Uint())) // and the version it sets
			}
			if got := VersionNeeded(c); got != want {
				t.Errorf("VersionNeeded(%v) = %d, want %d", c, got, want)
			}
		}
	}
}

// nonZero is a value of fd that proto3 does not leave out.
func nonZero(m protoreflect.Message, fd protoreflect.FieldDescriptor) protoreflect.Value {
	if fd.IsList() {
		l := m.NewField(fd).List()
		if fd.Message() != nil {
			l.Append(l.NewElement()) // a list of one message is set, however empty the message
		} else {
			l.Append(scalar(fd))
		}
		return protoreflect.ValueOfList(l)
	}
	return scalar(fd)
}

func TestForLogVersion(t *testing.T) {
	open := &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{TtlNanos: 1e10, Owner: "w", Nonce: 42}}}
	if err := ForLogVersion(open, 2); err != nil || open.GetOpenSession().GetNonce() != 42 {
		t.Fatalf("at version 2: %v, %v", err, open)
	}
	if err := ForLogVersion(open, 1); err != nil || open.GetOpenSession().GetNonce() != 0 || open.GetOpenSession().GetOwner() != "w" {
		t.Fatalf("at version 1 an open should lose only its nonce: %v, %v", err, open)
	}
	many := &fsmpb.Command{Op: &fsmpb.Command_AcquireMany{AcquireMany: &fsmpb.AcquireMany{Locks: []string{"a"}, HoldLimitNanos: 5e9}}}
	err := ForLogVersion(many, 1)
	if err == nil || !strings.Contains(err.Error(), "hold limit on a set") || !strings.Contains(err.Error(), "log version 2") {
		t.Fatalf("a hold-limited set at version 1: %v", err)
	}
	if many.GetAcquireMany().GetHoldLimitNanos() != 5e9 {
		t.Fatalf("a refused command changed: %v", many)
	}
	set := &fsmpb.Command{Op: &fsmpb.Command_SetLogVersion{SetLogVersion: &fsmpb.SetLogVersion{Version: 2}}}
	if err := ForLogVersion(set, 1); err != nil {
		t.Fatalf("SetLogVersion is what raises the version, and must pass: %v", err)
	}
	for _, delayed := range []*fsmpb.Command{
		{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "a", LockDelayNanos: 15e9}}},
		{Op: &fsmpb.Command_AcquireMany{AcquireMany: &fsmpb.AcquireMany{Locks: []string{"a"}, LockDelayNanos: 15e9}}},
	} {
		err := ForLogVersion(delayed, 4)
		if err == nil || !strings.Contains(err.Error(), "a lock-delay needs log version 5") {
			t.Fatalf("a lock-delay at version 4: %v", err)
		}
	}
	end := &fsmpb.Command{Op: &fsmpb.Command_EndLockDelay{EndLockDelay: &fsmpb.EndLockDelay{Lock: "a", DelayFrom: 3}}}
	if err := ForLogVersion(end, 4); err == nil || !strings.Contains(err.Error(), "the end of a lock-delay") {
		t.Fatalf("an EndLockDelay at version 4: %v", err)
	}
	rotate := &fsmpb.Command{Op: &fsmpb.Command_RotateSigningKey{RotateSigningKey: &fsmpb.RotateSigningKey{Seed: make([]byte, 32), First: true}}}
	if err := ForLogVersion(rotate, 5); err == nil || !strings.Contains(err.Error(), "a signing key needs log version 6 and the cluster's is 5") {
		t.Fatalf("a RotateSigningKey at version 5: %v", err)
	}
	if err := ForLogVersion(rotate, 6); err != nil {
		t.Fatalf("a RotateSigningKey at version 6: %v", err)
	}
	mixed := &fsmpb.Command{Op: &fsmpb.Command_AcquireMany{AcquireMany: &fsmpb.AcquireMany{
		Locks: []string{"a", "b"}, Modes: []*fsmpb.LockMode{{}, {Shared: true, Limit: 3}},
	}}}
	if err := ForLogVersion(mixed, 6); err == nil || !strings.Contains(err.Error(), "a set of locks in several modes needs log version 7 and the cluster's is 6") {
		t.Fatalf("a mixed set at version 6: %v", err)
	}
	if len(mixed.GetAcquireMany().GetModes()) != 2 {
		t.Fatalf("a refused command changed: %v", mixed)
	}
	if err := ForLogVersion(mixed, 7); err != nil {
		t.Fatalf("a mixed set at version 7: %v", err)
	}
	revoke := &fsmpb.Command{Op: &fsmpb.Command_RevokeHold{RevokeHold: &fsmpb.RevokeHold{Lock: "a", GraceNanos: 30e9}}}
	if err := ForLogVersion(revoke, 7); err == nil || !strings.Contains(err.Error(), "a revocation needs log version 8 and the cluster's is 7") {
		t.Fatalf("a RevokeHold at version 7: %v", err)
	}
	endRevoked := &fsmpb.Command{Op: &fsmpb.Command_EndRevokedHold{EndRevokedHold: &fsmpb.EndRevokedHold{Lock: "a", SessionId: 1, Token: 2}}}
	if err := ForLogVersion(endRevoked, 6); err == nil || !strings.Contains(err.Error(), "the end of a revoked hold needs log version 8") {
		t.Fatalf("an EndRevokedHold at version 6: %v", err)
	}
	if err := ForLogVersion(revoke, 8); err != nil {
		t.Fatalf("a RevokeHold at version 8: %v", err)
	}
	plain := &fsmpb.Command{Op: &fsmpb.Command_AcquireMany{AcquireMany: &fsmpb.AcquireMany{Locks: []string{"a"}}}}
	if err := ForLogVersion(plain, 1); err != nil {
		t.Fatal(err)
	}
}

// TestSetLogVersion: the command raises the version, never lowers it,
// refuses 0, and the version travels in snapshots and counts in Hash.
func TestSetLogVersion(t *testing.T) {
	m := New()
	if m.LogVersion() != 1 {
		t.Fatalf("a new machine is at %d, want 1", m.LogVersion())
	}
	before := m.Hash()
	set := func(index uint64, v uint32) *fsmpb.Result {
		return m.Apply(index, &fsmpb.Command{Op: &fsmpb.Command_SetLogVersion{SetLogVersion: &fsmpb.SetLogVersion{Version: v}}})
	}
	if res := set(1, 2); ErrorOf(res) != nil || m.LogVersion() != 2 {
		t.Fatalf("set 2: %v, version %d", res, m.LogVersion())
	}
	if m.Hash() == before {
		t.Fatal("the log version does not count in Hash")
	}
	if res := set(2, 1); ErrorOf(res) != nil || m.LogVersion() != 2 {
		t.Fatalf("set 1 after 2: %v, version %d", res, m.LogVersion())
	}
	if res := set(3, 0); ErrorOf(res) == nil || m.LogVersion() != 2 {
		t.Fatalf("set 0: %v, version %d", res, m.LogVersion())
	}
	data, _ := m.Snapshot()
	var snap fsmpb.Snapshot
	if err := proto.Unmarshal(data, &snap); err != nil || snap.GetLogVersion() != 2 {
		t.Fatalf("snapshot: %v, %v", err, &snap)
	}
	r := New()
	if err := r.Restore(data); err != nil || r.LogVersion() != 2 || r.Hash() != m.Hash() {
		t.Fatalf("restore: %v, version %d", err, r.LogVersion())
	}
	f := m.Freeze()
	frozen := f.Encode()
	if string(frozen) != string(data) {
		t.Fatal("a frozen state encodes otherwise than Snapshot")
	}
}
