// Package cluster runs Baton the way the benchmark commands measure it:
// it builds a revision of this repository, starts a fresh 3-member
// cluster of a build on 127.0.0.1, runs that build's own `baton bench`
// against it, and reads the members' CPU time from /proc around the
// measured run. Commands abtest (two builds in alternating pairs) and
// scaling (one build over numbers of clients) share it.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Members is the size of the clusters Start starts.
const Members = 3

// Cluster is a running cluster of three members that Start started.
type Cluster struct {
	members   []*member
	endpoints []string
}

// member is a started server process; done is closed when it exits.
type member struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts three members of b with data and logs in dir, client
// ports basePort, basePort+10 and basePort+20 (peer ports one above
// each), and serverArgs added to every `baton server`; it waits until
// each knows a leader. On failure it stops what it started.
func Start(ctx context.Context, b Build, dir string, basePort int, serverArgs ...string) (*Cluster, error) {
	c := &Cluster{}
	if err := c.start(ctx, b, dir, basePort, serverArgs); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, b Build, dir string, base int, serverArgs []string) error {
	var initial []string
	for i := range Members {
		initial = append(initial, fmt.Sprintf("n%d=127.0.0.1:%d", i+1, base+10*i+1))
		c.endpoints = append(c.endpoints, fmt.Sprintf("127.0.0.1:%d", base+10*i))
	}
	for i := range Members {
		name := fmt.Sprintf("n%d", i+1)
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			return err
		}
		log, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			return err
		}
		args := append([]string{"server", "--name", name, "--data-dir", filepath.Join(dir, name),
			"--client-addr", c.endpoints[i], "--peer-addr", strings.SplitN(initial[i], "=", 2)[1],
			"--initial-cluster", strings.Join(initial, ","), "--log-level", "warn"}, serverArgs...)
		cmd := exec.Command(b.Bin, args...)
		cmd.Env = append(os.Environ(), b.Env...)
		cmd.Stdout, cmd.Stderr = log, log
		err = cmd.Start()
		log.Close()
		if err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		m := &member{name: name, cmd: cmd, done: make(chan struct{})}
		go func() { cmd.Wait(); close(m.done) }()
		c.members = append(c.members, m)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, ep := range c.endpoints {
		for !knowsLeader(ctx, ep) {
			for _, m := range c.members {
				select {
				case <-m.done:
					return fmt.Errorf("%s exited: %s", m.name, m.cmd.ProcessState)
				default:
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s knows no leader after 60 s", ep)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// Endpoints is the members' client addresses, comma-separated, as
// `baton bench --endpoints` takes them.
func (c *Cluster) Endpoints() string { return strings.Join(c.endpoints, ",") }

// Stop ends the members Start started, by their PIDs: SIGTERM, then
// SIGKILL after 10 s. It returns when all have exited.
func (c *Cluster) Stop() {
	for _, m := range c.members {
		m.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, m := range c.members {
		select {
		case <-m.done:
		case <-time.After(10 * time.Second):
			m.cmd.Process.Kill()
			<-m.done
		}
	}
}

var leaderAddr = regexp.MustCompile(`"leader_?[aA]ddr": ?"[^"]`)

var leaderAddrValue = regexp.MustCompile(`"leader_?[aA]ddr": ?"([^"]+)"`)

// Leader is the PID of the member that leads, by the first endpoint's
// /v1/status; false if it cannot tell.
func (c *Cluster) Leader(ctx context.Context) (pid int, ok bool) {
	i, ok := c.leader(ctx)
	if !ok {
		return 0, false
	}
	return c.members[i].cmd.Process.Pid, true
}

// EndpointsLeaderFirst is Endpoints with the leader's address first, so
// that a client's first connection goes to the leader; false, and
// Endpoints as they are, if it cannot tell the leader.
func (c *Cluster) EndpointsLeaderFirst(ctx context.Context) (string, bool) {
	i, ok := c.leader(ctx)
	if !ok {
		return c.Endpoints(), false
	}
	eps := append([]string{c.endpoints[i]}, c.endpoints[:i]...)
	return strings.Join(append(eps, c.endpoints[i+1:]...), ","), true
}

// leader is the index of the member that leads, by the first endpoint's
// /v1/status.
func (c *Cluster) leader(ctx context.Context) (int, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := status(ctx, c.endpoints[0])
	if err != nil {
		return 0, false
	}
	m := leaderAddrValue.FindSubmatch(body)
	if m == nil {
		return 0, false
	}
	for i, ep := range c.endpoints {
		if ep == string(m[1]) && i < len(c.members) {
			return i, true
		}
	}
	return 0, false
}

func knowsLeader(ctx context.Context, endpoint string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	body, err := status(ctx, endpoint)
	return err == nil && leaderAddr.Match(body)
}

// status is the body of the member's /v1/status, when it answers 200.
func status(ctx context.Context, endpoint string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+endpoint+"/v1/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/v1/status: %s", endpoint, resp.Status)
	}
	return body, nil
}

// clockTick is Linux's USER_HZ, the unit of /proc/PID/stat's times: 100
// on every architecture Go runs on.
const clockTick = 10 * time.Millisecond

// CPU is the user and system time the members used so far, from /proc;
// false where there is no /proc.
func (c *Cluster) CPU() (time.Duration, bool) {
	var total time.Duration
	for _, m := range c.members {
		t, err := ProcCPU(m.cmd.Process.Pid)
		if err != nil {
			return 0, false
		}
		total += t
	}
	return total, true
}

// ProcCPU is the user and system time process pid used so far, from
// /proc/PID/stat.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(string(b))
}

// parseStat reads utime and stime (fields 14 and 15) of a /proc/PID/stat
// line; the command name in parentheses may hold spaces.
func parseStat(line string) (time.Duration, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, errors.New("no ')' in /proc/PID/stat")
	}
	f := strings.Fields(line[i+1:])
	// f[0] is field 3 (state): utime is field 14, f[11]; stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/PID/stat has %d fields after the name", len(f))
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(u+s) * clockTick, nil
}
