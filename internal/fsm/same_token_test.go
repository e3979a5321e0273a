package fsm

import (
	"fmt"
	"slices"
	"testing"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// sameTokenHolds applies, at log version v, what gives session 1 two
// read holds of "rw" under owner keys a and b that share a token: both
// wait behind session 2's write hold, and its release grants both. It
// returns the machine, the next index and the shared token. Session 1's
// commands keep every answer cached (min unacked 1).
func sameTokenHolds(t *testing.T, v uint32) (*Machine, uint64, uint64) {
	t.Helper()
	m := New()
	m.SetLogVersion(v)
	index := uint64(0)
	apply := func(cmd *fsmpb.Command) *fsmpb.Result {
		index++
		res := m.Apply(index, cmd)
		if res.GetError() != fsmpb.Error_ERROR_NONE {
			t.Fatalf("%v: %v", cmd, res)
		}
		return res
	}
	apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "o1", TtlNanos: 10e9}}})
	apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "o2", TtlNanos: 10e9}}})
	w := apply(&fsmpb.Command{SessionId: 2, Seq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "rw", Limit: 4}}})
	for i, key := range []string{"a", "b"} {
		apply(&fsmpb.Command{SessionId: 1, Seq: uint64(i + 1), MinUnackedSeq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
			Lock: "rw", OwnerKey: key, Limit: 4, Shared: true, Wait: true,
			HoldLimitNanos: []int64{0, 30e9}[i]}}})
	}
	res := apply(&fsmpb.Command{SessionId: 2, Seq: 2, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "rw", Token: w.GetAcquire().GetToken()}}})
	if len(res.GetGrants()) != 2 {
		t.Fatalf("the release granted %v, want both of session 1's reads", res.GetGrants())
	}
	return m, index, index
}

// TestHoldEndRewritesOnlyItsOwnAnswers: when session 1's hold under key
// a ends, the cached answer of its acquire becomes NOT_HOLDER; from
// SameTokenHoldsVersion the answer of key b's acquire, a hold with the
// same token that has not ended, stays GRANTED; below it, it was
// rewritten too (answers were matched by lock and token alone).
func TestHoldEndRewritesOnlyItsOwnAnswers(t *testing.T) {
	for _, v := range []uint32{SameTokenHoldsVersion - 1, SameTokenHoldsVersion} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			m, index, token := sameTokenHolds(t, v)
			index++
			if res := m.Apply(index, &fsmpb.Command{SessionId: 1, Seq: 3, MinUnackedSeq: 1, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{
				Lock: "rw", OwnerKey: "a", Token: token}}}); res.GetError() != fsmpb.Error_ERROR_NONE {
				t.Fatalf("release of key a: %v", res)
			}
			retry := func(seq uint64, key string) *fsmpb.Result {
				index++
				return m.Apply(index, &fsmpb.Command{SessionId: 1, Seq: seq, MinUnackedSeq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
					Lock: "rw", OwnerKey: key, Limit: 4, Shared: true, Wait: true}}})
			}
			if res := retry(1, "a"); res.GetError() != fsmpb.Error_ERROR_NOT_HOLDER {
				t.Fatalf("retry of key a's acquire, whose hold ended: %v, want NOT_HOLDER", res)
			}
			res := retry(2, "b")
			granted := res.GetAcquire().GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED && res.GetAcquire().GetToken() == token
			if granted != (v >= SameTokenHoldsVersion) {
				t.Fatalf("at version %d the retry of key b's acquire, whose hold stands, answered %v", v, res)
			}
		})
	}
}

// TestExpireHoldOfSameTokenHolds: session 1's reads under key a (no hold
// limit) and key b (a limit) share a token. Below SameTokenHoldsVersion
// the leader's ExpireHold names the first, which has no limit, and is
// refused: b is never expired by its limit. From it, without a key it
// expires b, the first with a limit; naming a key, exactly that hold
// (a's is refused, having no limit); ForLogVersion leaves the key out
// below the version.
func TestExpireHoldOfSameTokenHolds(t *testing.T) {
	expire := func(m *Machine, index, token uint64, key *string) *fsmpb.Result {
		return m.Apply(index, &fsmpb.Command{Op: &fsmpb.Command_ExpireHold{ExpireHold: &fsmpb.ExpireHold{
			Lock: "rw", SessionId: 1, Token: token, OwnerKey: key}}})
	}
	ended := func(res *fsmpb.Result) string {
		if len(res.GetHoldsEnded()) != 1 {
			return ""
		}
		return res.GetHoldsEnded()[0].GetOwnerKey()
	}
	a, b := "a", "b"
	t.Run("13", func(t *testing.T) {
		m, index, token := sameTokenHolds(t, SameTokenHoldsVersion-1)
		if res := expire(m, index+1, token, nil); res.GetError() != fsmpb.Error_ERROR_INVALID_ARGUMENT {
			t.Fatalf("below %d: %v, want the refusal for key a's hold", SameTokenHoldsVersion, res)
		}
	})
	t.Run("14/no-key", func(t *testing.T) {
		m, index, token := sameTokenHolds(t, SameTokenHoldsVersion)
		if res := expire(m, index+1, token, nil); ended(res) != "b" {
			t.Fatalf("%v, want key b's hold ended", res)
		}
	})
	t.Run("14/key", func(t *testing.T) {
		m, index, token := sameTokenHolds(t, SameTokenHoldsVersion)
		if res := expire(m, index+1, token, &a); res.GetError() != fsmpb.Error_ERROR_INVALID_ARGUMENT {
			t.Fatalf("naming key a: %v, want refused (no hold limit)", res)
		}
		if res := expire(m, index+2, token, &b); ended(res) != "b" {
			t.Fatalf("naming key b: %v, want its hold ended", res)
		}
		if res := expire(m, index+3, token, &b); res.GetError() != fsmpb.Error_ERROR_NOT_HOLDER {
			t.Fatalf("naming key b again: %v, want NOT_HOLDER", res)
		}
	})
	t.Run("ForLogVersion", func(t *testing.T) {
		cmd := &fsmpb.Command{Op: &fsmpb.Command_ExpireHold{ExpireHold: &fsmpb.ExpireHold{Lock: "rw", SessionId: 1, Token: 5, OwnerKey: &b}}}
		if got := VersionNeeded(cmd); got != SameTokenHoldsVersion {
			t.Fatalf("VersionNeeded = %d", got)
		}
		if err := ForLogVersion(cmd, SameTokenHoldsVersion-1); err != nil || cmd.GetExpireHold().OwnerKey != nil {
			t.Fatalf("ForLogVersion below %d: %v, owner key %v; want it left out", SameTokenHoldsVersion, err, cmd.GetExpireHold().OwnerKey)
		}
	})
}

// checkRetriedKeyed checks a retry of a command first applied at
// SameTokenHoldsVersion or above, whose answer keeps its owner key: a
// GRANTED answer names a hold of that key, and an Acquire answered
// NOT_HOLDER (its hold ended) did not make a hold that stands: the end
// of another key's hold with the same token rewrote no answer of it.
func (s *stream) checkRetriedKeyed(cmd *fsmpb.Command, res *fsmpb.Result) {
	key := cmd.GetAcquire().GetOwnerKey() + cmd.GetAcquireMany().GetOwnerKey()
	outs := res.GetAcquireMany()
	if a := res.GetAcquire(); a != nil {
		outs = append(outs, a)
	}
	for _, o := range outs {
		if o.GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
			continue
		}
		l, _ := s.m.Lock(o.GetLock())
		if !slices.ContainsFunc(l.GetHolders(), func(h *fsmpb.Holder) bool {
			return h.GetSessionId() == cmd.GetSessionId() && h.GetOwnerKey() == key && h.GetToken() == o.GetToken()
		}) {
			s.t.Fatalf("entry %d: retry %v answered %s GRANTED with token %d, but session %d key %q does not hold it so: %v",
				s.index, cmd, o.GetLock(), o.GetToken(), cmd.GetSessionId(), key, l.GetHolders())
		}
	}
	if a := cmd.GetAcquire(); a != nil && res.GetError() == fsmpb.Error_ERROR_NOT_HOLDER {
		l, _ := s.m.Lock(a.GetLock())
		for _, h := range l.GetHolders() {
			if h.GetSessionId() == cmd.GetSessionId() && h.GetOwnerKey() == key && h.GetAcquireSeq() == cmd.GetSeq() {
				s.t.Fatalf("entry %d: retry %v answered NOT_HOLDER, but the hold it made stands: %v", s.index, cmd, h)
			}
		}
		s.stats["retried_ended_keyed"]++
	}
}
