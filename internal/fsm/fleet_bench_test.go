package fsm

import (
	"fmt"
	"testing"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Benchmarks of one entry at fleet scale: long queues, many holders of
// one lock, sessions with many waits. Each builds its state untimed and
// times the one entry; every member applies it, on its Raft loop, so its
// cost must grow no faster than what the entry changes.

// fleet is a machine, and each session's last seq (every command
// acknowledges the ones before, so no session's cache fills). It is
// built below DeadlockVersion, so that queueing its waiters costs no
// deadlock search, and raised to this release's log version (ready)
// before the timed entry.
type fleet struct {
	b    *testing.B
	m    *Machine
	idx  uint64
	seqs map[uint64]uint64
}

func newFleet(b *testing.B) *fleet {
	m := New()
	m.SetLogVersion(DeadlockVersion - 1)
	return &fleet{b: b, m: m, seqs: make(map[uint64]uint64)}
}

// ready raises f to this release's log version and starts the timer.
func (f *fleet) ready() {
	f.m.SetLogVersion(LogVersion)
	f.b.StartTimer()
}

// apply applies c at the next index, failing on a refusal.
func (f *fleet) apply(c *fsmpb.Command) *fsmpb.Result {
	f.idx++
	res := f.m.Apply(f.idx, c)
	if err := ErrorOf(res); err != nil {
		f.b.Fatal(err)
	}
	return res
}

func (f *fleet) open() uint64 {
	return f.apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{TtlNanos: int64(rules.DefaultTTL)}}}).GetSessionId()
}

// cmd is a command of session s with its next seq.
func (f *fleet) cmd(s uint64, c *fsmpb.Command) *fsmpb.Command {
	f.seqs[s]++
	c.SessionId, c.Seq, c.MinUnackedSeq = s, f.seqs[s], f.seqs[s]
	return c
}

// acquire applies s's acquire of lock under key and returns its outcome.
func (f *fleet) acquire(s uint64, lock, key string, wait bool) *fsmpb.AcquireOutcome {
	return f.apply(f.cmd(s, &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: lock, OwnerKey: key, Wait: wait}}})).GetAcquire()
}

func (f *fleet) release(s uint64, lock, key string, token uint64) *fsmpb.Result {
	return f.apply(f.cmd(s, &fsmpb.Command{Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: lock, OwnerKey: key, Token: token}}}))
}

func (f *fleet) expire(s uint64) *fsmpb.Result {
	return f.apply(&fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: s}}})
}

// queueAndCancel raises f to this release's log version and times, in
// b.Loop, a new session's acquire of lock, which must queue; the wait is
// cancelled untimed after each, so that every one meets the same state.
func (f *fleet) queueAndCancel(lock string) {
	s := f.open()
	f.ready()
	for f.b.Loop() {
		if o := f.acquire(s, lock, "", true); o.GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
			f.b.Fatalf("acquire: %v", o)
		}
		f.b.StopTimer()
		f.apply(f.cmd(s, &fsmpb.Command{Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{Lock: lock, SessionId: s, AcquireSeq: f.seqs[s]}}}))
		f.b.StartTimer()
	}
}

// fleetSizes are the sizes the benchmarks below run at.
var fleetSizes = []int{16, 256, 1024, 4000}

// BenchmarkEndSessionWaits is the expiry of a session with n waits on one
// lock (n owner keys: goroutines of one process), queued among n waits
// of other sessions: its waiters leave the queue in one entry.
func BenchmarkEndSessionWaits(b *testing.B) {
	for _, n := range fleetSizes {
		b.Run(fmt.Sprintf("waits=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				f := newFleet(b)
				f.acquire(f.open(), "hot", "", false)
				s := f.open()
				for i := range n {
					f.acquire(f.open(), "hot", "", true)
					f.acquire(s, "hot", fmt.Sprint(i), true)
				}
				f.ready()
				if res := f.expire(s); len(res.GetWaitsEnded()) != n {
					b.Fatalf("%d waits ended, want %d", len(res.GetWaitsEnded()), n)
				}
			}
		})
	}
}

// BenchmarkEndSessionHoldsWaits is the expiry of a session that holds n
// locks and waits for n others (held by another session).
func BenchmarkEndSessionHoldsWaits(b *testing.B) {
	for _, n := range []int{16, 256, 1024, 10000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				f := newFleet(b)
				t, s := f.open(), f.open()
				for i := range n {
					f.acquire(t, fmt.Sprintf("w/%d", i), "", false)
					f.acquire(s, fmt.Sprintf("h/%d", i), "", false)
					f.acquire(s, fmt.Sprintf("w/%d", i), "", true)
				}
				f.ready()
				if res := f.expire(s); len(res.GetWaitsEnded()) != n {
					b.Fatalf("%d waits ended, want %d", len(res.GetWaitsEnded()), n)
				}
			}
		})
	}
}

// BenchmarkGrantReenter is a release of a semaphore with n permits, all
// held, and n sessions queued for one, whose head session waits for a
// second permit under the same key: the grant of the first re-enters the
// second (reenterWaits), which looks through the queue for it.
func BenchmarkGrantReenter(b *testing.B) {
	for _, n := range fleetSizes {
		b.Run(fmt.Sprintf("holders=waiters=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				f := newFleet(b)
				sem := func(s uint64, wait bool) *fsmpb.AcquireOutcome {
					return f.apply(f.cmd(s, &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
						Lock: "sem", Limit: uint32(n), Shared: true, Wait: wait}}})).GetAcquire()
				}
				h := f.open()
				tok := sem(h, false).GetToken()
				for range n - 1 {
					sem(f.open(), false)
				}
				head := f.open()
				sem(head, true)
				for range n {
					sem(f.open(), true)
				}
				sem(head, true)
				f.ready()
				res := f.apply(f.cmd(h, &fsmpb.Command{Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "sem", Token: tok}}}))
				if len(res.GetGrants()) != 2 {
					b.Fatalf("release: %v", res)
				}
			}
		})
	}
}

// BenchmarkWakeReadersStalled is BenchmarkWakeReaders where each reader
// also waits for a lock of its own, held by another session: each grant
// leaves a node waiting, for the entry to search once it is done.
func BenchmarkWakeReadersStalled(b *testing.B) {
	for _, n := range []int{16, 256, 1024, MaxWaitersPerLock} {
		b.Run(fmt.Sprintf("readers=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				f := newFleet(b)
				wide := func(s uint64, wait bool) *fsmpb.AcquireOutcome {
					return f.apply(f.cmd(s, &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
						Lock: "x", Limit: rules.MaxHoldersPerLock, Shared: true, Wait: wait}}})).GetAcquire()
				}
				w, t := f.open(), f.open()
				tok := f.apply(f.cmd(w, &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
					Lock: "x", Limit: rules.MaxHoldersPerLock}}})).GetAcquire().GetToken()
				for i := range n {
					r := f.open()
					wide(r, true)
					f.acquire(t, fmt.Sprintf("own/%d", i), "", false)
					f.acquire(r, fmt.Sprintf("own/%d", i), "", true)
				}
				release := f.cmd(w, &fsmpb.Command{Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "x", Token: tok}}})
				f.ready()
				if res := f.apply(release); len(res.GetGrants()) != n {
					b.Fatalf("%d grants, want %d", len(res.GetGrants()), n)
				}
			}
		})
	}
}

// BenchmarkCancelWaitQueue is a CancelWait of the waiter in the middle of
// a queue of n sessions, and (stalled) of one whose session waits on the
// lock at the tail of that queue too: the cancel leaves that node waiting,
// so the entry searches it for a deadlock (DeadlockAtGrantVersion).
func BenchmarkCancelWaitQueue(b *testing.B) {
	for _, stalled := range []bool{false, true} {
		for _, n := range fleetSizes {
			b.Run(fmt.Sprintf("stalled=%v/waiters=%d", stalled, n), func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					f := newFleet(b)
					f.acquire(f.open(), "hot", "", false)
					f.acquire(f.open(), "other", "", false)
					var c, seq uint64
					for i := range n {
						s := f.open()
						f.acquire(s, "hot", "", true)
						if i == n/2 {
							c, seq = s, f.seqs[s]
						}
					}
					lock := "hot"
					if stalled {
						c = f.open()
						f.acquire(c, "hot", "", true)
						f.acquire(c, "other", "", true)
						lock, seq = "other", f.seqs[c]
					}
					cancel := f.cmd(c, &fsmpb.Command{Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{
						Lock: "x", SessionId: c, AcquireSeq: seq}}})
					cancel.GetCancelWait().Lock = lock
					f.ready()
					if res := f.apply(cancel); len(res.GetWaitsEnded()) != 1 {
						b.Fatalf("cancel: %v", res)
					}
				}
			})
		}
	}
}

// BenchmarkReleaseStalled is the handoff of a lock with n sessions queued
// whose head also waits for another lock: the grant leaves that node
// waiting, so the entry searches it for a deadlock.
func BenchmarkReleaseStalled(b *testing.B) {
	for _, n := range fleetSizes {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				f := newFleet(b)
				h := f.open()
				tok := f.acquire(h, "hot", "", false).GetToken()
				f.acquire(f.open(), "other", "", false)
				head := f.open()
				f.acquire(head, "hot", "", true)
				for range n {
					f.acquire(f.open(), "other", "", true)
				}
				f.acquire(head, "other", "", true)
				f.ready()
				if res := f.release(h, "hot", "", tok); len(res.GetGrants()) != 1 {
					b.Fatalf("release: %v", res)
				}
			}
		})
	}
}

// BenchmarkWakeReadersQueued is BenchmarkWakeReadersStalled where the
// readers' other waits are all queued on one mutex, in the order they
// queued for the read lock: each grant leaves a node waiting in that
// long queue. With the mutex's holder waiting for nothing (idle) no node
// needs a search; with it waiting for a third lock (holder-waits) a
// search from each reads the queue ahead of it, and the entry runs
// MaxStalledSearches of them (below StalledSearchBoundVersion, one from
// each: seconds at 4,000).
func BenchmarkWakeReadersQueued(b *testing.B) {
	for _, holderWaits := range []bool{false, true} {
		for _, n := range []int{16, 256, 1024, 4000} {
			b.Run(fmt.Sprintf("holder-waits=%v/readers=%d", holderWaits, n), func(b *testing.B) {
				benchWakeReadersQueued(b, n, holderWaits)
			})
		}
	}
}

func benchWakeReadersQueued(b *testing.B, n int, holderWaits bool) {
	for b.Loop() {
		b.StopTimer()
		f := newFleet(b)
		w, t := f.open(), f.open()
		tok := f.apply(f.cmd(w, &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
			Lock: "x", Limit: rules.MaxHoldersPerLock}}})).GetAcquire().GetToken()
		f.acquire(t, "q", "", false)
		if holderWaits {
			f.acquire(f.open(), "z", "", false)
			f.acquire(t, "z", "", true)
		}
		for range n {
			r := f.open()
			f.apply(f.cmd(r, &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
				Lock: "x", Limit: rules.MaxHoldersPerLock, Shared: true, Wait: true}}}))
			f.acquire(r, "q", "", true)
		}
		release := f.cmd(w, &fsmpb.Command{Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "x", Token: tok}}})
		f.ready()
		if res := f.apply(release); len(res.GetGrants()) != n {
			b.Fatalf("%d grants, want %d", len(res.GetGrants()), n)
		}
	}
}

// BenchmarkQueueManyKeys is an acquire that queues behind n waits of its
// own session under other owner keys (a process whose goroutines each
// take the lock under a key of their own). With the holder's session
// waiting for nothing (idle) no search is needed; with it waiting for
// another lock (waiting), the acquire's deadlock search reads each of
// those nodes' waits.
func BenchmarkQueueManyKeys(b *testing.B) {
	for _, waiting := range []bool{false, true} {
		for _, n := range []int{16, 64, 256, 512} {
			b.Run(fmt.Sprintf("holder-waits=%v/keys=%d", waiting, n), func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					f := newFleet(b)
					h := f.open()
					f.acquire(h, "hot", "", false)
					if waiting {
						f.acquire(f.open(), "side", "", false)
						f.acquire(h, "side", "", true)
					}
					s := f.open()
					for i := range n {
						f.acquire(s, "hot", fmt.Sprint(i), true)
					}
					f.ready()
					if o := f.acquire(s, "hot", "last", true); o.GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
						b.Fatalf("acquire: %v", o)
					}
				}
			})
		}
	}
}

// BenchmarkSemaphoreHolders is one entry on a semaphore with n permits,
// all held by sessions of their own: the last holder's release, its
// reentrant acquire, and the expiry of its session; and (expire-waiter)
// the expiry of the session of the middle waiter of a mutex with n
// waiters.
func BenchmarkSemaphoreHolders(b *testing.B) {
	for _, op := range []string{"release", "reenter", "expire", "expire-waiter"} {
		for _, n := range []int{16, 256, 1024, 10000} {
			b.Run(fmt.Sprintf("%s/n=%d", op, n), func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					f := newFleet(b)
					acq := &fsmpb.Acquire{Lock: "sem", Limit: uint32(n), Shared: true}
					count := n
					if op == "expire-waiter" {
						acq, count = &fsmpb.Acquire{Lock: "sem", Wait: true}, n+1
					}
					sessions := make([]uint64, count)
					var tok uint64
					for i := range sessions {
						sessions[i] = f.open()
						tok = f.apply(f.cmd(sessions[i], &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: acq}})).GetAcquire().GetToken()
					}
					last := sessions[count-1]
					var cmd *fsmpb.Command
					switch op {
					case "release":
						cmd = f.cmd(last, &fsmpb.Command{Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "sem", Token: tok}}})
					case "reenter":
						cmd = f.cmd(last, &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: acq}})
					case "expire":
						cmd = &fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: last}}}
					case "expire-waiter":
						cmd = &fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: sessions[1+n/2]}}}
					}
					f.ready()
					f.apply(cmd)
				}
			})
		}
	}
}

// BenchmarkAcquireManyFleet is an AcquireMany of n locks by a session
// that holds n others: free locks (granted), or locks each held by
// another session (all or nothing: none granted).
func BenchmarkAcquireManyFleet(b *testing.B) {
	for _, busy := range []bool{false, true} {
		for _, n := range []int{16, 256, rules.MaxAcquireMany} {
			b.Run(fmt.Sprintf("busy=%v/locks=%d", busy, n), func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					f := newFleet(b)
					s, t := f.open(), f.open()
					names := make([]string, n)
					for i := range names {
						names[i] = fmt.Sprintf("set/%d", i)
						f.acquire(s, fmt.Sprintf("held/%d", i), "", false)
						if busy {
							f.acquire(t, names[i], "", false)
						}
					}
					cmd := f.cmd(s, &fsmpb.Command{Op: &fsmpb.Command_AcquireMany{AcquireMany: &fsmpb.AcquireMany{Locks: names, All: true}}})
					f.ready()
					f.apply(cmd)
				}
			})
		}
	}
}

// BenchmarkReenterMany is the release that grants a mutex to a node
// (session and key) that waits for it n times, its waits interleaved
// with those of n other sessions: the grant re-enters the node's other
// n-1 waits in the same entry (reenterWaits).
func BenchmarkReenterMany(b *testing.B) {
	for _, n := range fleetSizes {
		b.Run(fmt.Sprintf("waits=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				f := newFleet(b)
				h := f.open()
				tok := f.acquire(h, "hot", "", false).GetToken()
				s := f.open()
				for range n {
					f.acquire(s, "hot", "", true)
					f.acquire(f.open(), "hot", "", true)
				}
				f.ready()
				if res := f.release(h, "hot", "", tok); len(res.GetGrants()) != n {
					b.Fatalf("%d grants, want %d", len(res.GetGrants()), n)
				}
			}
		})
	}
}

// BenchmarkSearchOwnWaitsInLongQueues is an acquire that queues behind a
// holder whose owner key waits first in each of k queues, each with n
// other sessions' waiters behind it: the deadlock search reads the
// holder's k waits and finds each one's place.
func BenchmarkSearchOwnWaitsInLongQueues(b *testing.B) {
	for _, k := range []int{16, 64} {
		for _, n := range []int{1000, MaxWaitersPerLock - 1} {
			b.Run(fmt.Sprintf("waits=%d/queue=%d", k, n), func(b *testing.B) {
				b.StopTimer()
				f := newFleet(b)
				h, g := f.open(), f.open()
				f.acquire(h, "hot", "", false)
				for q := range k {
					f.acquire(g, fmt.Sprint("q", q), "", false)
					f.acquire(h, fmt.Sprint("q", q), "", true)
				}
				for range n {
					w := f.open()
					for q := range k {
						f.acquire(w, fmt.Sprint("q", q), "", true)
					}
				}
				f.queueAndCancel("hot")
			})
		}
	}
}

// BenchmarkSearchManyKeysSession is an acquire that queues behind a holder
// waiting for a lock held by a session whose key "" waits too, beside n
// waits of its other owner keys (MaxHoldsPerSession allows 100,000): the
// deadlock search reads the one node of that session it meets.
func BenchmarkSearchManyKeysSession(b *testing.B) {
	for _, n := range []int{16, 1000, 40000} {
		b.Run(fmt.Sprintf("waits=%d", n), func(b *testing.B) {
			b.StopTimer()
			f := newFleet(b)
			h, t, g := f.open(), f.open(), f.open()
			f.acquire(h, "hot", "", false)
			f.acquire(t, "a", "", false)
			f.acquire(g, "b", "", false)
			f.acquire(h, "a", "", true)
			f.acquire(t, "b", "", true)
			for i := range n {
				f.acquire(g, fmt.Sprint("w/", i%8), "", false)
				f.acquire(t, fmt.Sprint("w/", i%8), fmt.Sprint("k", i), true)
			}
			f.queueAndCancel("hot")
		})
	}
}

// BenchmarkGrantManyKeysSession is a release that grants the lock to a
// node of a session whose other owner keys wait n times elsewhere: the
// grant checks whether the node waits for the lock again (reenterWaits).
func BenchmarkGrantManyKeysSession(b *testing.B) {
	for _, n := range []int{16, 1000, 40000} {
		b.Run(fmt.Sprintf("waits=%d", n), func(b *testing.B) {
			b.StopTimer()
			f := newFleet(b)
			g, t, o := f.open(), f.open(), f.open()
			for i := range n {
				f.acquire(o, fmt.Sprint("w/", i%8), "", false)
				f.acquire(t, fmt.Sprint("w/", i%8), fmt.Sprint("k", i), true)
			}
			tok := f.acquire(g, "g", "", false).GetToken()
			f.acquire(t, "g", "", true)
			f.ready()
			for b.Loop() {
				res := f.release(g, "g", "", tok)
				b.StopTimer()
				if len(res.GetGrants()) != 1 {
					b.Fatalf("release: %v", res)
				}
				f.acquire(g, "g", "", true)
				tok = f.release(t, "g", "", res.GetGrants()[0].GetToken()).GetGrants()[0].GetToken()
				f.acquire(t, "g", "", true)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkRefuseBehindDeadlockedQueue is an acquire refused as
// deadlocked at the tail of a queue of n waiters, all deadlocked with it:
// the refusal names the shortest cycle, found breadth first through the
// waiters (cycle).
func BenchmarkRefuseBehindDeadlockedQueue(b *testing.B) {
	for _, n := range []int{16, 256, 1000, 4000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			b.StopTimer()
			f := newFleet(b)
			h, s := f.open(), f.open()
			f.acquire(h, "l", "", false)
			f.acquire(s, "m", "", false)
			for range n {
				f.acquire(f.open(), "l", "", true)
			}
			f.acquire(h, "m", "", true)
			f.ready()
			for b.Loop() {
				f.idx++
				res := f.m.Apply(f.idx, f.cmd(s, &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "l", Wait: true}}}))
				if res.GetError() != fsmpb.Error_ERROR_DEADLOCK {
					b.Fatalf("acquire: %v", res)
				}
			}
		})
	}
}
