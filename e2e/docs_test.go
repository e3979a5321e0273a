package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDocsRunningSecurely runs the "Running securely" block of
// docs/SECURITY.md as it is, with its ports moved to free ones: a
// 3-member cluster with TLS on both ports and separate CAs,
// authentication turned on by root's certificate, a user whose role may
// lock under jobs/ and is refused elsewhere. The block exits non-zero if a step that must succeed fails
// or one that must be refused succeeds.
func TestDocsRunningSecurely(t *testing.T) {
	if testing.Short() {
		t.Skip("builds baton and runs three members")
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatal("the block needs openssl (Debian: apt-get install openssl)")
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "SECURITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "<!-- running-securely -->")
	end := strings.Index(text, "<!-- /running-securely -->")
	if start < 0 || end < start {
		t.Fatal("docs/SECURITY.md has no running-securely block")
	}
	block := text[start:end]
	block = block[strings.Index(block, "```sh")+len("```sh") : strings.LastIndex(block, "```")]
	addrs := freeLoopbackAddrs(t, 6)
	for i, port := range []string{"7700", "7701", "7710", "7711", "7720", "7721"} {
		_, free, _ := strings.Cut(addrs[i], ":")
		block = strings.ReplaceAll(block, port, free)
	}

	dir := t.TempDir()
	run := filepath.Join(dir, "secure")
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(batonBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "baton"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", block)
	cmd.Dir = run
	cmd.Env = serverEnv()
	// Members it started in the background may outlive a failed block
	// and hold its output open: Wait stops waiting for them.
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	// The block ends its members itself; a failed step leaves them
	// running: end them by the PIDs it wrote.
	if pids, rerr := os.ReadFile(filepath.Join(run, "pids")); rerr == nil {
		exec.Command("kill", strings.Fields(string(pids))...).Run()
	}
	if err != nil {
		logs := ""
		for _, n := range []string{"n1", "n2", "n3"} {
			logs += "\n--- " + n + ".log:\n" + tail(filepath.Join(run, n+".log"), 20)
		}
		t.Fatalf("docs/SECURITY.md's block failed: %v\n%s%s", err, out, logs)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if r := raceReport(filepath.Join(run, n+".log")); r != "" {
			t.Errorf("%s: the race detector reported a data race:\n%s", n, r)
		}
	}
	for _, want := range []string{"ci holds jobs/nightly", `no lock permission over "billing/close"`,
		`no admin permission over ""`, `root  gave user "ci" the role "jobs"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("docs/SECURITY.md's block printed no %q:\n%s", want, out)
		}
	}
}
