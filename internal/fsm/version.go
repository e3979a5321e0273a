package fsm

import (
	"fmt"

	"github.com/batonlock/baton/api/protofield"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// LogVersion is the newest version of the log and snapshot format this
// release reads. A member stops at an entry with a field it does not know
// (raftnode), so the leader writes what a version added only once the
// cluster's log version (Machine.LogVersion) has reached it, and the
// leader raises that only when every member has said it runs a release
// that reads it. So members can be upgraded in any order.
//
//	1: every release before log versions (a cluster's version until raised).
//	2: OpenSession.nonce (and Session.open_nonce in snapshots),
//	   AcquireMany.hold_limit_nanos, SetLogVersion and Snapshot.log_version.
//	3: session secrets: OpenSession.secret_hash, Command.secret_hash (and
//	   Session.secret_hash in snapshots).
//	4: authentication: Command.principal, AuthChange, AuditNote (and
//	   Session.principal, Snapshot.auth and Snapshot.audit in snapshots).
//	5: lock-delay: Acquire.lock_delay_nanos, AcquireMany.lock_delay_nanos,
//	   EndLockDelay (and Lock.delay_*, Holder.lock_delay_nanos,
//	   Waiter.lock_delay_nanos and AcquireOutcome.delayed_until_unix_nano
//	   in snapshots). A hold gets a lock-delay only from an entry of
//	   version 5, so a log below it never starts one, and members of
//	   older releases apply it alike.
//	6: signed tokens: RotateSigningKey (and Snapshot.signing_keys in
//	   snapshots). A cluster below it has no signing key, and its
//	   members sign nothing (SignedTokensVersion).
//	7: mixed lock sets: AcquireMany.modes, a mode per lock
//	   (MixedSetVersion).
//	8: cooperative revocation: RevokeHold, EndRevokedHold (and
//	   Holder.revoke_* in snapshots): RevocationVersion.
//	9: hold values: Acquire.value, Proclaim (and Holder.value and
//	   Waiter.value in snapshots; HoldValueVersion).
//	10: the history of ended holds in snapshots (Snapshot.history and
//	   LockHistory, PastHold and HoldEnd in it; HistoryVersion). No
//	   command changes: every member records the same ends at every
//	   version, and below 10 keeps them out of its snapshots and Hash, as
//	   older releases do; the entry that raises the version to 10 empties
//	   the history on every member, which from there on tell the same
//	   (past.go).
//	11: deadlock detection: an Acquire whose wait would close a deadlock
//	   is refused (DeadlockVersion), with Result.deadlock (kept in
//	   snapshots with the session's cached results). No command field:
//	   below it the machine queues such a wait, so old logs replay the
//	   same.
//	12: a session's end ends its holds, starting their lock-delays,
//	   before it grants the waiters behind its own waits in their
//	   locks (EndHoldsFirstVersion). Below it such a waiter could be
//	   granted a permit or a read beside the ending hold in the entry
//	   that starts the lock's delay. No field changes.
//	13: what a watch that fills in a gap from the history needs
//	   (WatchHistoryVersion): PastHold.value, the value a hold had when
//	   it ended, recorded only from this version (below it empty, so
//	   older snapshots keep their bytes), and Snapshot.history_floor,
//	   below which the history may have lost ends (HistoryComplete).
//	   No command changes: every member records the same.
//	14: a grant or a cancel that leaves a node that still waits
//	   deadlocked ends that node's waits with DEADLOCK and the cycle
//	   (DeadlockAtGrantVersion; WaitEnded.deadlock, a result's side
//	   effect, never written), and a node's other waits for a lock it
//	   is granted re-enter that hold in the same entry (reenterWaits).
//	   No command field: below it such waits stay queued, so old logs
//	   replay the same. One session's holds
//	   of a lock that share a token are told apart by owner key
//	   (SameTokenHoldsVersion): an Acquire's or AcquireMany's cached
//	   result keeps its owner key (CachedResult.keyed and owner_key in
//	   snapshots), so a hold's end rewrites the answers about that hold
//	   only; ExpireHold.owner_key names which of them expires.
//	15: an entry searches from at most MaxStalledSearches of the nodes
//	   its grants and cancels leave waiting (StalledSearchBoundVersion);
//	   the others keep their waits, as a search past MaxDeadlockSearch
//	   leaves them. Below it every such node is searched, so one entry
//	   granting a run of thousands of readers could run thousands of
//	   searches. And a search reads, and counts toward MaxDeadlockSearch,
//	   a node's own waits, not its session's other owner keys' too
//	   (OwnWaitsVersion), so it gives up later where a session's many
//	   keys wait. No field changes.
//
// A field added to a log or snapshot message needs a new version here, and
// its entry in fieldVersions (TestEveryLogFieldHasAVersion fails without).
const LogVersion = StalledSearchBoundVersion

// SameTokenHoldsVersion is the log version from which one session's
// holds of a lock under two owner keys, which share a token when one
// entry granted both, are told apart by owner key: a cached acquire's
// answer keeps its owner key, and a hold's end rewrites only the
// answers about it (holdEnded); an ExpireHold names the hold's owner
// key, or expires the first of them that has a limit (expireHold).
const SameTokenHoldsVersion = 14

// WatchHistoryVersion is the log version from which the history of ended
// holds keeps each end's value and its floor (past.go, HistoryComplete):
// what a watch that resumes after a gap fills in from it.
const WatchHistoryVersion = 13

// EndHoldsFirstVersion is the log version from which a session's end
// grants no waiter of a lock it holds until its hold there has ended and
// the lock's delay, if any, has started (endSession).
const EndHoldsFirstVersion = 12

// MixedSetVersion is the log version that added AcquireMany.modes: below
// it a set of locks takes them all in one mode.
const MixedSetVersion = 7

// LockDelayVersion is the log version that added lock-delays: below it a
// server gives no hold its default lock-delay.
const LockDelayVersion = 5

// RevocationVersion is the log version that added cooperative
// revocation (revoke.go): below it a server refuses a revoke, and no hold
// has a revocation.
const RevocationVersion = 8

// LogVersion is the cluster's log version: what the leader may write.
// Every cluster starts at 1 (a new one too: its bootstrap records, which
// each first member writes for itself, must not depend on its release)
// until its leader raises it.
func (m *Machine) LogVersion() uint32 { return max(m.logVersion, 1) }

// SetLogVersion raises the cluster's log version to v (never lowers it),
// as the SetLogVersion command does. Raised to HistoryVersion or above
// from below it, it empties the history of ended holds, which each
// member kept for itself until then and all keep alike from then on
// (past.go). Raised to WatchHistoryVersion or above from below it, it
// starts the history's floor at the applied index (the entry's): no
// member tracked what ends the history lost before.
func (m *Machine) SetLogVersion(v uint32) {
	if m.logVersion < HistoryVersion && v >= HistoryVersion {
		m.past = past{}
	}
	if m.logVersion < WatchHistoryVersion && v >= WatchHistoryVersion {
		m.past.floor = m.applied
	}
	m.logVersion = max(m.logVersion, v)
}

func (m *Machine) setLogVersion(a *apply, op *fsmpb.SetLogVersion) {
	if op.GetVersion() == 0 {
		a.refuse(invalid("log version 0 does not exist"))
		return
	}
	m.SetLogVersion(op.GetVersion())
}

// VersionNeeded is the log version a member needs to apply cmd: the
// newest version that added a field cmd sets (for SetLogVersion, at least
// the version it sets).
func VersionNeeded(cmd *fsmpb.Command) uint32 {
	if eh := cmd.GetExpireHold(); eh != nil && eh.OwnerKey != nil {
		return SameTokenHoldsVersion
	}
	if cmd.GetProclaim() != nil || cmd.GetAcquire().GetValue() != "" {
		return HoldValueVersion
	}
	if cmd.GetRevokeHold() != nil || cmd.GetEndRevokedHold() != nil {
		return RevocationVersion
	}
	if len(cmd.GetAcquireMany().GetModes()) > 0 {
		return MixedSetVersion
	}
	if cmd.GetRotateSigningKey() != nil {
		return SignedTokensVersion
	}
	if cmd.GetEndLockDelay() != nil || cmd.GetAcquire().GetLockDelayNanos() != 0 || cmd.GetAcquireMany().GetLockDelayNanos() != 0 {
		return LockDelayVersion
	}
	if cmd.GetPrincipal() != "" || cmd.GetAuthChange() != nil || cmd.GetAuditNote() != nil {
		return 4
	}
	if len(cmd.GetSecretHash()) > 0 {
		return 3
	}
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_OpenSession:
		if len(op.OpenSession.GetSecretHash()) > 0 {
			return 3
		}
		if op.OpenSession.GetNonce() != 0 {
			return 2
		}
	case *fsmpb.Command_AcquireMany:
		if op.AcquireMany.GetHoldLimitNanos() != 0 {
			return 2
		}
	case *fsmpb.Command_SetLogVersion:
		return max(2, op.SetLogVersion.GetVersion())
	}
	return 1
}

// ForLogVersion rewrites cmd, if it can, so that members of log version v
// can apply it, or says why it cannot (a hold's value cannot be left out:
// an election's leader would publish nothing). Below version 14 an
// ExpireHold loses its owner key. Below version 3 a command loses its
// secret hash, and an OpenSession the secret's (the session then has no
// secret, as before version 3: its requests are not checked); below 2 an
// OpenSession loses its nonce (the open is then not exactly-once); a hold
// limit on a set of locks, a lock-delay, a signing key, a set of locks
// in several modes or a revocation cannot be left out (the server
// applies its default lock-delay only from version 5, makes no first key
// below 6, and refuses a revoke below 8). SetLogVersion passes: it is
// what raises v, and the leader proposes it only once every member has
// said it reads the version it sets.
func ForLogVersion(cmd *fsmpb.Command, v uint32) error {
	if VersionNeeded(cmd) <= v || cmd.GetSetLogVersion() != nil {
		return nil
	}
	if v < 4 {
		// Authentication cannot be on below version 4: nobody needs to
		// be named.
		cmd.Principal = ""
	}
	if v < 3 {
		cmd.SecretHash = nil
		if op, ok := cmd.GetOp().(*fsmpb.Command_OpenSession); ok {
			op.OpenSession.SecretHash = nil
		}
	}
	if op, ok := cmd.GetOp().(*fsmpb.Command_OpenSession); ok && v < 2 {
		op.OpenSession.Nonce = 0
	}
	if op, ok := cmd.GetOp().(*fsmpb.Command_ExpireHold); ok && v < SameTokenHoldsVersion {
		// Below it the machine expires the first of the session's holds
		// with the token, as the leader asked before it named one.
		op.ExpireHold.OwnerKey = nil
	}
	if VersionNeeded(cmd) <= v {
		return nil
	}
	what := "this request"
	switch {
	case cmd.GetProclaim() != nil || cmd.GetAcquire().GetValue() != "":
		what = "a hold's value"
	case len(cmd.GetAcquireMany().GetModes()) > 0:
		what = "a set of locks in several modes"
	case cmd.GetAcquire().GetLockDelayNanos() != 0 || cmd.GetAcquireMany().GetLockDelayNanos() != 0:
		what = "a lock-delay"
	case cmd.GetEndLockDelay() != nil:
		what = "the end of a lock-delay"
	case cmd.GetRotateSigningKey() != nil:
		what = "a signing key"
	case cmd.GetRevokeHold() != nil:
		what = "a revocation"
	case cmd.GetEndRevokedHold() != nil:
		what = "the end of a revoked hold"
	case cmd.GetAcquireMany() != nil:
		what = "a hold limit on a set of locks"
	case cmd.GetAuthChange() != nil:
		what = "a change of users, roles or permissions"
	case cmd.GetAuditNote() != nil:
		what = "an audit record"
	}
	return fmt.Errorf("%s needs log version %d and the cluster's is %d: a member runs an older release, "+
		"or has not been heard from since the leader started (upgrade every member; `baton member list` shows each one's version)",
		what, VersionNeeded(cmd), v)
}

// appendClusterInfo appends the snapshot's cluster_id and log_version.
func appendClusterInfo(b []byte, clusterID uint64, logVersion uint32) []byte {
	b = protofield.AppendUint(b, snapshotClusterID, clusterID)
	return protofield.AppendUint(b, snapshotLogVersion, uint64(logVersion))
}
