package fsm

import (
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// checkSet checks an AcquireMany's answer. A first answer: with all,
// every lock granted or none; each lock granted is held in the mode the
// set gave it. The model keeps the first answer, to judge retries by
// (checkRetriedSet).
func (s *stream) checkSet(cmd *fsmpb.Command, res *fsmpb.Result, retry bool) {
	op := cmd.GetAcquireMany()
	if op == nil {
		return
	}
	outs := res.GetAcquireMany()
	id := waiterID{cmd.GetSessionId(), cmd.GetSeq()}
	if !retry {
		if _, ok := s.sets[id]; ok {
			s.t.Fatalf("entry %d: %v is not a retry, but the model has an answer for its seq", s.index, cmd)
		}
		s.sets[id] = outs
	} else if len(outs) > 0 {
		s.checkRetriedSet(cmd, outs, s.sets[id])
	}
	if len(outs) == 0 {
		return
	}
	granted := 0
	for i, o := range outs {
		if o.GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
			continue
		}
		granted++
		shared := op.GetShared()
		if modes := op.GetModes(); len(modes) > 0 {
			shared = modes[i].GetShared()
			s.stats["mixed_set_grants"]++
		}
		l, _ := s.m.Lock(o.GetLock())
		for _, h := range l.GetHolders() {
			if h.GetSessionId() == cmd.GetSessionId() && h.GetOwnerKey() == op.GetOwnerKey() &&
				h.GetToken() == o.GetToken() && h.GetShared() != shared {
				s.t.Fatalf("entry %d: %v granted %s shared=%v, the set asked shared=%v", s.index, cmd, o.GetLock(), h.GetShared(), shared)
			}
		}
	}
	// A retry's answer is judged against its first (checkRetriedSet): it
	// may have lost grants since, not gained any.
	if !retry && op.GetAll() && granted != 0 && granted != len(outs) {
		s.t.Fatalf("entry %d: all-or-nothing %v granted %d of %d locks: %v", s.index, cmd, granted, len(outs), outs)
	}
}

// checkRetriedSet checks the answer outs to a retried AcquireMany against
// first, the answer its first application gave: the same outcomes, but
// that a lock first GRANTED whose hold has ended since now reads BUSY,
// with no holder (holdEnded rewrites the cached answer so, the lock being
// no longer the caller's). So a retry of an all-or-nothing set may show
// some of its locks granted and not others, though its first answer
// granted all.
func (s *stream) checkRetriedSet(cmd *fsmpb.Command, outs, first []*fsmpb.AcquireOutcome) {
	t := s.t
	if len(outs) != len(first) {
		t.Fatalf("entry %d: retry %v answered %v; its first answer was %v", s.index, cmd, outs, first)
	}
	for i, o := range outs {
		f := first[i]
		if proto.Equal(o, f) {
			continue
		}
		ended := &fsmpb.AcquireOutcome{Lock: f.GetLock(), Status: fsmpb.AcquireStatus_ACQUIRE_STATUS_BUSY}
		if f.GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED || !proto.Equal(o, ended) {
			t.Fatalf("entry %d: retry %v answered %v about %s; its first answer was %v", s.index, cmd, o, f.GetLock(), f)
		}
		l, _ := s.m.Lock(f.GetLock())
		if slices.ContainsFunc(l.GetHolders(), func(h *fsmpb.Holder) bool {
			return h.GetSessionId() == cmd.GetSessionId() && h.GetOwnerKey() == cmd.GetAcquireMany().GetOwnerKey() &&
				h.GetToken() == f.GetToken()
		}) {
			t.Fatalf("entry %d: retry %v answered %s BUSY, but the hold its first answer granted (token %d) is still there",
				s.index, cmd, f.GetLock(), f.GetToken())
		}
		s.stats["retried_set_holds_ended"]++
	}
}
