package fsm

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// BenchmarkScale builds the issue-5 scale point, 1,000,000 held locks and
// 100,000 sessions, and reports what it costs: heap, snapshot size, and
// the time to snapshot and to restore (what a restarting member pays).
// Run it once: go test -run '^$' -bench BenchmarkScale -benchtime 1x ./internal/fsm
func BenchmarkScale(b *testing.B) {
	const sessions, locks = 100_000, 1_000_000
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m := New()
		idx := uint64(0)
		for i := range sessions {
			idx++
			m.Apply(idx, &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{
				TtlNanos: int64(10 * time.Second), Owner: fmt.Sprintf("host-%d/%d/worker", i%100, i)}}})
		}
		for i := range locks {
			idx++
			res := m.Apply(idx, &fsmpb.Command{SessionId: uint64(1 + i%sessions), Op: &fsmpb.Command_Acquire{
				Acquire: &fsmpb.Acquire{Lock: fmt.Sprintf("inventory/row/%d", i)}}})
			if res.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
				b.Fatalf("acquire %d: %v", i, res)
			}
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
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(len(data))/(1<<20), "snapshot-MiB")
		b.ReportMetric(snapTime.Seconds(), "snapshot-s")
		b.ReportMetric(restoreTime.Seconds(), "restore-s")
	}
}
