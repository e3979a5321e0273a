package fsm

import (
	"fmt"
	"testing"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// BenchmarkApply measures one Apply on a machine holding many locks.
//   - acquire-release: a session takes and frees lock i (two entries per
//     iteration), exactly-once cache on;
//   - handoff: a release that grants the lock to the next waiter, and the
//     new waiter that queues behind (two entries per iteration).
func BenchmarkApply(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("acquire-release/locks=%d", n), func(b *testing.B) {
			m, index := benchMachine(b, n)
			seq := uint64(n + 1)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				name := fmt.Sprintf("free/%d", i%1024)
				i++
				index++
				seq++
				res := m.Apply(index, &fsmpb.Command{SessionId: 1, Seq: seq,
					Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: name}}})
				tok := res.GetAcquire().GetToken()
				index++
				seq++
				m.Apply(index, &fsmpb.Command{SessionId: 1, Seq: seq,
					Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: name, Token: tok}}})
			}
		})
		b.Run(fmt.Sprintf("handoff/locks=%d", n), func(b *testing.B) {
			m, index := benchMachine(b, n)
			// Session 2 holds "hot" and queues behind itself under
			// alternating keys; each release hands over to the queued key.
			index++
			m.Apply(index, &fsmpb.Command{SessionId: 2, Seq: 1,
				Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "hot", OwnerKey: "0"}}})
			token := index
			seq := uint64(1)
			key := 0
			b.ReportAllocs()
			for b.Loop() {
				index++
				seq++
				m.Apply(index, &fsmpb.Command{SessionId: 2, Seq: seq,
					Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "hot", OwnerKey: fmt.Sprint(1 - key), Wait: true}}})
				index++
				seq++
				res := m.Apply(index, &fsmpb.Command{SessionId: 2, Seq: seq,
					Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "hot", OwnerKey: fmt.Sprint(key), Token: token}}})
				if len(res.GetGrants()) != 1 {
					b.Fatalf("release did not hand over: %v", res)
				}
				token = index
				key = 1 - key
			}
		})
	}
}

// benchMachine returns a machine at this release's log version with
// sessions 1 and 2 where session 1 holds n locks "held/i" (token i+3),
// and a history of ended holds at its bounds, as on a busy member
// (PastLocks locks of PastHoldsPerLock ends, of a third session); and
// the last index used.
func benchMachine(b *testing.B, n int) (*Machine, uint64) {
	m := New()
	m.SetLogVersion(LogVersion)
	m.Apply(1, &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "bench"}}})
	m.Apply(2, &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "bench"}}})
	index := uint64(2)
	apply := func(cmd *fsmpb.Command) *fsmpb.Result {
		index++
		res := m.Apply(index, cmd)
		if err := ErrorOf(res); err != nil {
			b.Fatal(err)
		}
		return res
	}
	for i := range n {
		apply(&fsmpb.Command{SessionId: 1, Seq: uint64(i + 1),
			Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: fmt.Sprintf("held/%d", i)}}})
	}
	past := apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "bench/past"}}}).GetSessionId()
	seq := uint64(0)
	for i := range PastLocks {
		name := fmt.Sprintf("past/%d", i)
		for range PastHoldsPerLock {
			seq++
			tok := apply(&fsmpb.Command{SessionId: past, Seq: seq, MinUnackedSeq: seq,
				Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: name}}}).GetAcquire().GetToken()
			seq++
			apply(&fsmpb.Command{SessionId: past, Seq: seq, MinUnackedSeq: seq,
				Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: name, Token: tok}}})
		}
	}
	return m, index
}

// BenchmarkWakeReaders is the apply of a writer's release that lets in a
// run of readers queued behind it, as many as a lock admits: each is
// checked against the holders so far (a key never holds twice), which
// must not make the entry quadratic in them.
func BenchmarkWakeReaders(b *testing.B) {
	for _, n := range []int{100, MaxWaitersPerLock} {
		b.Run(fmt.Sprintf("readers=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				m := New()
				idx := uint64(0)
				apply := func(c *fsmpb.Command) *fsmpb.Result { idx++; return m.Apply(idx, c) }
				open := func() uint64 {
					return apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{TtlNanos: int64(rules.DefaultTTL)}}}).GetSessionId()
				}
				w := open()
				tok := apply(&fsmpb.Command{SessionId: w, Seq: 1, MinUnackedSeq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
					Lock: "x", Limit: rules.MaxHoldersPerLock}}}).GetAcquire().GetToken()
				for range n {
					apply(&fsmpb.Command{SessionId: open(), Seq: 1, MinUnackedSeq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
						Lock: "x", Limit: rules.MaxHoldersPerLock, Shared: true, Wait: true}}})
				}
				release := &fsmpb.Command{SessionId: w, Seq: 2, MinUnackedSeq: 2, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "x", Token: tok}}}
				b.StartTimer()
				if res := apply(release); len(res.GetGrants()) != n {
					b.Fatalf("%d grants, want %d", len(res.GetGrants()), n)
				}
			}
		})
	}
}

// BenchmarkHandoffQueue is one handoff of a lock with n sessions queued
// on it, as a fleet contending for one lock makes: the holder's release
// grants the head, and the releaser queues again at the tail (two entries
// per iteration). The queued acquire's deadlock search reads every
// waiter ahead of it, which must keep the entry linear in them.
func BenchmarkHandoffQueue(b *testing.B) {
	for _, n := range []int{16, 256, 1024, 4000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			f := newFleet(b)
			sessions := make([]uint64, n+1)
			for i := range sessions {
				sessions[i] = f.open()
			}
			holder, token := sessions[0], f.acquire(sessions[0], "hot", "", true).GetToken()
			for _, s := range sessions[1:] {
				f.acquire(s, "hot", "", true)
			}
			f.ready()
			b.ReportAllocs()
			for b.Loop() {
				g := f.release(holder, "hot", "", token).GetGrants()
				if len(g) != 1 {
					b.Fatalf("release did not hand over: %v", g)
				}
				if f.acquire(holder, "hot", "", true).GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
					b.Fatal("the releaser's acquire did not queue")
				}
				holder, token = g[0].GetSessionId(), g[0].GetToken()
			}
		})
	}
}
