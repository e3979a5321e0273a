package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton/internal/testnet"
)

// node is one `baton server` process, restartable from its data dir.
type node struct {
	name       string
	clientAddr string
	peerAddr   string
	dataDir    string
	logPath    string
	netns      string // run inside this network namespace ("": the test's own)
	nofile     int    // when > 0, the open file limit the process runs with
	args       []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd exits
	runs int
}

// cluster is a set of nodes started by one test. Only processes it started
// are ever signalled, by PID.
type cluster struct {
	t     testing.TB
	bin   string
	nodes []*node
}

// clusterConfig lists what differs between the loopback and the
// namespaced clusters.
type clusterConfig struct {
	n           int
	clientAddrs []string // host:port per node
	peerAddrs   []string
	netns       []string // per node, or nil
	extraArgs   []string
}

// freeLoopbackAddrs reserves n distinct ports on 127.0.0.1 for servers
// started as processes. testnet keeps them below the kernel's ephemeral
// range, so no outgoing connection takes one before its server binds it.
func freeLoopbackAddrs(t testing.TB, n int) []string {
	t.Helper()
	out, err := testnet.Addrs(n)
	if err != nil {
		t.Fatalf("reserve ports: %v", err)
	}
	return out
}

// newCluster prepares (does not start) cfg.n nodes with data dirs and logs
// under t.TempDir(). Cleanup kills whatever still runs and, if the test
// failed, prints the tail of every log.
func newCluster(t testing.TB, cfg clusterConfig) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: batonBinary(t)}
	dir := t.TempDir()
	var members []string
	for i := range cfg.n {
		members = append(members, fmt.Sprintf("n%d=%s", i+1, cfg.peerAddrs[i]))
	}
	for i := range cfg.n {
		nd := &node{
			name:       fmt.Sprintf("n%d", i+1),
			clientAddr: cfg.clientAddrs[i],
			peerAddr:   cfg.peerAddrs[i],
			dataDir:    filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			logPath:    filepath.Join(dir, fmt.Sprintf("n%d.log", i+1)),
		}
		if cfg.netns != nil {
			nd.netns = cfg.netns[i]
		}
		nd.args = append([]string{"server",
			"--name", nd.name, "--data-dir", nd.dataDir,
			"--client-addr", nd.clientAddr, "--peer-addr", nd.peerAddr,
			"--initial-cluster", strings.Join(members, ","),
		}, cfg.extraArgs...)
		c.nodes = append(c.nodes, nd)
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.kill()
		}
		for _, nd := range c.nodes {
			// A server built with -race (BATON_TEST_RACE_SERVER=1) reports
			// a race on its stderr and runs on.
			if r := raceReport(nd.logPath); r != "" {
				t.Errorf("%s: the race detector reported a data race:\n%s", nd.name, r)
			}
		}
		if t.Failed() {
			for _, nd := range c.nodes {
				t.Logf("--- tail of %s (%s) ---\n%s", nd.name, nd.logPath, tail(nd.logPath, 60))
			}
		}
	})
	return c
}

// start starts every node and waits until each answers /v1/status.
func (c *cluster) start(ctx context.Context) {
	c.t.Helper()
	for _, nd := range c.nodes {
		if err := nd.start(c.bin); err != nil {
			c.t.Fatalf("start %s: %v", nd.name, err)
		}
	}
	for _, nd := range c.nodes {
		if err := nd.waitUp(ctx); err != nil {
			c.t.Fatalf("%s: %v", nd.name, err)
		}
	}
}

func (c *cluster) endpoints() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.clientAddr)
	}
	return out
}

func (c *cluster) byClientAddr(addr string) *node {
	for _, nd := range c.nodes {
		if nd.clientAddr == addr {
			return nd
		}
	}
	return nil
}

// start launches the process (appending to its log). It is an error to
// start a node that runs.
func (nd *node) start(bin string) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd != nil {
		return fmt.Errorf("%s already runs (pid %d)", nd.name, nd.cmd.Process.Pid)
	}
	lf, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	nd.runs++
	fmt.Fprintf(lf, "=== e2e: start #%d of %s at %s ===\n", nd.runs, nd.name, time.Now().Format(time.RFC3339Nano))
	var cmd *exec.Cmd
	switch {
	case nd.netns != "":
		// ip netns exec execs the binary, so the PID is the server's.
		cmd = exec.Command("ip", append([]string{"netns", "exec", nd.netns, bin}, nd.args...)...)
	case nd.nofile > 0:
		// The shell execs the binary too.
		script := fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nd.nofile)
		cmd = exec.Command("sh", append([]string{"-c", script, bin}, nd.args...)...)
	default:
		cmd = exec.Command(bin, nd.args...)
	}
	cmd.Env = serverEnv()
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(lf, "=== e2e: %s pid %d exited: %v ===\n", nd.name, cmd.Process.Pid, err)
		lf.Close()
		close(done)
	}()
	nd.cmd, nd.done = cmd, done
	return nil
}

// serverEnv is the test's environment without BATON_* variables, so only
// the flags given here configure a server.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BATON_") {
			env = append(env, kv)
		}
	}
	return env
}

// signal sends sig to the process this node started and, for SIGKILL,
// waits for it to exit. It reports whether a process was running.
func (nd *node) signal(sig syscall.Signal, wait time.Duration) bool {
	nd.mu.Lock()
	cmd, done := nd.cmd, nd.done
	nd.mu.Unlock()
	if cmd == nil {
		return false
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(wait):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
	nd.mu.Lock()
	if nd.cmd == cmd {
		nd.cmd, nd.done = nil, nil
	}
	nd.mu.Unlock()
	return true
}

// kill is kill -9 and wait.
func (nd *node) kill() bool { return nd.signal(syscall.SIGKILL, 10*time.Second) }

// stop is SIGTERM (a clean shutdown), then SIGKILL after 10s.
func (nd *node) stop() bool { return nd.signal(syscall.SIGTERM, 10*time.Second) }

func (nd *node) running() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.cmd != nil
}

// exited reports whether the process this node started has exited on its
// own (a crash).
func (nd *node) exited() bool {
	nd.mu.Lock()
	done := nd.done
	nd.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// statusJSON is the part of GET /v1/status the tests read.
type statusJSON struct {
	Name         string `json:"name"`
	Leader       string `json:"leader"`
	LeaderID     string `json:"leader_id"`
	LeaderAddr   string `json:"leader_addr"`
	Term         string `json:"term"`
	CommitIndex  string `json:"commit_index"`
	AppliedIndex string `json:"applied_index"`
	Role         string `json:"role"`
	Sessions     int    `json:"sessions"`
	Locks        int    `json:"locks"`
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// status reads GET /v1/status over HTTP/JSON.
func (nd *node) status(ctx context.Context) (*statusJSON, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nd.clientAddr+"/v1/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/status on %s: %s", nd.name, resp.Status)
	}
	var st statusJSON
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("decode status of %s: %w", nd.name, err)
	}
	return &st, nil
}

// waitUp polls /v1/status until it answers, the process exits, or ctx ends.
func (nd *node) waitUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if _, err := nd.status(ctx); err == nil {
			return nil
		}
		if nd.exited() {
			return fmt.Errorf("exited while starting; log tail:\n%s", tail(nd.logPath, 30))
		}
		select {
		case <-ctx.Done():
			return errors.New("no answer on /v1/status within 30s")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// grepLog returns the lines of path containing any of subs.
func grepLog(path string, subs ...string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		for _, s := range subs {
			if strings.Contains(line, s) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

// raceReport returns the first data race report in the log at path, or "".
func raceReport(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	const start, end = "WARNING: DATA RACE", "=================="
	i := strings.Index(string(data), start)
	if i < 0 {
		return ""
	}
	r := string(data[i:])
	if j := strings.Index(r, end); j >= 0 {
		r = r[:j]
	}
	return r
}
