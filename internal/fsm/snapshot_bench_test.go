package fsm

import (
	"fmt"
	"testing"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// BenchmarkSnapshot encodes the state of benchMachine (n held locks, one
// cached result each, a full history): Snapshot on the applying
// goroutine, and frozen (Freeze, Encode, Thaw), as a member takes its
// snapshots. It reports the snapshot's size.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		m, _ := benchMachine(b, n)
		b.Run(fmt.Sprintf("snapshot/locks=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				snap, err := m.Snapshot()
				if err != nil {
					b.Fatal(err)
				}
				size = len(snap)
			}
			b.ReportMetric(float64(size), "bytes/snapshot")
		})
		b.Run(fmt.Sprintf("frozen/locks=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f := m.Freeze()
				f.Encode()
				m.Thaw(f)
			}
		})
	}
}

// BenchmarkApplyWhileFrozen is BenchmarkApply's acquire-release on locks
// that existed before the state was frozen: each cycle takes one of
// session 1's held locks again (reentrant) and releases that count, so it
// changes a lock and a session record that the frozen state shares. A
// new frozen state is taken every frozenEvery cycles (the last one
// encoded first, off the clock), and the cycles go through the held locks
// in a stride, so that every cycle changes a lock for the first time
// since the freeze, the expensive change, and session 1 once a freeze.
func BenchmarkApplyWhileFrozen(b *testing.B) {
	const frozenEvery = 1000
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("reenter-release/locks=%d", n), func(b *testing.B) {
			m, index := benchMachine(b, n)
			seq := uint64(n)
			f := m.Freeze()
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				if i%frozenEvery == frozenEvery-1 {
					b.StopTimer()
					f.Encode()
					m.Thaw(f)
					f = m.Freeze()
					b.StartTimer()
				}
				k := i * 7919 % n // spread over the held locks
				i++
				name := fmt.Sprintf("held/%d", k)
				index++
				seq++
				m.Apply(index, &fsmpb.Command{SessionId: 1, Seq: seq,
					Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: name}}})
				index++
				seq++
				res := m.Apply(index, &fsmpb.Command{SessionId: 1, Seq: seq,
					Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: name, Token: uint64(k + 3)}}})
				if res.GetRemainingCount() != 1 {
					b.Fatalf("release of %s: %v", name, res)
				}
			}
			f.Encode()
			m.Thaw(f)
		})
	}
}
