package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	block = freePorts(t, block, "7700", "7701", "7710", "7711", "7720", "7721")

	dir := t.TempDir()
	run := filepath.Join(dir, "secure")
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := docShell(ctx, t, dir, run, block)
	out, err := cmd.CombinedOutput()
	// The block ends its members itself; a failed step leaves them
	// running: end them by the PIDs it wrote (and docShell's cleanup ends
	// any it had not written yet).
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

// TestDocsThreeMembers runs the three-member block of README.md and of
// docs/CLUSTER.md as it is, with its ports moved to free ones, in a
// directory of its own: the members start, `baton status` on one of
// them lists all three, and their data dirs are under baton-cluster/,
// which .gitignore ignores.
func TestDocsThreeMembers(t *testing.T) {
	skipShort(t)
	for _, doc := range []string{"README.md", filepath.Join("docs", "CLUSTER.md")} {
		t.Run(doc, func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join("..", doc))
			if err != nil {
				t.Fatal(err)
			}
			s := string(text)
			start, end := strings.Index(s, "<!-- three-members -->"), strings.Index(s, "<!-- /three-members -->")
			if start < 0 || end < start {
				t.Fatalf("%s has no three-members block", doc)
			}
			block := s[start:end]
			block = block[strings.Index(block, "```sh")+len("```sh") : strings.LastIndex(block, "```")]
			for _, port := range []string{"7700", "7701"} {
				if strings.Contains(block, port) {
					t.Errorf("the block uses the single node's port %s", port)
				}
			}
			block = freePorts(t, block, "7810", "7811", "7820", "7821", "7830", "7831")
			build := "go build -o baton ./cmd/baton\n"
			if !strings.Contains(block, build) {
				t.Fatalf("the block does not start with %q", build)
			}
			block = strings.Replace(block, build, "", 1) + "jobs -p > pids\n"

			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := docShell(ctx, t, dir, dir, block)
			out, err := cmd.Output()
			t.Cleanup(func() {
				if pids, err := os.ReadFile(filepath.Join(dir, "pids")); err == nil {
					exec.Command("kill", strings.Fields(string(pids))...).Run()
				}
			})
			if err != nil {
				t.Fatalf("%s's block failed: %v\n%s\n--- n1.log:\n%s", doc, err, out, tail(filepath.Join(dir, "baton-cluster", "n1.log"), 20))
			}
			for _, n := range []string{"n1", "n2", "n3"} {
				if !strings.Contains(string(out), "\n"+n+" ") {
					t.Errorf("status lists no member %s:\n%s", n, out)
				}
				if _, err := os.Stat(filepath.Join(dir, "baton-cluster", n, "group-1")); err != nil {
					t.Errorf("member %s's data dir: %v", n, err)
				}
			}
			ignored := exec.Command("git", "check-ignore", "-q", "baton-cluster/n1/group-1")
			ignored.Dir = ".."
			if err := ignored.Run(); err != nil {
				t.Errorf("git check-ignore baton-cluster/n1/group-1: %v; want it ignored", err)
			}
		})
	}
}

// freePorts rewrites each documented port in block to a free loopback
// port, in one pass (a Replacer): a free port that happens to contain a
// documented one is not rewritten again.
func freePorts(t *testing.T, block string, ports ...string) string {
	t.Helper()
	addrs := freeLoopbackAddrs(t, len(ports))
	var pairs []string
	for i, port := range ports {
		_, free, _ := strings.Cut(addrs[i], ":")
		pairs = append(pairs, port, free)
	}
	return strings.NewReplacer(pairs...).Replace(block)
}

// docShell is a documented shell block to run in runDir with the baton
// binary at dir/baton, as the docs' readers run it. It runs in a process
// group of its own, which the test's end kills: the members the block
// started in the background, even those a failed block never got to
// write down or stop. Such members may also hold its output open: Wait
// stops waiting for them after WaitDelay.
func docShell(ctx context.Context, t *testing.T, dir, runDir, block string) *exec.Cmd {
	t.Helper()
	bin, err := os.ReadFile(batonBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "baton"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", block)
	cmd.Dir = runDir
	cmd.Env = serverEnv()
	cmd.WaitDelay = 2 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	return cmd
}
