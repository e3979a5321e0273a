package fsm

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// revokedHold names a hold of the random stream: a lock, an owner key, a
// session and a token. The owner key is needed: one session's two holds
// of one lock (keys "" and "k") granted by one entry share the token.
type revokedHold = holdKey

// revocationModel is what the model knows of a hold's revocation: the
// entry that asked it, and the hold's place in that entry's holds_revoked
// (the order of its lock's holders, which later ends keep).
type revocationModel struct {
	from uint64
	rank int
}

// compareRevokedHolds orders holds by lock, session, token and owner key.
func compareRevokedHolds(a, b revokedHold) int {
	return cmp.Or(cmp.Compare(a.lock, b.lock), cmp.Compare(a.session, b.session),
		cmp.Compare(a.token, b.token), cmp.Compare(a.key, b.key))
}

// revokedHoldOf names h's hold.
func revokedHoldOf(h *fsmpb.HoldRevoked) revokedHold {
	return revokedHold{h.GetLock(), h.GetOwnerKey(), h.GetSessionId(), h.GetToken()}
}

// endRevokedTarget returns the hold being revoked that end ends, by the
// model, and how many holds being revoked it names (0: none to end).
// EndRevokedHold names no owner key: of
// a session's holds of the lock with the token that are being revoked it
// ends the first in the lock's holder order (revoke.go). Two such holds
// were revoked by the same entry, so their ranks order them.
func (s *stream) endRevokedTarget(end *fsmpb.EndRevokedHold) (revokedHold, int) {
	var best revokedHold
	n := 0
	for k, r := range s.revokes {
		if k.lock != end.GetLock() || k.session != end.GetSessionId() || k.token != end.GetToken() {
			continue
		}
		if n == 0 || r.rank < s.revokes[best].rank {
			best = k
		}
		n++
	}
	return best, n
}

// revokeCommand is an operator's revoke of a random lock (now and then
// with a grace out of range or a token it does not have), or the leader's
// end of a revoked hold: mostly of one being revoked, sometimes of one
// that is not or has ended.
func (s *stream) revokeCommand() *fsmpb.Command {
	r := s.rng
	lockName := streamLocks[r.IntN(len(streamLocks))]
	if r.IntN(2) == 0 {
		grace := []int64{int64(30 * time.Second), int64(time.Second), 7}[r.IntN(3)]
		var tok uint64
		if r.IntN(2) == 0 {
			tok = s.someToken(lockName)
		}
		return &fsmpb.Command{Op: &fsmpb.Command_RevokeHold{RevokeHold: &fsmpb.RevokeHold{Lock: lockName, Token: tok, GraceNanos: grace}}}
	}
	sid, tok := s.someSession(), s.someToken(lockName)
	// In a fixed order: each hold looked at draws from the stream's
	// numbers, so a map's random order would make the stream (and the
	// seed's verdict) differ from run to run.
	for _, h := range slices.SortedFunc(maps.Keys(s.revokes), compareRevokedHolds) {
		if h.lock == lockName && r.IntN(4) > 0 {
			sid, tok = h.session, h.token
			break
		}
	}
	return &fsmpb.Command{Op: &fsmpb.Command_EndRevokedHold{EndRevokedHold: &fsmpb.EndRevokedHold{Lock: lockName, SessionId: sid, Token: tok}}}
}

// checkRevokedAll checks that an applied RevokeHold asked every hold of
// its lock, or every one with its token, each once: the holds are those
// of the lock after the entry, since a revoke ends none.
func (s *stream) checkRevokedAll(cmd *fsmpb.Command, op *fsmpb.RevokeHold, res *fsmpb.Result) {
	var want []revokedHold
	l, _ := s.m.Lock(op.GetLock())
	for _, h := range l.GetHolders() {
		if op.GetToken() == 0 || h.GetToken() == op.GetToken() {
			want = append(want, revokedHold{op.GetLock(), h.GetOwnerKey(), h.GetSessionId(), h.GetToken()})
		}
	}
	var got []revokedHold
	for _, h := range res.GetHoldsRevoked() {
		got = append(got, revokedHoldOf(h))
	}
	if len(want) == 0 || !slices.Equal(got, want) {
		s.t.Fatalf("entry %d: %v revoked %v; the lock's holds it asks are %v", s.index, cmd, got, want)
	}
}

// observeRevokes follows the revocations res reports started and ended,
// and checks them against the machine: a revoke asks the holds it names
// (checkRevokedAll); a hold asked again keeps its
// first revocation; a hold's revocation starts with its siblings' (the
// session's other holds of the lock with its token); an EndRevokedHold
// ends the hold the model says (endRevokedTarget), and only one being
// revoked; every hold being revoked after the entry is one the model
// has, and every revocation the model has is of a hold still there (its
// end, by any way, was reported).
func (s *stream) observeRevokes(cmd *fsmpb.Command, res *fsmpb.Result) {
	t := s.t
	for i, h := range res.GetHoldsRevoked() {
		k := revokedHoldOf(h)
		r, ok := s.revokes[k]
		switch {
		case h.GetRevokeFrom() == s.index && !ok:
			for o, or := range s.revokes {
				if o.lock == k.lock && o.session == k.session && o.token == k.token && or.from != s.index {
					t.Fatalf("entry %d: %v revokes %v afresh; its sibling %v was revoked by %d", s.index, cmd, h, o, or.from)
				}
			}
			s.revokes[k] = revocationModel{from: s.index, rank: i}
			s.stats["revokes_started"]++
		case h.GetRevokeFrom() == s.index || r.from != h.GetRevokeFrom():
			t.Fatalf("entry %d: %v reports %v; the model has it revoked by %d (%v)", s.index, cmd, h, r.from, ok)
		}
	}
	if op := cmd.GetRevokeHold(); op != nil && res.GetError() == fsmpb.Error_ERROR_NONE {
		s.checkRevokedAll(cmd, op, res)
	}
	ended := res.GetLiveness().GetRevocationsEnded()
	if end := cmd.GetEndRevokedHold(); end != nil {
		want, n := s.endRevokedTarget(end)
		ok := n > 0
		if done := res.GetError() == fsmpb.Error_ERROR_NONE; done != ok {
			t.Fatalf("entry %d: %v applied %v; the model has the hold revoked: %v", s.index, cmd, done, ok)
		}
		if ok && (len(ended) != 1 || revokedHoldOf(ended[0]) != want) {
			t.Fatalf("entry %d: %v ended the revocations of %v; the model says of %v alone", s.index, cmd, ended, want)
		}
		if n > 1 {
			s.stats["end_revoked_of_siblings"]++
		}
		s.stats["end_revoked_"+res.GetError().String()]++
	}
	for _, h := range ended {
		k := revokedHoldOf(h)
		if _, ok := s.revokes[k]; !ok {
			t.Fatalf("entry %d: %v ended the revocation of %v, which the model does not have", s.index, cmd, k)
		}
		delete(s.revokes, k)
	}
	maps.DeleteFunc(s.revokes, func(k revokedHold, _ revocationModel) bool {
		return slices.Contains(res.GetSessionsEnded(), k.session)
	})
	got, want := map[revokedHold]uint64{}, map[revokedHold]uint64{}
	for _, name := range streamLocks {
		l, _ := s.m.Lock(name)
		for _, h := range l.GetHolders() {
			if h.GetRevokeFrom() != 0 {
				got[revokedHold{name, h.GetOwnerKey(), h.GetSessionId(), h.GetToken()}] = h.GetRevokeFrom()
			}
		}
	}
	for k, r := range s.revokes {
		want[k] = r.from
	}
	if !maps.Equal(got, want) {
		t.Fatalf("entry %d %v -> %v: holds being revoked %v, the model says %v", s.index, cmd, res, got, want)
	}
}
