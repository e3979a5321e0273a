package fsm

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// The issue-5 scale point: 1,000,000 held locks and 100,000 sessions.
const scaleSessions, scaleLocks = 100_000, 1_000_000

// BenchmarkScale builds the issue-5 scale point with one unsequenced
// Acquire per lock (nothing cached), and reports what it costs: heap,
// snapshot size, and the time to snapshot and to restore (what a
// restarting member pays); then the time to freeze the state and to encode
// it while another goroutine applies, how many acquire and release cycles
// that one applied meanwhile, and its slowest cycle.
// Run it once: go test -run '^$' -bench BenchmarkScale -benchtime 1x ./internal/fsm
func BenchmarkScale(b *testing.B) {
	for b.Loop() {
		benchScale(b, func(m *Machine, idx uint64) uint64 {
			for i := range scaleLocks {
				idx++
				res := m.Apply(idx, &fsmpb.Command{SessionId: uint64(1 + i%scaleSessions), Op: &fsmpb.Command_Acquire{
					Acquire: &fsmpb.Acquire{Lock: fmt.Sprintf("inventory/row/%d", i)}}})
				if res.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
					b.Fatalf("acquire %d: %v", i, res)
				}
			}
			return idx
		})
	}
}

// BenchmarkScaleAcquireMany builds the same scale point the way the real
// load does: each session takes its 10 locks with ONE AcquireMany at seq 1
// that is never acknowledged, so every session keeps that result (10
// outcomes) in its exactly-once cache, and the cache's cost is measured.
func BenchmarkScaleAcquireMany(b *testing.B) {
	const perSession = scaleLocks / scaleSessions
	for b.Loop() {
		benchScale(b, func(m *Machine, idx uint64) uint64 {
			names := make([]string, perSession)
			for s := range scaleSessions {
				for j := range names {
					names[j] = fmt.Sprintf("inventory/row/%d", s*perSession+j)
				}
				idx++
				res := m.Apply(idx, &fsmpb.Command{SessionId: uint64(1 + s), Seq: 1, Op: &fsmpb.Command_AcquireMany{
					AcquireMany: &fsmpb.AcquireMany{Locks: names}}})
				if len(res.GetAcquireMany()) != perSession ||
					res.GetAcquireMany()[perSession-1].GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
					b.Fatalf("acquire_many of session %d: %v", s+1, res)
				}
			}
			return idx
		})
	}
}

// benchScale opens scaleSessions sessions, lets fill take the locks, and
// reports the heap the machine uses and the snapshot's size and times.
func benchScale(b *testing.B, fill func(m *Machine, idx uint64) uint64) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m := New()
	idx := uint64(0)
	for i := range scaleSessions {
		idx++
		m.Apply(idx, &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{
			TtlNanos: int64(10 * time.Second), Owner: fmt.Sprintf("host-%d/%d/worker", i%100, i)}}})
	}
	idx = fill(m, idx)
	if m.NumLocks() != scaleLocks {
		b.Fatalf("%d locks, want %d", m.NumLocks(), scaleLocks)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t0 := time.Now()
	data, err := m.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	snapTime := time.Since(t0)
	t1 := time.Now()
	if err := New().Restore(data); err != nil {
		b.Fatal(err)
	}
	restoreTime := time.Since(t1)

	// The same state frozen and encoded on another goroutine while this
	// one applies, as a member does: acquire and release cycles of the
	// sessions on locks of their own. The encoding must be the snapshot's.
	t2 := time.Now()
	f := m.Freeze()
	freezeTime := time.Since(t2)
	done := make(chan []byte)
	go func() { done <- f.Encode() }()
	var frozen []byte
	var cycles int
	var slowest time.Duration
	for frozen == nil {
		select {
		case frozen = <-done:
			continue
		default:
		}
		ta := time.Now()
		s := uint64(1 + cycles%scaleSessions)
		name := fmt.Sprintf("during/%d", cycles)
		idx++
		res := m.Apply(idx, &fsmpb.Command{SessionId: s, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: name}}})
		idx++
		m.Apply(idx, &fsmpb.Command{SessionId: s, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: name, Token: res.GetAcquire().GetToken()}}})
		slowest = max(slowest, time.Since(ta))
		cycles++
	}
	frozenTime := time.Since(t2)
	m.Thaw(f)
	if !bytes.Equal(frozen, data) {
		b.Fatalf("the frozen state encodes to %d bytes, its snapshot was %d", len(frozen), len(data))
	}
	runtime.KeepAlive(m)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(len(data))/(1<<20), "snapshot-MiB")
	b.ReportMetric(snapTime.Seconds(), "snapshot-s")
	b.ReportMetric(restoreTime.Seconds(), "restore-s")
	b.ReportMetric(freezeTime.Seconds()*1e6, "freeze-µs")
	b.ReportMetric(frozenTime.Seconds(), "frozen-encode-s")
	b.ReportMetric(float64(cycles), "cycles-while-encoding")
	b.ReportMetric(slowest.Seconds()*1e6, "slowest-cycle-µs")
}
