package fsm

import (
	"fmt"

	"github.com/google/btree"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Machine is the lock state machine of one Raft group. It is not safe for
// concurrent use: the caller serialises Apply, reads and snapshots (the apply
// loop owns it; readers take the same lock). Only a Frozen state may be
// encoded on another goroutine while the Machine goes on (frozen.go).
//
// Every Result and every value returned by a read is a fresh copy the caller
// may keep and modify.
type Machine struct {
	applied uint64

	sessions map[uint64]*session
	locks    map[string]*lock
	// sessionTree and lockTree hold the current states of sessions sorted
	// by id and of locks sorted by name: the walks in order (snapshots,
	// paged reads) get each record without a map lookup, and Freeze
	// clones them.
	sessionTree *btree.BTreeG[*sessionState]
	lockTree    *btree.BTreeG[*lockState]

	// members are the Raft group's members, clusterID its id (members.go).
	members   map[uint64]Member
	clusterID uint64
	// logVersion is the cluster's log version (version.go); 0 for a
	// cluster from before versions.
	logVersion uint32
	// auth is who may do what (auth.go); audits the recent admin and
	// auth actions, oldest first.
	auth   authState
	audits []auditRecord
	// keys are the cluster's token signing keys by id, the current one
	// last (signing.go).
	keys []signingKey

	// past is the recent history of holds (past.go): replicated from
	// HistoryVersion, in memory only below it.
	past past
	// opens indexes live sessions by the nonce of the OpenSession that
	// made them (exactly-once opens); derived from the sessions.
	opens map[uint64]*session
	// byPrincipal counts the live sessions of each user that opened some
	// (a session's principal); derived from the sessions, so it is in no
	// snapshot. Sessions opened while authentication was off are no
	// one's and not counted.
	byPrincipal map[string]int

	// frozen is the state being encoded while Apply goes on, and epoch
	// counts the freezes (frozen.go).
	frozen *Frozen
	epoch  uint64
	// lastSize and lastRecords are the bytes and records of the last
	// encoding or restored snapshot, to size the next one's buffer.
	lastSize, lastRecords int
	// deadlocks is the deadlock search's scratch, reused (deadlock.go).
	deadlocks deadlockSearch
	// searchedStalled, if set (by tests only), is called with each node
	// endStalled searched and the waits it found deadlocked (none: free),
	// in the state the search saw.
	searchedStalled func(session uint64, key string, ws []stalledWait)
	// skippedStalled, if set (by tests only), is called with each node
	// endStalled leaves unsearched past MaxStalledSearches.
	skippedStalled func(session uint64, key string)
	// searched, if set (by tests only), is called at the end of each
	// deadlock search with the holds and waits it counted, the waiters
	// whose places it indexed and the waiters its cycles read.
	searched func(looked, placed, cycleRead int)
}

// btreeDegree is the fan-out of the sorted indexes; 32 is google/btree's
// usual choice for small keys.
const btreeDegree = 32

// New returns an empty Machine whose applied index is 0.
func New() *Machine {
	return &Machine{
		sessions:    make(map[uint64]*session),
		locks:       make(map[string]*lock),
		sessionTree: btree.NewG(btreeDegree, func(x, y *sessionState) bool { return x.sess.id < y.sess.id }),
		lockTree:    btree.NewG(btreeDegree, func(x, y *lockState) bool { return x.name < y.name }),
	}
}

// AppliedIndex returns the index of the last entry applied (by Apply or
// SetApplied) or restored.
func (m *Machine) AppliedIndex() uint64 { return m.applied }

// SetApplied records that the entry at index, which carries no command (a
// leader's empty entry, a configuration change), has been applied. index
// must be above AppliedIndex; anything else means the log is being applied
// out of order, and SetApplied panics.
func (m *Machine) SetApplied(index uint64) {
	m.advance(index)
}

func (m *Machine) advance(index uint64) {
	if index <= m.applied {
		panic(fmt.Sprintf("fsm: entry %d applied after entry %d", index, m.applied))
	}
	m.applied = index
}

// apply is the context of the entry being applied.
type apply struct {
	index uint64 // the entry's index: new session ids and grant tokens
	wall  int64  // the proposer's wall clock, for display fields only
	seq   uint64 // the command's seq, the acquire_seq of its holds and waits
	res   *fsmpb.Result
	// outcome is allocated with res for an Acquire, for its outcome
	// (newOutcome): one allocation where there were two, on every member.
	outcome *fsmpb.AcquireOutcome
	// stalled are the nodes that lost a wait this entry and may be
	// deadlocked by it (mayStall), searched once it is done.
	stalled []dlNode
	// stalledSet has the nodes of stalled once they are many.
	stalledSet map[dlNode]struct{}
}

// newOutcome returns a zero AcquireOutcome: a.outcome the first time.
func (a *apply) newOutcome() *fsmpb.AcquireOutcome {
	if o := a.outcome; o != nil {
		a.outcome = nil
		return o
	}
	return &fsmpb.AcquireOutcome{}
}

// liveness returns the result's report to the leader's liveness tracker,
// made on first use: most entries have nothing to report, and no report.
func (a *apply) liveness() *fsmpb.Liveness {
	if a.res.Liveness == nil {
		a.res.Liveness = &fsmpb.Liveness{}
	}
	return a.res.Liveness
}

// Apply applies cmd, the command of the log entry at index, and returns its
// result. index must be above AppliedIndex (Apply panics otherwise: the log
// is being applied out of order). Bad input never panics: the result carries
// the error, and nothing but the applied index changes.
//
// The returned Result belongs to the caller. Its side-effect lists (grants,
// waits_ended, sessions_ended, holds_ended) describe what the entry did to
// other requests, in a deterministic order; its liveness what it started or
// ended that the leader's liveness tracker times.
func (m *Machine) Apply(index uint64, cmd *fsmpb.Command) *fsmpb.Result {
	m.advance(index)
	if cmd == nil || cmd.GetOp() == nil {
		return failf(fsmpb.Error_ERROR_INVALID_ARGUMENT, "command has no operation")
	}
	a := &apply{index: index, wall: cmd.GetWallTimeUnixNano(), seq: cmd.GetSeq()}
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_Acquire:
		r := &struct {
			res fsmpb.Result
			out fsmpb.AcquireOutcome
		}{}
		a.res, a.outcome = &r.res, &r.out
	case *fsmpb.Command_OpenSession:
		// Not deduplicated: the session does not exist yet.
		if err := m.authorize(cmd, nil); err != nil {
			return failf(err.Code, "%s", err.Msg)
		}
		r := &opened{}
		a.res = &r.res
		m.openSession(a, r, op.OpenSession, cmd.GetPrincipal())
		return a.res
	default:
		a.res = &fsmpb.Result{}
	}

	var s *session
	dedup := false
	var minUnacked uint64
	if id := cmd.GetSessionId(); id != 0 {
		s = m.sessions[id]
		if s == nil {
			return failf(fsmpb.Error_ERROR_SESSION_NOT_FOUND, "session %d not found", id)
		}
		if !s.secretHash.Admits(cmd.GetSecretHash()) {
			// Before the cache and the sequence window: a stranger learns
			// no answer of the session's and moves none of its numbers.
			return failf(fsmpb.Error_ERROR_SECRET_MISMATCH,
				"session %d: the request's session secret is not the session's (only its owner may act for it)", id)
		}
	}
	// Before the cache too: a user who lost a permission learns nothing.
	if err := m.authorize(cmd, s); err != nil {
		return failf(err.Code, "%s", err.Msg)
	}
	if s != nil {
		id := s.id
		if seq := cmd.GetSeq(); seq != 0 {
			if seq < s.minUnacked {
				return failf(fsmpb.Error_ERROR_STALE_SEQUENCE,
					"seq %d of session %d is below its min unacked seq %d", seq, id, s.minUnacked)
			}
			if c := s.cachedEntry(seq); c != nil {
				if _, ok := cmd.GetOp().(*fsmpb.Command_Acquire); ok && !c.claimed {
					// The client may now act on this answer: an
					// abandoned CancelWait of the seq must not undo it.
					c = m.claim(s, seq)
				}
				if c.fenced() && cmd.GetCancelWait() == nil {
					return failf(fsmpb.Error_ERROR_REFUSED,
						"seq %d of session %d was refused before it reached the log (its first answer said why); retrying it changes nothing", seq, id)
				}
				return c.toProto(nil)
			}
			minUnacked = cmd.GetMinUnackedSeq()
			if minUnacked == 0 || minUnacked > seq {
				minUnacked = seq
			}
			minUnacked = max(minUnacked, s.minUnacked)
			if s.pendingFrom(minUnacked) >= MaxPending {
				return failf(fsmpb.Error_ERROR_TOO_MANY_PENDING,
					"session %d has %d unacknowledged results; the limit is %d", id, MaxPending, MaxPending)
			}
			dedup = true
		}
	}

	m.dispatch(a, cmd, s)
	if len(a.stalled) > 0 {
		m.endStalled(a)
	}

	if dedup && m.sessions[s.id] == s {
		m.changeSession(s)
		s.forgetBelow(minUnacked)
		keyed, key := m.resultKey(cmd)
		s.remember(cmd.GetSeq(), a.res, keyed, key)
	}
	return a.res
}

// resultKey is the owner key cmd's cached result keeps, and whether it
// keeps one: an Acquire's or AcquireMany's, from SameTokenHoldsVersion.
func (m *Machine) resultKey(cmd *fsmpb.Command) (bool, string) {
	if m.LogVersion() < SameTokenHoldsVersion {
		return false, ""
	}
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_Acquire:
		return true, op.Acquire.GetOwnerKey()
	case *fsmpb.Command_AcquireMany:
		return true, op.AcquireMany.GetOwnerKey()
	}
	return false, ""
}

func (m *Machine) dispatch(a *apply, cmd *fsmpb.Command, s *session) {
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_CloseSession:
		m.closeSession(a, s)
	case *fsmpb.Command_ExpireSession:
		m.expireSession(a, op.ExpireSession)
	case *fsmpb.Command_BlacklistSession:
		m.blacklistSession(a, op.BlacklistSession)
		if a.res.GetError() == fsmpb.Error_ERROR_NONE {
			m.audit(a, cmd.GetPrincipal(), fmt.Sprintf("blacklisted session %d", op.BlacklistSession.GetSessionId()))
		}
	case *fsmpb.Command_Acquire:
		m.acquireWithValue(a, s, op.Acquire)
	case *fsmpb.Command_Proclaim:
		m.proclaim(a, s, op.Proclaim)
	case *fsmpb.Command_AcquireMany:
		m.acquireMany(a, s, op.AcquireMany)
	case *fsmpb.Command_Release:
		m.release(a, s, op.Release)
	case *fsmpb.Command_CasRelease:
		m.casRelease(a, op.CasRelease)
		if a.res.GetError() == fsmpb.Error_ERROR_NONE {
			m.audit(a, cmd.GetPrincipal(), fmt.Sprintf("cas-released lock %s (session %d, token %d)",
				quote(op.CasRelease.GetLock()), op.CasRelease.GetSessionId(), op.CasRelease.GetToken()))
		}
	case *fsmpb.Command_CancelWait:
		m.cancelWait(a, s, op.CancelWait)
	case *fsmpb.Command_ExpireHold:
		m.expireHold(a, s, op.ExpireHold)
	case *fsmpb.Command_EndLockDelay:
		m.endLockDelay(a, s, op.EndLockDelay)
	case *fsmpb.Command_RevokeHold:
		m.revokeHold(a, op.RevokeHold)
		if a.res.GetError() == fsmpb.Error_ERROR_NONE {
			m.audit(a, cmd.GetPrincipal(), fmt.Sprintf("revoked lock %s (token %d, grace %v)",
				quote(op.RevokeHold.GetLock()), op.RevokeHold.GetToken(), nanos(op.RevokeHold.GetGraceNanos())))
		}
	case *fsmpb.Command_EndRevokedHold:
		m.endRevokedHold(a, s, op.EndRevokedHold)
	case *fsmpb.Command_SetLogVersion:
		m.setLogVersion(a, op.SetLogVersion)
	case *fsmpb.Command_AuthChange:
		m.applyAuthChange(a, cmd.GetPrincipal(), op.AuthChange)
	case *fsmpb.Command_AuditNote:
		m.audit(a, cmd.GetPrincipal(), op.AuditNote.GetAction())
	case *fsmpb.Command_RotateSigningKey:
		m.rotateSigningKey(a, s, cmd.GetPrincipal(), op.RotateSigningKey)
	default:
		a.refuse(errorf(fsmpb.Error_ERROR_INVALID_ARGUMENT, "unknown operation %T", op))
	}
}

// refuse sets the entry's result to the refusal err. Callers refuse before
// they change anything.
func (a *apply) refuse(err *Error) {
	a.res.Error = err.Code
	a.res.Message = err.Msg
}

// leaderCommand refuses a leader's command (what) about lock name that a
// session sent (s is not nil), or whose name is no lock's, and reports
// whether it may go on.
func (a *apply) leaderCommand(s *session, what, name string) bool {
	if err := checkLockName(name); err != nil {
		a.refuse(err)
		return false
	}
	if s != nil {
		a.refuse(invalid("%s is the leader's: session %d cannot send it", what, s.id))
		return false
	}
	return true
}

// needSession refuses commands that must come from a session when s is nil.
func (a *apply) needSession(s *session, what string) bool {
	if s == nil {
		a.refuse(invalid("%s needs the requesting session's id", what))
		return false
	}
	return true
}
