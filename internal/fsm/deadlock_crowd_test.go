package fsm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// TestDeadlockRandomCrowded is TestDeadlockRandom for a crowd: a few
// sessions with many owner keys each (goroutines sharing a session) on
// two locks, so that queues grow past longQueue waiters and sessions past
// manyWaits waits, where the search indexes a queue and keeps a session's
// found waits for its other nodes. The harness checks every queued wait
// and every refusal against refDeadlocked, and the test fails unless
// both of those shapes were searched. It runs at log version 14 and at
// this release's, where a node reads its own waits only (readOwnWaits)
// and finds their places in a long queue as it extends the queue's copy
// (placeOwn).
func TestDeadlockRandomCrowded(t *testing.T) {
	for _, v := range []uint32{DeadlockAtGrantVersion, LogVersion} {
		t.Run(fmt.Sprint("v", v), func(t *testing.T) { testDeadlockRandomCrowded(t, v) })
	}
}

func testDeadlockRandomCrowded(t *testing.T, version uint32) {
	const crowdWaits = 56
	seeds := 8
	if testing.Short() {
		seeds = 4
	}
	keys := []string{"", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}
	var behindLong, fromMany int
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0xc40d))
			sessions := 3 + r.IntN(4)
			h := newDLHarnessAt(t, sessions, version)
			for range 2500 {
				s := uint64(1 + r.IntN(sessions))
				key := keys[r.IntN(len(keys))]
				name := fmt.Sprintf("l%d", r.IntN(2))
				if r.IntN(3) > 0 {
					pre := h.m.Locks("", "", 0)
					queue, waits, total := 0, 0, 0
					waiting := map[uint64]bool{}
					for _, l := range pre {
						total += len(l.GetWaiters())
						for _, w := range l.GetWaiters() {
							waiting[w.GetSessionId()] = true
							if w.GetSessionId() == s {
								waits++
							}
						}
						if l.GetName() == name {
							queue = len(l.GetWaiters())
						}
					}
					// The machine searches only when a holder's session
					// waits (holdersWaitForNothing).
					searched := false
					for _, l := range pre {
						if l.GetName() == name {
							searched = slices.ContainsFunc(l.GetHolders(), func(x *fsmpb.Holder) bool { return waiting[x.GetSessionId()] })
						}
					}
					// At most crowdWaits waits in all: each node of a
					// session reads all of its session's waits, and past
					// MaxDeadlockSearch looked at a search gives up (the
					// wait queues), which the reference does not model.
					res := h.acquire(s, key, name, 1, false, r.IntN(8) > 0 && total < crowdWaits)
					decided := res.GetError() == fsmpb.Error_ERROR_DEADLOCK || res.GetAcquire().GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED
					if searched && decided {
						if queue >= longQueue {
							behindLong++
						}
						if waits >= manyWaits {
							fromMany++
						}
					}
					continue
				}
				h.releaseOne(r, s)
			}
		})
	}
	t.Logf("searched waits (queued or refused, each checked) behind a queue of %d or more: %d; of a session with %d waits or more: %d", longQueue, behindLong, manyWaits, fromMany)
	if behindLong == 0 || fromMany == 0 {
		t.Fatal("no search behind a long queue, or of a session with many waits: the test does not reach what it is for")
	}
}
