package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// The operator of Config.Revokes. Every so often it asks the holders of a
// random lock to let go: a RevokeHold through a member that believes it
// leads (as `baton revoke` follows the leader), with a grace of one to
// two seconds. A holder is told when the entry first applies on any member
// (in the real server, the push of the member its stream is on; here at
// once, no later than the leader starts timing the grace). It stops using
// the hold at once, and one time in two releases it (it cooperates);
// otherwise it keeps it unused, and the leader's tracker ends it at the
// grace with EndRevokedHold, an operation of the history as ExpireHold
// is.

// revoke proposes one RevokeHold and schedules the next until the calm.
func (s *Sim) revoke() {
	if s.calm {
		return
	}
	defer s.after(s.dur(50*time.Millisecond, 300*time.Millisecond), s.revoke)
	var up []*member
	for _, id := range s.peers {
		if m := s.nodes[id]; m != nil && m.up() && !m.srv.dead && m.node.IsLeader() {
			up = append(up, m)
		}
	}
	if len(up) == 0 {
		return
	}
	m := up[s.rng.IntN(len(up))]
	lock := fmt.Sprintf("lock/%d", s.rng.IntN(s.cfg.Locks))
	if s.cfg.Semaphores > 0 && s.rng.IntN(4) == 0 {
		lock = fmt.Sprintf("sem/%d", s.rng.IntN(s.cfg.Semaphores))
	}
	grace := s.dur(time.Second, 2*time.Second).Truncate(time.Millisecond)
	cmd := &fsmpb.Command{Op: &fsmpb.Command_RevokeHold{RevokeHold: &fsmpb.RevokeHold{Lock: lock, GraceNanos: int64(grace)}}}
	if err := (simProposer{m.srv}).submit(cmd, nil); err == nil {
		s.stats.Revokes++
		s.tracef("revoke %s grace %v via %d", lock, grace, m.id)
	}
}

// revokeTold tells the client of h's session that h is being revoked.
func (s *Sim) revokeTold(h *fsmpb.HoldRevoked) {
	for _, c := range s.clients {
		if c.session != 0 && c.session == h.GetSessionId() {
			c.revoked(holdRef{h.GetLock(), h.GetOwnerKey()}, h.GetToken())
		}
	}
}

// revoked is the client told that its hold l (a lock and owner key) with
// token is being revoked: it stops using the hold (and does not take the
// lock again under that key this session), and one time in two releases
// it if it holds a single count.
func (c *client) revoked(l holdRef, token uint64) {
	s := c.s
	tok, ok := c.holds[l]
	if !ok && token > c.revokedEarly[l] {
		c.revokedEarly[l] = token // a grant whose answer is still to come
	}
	if !ok || tok != token {
		return // told already, or of a hold it no longer believes it has
	}
	s.stats.RevokesTold++
	count := c.counts[l]
	c.forget(l)
	c.tainted[l] = true
	if count <= 1 && s.rng.IntN(2) == 0 {
		c.releaseRevoked(l, token, c.session, 10)
	}
}

// releaseRevoked releases the revoked hold of l with token once the
// client has no request in flight, trying again a little later up to
// tries times, while its session is the one that held it.
func (c *client) releaseRevoked(l holdRef, token, session uint64, tries int) {
	s := c.s
	if c.session != session || s.calm || tries == 0 {
		return
	}
	if c.op != nil || c.opening {
		s.after(s.dur(10*time.Millisecond, 50*time.Millisecond), func() { c.releaseRevoked(l, token, session, tries-1) })
		return
	}
	s.stats.RevokesHonoured++
	c.seq++
	c.start(&clientOp{kind: opRelease, lock: l.lock, key: l.key, token: token, seq: c.seq, cmd: &fsmpb.Command{
		SessionId: c.session, Seq: c.seq, MinUnackedSeq: c.minUnacked(),
		Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: l.lock, Token: token, OwnerKey: l.key}},
	}})
}

// revokedHold names a hold in the replayed log (one session's holds of a
// lock under two keys may share the token: Config.Keys); revokeRun is
// its revocation: the RevokeHold entry, its wall clock and the grace.
type revokedHold struct {
	lock           string
	session, token uint64
	key            string
}

type revokeRun struct {
	from  uint64
	wall  int64
	grace int64
}

// checkRevokes follows the revocations the entry at index i started and
// ended (check j): a hold asked again keeps its first revocation; an
// EndRevokedHold ends a hold being revoked, that hold alone, and was
// proposed no earlier than its grace after the RevokeHold entry (each
// leader times a grace from its own apply of it, or, new, in full from
// its election); a revocation ends with its hold or its session.
func (k *checker) checkRevokes(i uint64, e *logEntry, res *fsmpb.Result, revokes map[revokedHold]revokeRun) error {
	for _, h := range res.GetHoldsRevoked() {
		key := revokedHold{h.GetLock(), h.GetSessionId(), h.GetToken(), h.GetOwnerKey()}
		run, ok := revokes[key]
		switch {
		case h.GetRevokeFrom() == i && ok:
			return fmt.Errorf("index %d revoked %+v again; its revocation from index %d stands", i, key, run.from)
		case h.GetRevokeFrom() == i:
			revokes[key] = revokeRun{from: i, wall: e.cmd.GetWallTimeUnixNano(), grace: h.GetGraceNanos()}
		case !ok || run.from != h.GetRevokeFrom() || run.grace != h.GetGraceNanos():
			return fmt.Errorf("index %d reports %+v revoked from index %d; the log has %+v", i, key, h.GetRevokeFrom(), run)
		}
	}
	if end := e.cmd.GetEndRevokedHold(); end != nil && res.GetError() == fsmpb.Error_ERROR_NONE {
		// The command names no owner key: the hold it ended says which
		// of the session's holds with the token it was.
		var ended *fsmpb.HoldEnded
		if len(res.GetHoldsEnded()) == 1 {
			ended = res.GetHoldsEnded()[0]
		}
		key := revokedHold{end.GetLock(), end.GetSessionId(), end.GetToken(), ended.GetOwnerKey()}
		run, ok := revokes[key]
		switch {
		case ended == nil || ended.GetToken() != key.token || ended.GetSessionId() != key.session || ended.GetLock() != key.lock:
			return fmt.Errorf("index %d ended %v for the revocation of %+v", i, res.GetHoldsEnded(), key)
		case !ok:
			return fmt.Errorf("index %d ended %+v, which no revocation runs for", i, key)
		case e.cmd.GetWallTimeUnixNano()-run.wall < run.grace:
			return fmt.Errorf("index %d ended %+v %v after its revocation at index %d, before its grace %v",
				i, key, time.Duration(e.cmd.GetWallTimeUnixNano()-run.wall), run.from, time.Duration(run.grace))
		}
	}
	for _, h := range res.GetLiveness().GetRevocationsEnded() {
		delete(revokes, revokedHold{h.GetLock(), h.GetSessionId(), h.GetToken(), h.GetOwnerKey()})
	}
	if ended := res.GetSessionsEnded(); len(ended) > 0 {
		for key := range revokes {
			if slices.Contains(ended, key.session) {
				delete(revokes, key)
			}
		}
	}
	return nil
}
