package e2e

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lockProc is one running `baton lock` whose command prints lines we read.
type lockProc struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *strings.Builder
	done   chan error
}

func startLock(t *testing.T, endpoints string, args ...string) *lockProc {
	t.Helper()
	return startBaton(t, append([]string{"lock", "--endpoints", endpoints}, args...)...)
}

// startBaton runs baton with args (a command that runs another: lock,
// elect) and reads what that command prints.
func startBaton(t *testing.T, args ...string) *lockProc {
	t.Helper()
	cmd := exec.Command(batonBinary(t), args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &lockProc{cmd: cmd, lines: make(chan string, 16), stderr: &strings.Builder{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	return p
}

// line waits for the next line the command printed.
func (p *lockProc) line(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatalf("baton lock ended without output; stderr: %s", p.stderr)
		}
		return l
	case <-time.After(within):
		t.Fatalf("no output within %s; stderr: %s", within, p.stderr)
	}
	return ""
}

func (p *lockProc) exit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(within):
		t.Fatalf("baton lock still running after %s; stderr: %s", within, p.stderr)
	}
	return -1
}

// threeMembers starts a 3-member cluster of baton processes and returns
// it with its Raft leader and the leader's client address.
func threeMembers(ctx context.Context, t *testing.T) (*cluster, *node, string) {
	t.Helper()
	skipShort(t)
	addrs := freeLoopbackAddrs(t, 6)
	c := newCluster(t, clusterConfig{n: 3, clientAddrs: addrs[:3], peerAddrs: addrs[3:]})
	c.start(ctx)
	leaderAddr := ""
	for deadline := time.Now().Add(30 * time.Second); leaderAddr == "" && time.Now().Before(deadline); {
		if st, err := c.nodes[0].status(ctx); err == nil && st.LeaderAddr != "" {
			leaderAddr = st.LeaderAddr
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	leader := c.byClientAddr(leaderAddr)
	if leader == nil {
		t.Fatalf("no leader within 30s (last: %q)", leaderAddr)
	}
	return c, leader, leaderAddr
}

func singleNode(t *testing.T) string {
	t.Helper()
	skipShort(t)
	addrs := freeLoopbackAddrs(t, 2)
	c := newCluster(t, clusterConfig{n: 1, clientAddrs: addrs[:1], peerAddrs: addrs[1:]})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.start(ctx)
	return strings.Join(c.endpoints(), ",")
}

// holdScript prints the lock's token and its own pid, then sleeps; its
// process group is killed at cleanup.
const holdScript = `echo "$BATON_TOKEN $$ $BATON_LOCK $BATON_SESSION"; exec sleep 60`

func TestCLILockBusyAndSIGTERM(t *testing.T) {
	ep := singleNode(t)
	holder := startLock(t, ep, "--no-wait", "--owner", "first-holder", "job", "--", "sh", "-c", holdScript)
	fields := strings.Fields(holder.line(t, 20*time.Second))
	if len(fields) != 4 || fields[2] != "job" || fields[0] == "" || fields[3] == "" {
		t.Fatalf("command environment: %q", fields)
	}
	pgid, _ := strconv.Atoi(fields[1])
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })

	second := startLock(t, ep, "--no-wait", "job", "--", "true")
	if code := second.exit(t, 20*time.Second); code != 75 {
		t.Fatalf("second lock exited %d, want 75; stderr: %s", code, second.stderr)
	}
	if !strings.Contains(second.stderr.String(), "first-holder") {
		t.Fatalf("second lock does not name the holder: %s", second.stderr)
	}

	// SIGTERM goes to the command's group; baton releases as it exits.
	if err := holder.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := holder.exit(t, 20*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("holder exited %d, want %d (its command's SIGTERM); stderr: %s", code, 128+int(syscall.SIGTERM), holder.stderr)
	}
	third := startLock(t, ep, "--no-wait", "job", "--", "sh", "-c", "exit 3")
	if code := third.exit(t, 20*time.Second); code != 3 {
		t.Fatalf("lock right after SIGTERM exited %d, want the command's 3 (released at once); stderr: %s", code, third.stderr)
	}
}

func TestCLIKill9PassesLockAfterTTL(t *testing.T) {
	ep := singleNode(t)
	const ttl = 2 * time.Second
	first := startLock(t, ep, "--ttl", ttl.String(), "job", "--", "sh", "-c", holdScript)
	fields := strings.Fields(first.line(t, 20*time.Second))
	token1, _ := strconv.ParseUint(fields[0], 10, 64)
	pgid, _ := strconv.Atoi(fields[1])
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })

	waiter := startLock(t, ep, "--wait", "30s", "job", "--", "sh", "-c", `echo "$BATON_TOKEN"`)
	// Give the waiter time to queue behind the holder before the kill; the
	// measurement below only needs the kill instant.
	waitQueued(t, ep, "job")
	killed := time.Now()
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := waiter.line(t, 30*time.Second)
	after := time.Since(killed)
	token2, _ := strconv.ParseUint(got, 10, 64)
	t.Logf("waiter got the lock %v after kill -9 of the holder (ttl %v)", after, ttl)
	if token2 <= token1 {
		t.Fatalf("token %d after handoff, want > %d", token2, token1)
	}
	if after > ttl+5*time.Second {
		t.Fatalf("handoff took %v, want within ttl %v plus a few seconds", after, ttl)
	}
	if code := waiter.exit(t, 20*time.Second); code != 0 {
		t.Fatalf("waiter exited %d; stderr: %s", code, waiter.stderr)
	}
}

// waitQueued polls `baton get` until name has a waiter (bounded).
func waitQueued(t *testing.T, ep, name string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		out, _ := exec.Command(batonBinary(t), "get", "--endpoints", ep, name).Output()
		if strings.Contains(string(out), "1. waiting") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never had a waiter", name)
}

// TestCLICasReleaseStopsTheHolder: an operator's `baton release` (a
// CasRelease) of a hold whose `baton lock` still runs reaches that client
// at once: it stops the command and exits 76 (lock lost), instead of
// letting it run on believing it holds the lock.
func TestCLICasReleaseStopsTheHolder(t *testing.T) {
	ep := singleNode(t)
	holder := startLock(t, ep, "--kill-grace", "5s", "job", "--", "sh", "-c", holdScript)
	fields := strings.Fields(holder.line(t, 20*time.Second))
	if len(fields) != 4 {
		t.Fatalf("command environment: %q", fields)
	}
	pgid, _ := strconv.Atoi(fields[1])
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })

	out, err := exec.Command(batonBinary(t), "release", "--endpoints", ep, "job",
		"--session", fields[3], "--token", fields[0]).CombinedOutput()
	if err != nil {
		t.Fatalf("baton release: %v: %s", err, out)
	}
	if code := holder.exit(t, 20*time.Second); code != 76 {
		t.Fatalf("holder exited %d after the CasRelease, want 76; stderr: %s", code, holder.stderr)
	}
	if !strings.Contains(holder.stderr.String(), "CasRelease") {
		t.Fatalf("holder does not say why the lock was lost: %s", holder.stderr)
	}
	// The lock's history says who held it and how that ended.
	out, err = exec.Command(batonBinary(t), "get", "--endpoints", ep, "job").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "recently") || !strings.Contains(string(out), "token "+fields[0]+": held") ||
		!strings.Contains(string(out), "cas-released") {
		t.Fatalf("baton get after the CasRelease: %v: %s", err, out)
	}
	// baton history: a header, then one line per ended hold.
	out, err = exec.Command(batonBinary(t), "history", "--endpoints", ep, "job").Output()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) != 2 || !strings.HasPrefix(lines[0], "TOKEN") {
		t.Fatalf("baton history job: %v: %s", err, out)
	}
	row := strings.Fields(lines[1])
	// TOKEN SESSION OWNER OWNER-KEY MODE SINCE ENDED HOW ENDED-INDEX VALUE
	if len(row) != 10 || row[0] != fields[0] || row[1] != fields[3] || row[3] != "-" || row[4] != "exclusive" ||
		row[7] != "cas-released" || row[9] != "-" {
		t.Fatalf("baton history job: %q, want token %s of session %s, cas-released", lines[1], fields[0], fields[3])
	}
	out, err = exec.Command(batonBinary(t), "history", "--endpoints", ep, "--json", "job").Output()
	if err != nil || !strings.Contains(string(out), `"Replicated": true`) || !strings.Contains(string(out), `"How": "cas-released"`) {
		t.Fatalf("baton history --json job: %v: %s", err, out)
	}
}

// TestCLISemaphoreAndReadWrite: `baton lock --permits 2` lets two commands
// run at once and turns the third away; `--read` holders share a lock
// that `--write` is refused, and bad combinations are usage errors.
func TestCLISemaphoreAndReadWrite(t *testing.T) {
	ep := singleNode(t)
	for i := range 2 {
		p := startLock(t, ep, "--no-wait", "--permits", "2", "pool", "--", "sh", "-c", holdScript)
		fields := strings.Fields(p.line(t, 20*time.Second))
		pgid, _ := strconv.Atoi(fields[1])
		t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
		t.Logf("permit %d: token %s", i+1, fields[0])
	}
	third := startLock(t, ep, "--no-wait", "--permits", "2", "pool", "--", "true")
	if code := third.exit(t, 20*time.Second); code != 75 {
		t.Fatalf("third permit of two exited %d, want 75; stderr: %s", code, third.stderr)
	}
	wrong := startLock(t, ep, "--no-wait", "--permits", "3", "pool", "--", "true")
	if code := wrong.exit(t, 20*time.Second); code == 0 || code == 75 || !strings.Contains(wrong.stderr.String(), "admits 2 holders") {
		t.Fatalf("a semaphore of 3 on one of 2 exited %d; stderr: %s", code, wrong.stderr)
	}
	out, err := exec.Command(batonBinary(t), "locks", "--endpoints", ep).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "2/2") {
		t.Fatalf("baton locks: %v\n%s", err, out)
	}

	reader := startLock(t, ep, "--no-wait", "--read", "doc", "--", "sh", "-c", holdScript)
	fields := strings.Fields(reader.line(t, 20*time.Second))
	pgid, _ := strconv.Atoi(fields[1])
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	second := startLock(t, ep, "--no-wait", "--read", "doc", "--", "sh", "-c", "exit 4")
	if code := second.exit(t, 20*time.Second); code != 4 {
		t.Fatalf("a second reader exited %d, want its command's 4; stderr: %s", code, second.stderr)
	}
	writer := startLock(t, ep, "--no-wait", "--write", "doc", "--", "true")
	if code := writer.exit(t, 20*time.Second); code != 75 {
		t.Fatalf("a writer beside a reader exited %d, want 75; stderr: %s", code, writer.stderr)
	}

	for _, args := range [][]string{
		{"--read", "--write"},
		{"--permits", "2", "--read"},
		{"--permits", "0"},
		{"--max-readers", "5"},
	} {
		bad := startLock(t, ep, append(args, "x", "--", "true")...)
		if code := bad.exit(t, 20*time.Second); code != 2 {
			t.Fatalf("baton lock %v exited %d, want 2 (usage); stderr: %s", args, code, bad.stderr)
		}
	}
}

// TestCLIWatch: `baton watch` prints the lock's state at once, then a line
// for each change, and ends cleanly on SIGINT.
func TestCLIWatch(t *testing.T) {
	ep := singleNode(t)
	cmd := exec.Command(batonBinary(t), "watch", "--endpoints", ep, "leader/jobs")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(want string) string {
		t.Helper()
		select {
		case l := <-lines:
			if !strings.Contains(l, want) {
				t.Fatalf("baton watch printed %q, want %q; stderr: %s", l, want, stderr.String())
			}
			return l
		case <-time.After(20 * time.Second):
			t.Fatalf("baton watch printed nothing with %q within 20s; stderr: %s", want, stderr.String())
		}
		return ""
	}
	next("leader/jobs free")
	holder := startLock(t, ep, "--owner", "campaigner", "leader/jobs", "--", "sh", "-c", "echo $BATON_TOKEN; sleep 0.2")
	token := holder.line(t, 20*time.Second)
	next("held by campaigner (session")
	if code := holder.exit(t, 20*time.Second); code != 0 {
		t.Fatalf("baton lock exited %d; stderr: %s", code, holder.stderr)
	}
	next("leader/jobs free")
	t.Logf("holder's token %s", token)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("baton watch after SIGINT: %v; stderr: %s", err, stderr.String())
	}
}

// TestCLIMaxHold: `baton lock --max-hold` stops a command that holds the
// lock too long, although baton's heartbeats go on, exits 76, and the
// server hands the lock to the next waiter.
func TestCLIMaxHold(t *testing.T) {
	ep := singleNode(t)
	holder := startLock(t, ep, "--max-hold", "1s", "--kill-grace", "1s", "job", "--", "sh", "-c", holdScript)
	fields := strings.Fields(holder.line(t, 20*time.Second))
	pgid, _ := strconv.Atoi(fields[1])
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	waiter := startLock(t, ep, "--wait", "30s", "job", "--", "sh", "-c", `echo "$BATON_TOKEN"`)
	if code := holder.exit(t, 20*time.Second); code != 76 {
		t.Fatalf("a command past --max-hold: baton exited %d, want 76; stderr: %s", code, holder.stderr)
	}
	if !strings.Contains(holder.stderr.String(), "hold limit passed") {
		t.Fatalf("stderr does not say why: %s", holder.stderr)
	}
	got := waiter.line(t, 20*time.Second)
	if tok, _ := strconv.ParseUint(got, 10, 64); tok <= mustUint(t, fields[0]) {
		t.Fatalf("the waiter's token %s is not above the holder's %s", got, fields[0])
	}
	bad := startLock(t, ep, "--max-hold", "10ms", "x", "--", "true")
	if code := bad.exit(t, 20*time.Second); code != 2 {
		t.Fatalf("--max-hold 10ms exited %d, want 2", code)
	}
}

// TestCLIBadLockName: a lock name no member would accept, here not
// UTF-8, used to hang `baton lock` past its --timeout while its client
// reconnected in a loop (issue 23). It is a usage error: one line on
// stderr and exit 2, at once. Other commands refuse it the same way.
func TestCLIBadLockName(t *testing.T) {
	ep := singleNode(t)
	const bad = "bad\xffname"
	start := time.Now()
	p := startLock(t, ep, "--timeout", "5s", bad, "--", "true")
	code := p.exit(t, 20*time.Second)
	took := time.Since(start)
	lines := strings.Split(strings.TrimRight(p.stderr.String(), "\n"), "\n")
	if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], `lock name "bad\xffname" is not valid UTF-8`) {
		t.Fatalf("baton lock of a name not UTF-8 exited %d after %v, stderr %q; want 2 and one line saying why", code, took, p.stderr)
	}
	if took > 4*time.Second {
		t.Fatalf("baton lock of a name not UTF-8 took %v; want at once", took)
	}
	cmd := exec.Command(batonBinary(t), "get", "--endpoints", ep, "--timeout", "5s", bad)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || strings.Count(strings.TrimRight(stderr.String(), "\n"), "\n") != 0 ||
		!strings.Contains(stderr.String(), "not valid UTF-8") {
		t.Fatalf("baton get of a name not UTF-8: %v, stderr %q; want exit 2 and one line saying why", err, stderr.String())
	}
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCLINothingListening: with no member at the address it was given, a
// command fails at once, not after its --timeout, with one line naming
// the address.
func TestCLINothingListening(t *testing.T) {
	skipShort(t)
	addr := freeLoopbackAddrs(t, 1)[0]
	for _, args := range [][]string{{"status"}, {"lock", "job", "--", "true"}} {
		cmd := exec.Command(batonBinary(t), append([]string{args[0], "--endpoints", addr, "--timeout", "10s"}, args[1:]...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		err := cmd.Run()
		took := time.Since(start)
		want := "baton " + args[0] + ": no member listens at " + addr + " (connection refused)\n"
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || stderr.String() != want {
			t.Errorf("baton %v with nothing listening: %v, stderr %q; want exit 1 and %q", args, err, stderr.String(), want)
		}
		// Well under a second on an idle machine; the bound leaves room
		// for a loaded one, far below the 10 s timeout.
		if took > 3*time.Second {
			t.Errorf("baton %v with nothing listening took %v; want at once", args, took)
		}
		t.Logf("baton %v with nothing listening failed in %v", args, took)
	}
}

// TestCLILockOneEndpointSurvivesKill9 is the real-process half of issue
// 28's acceptance test (the exact one is the root package's
// TestOneEndpointSurvivesItsMember): `baton lock` given ONE member of a
// 3-member cluster, the leader, holds a lock; the leader is killed with
// SIGKILL; the command runs on for three TTLs (a client that knew only
// that member would have stopped it within one), the lock keeps its
// holder and token, and it is released when the command ends.
func TestCLILockOneEndpointSurvivesKill9(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, leader, leaderAddr := threeMembers(ctx, t)
	var others []string
	for _, ep := range c.endpoints() {
		if ep != leaderAddr {
			others = append(others, ep)
		}
	}

	// A TTL well above the failover (an election timeout of 1-2 s, then
	// the reconnect), with room for a loaded machine.
	const ttl = 6 * time.Second
	holder := startLock(t, leaderAddr, "--ttl", ttl.String(), "job", "--", "sh", "-c", holdScript)
	fields := strings.Fields(holder.line(t, 30*time.Second))
	pgid, _ := strconv.Atoi(fields[1])
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	if !leader.kill() {
		t.Fatal("the leader did not die of SIGKILL")
	}
	select {
	case err := <-holder.done:
		t.Fatalf("baton lock ended after its one member was killed: %v; stderr: %s", err, holder.stderr)
	case <-time.After(3 * ttl):
	}
	out, err := exec.Command(batonBinary(t), "get", "--endpoints", strings.Join(others, ","), "job").Output()
	if err != nil || !strings.Contains(string(out), "token "+fields[0]+",") {
		t.Fatalf("baton get job after the kill: %v\n%s\nwant the hold of token %s", err, out, fields[0])
	}
	if err := holder.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := holder.exit(t, 20*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("holder exited %d, want %d (its command's SIGTERM); stderr: %s", code, 128+int(syscall.SIGTERM), holder.stderr)
	}
	next := startLock(t, strings.Join(others, ","), "--no-wait", "job", "--", "true")
	if code := next.exit(t, 20*time.Second); code != 0 {
		t.Fatalf("lock after the holder ended exited %d, want 0 (released); stderr: %s", code, next.stderr)
	}
}
