package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCLIMembership replaces a member of a process cluster the way an
// operator would: `baton member add n4 --learner`, start n4 with --join
// and the printed --initial-cluster, `baton member promote n4`, `baton
// member remove n1`; n1 exits by itself (status 0), and the cluster of
// n2, n3, n4 keeps the lock taken before and serves.
func TestCLIMembership(t *testing.T) {
	skipShort(t)
	addrs := freeLoopbackAddrs(t, 8)
	c := newCluster(t, clusterConfig{n: 3, clientAddrs: addrs[:3], peerAddrs: addrs[3:6]})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.start(ctx)
	ep := strings.Join(c.endpoints(), ",")
	run := func(args ...string) (string, int) {
		cmd := exec.Command(c.bin, args...)
		cmd.Env = serverEnv()
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, code := run("lock", "--endpoints", ep, "--ttl", "60s", "--no-wait", "before", "--", "true"); code != 0 {
		t.Fatalf("lock: %d %s", code, out)
	}
	out, code := run("member", "add", "n4", addrs[7], "--learner", "--endpoints", ep)
	if code != 0 {
		t.Fatalf("member add: exit %d: %s", code, out)
	}
	i := strings.Index(out, "--initial-cluster ")
	if i < 0 {
		t.Fatalf("member add printed no --initial-cluster: %s", out)
	}
	initial := strings.Fields(out[i+len("--initial-cluster "):])[0]
	if out, code := run("member", "add", "n4", addrs[7], "--endpoints", ep); code != 1 || !strings.Contains(out, "already") {
		t.Fatalf("adding n4 twice: exit %d: %s", code, out)
	}
	dir := t.TempDir()
	n4 := &node{name: "n4", clientAddr: addrs[6], peerAddr: addrs[7],
		dataDir: filepath.Join(dir, "n4"), logPath: filepath.Join(dir, "n4.log")}
	n4.args = []string{"server", "--name", "n4", "--data-dir", n4.dataDir, "--client-addr", n4.clientAddr,
		"--peer-addr", n4.peerAddr, "--initial-cluster", initial, "--join"}
	c.nodes = append(c.nodes, n4)
	if err := n4.start(c.bin); err != nil {
		t.Fatal(err)
	}
	if err := n4.waitUp(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, code := run("member", "promote", "n4", "--endpoints", ep)
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member promote: exit %d: %s", code, out)
		}
		time.Sleep(100 * time.Millisecond) // the learner is catching up
	}
	if out, code := run("member", "remove", "n1", "--endpoints", ep); code != 0 {
		t.Fatalf("member remove: exit %d: %s", code, out)
	}
	n1 := c.nodes[0]
	select {
	case <-n1.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("n1 still runs after its removal; log:\n%s", tail(n1.logPath, 20))
	}
	if st := n1.cmd.ProcessState; st.ExitCode() != 0 {
		// It exits 0 when it applied its removal; a member that never
		// hears of it is killed by the operator instead.
		t.Fatalf("n1 exited %d; log:\n%s", st.ExitCode(), tail(n1.logPath, 20))
	}
	ep = strings.Join([]string{addrs[1], addrs[2], addrs[6]}, ",")
	// Status is answered by any member from what it applied: one may be
	// a moment behind the removal.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, code = run("member", "list", "--endpoints", ep)
		if code == 0 && !strings.Contains(out, "n1 ") && strings.Contains(out, "n4") && !strings.Contains(out, "learner") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member list: exit %d: %s", code, out)
		}
	}
	if out, code := run("get", "before", "--endpoints", ep); code != 0 || !strings.Contains(out, "before") {
		t.Fatalf("get: exit %d: %s", code, out)
	}
	if out, code := run("lock", "--endpoints", ep, "--no-wait", "after", "--", "true"); code != 0 {
		t.Fatalf("lock after the replacement: %d %s", code, out)
	}
}
