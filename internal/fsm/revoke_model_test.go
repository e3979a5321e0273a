package fsm

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// revokedHold names a hold of the random stream: a lock, a session and a
// token.
type revokedHold struct {
	lock           string
	session, token uint64
}

// compareRevokedHolds orders holds by lock, session and token.
func compareRevokedHolds(a, b revokedHold) int {
	return cmp.Or(cmp.Compare(a.lock, b.lock), cmp.Compare(a.session, b.session), cmp.Compare(a.token, b.token))
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

// observeRevokes follows the revocations res reports started and ended,
// and checks them against the machine: a hold asked again keeps its
// first revocation; an EndRevokedHold ends only a hold being revoked;
// every hold being revoked after the entry is one the model has, and
// every revocation the model has is of a hold still there (its end, by
// any way, was reported).
func (s *stream) observeRevokes(cmd *fsmpb.Command, res *fsmpb.Result) {
	t := s.t
	for _, h := range res.GetHoldsRevoked() {
		k := revokedHold{h.GetLock(), h.GetSessionId(), h.GetToken()}
		from, ok := s.revokes[k]
		switch {
		case h.GetRevokeFrom() == s.index && !ok:
			s.revokes[k] = s.index
			s.stats["revokes_started"]++
		case h.GetRevokeFrom() == s.index || from != h.GetRevokeFrom():
			t.Fatalf("entry %d: %v reports %v; the model has it revoked by %d (%v)", s.index, cmd, h, from, ok)
		}
	}
	if end := cmd.GetEndRevokedHold(); end != nil {
		k := revokedHold{end.GetLock(), end.GetSessionId(), end.GetToken()}
		_, ok := s.revokes[k]
		if done := res.GetError() == fsmpb.Error_ERROR_NONE; done != ok {
			t.Fatalf("entry %d: %v applied %v; the model has the hold revoked: %v", s.index, cmd, done, ok)
		}
		s.stats["end_revoked_"+res.GetError().String()]++
	}
	for _, h := range res.GetLiveness().GetRevocationsEnded() {
		k := revokedHold{h.GetLock(), h.GetSessionId(), h.GetToken()}
		if _, ok := s.revokes[k]; !ok {
			t.Fatalf("entry %d: %v ended the revocation of %v, which the model does not have", s.index, cmd, k)
		}
		delete(s.revokes, k)
	}
	maps.DeleteFunc(s.revokes, func(k revokedHold, _ uint64) bool {
		for _, id := range res.GetSessionsEnded() {
			if k.session == id {
				return true
			}
		}
		return false
	})
	got := map[revokedHold]uint64{}
	for _, name := range streamLocks {
		l, _ := s.m.Lock(name)
		for _, h := range l.GetHolders() {
			if h.GetRevokeFrom() != 0 {
				got[revokedHold{name, h.GetSessionId(), h.GetToken()}] = h.GetRevokeFrom()
			}
		}
	}
	if !maps.Equal(got, s.revokes) {
		t.Fatalf("entry %d %v -> %v: holds being revoked %v, the model says %v", s.index, cmd, res, got, s.revokes)
	}
}
