package e2e

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// setScript prints the set's first token, its own pid, the set's locks
// and tokens (comma-separated) and the session, then sleeps; its process
// group is killed at cleanup.
const setScript = `echo "$BATON_TOKEN $$ $(echo $BATON_LOCKS | tr ' ' ,) $(echo $BATON_TOKENS | tr ' ' ,) $BATON_SESSION"; exec sleep 60`

// holdSet starts `baton lock args... -- sh -c setScript` and returns the
// fields its command printed.
func holdSet(t *testing.T, ep string, args ...string) (*lockProc, []string) {
	t.Helper()
	p := startLock(t, ep, append(args, "--", "sh", "-c", setScript)...)
	fields := strings.Fields(p.line(t, 20*time.Second))
	if len(fields) != 5 {
		t.Fatalf("command environment: %q", fields)
	}
	pgid, _ := strconv.Atoi(fields[1])
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	return p, fields
}

// TestCLILockSet: `baton lock a b --reader cfg --permit pool=2 -- cmd`
// holds a mutex, a read hold and a permit together under one token; a
// reader beside it runs, a set that needs one of its locks is turned
// away (or waits, and is served when the holder ends), and a wait that
// runs out names the lock still held.
func TestCLILockSet(t *testing.T) {
	ep := singleNode(t)
	holder, fields := holdSet(t, ep, "--no-wait", "--owner", "set-holder", "a", "b", "--reader", "cfg", "--permit", "pool=2")
	tok := fields[0]
	if fields[2] != "a,b,cfg,pool" || fields[3] != strings.Repeat(tok+",", 3)+tok {
		t.Fatalf("BATON_LOCKS %q and BATON_TOKENS %q; want a,b,cfg,pool under one token %s", fields[2], fields[3], tok)
	}

	// Another reader of cfg and the other permit of pool sit beside it.
	beside := startLock(t, ep, "--no-wait", "--read", "cfg", "--permit", "pool=2", "--", "sh", "-c", "exit 4")
	if code := beside.exit(t, 20*time.Second); code != 4 {
		t.Fatalf("a reader and a permit beside the set exited %d, want its command's 4; stderr: %s", code, beside.stderr)
	}
	// A set that needs b is turned away whole, and says who holds it.
	busy := startLock(t, ep, "--no-wait", "c", "b", "--", "true")
	if code := busy.exit(t, 20*time.Second); code != 75 || !strings.Contains(busy.stderr.String(), "b is held by set-holder") {
		t.Fatalf("a set with a held lock exited %d, want 75 naming b's holder; stderr: %s", code, busy.stderr)
	}
	// A set whose wait runs out names the lock still held.
	late := startLock(t, ep, "--wait", "1s", "c", "b", "--", "true")
	if code := late.exit(t, 20*time.Second); code != 75 || !strings.Contains(late.stderr.String(), "not all acquired after waiting 1s: b is held by set-holder") {
		t.Fatalf("a set whose wait ran out exited %d, want 75 naming b's holder; stderr: %s", code, late.stderr)
	}
	if out, err := exec.Command(batonBinary(t), "get", "--endpoints", ep, "c").CombinedOutput(); err != nil || !strings.Contains(string(out), "free") {
		t.Fatalf("c after the sets that did not get b: %v\n%s", err, out)
	}

	// A set that waits is served when the holder ends.
	waiter := startLock(t, ep, "--wait", "30s", "c", "b", "--", "sh", "-c", `echo "$(echo $BATON_TOKENS | tr ' ' ,)"`)
	waitQueued(t, ep, "b")
	if err := holder.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(waiter.line(t, 20*time.Second), ",")
	if len(got) != 2 || mustUint(t, got[0]) <= mustUint(t, tok) || mustUint(t, got[1]) <= mustUint(t, tok) {
		t.Fatalf("the waiting set got tokens %q; want two, above the first holder's %s", got, tok)
	}
	if code := waiter.exit(t, 20*time.Second); code != 0 {
		t.Fatalf("the waiting set exited %d; stderr: %s", code, waiter.stderr)
	}
	if code := holder.exit(t, 20*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("the holder exited %d, want its command's SIGTERM; stderr: %s", code, holder.stderr)
	}
}

// TestCLILockSetHoldLost: when an operator ends one hold of a set, the
// command is stopped as for a lost lock (exit 76), and the set's other
// holds are released.
func TestCLILockSetHoldLost(t *testing.T) {
	ep := singleNode(t)
	holder, fields := holdSet(t, ep, "--kill-grace", "5s", "x", "y", "--permit", "pool=3")
	out, err := exec.Command(batonBinary(t), "release", "--endpoints", ep, "y",
		"--session", fields[4], "--token", fields[0]).CombinedOutput()
	if err != nil {
		t.Fatalf("baton release: %v: %s", err, out)
	}
	if code := holder.exit(t, 20*time.Second); code != 76 {
		t.Fatalf("holder exited %d after one of its holds was released, want 76; stderr: %s", code, holder.stderr)
	}
	if !strings.Contains(holder.stderr.String(), "lock y may be lost") {
		t.Fatalf("holder does not say which lock was lost: %s", holder.stderr)
	}
	next := startLock(t, ep, "--no-wait", "x", "--permit", "pool=3", "--", "true")
	if code := next.exit(t, 20*time.Second); code != 0 {
		t.Fatalf("x and a permit after the set ended: exit %d, want 0 (released); stderr: %s", code, next.stderr)
	}
}
