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

// TestLockForwardsRevoke: `baton lock` forwards a revoke of its hold to
// the command as SIGTERM, for a single lock and for any lock of a set,
// and `baton elect` does for the leader's hold; the command sees it,
// exits, and every hold is released within the grace (the leader ends
// nothing).
func TestLockForwardsRevoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a member on real ports and runs a shell; runs without -short")
	}
	c := embedtest.New(t, 1)
	c.WaitLeader()
	ep := c.Endpoints(0)
	const script = `trap 'echo term > "$0.got"; exit 0' TERM; echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; sleep 60 & wait`
	for _, tt := range []struct {
		name    string
		run     func(globals, []string) int
		args    []string // before -- CMD
		revoke  string   // the lock revoked
		holding []string // every lock held
	}{
		{"lock", runLock, []string{"--ttl", "60s", "jobs/revoked"}, "jobs/revoked", []string{"jobs/revoked"}},
		{"a set, its second lock", runLock, []string{"--ttl", "60s", "jobs/set-a", "jobs/set-b"}, "jobs/set-b", []string{"jobs/set-a", "jobs/set-b"}},
		{"elect", runElect, []string{"--ttl", "60s", "jobs/leader", "10.0.0.7:8080"}, "jobs/leader", []string{"jobs/leader"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			g := defaultGlobals()
			g.endpoints = ep
			exited := make(chan int, 1)
			go func() {
				exited <- tt.run(g, append(append([]string{}, tt.args...), "--", "sh", "-c", script, pidFile))
			}()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cl, err := baton.Dial(ctx, ep)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			waitPID(t, pidFile)
			const grace = 30 * time.Second
			revs, err := cl.RevokeLock(ctx, tt.revoke, baton.WithGrace(grace))
			if err != nil || len(revs) != 1 {
				t.Fatalf("revoke: %+v, %v", revs, err)
			}
			select {
			case code := <-exited:
				if code != 0 {
					t.Fatalf("baton %s exited %d, want the command's 0", tt.name, code)
				}
			case <-ctx.Done():
				t.Fatalf("baton %s did not return", tt.name)
			}
			got, err := os.ReadFile(pidFile + ".got")
			if err != nil || strings.TrimSpace(string(got)) != "term" {
				t.Fatalf("the command's trap file: %q, %v; want it to have seen SIGTERM", got, err)
			}
			for _, name := range tt.holding {
				info, err := cl.Get(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				if len(info.Holders) != 0 || len(info.History) == 0 || info.History[0].How != "released" ||
					name == tt.revoke && info.History[0].Token != revs[0].Token {
					t.Fatalf("%s after the command exited: holders %+v, history %+v; want the hold released", name, info.Holders, info.History)
				}
			}
		})
	}
}
