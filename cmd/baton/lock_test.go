package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/embed/embedtest"
)

func TestKillGrace(t *testing.T) {
	for _, tt := range []struct {
		name      string
		grace     time.Duration
		set       bool
		lockDelay time.Duration
		want      time.Duration
	}{
		{"no lock-delay: the default", DefaultKillGrace, false, 0, DefaultKillGrace},
		{"no lock-delay: as given", time.Minute, true, 0, time.Minute},
		{"fits a short lock-delay", DefaultKillGrace, false, 4 * time.Second, 4*time.Second - baton.SafetyMargin(4*time.Second)},
		{"a long lock-delay: the default", DefaultKillGrace, false, time.Minute, DefaultKillGrace},
		{"as given, even if longer", 20 * time.Second, true, 4 * time.Second, 20 * time.Second},
		{"as given, shorter", time.Second, true, 4 * time.Second, time.Second},
	} {
		if got := killGrace("lock", tt.grace, tt.set, tt.lockDelay); got != tt.want {
			t.Errorf("%s: killGrace(%v, %v, %v) = %v, want %v", tt.name, tt.grace, tt.set, tt.lockDelay, got, tt.want)
		}
	}
	for _, d := range []time.Duration{time.Second, 4 * time.Second, 15 * time.Second, time.Minute} {
		if g := killGrace("lock", DefaultKillGrace, false, d); g+baton.SafetyMargin(d) > d {
			t.Errorf("lock-delay %v: default kill grace %v leaves less than the margin %v", d, g, baton.SafetyMargin(d))
		}
	}
}

// TestLockKillsBeforeLockDelayEnds: `baton lock` runs a command that
// ignores SIGTERM; its hold ends by its hold limit (--max-hold), so the
// server keeps the lock from everyone for its lock-delay. With the
// default kill grace, the command is SIGKILLed before that delay ends:
// when the next holder gets the lock, the command is dead. (With the old
// fixed grace of 10 s it ran on for seconds beside the next holder.)
func TestLockKillsBeforeLockDelayEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a member on real ports and runs a shell; runs without -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads the command's state in /proc")
	}
	c := embedtest.New(t, 1)
	c.WaitLeader()
	ep := c.Endpoints(0)
	const (
		lockDelay = 4 * time.Second
		maxHold   = 2 * time.Second
	)
	pidFile := filepath.Join(t.TempDir(), "pid")
	g := defaultGlobals()
	g.endpoints = ep
	exited := make(chan int, 1)
	go func() {
		exited <- runLock(g, []string{"--ttl", "60s", "--max-hold", maxHold.String(), "--lock-delay", lockDelay.String(),
			"jobs/stubborn", "--", "sh", "-c", `trap "" TERM; echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 60`, pidFile})
	}()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := baton.Dial(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s, err := cl.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	pid := waitPID(t, pidFile)
	next, err := s.Mutex("jobs/stubborn").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	if alive(pid) {
		t.Fatalf("the next holder got the lock (token %d) while the command that ignores SIGTERM still ran", next.Token())
	}
	select {
	case code := <-exited:
		if code != ExitLockLost {
			t.Fatalf("baton lock exited %d, want %d", code, ExitLockLost)
		}
	case <-ctx.Done():
		t.Fatal("baton lock did not return")
	}
	info, err := cl.Get(ctx, "jobs/stubborn")
	if err != nil || len(info.History) == 0 {
		t.Fatalf("get: %+v, %v", info, err)
	}
	if ended := info.History[0].Ended; granted.Sub(ended) < lockDelay-time.Second {
		t.Errorf("the next holder got the lock %v after the hold expired, want the lock-delay %v", granted.Sub(ended), lockDelay)
	}
}

// waitPID returns the pid the command wrote (bounded).
func waitPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid file %q: %v", b, err)
			}
			return pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the command never started")
	return 0
}

// alive reports whether process pid runs (a zombie, killed and not yet
// reaped, does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// TestDeadlockErrorIsOneLine: a lock refused as a deadlock is reported
// in one line naming the cycle, and fails with status 1.
func TestDeadlockErrorIsOneLine(t *testing.T) {
	err := &baton.DeadlockError{Cycle: []baton.DeadlockEdge{
		{SessionID: 7, Lock: "b", BlockerSessionID: 8, BlockerOwnerKey: "k"},
		{SessionID: 8, OwnerKey: "k", Lock: "a", BlockerSessionID: 7},
	}}
	var code int
	out := captureStderr(t, func() { code = exitCode("lock", err) })
	want := `baton lock: deadlock: session 7 waits for lock "b" held by session 8 key "k", session 8 key "k" waits for lock "a" held by session 7` + "\n"
	if out != want || code != 1 {
		t.Fatalf("exit %d, printed %q; want 1 and %q", code, out, want)
	}
}
