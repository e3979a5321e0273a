//go:build unix

package baton

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton/embed/embedtest"
)

// BenchmarkCycle runs the own/64 workload of `baton bench` (each of 64
// workers locks and releases a lock of its own, one session each, one
// client) against a cluster in this process: one op is one cycle, so
// allocs/op and cpu-us/op (the process's CPU time per op) are the whole system's, client
// and members together, without the noise of separate processes.
//
//	go test -run '^$' -bench BenchmarkCycle -benchmem -cpuprofile cpu.out .
func BenchmarkCycle(b *testing.B) {
	for _, members := range []int{1, 3} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			c := embedtest.New(b, members)
			c.WaitLeader()
			cl := dial(b, c.Endpoints(0))
			// RunParallel starts parallelism x GOMAXPROCS goroutines: 64
			// on two cores, each with its own session and lock.
			parallelism := (64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
			workers := parallelism * runtime.GOMAXPROCS(0)
			sessions := make([]*Session, workers)
			for i := range sessions {
				sessions[i] = newSession(b, cl)
			}
			var next atomic.Int64
			var failed atomic.Pointer[error]
			b.SetParallelism(parallelism)
			b.ReportAllocs()
			cpu0 := processCPU(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := int(next.Add(1) - 1)
				m := sessions[w].Mutex(fmt.Sprintf("bench/%d", w))
				ctx := context.Background()
				for pb.Next() {
					l, err := m.Lock(ctx)
					if err == nil {
						err = l.Release(ctx)
					}
					if err != nil {
						failed.CompareAndSwap(nil, &err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
		})
	}
}

// processCPU is the CPU time, user and system, this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
