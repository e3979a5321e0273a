package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/api/rules"
)

// observed collects what an Observe reports, in order.
type observed struct {
	name string
	ch   <-chan baton.Leader
	seen []baton.Leader
}

// next waits for the next report and checks it is want (term 0: no
// leader; otherwise that term and value).
func (o *observed) next(t *testing.T, term uint64, value string) {
	t.Helper()
	select {
	case l, ok := <-o.ch:
		if !ok {
			t.Fatalf("%s: observe channel closed; seen %+v", o.name, o.seen)
		}
		o.seen = append(o.seen, l)
		if l.Term != term || l.Value != value {
			t.Fatalf("%s saw %+v, want term %d value %q; seen so far %+v", o.name, l, term, value, o.seen)
		}
		if n := len(o.seen); n > 1 && l.Index <= o.seen[n-2].Index {
			t.Fatalf("%s: index went from %d to %d", o.name, o.seen[n-2].Index, l.Index)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s saw nothing within 30s after %+v; want term %d value %q", o.name, o.seen, term, value)
	}
}

// TestElectionAcrossLeaderKill: in a 3-member cluster, two candidates
// campaign, the leading one proclaims, and both resign, while the
// cluster's Raft leader is killed with SIGKILL between the campaign and
// the proclaim. Two observers, one given only the member that is killed,
// see every change, in order: nobody, a, a's new value, b, b's new value,
// nobody. Bad input (a value too long, a proclaim by a candidate that
// does not lead, a proclaim of another's hold through HTTP) is refused
// and changes nothing.
func TestElectionAcrossLeaderKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, leader, leaderAddr := threeMembers(ctx, t)
	all := strings.Join(c.endpoints(), ",")

	const name = "leader/scheduler"
	// A TTL well above the failover, with room for a loaded machine.
	const ttl = 8 * time.Second
	ca, cb := dial(t, all), dial(t, all)
	a := newSession(t, ca, baton.WithOwner("scheduler-a"), baton.WithTTL(ttl))
	b := newSession(t, cb, baton.WithOwner("scheduler-b"), baton.WithTTL(ttl))
	ea, eb := a.Election(name), b.Election(name)

	var observers []*observed
	for i, ep := range []string{leaderAddr, all} {
		cl := dial(t, ep)
		ch, err := cl.Election(name).Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		o := &observed{name: fmt.Sprintf("observer %d (of %s)", i, ep), ch: ch}
		o.next(t, 0, "")
		observers = append(observers, o)
	}
	everyone := func(term uint64, value string) {
		t.Helper()
		for _, o := range observers {
			o.next(t, term, value)
		}
	}

	step := func() context.Context {
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		t.Cleanup(scancel)
		return sctx
	}
	if _, err := ea.Campaign(step(), strings.Repeat("v", rules.MaxHoldValueLen+1)); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Fatalf("Campaign with a value too long: %v, want ErrInvalidArgument", err)
	}
	termA, err := ea.Campaign(step(), "10.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	everyone(termA.Token(), "10.0.0.1:8080")
	bDone := make(chan error, 1)
	var termB *baton.Lease
	go func() {
		l, err := eb.Campaign(ctx, "10.0.0.2:8080")
		termB = l
		bDone <- err
	}()
	// b waits in the queue behind a.
	for deadline := time.Now().Add(30 * time.Second); ; {
		info, err := ca.Get(step(), name)
		if err == nil && len(info.Waiters) == 1 && info.Waiters[0].SessionID == b.ID() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b is not queued within 30s: %+v, %v", info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := eb.Proclaim(step(), "usurper"); !errors.Is(err, baton.ErrNotHeld) {
		t.Fatalf("Proclaim by a candidate that does not lead: %v, want ErrNotHeld", err)
	}

	if !leader.kill() {
		t.Fatal("the Raft leader did not die of SIGKILL")
	}
	if err := ea.Proclaim(step(), "10.0.0.1:9090"); err != nil {
		t.Fatalf("Proclaim after the Raft leader's kill: %v", err)
	}
	everyone(termA.Token(), "10.0.0.1:9090")
	select {
	case <-termA.Lost():
		t.Fatalf("a's leadership was lost across the kill: %v", termA.Err())
	default:
	}

	// A proclaim of a's hold by another session, as curl would send it,
	// is refused by the state machine and changes nothing.
	st, err := cb.Status(step())
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := http.Post("http://"+st.LeaderAddr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	var opened struct {
		SessionID string `json:"session_id"`
		Secret    string `json:"secret"`
	}
	code, out := post("/v1/sessions", `{"owner": "curl", "ttl": "8s"}`)
	if code != http.StatusOK || json.Unmarshal([]byte(out), &opened) != nil {
		t.Fatalf("open a session over HTTP: %d %s", code, out)
	}
	code, out = post("/v1/locks/proclaim", fmt.Sprintf(`{"header": {"session_id": %q, "seq": "1", "secret": %q}, "name": %q, "token": "%d", "value": "usurper"}`,
		opened.SessionID, opened.Secret, name, termA.Token()))
	if code != http.StatusBadRequest || !strings.Contains(out, "NOT_HOLDER") {
		t.Fatalf("another session's proclaim of a's hold over HTTP: %d %s, want 400 NOT_HOLDER", code, out)
	}
	if l, err := cb.Election(name).Leader(step()); err != nil || l.Term != termA.Token() || l.Value != "10.0.0.1:9090" {
		t.Fatalf("Leader after the refused proclaims: %+v, %v", l, err)
	}

	if err := ea.Resign(step()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-bDone:
		if err != nil {
			t.Fatalf("b's campaign: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("b does not lead within 30s of a's resignation")
	}
	if termB.Token() <= termA.Token() {
		t.Fatalf("b's term %d is not above a's %d", termB.Token(), termA.Token())
	}
	everyone(termB.Token(), "10.0.0.2:8080")
	if err := eb.Proclaim(step(), "10.0.0.2:9090"); err != nil {
		t.Fatal(err)
	}
	everyone(termB.Token(), "10.0.0.2:9090")
	if err := eb.Resign(step()); err != nil {
		t.Fatal(err)
	}
	everyone(0, "")
	if _, err := ca.Election(name).Leader(step()); !errors.Is(err, baton.ErrNoLeader) {
		t.Fatalf("Leader after both resigned: %v, want ErrNoLeader", err)
	}
}

// lineReader is a running baton command whose stdout we read by line.
type lineReader struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *strings.Builder
}

func startLines(t *testing.T, args ...string) *lineReader {
	t.Helper()
	cmd := exec.Command(batonBinary(t), args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &lineReader{cmd: cmd, lines: make(chan string, 16), stderr: &strings.Builder{}}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
	}()
	return r
}

func (r *lineReader) next(t *testing.T, want string) string {
	t.Helper()
	select {
	case l, ok := <-r.lines:
		if !ok {
			t.Fatalf("%s ended; want a line with %q; stderr: %s", r.cmd.Args[1], want, r.stderr)
		}
		if !strings.Contains(l, want) {
			t.Fatalf("%s printed %q, want %q; stderr: %s", r.cmd.Args[1], l, want, r.stderr)
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatalf("%s printed nothing with %q within 30s; stderr: %s", r.cmd.Args[1], want, r.stderr)
	}
	return ""
}

// TestCLIElectAndObserve runs `baton elect` and `baton observe` as
// docs/GUIDE.md shows them: observe prints a line per change of leader
// or value; the first elect runs its command while it leads, with the
// term and value in its environment; the second waits and leads once
// the first's command ends (SIGTERM is forwarded to it); a value too
// long is refused with exit 2 before anything is sent.
func TestCLIElectAndObserve(t *testing.T) {
	ep := singleNode(t)
	observe := startLines(t, "observe", "--endpoints", ep, "leader/scheduler")
	observe.next(t, "leader/scheduler has no leader")

	const script = `echo "$BATON_TOKEN $BATON_ELECTION_VALUE $$"; exec sleep 60`
	first := startElect(t, ep, "--owner", "scheduler-a", "leader/scheduler", "10.0.0.7:8080", "--", "sh", "-c", script)
	fa := strings.Fields(first.line(t, 30*time.Second))
	if len(fa) != 3 || fa[1] != "10.0.0.7:8080" {
		t.Fatalf("first elect's command environment: %q", fa)
	}
	pgid, _ := strconv.Atoi(fa[2])
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	if l := observe.next(t, "led by scheduler-a (session"); !strings.Contains(l, "term "+fa[0]+`, value "10.0.0.7:8080"`) {
		t.Fatalf("baton observe printed %q, want a's term %s and value", l, fa[0])
	}

	second := startElect(t, ep, "--owner", "scheduler-b", "leader/scheduler", "10.0.0.8:8080", "--", "sh", "-c", script)
	select {
	case l := <-second.lines:
		t.Fatalf("the second candidate ran its command while the first leads: %q", l)
	case <-time.After(500 * time.Millisecond):
	}

	bad := startElect(t, ep, "leader/scheduler", strings.Repeat("v", rules.MaxHoldValueLen+1), "--", "true")
	if code := bad.exit(t, 30*time.Second); code != 2 || !strings.Contains(bad.stderr.String(), "MaxHoldValueLen") {
		t.Fatalf("elect with a value too long exited %d, want 2; stderr: %s", code, bad.stderr)
	}

	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := first.exit(t, 30*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("first elect exited %d, want %d (its command's SIGTERM); stderr: %s", code, 128+int(syscall.SIGTERM), first.stderr)
	}
	fb := strings.Fields(second.line(t, 30*time.Second))
	if len(fb) != 3 || fb[1] != "10.0.0.8:8080" || mustUint(t, fb[0]) <= mustUint(t, fa[0]) {
		t.Fatalf("second elect's command environment %q after the first's %q: want its value and a higher term", fb, fa)
	}
	pgidB, _ := strconv.Atoi(fb[2])
	t.Cleanup(func() { _ = syscall.Kill(-pgidB, syscall.SIGKILL) })
	// The first's resignation and the second's grant are one entry: one
	// line, naming the new leader and its term.
	if l := observe.next(t, "led by scheduler-b (session"); !strings.Contains(l, "term "+fb[0]+`, value "10.0.0.8:8080"`) {
		t.Fatalf("baton observe printed %q, want b's term %s and value", l, fb[0])
	}
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	second.exit(t, 30*time.Second)
	observe.next(t, "has no leader")
	if err := observe.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := observe.cmd.Wait(); err != nil {
		t.Fatalf("baton observe after SIGINT: %v; stderr: %s", err, observe.stderr)
	}
}

// startElect runs `baton elect` with args, as startLock runs `baton lock`.
func startElect(t *testing.T, endpoints string, args ...string) *lockProc {
	t.Helper()
	return startBaton(t, append([]string{"elect", "--endpoints", endpoints}, args...)...)
}
