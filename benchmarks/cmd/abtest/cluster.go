package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/batonlock/baton/internal/bench"
)

// side is one of the two builds under test.
type side struct {
	name  string   // A or B
	bin   string   // the baton binary
	label string   // what it is, for the report
	env   []string // added to its servers' environment
}

// resolveBuild returns the binary spec names: spec itself when it is a
// file, else the baton of git revision spec of this repository, built
// into dir.
func resolveBuild(ctx context.Context, spec, dir string) (bin, label string, err error) {
	if st, err := os.Stat(spec); err == nil && st.Mode().IsRegular() {
		abs, err := filepath.Abs(spec)
		return abs, spec, err
	}
	root, err := output(ctx, "", "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return "", "", fmt.Errorf("%q is not a file, and git cannot say where this repository is: %w", spec, err)
	}
	root = strings.TrimSpace(root)
	rev, err := output(ctx, root, "git", "rev-parse", "--verify", "--short", spec+"^{commit}")
	if err != nil {
		return "", "", fmt.Errorf("%q is neither a file nor a git revision: %w", spec, err)
	}
	rev = strings.TrimSpace(rev)
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", rev)
	var tarball bytes.Buffer
	archive.Stdout = &tarball
	archive.Stderr = os.Stderr
	if err := archive.Run(); err != nil {
		return "", "", fmt.Errorf("git archive %s: %w", rev, err)
	}
	src := filepath.Join(dir, "src")
	if err := untar(&tarball, src); err != nil {
		return "", "", fmt.Errorf("unpack %s: %w", rev, err)
	}
	bin = filepath.Join(dir, "baton")
	if _, err := output(ctx, src, "go", "build", "-o", bin, "./cmd/baton"); err != nil {
		return "", "", fmt.Errorf("build %s: %w", rev, err)
	}
	return bin, spec + " (" + rev + ")", nil
}

func output(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// untar writes the regular files and directories of a tar stream under dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("entry %q leaves the directory", h.Name)
		}
		path := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}

// measurement is one run of a workload on one build.
type measurement struct {
	report          bench.Report
	cpuPerCyc       time.Duration // the three servers' CPU per cycle; 0 if unknown
	leaderCPUPerCyc time.Duration // the leader's alone; 0 if unknown
}

func (m measurement) String() string {
	us := func(d time.Duration) string {
		if d <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f us", float64(d)/1e3)
	}
	return fmt.Sprintf("%9.0f cycles/s  acquire p50 %6.2f ms  p99 %6.2f ms  servers' CPU/cycle %s (leader %s)  errors %d",
		m.report.CyclesPerSec, m.report.AcquireP50, m.report.AcquireP99, us(m.cpuPerCyc), us(m.leaderCPUPerCyc), m.report.Errors)
}

// measure starts a fresh cluster of s's build in dir, warms it up, runs
// the workload with s's own `baton bench`, reads the servers' CPU around
// the measured run, and stops the cluster.
func measure(ctx context.Context, s *side, w workload, dir string, o options) (m measurement, err error) {
	procs, endpoints, err := startCluster(ctx, s, dir, o.basePort)
	defer func() {
		stopCluster(procs)
		if err != nil {
			err = fmt.Errorf("%w (the members' logs are in %s)", err, dir)
		} else if !o.keep {
			os.RemoveAll(dir)
		}
	}()
	if err != nil {
		return m, err
	}
	args := func(d time.Duration) []string {
		return []string{"bench", "--endpoints", endpoints, "--workload", w.kind, "--workers", strconv.Itoa(w.workers),
			"--conns", strconv.Itoa(o.conns(w)), "--duration", d.String(), "--warmup", "0s", "--json"}
	}
	if o.warmup > 0 {
		if _, err := output(ctx, "", s.bin, args(o.warmup)...); err != nil {
			return m, fmt.Errorf("warm-up: %w", err)
		}
	}
	leader := leaderOf(ctx, procs, strings.Split(endpoints, ","))
	cpu0, cpuOK := cpuTime(procs)
	var lead0 time.Duration
	if leader != nil {
		lead0, _ = procCPU(leader.cmd.Process.Pid)
	}
	out, err := output(ctx, "", s.bin, args(o.duration)...)
	if err != nil {
		return m, err
	}
	cpu1, cpuOK1 := cpuTime(procs)
	var lead1 time.Duration
	if leader != nil {
		lead1, _ = procCPU(leader.cmd.Process.Pid)
	}
	if err := decodeReport(out, &m.report); err != nil {
		return m, err
	}
	if m.report.Errors > 0 {
		return m, fmt.Errorf("bench reported %d errors, the first: %s", m.report.Errors, m.report.FirstError)
	}
	if cpuOK && cpuOK1 && m.report.Cycles > 0 {
		m.cpuPerCyc = (cpu1 - cpu0) / time.Duration(m.report.Cycles)
	}
	if lead1 > lead0 && m.report.Cycles > 0 {
		m.leaderCPUPerCyc = (lead1 - lead0) / time.Duration(m.report.Cycles)
	}
	return m, nil
}

// decodeReport reads the JSON report `baton bench --json` prints (one
// object, indented).
func decodeReport(out string, r *bench.Report) error {
	i := strings.IndexByte(out, '{')
	if i < 0 {
		return fmt.Errorf("no JSON report in bench's output %q", out)
	}
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(r); err != nil {
		return fmt.Errorf("bench's JSON report: %w", err)
	}
	return nil
}

// member is a started server process; done is closed when it exits.
type member struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// startCluster starts three members of s's build with data and logs in
// dir and waits until each knows a leader.
func startCluster(ctx context.Context, s *side, dir string, base int) ([]*member, string, error) {
	var cluster, endpoints []string
	for i := range 3 {
		cluster = append(cluster, fmt.Sprintf("n%d=127.0.0.1:%d", i+1, base+10*i+1))
		endpoints = append(endpoints, fmt.Sprintf("127.0.0.1:%d", base+10*i))
	}
	var procs []*member
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			return procs, "", err
		}
		log, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			return procs, "", err
		}
		cmd := exec.Command(s.bin, "server", "--name", name, "--data-dir", filepath.Join(dir, name),
			"--client-addr", endpoints[i], "--peer-addr", strings.SplitN(cluster[i], "=", 2)[1],
			"--initial-cluster", strings.Join(cluster, ","), "--log-level", "warn")
		cmd.Env = append(os.Environ(), s.env...)
		cmd.Stdout, cmd.Stderr = log, log
		err = cmd.Start()
		log.Close()
		if err != nil {
			return procs, "", fmt.Errorf("start %s: %w", name, err)
		}
		m := &member{name: name, cmd: cmd, done: make(chan struct{})}
		go func() { cmd.Wait(); close(m.done) }()
		procs = append(procs, m)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, ep := range endpoints {
		for !knowsLeader(ctx, ep) {
			for _, m := range procs {
				select {
				case <-m.done:
					return procs, "", fmt.Errorf("%s exited: %s", m.name, m.cmd.ProcessState)
				default:
				}
			}
			if time.Now().After(deadline) {
				return procs, "", fmt.Errorf("%s knows no leader after 60 s", ep)
			}
			if err := ctx.Err(); err != nil {
				return procs, "", err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return procs, strings.Join(endpoints, ","), nil
}

var leaderAddr = regexp.MustCompile(`"leader_?[aA]ddr": ?"[^"]`)

var leaderAddrValue = regexp.MustCompile(`"leader_?[aA]ddr": ?"([^"]+)"`)

// leaderOf is the process of the member that leads, by the first
// endpoint's /v1/status; nil if it cannot tell.
func leaderOf(ctx context.Context, procs []*member, endpoints []string) *member {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+endpoints[0]+"/v1/status", nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	m := leaderAddrValue.FindSubmatch(body)
	if m == nil {
		return nil
	}
	for i, ep := range endpoints {
		if ep == string(m[1]) && i < len(procs) {
			return procs[i]
		}
	}
	return nil
}

func knowsLeader(ctx context.Context, endpoint string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+endpoint+"/v1/status", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode == http.StatusOK && leaderAddr.Match(body)
}

// stopCluster ends the members it started, by their PIDs: SIGTERM, then
// SIGKILL after 10 s.
func stopCluster(procs []*member) {
	for _, m := range procs {
		m.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, m := range procs {
		select {
		case <-m.done:
		case <-time.After(10 * time.Second):
			m.cmd.Process.Kill()
			<-m.done
		}
	}
}

// clockTick is Linux's USER_HZ, the unit of /proc/PID/stat's times: 100
// on every architecture Go runs on.
const clockTick = 10 * time.Millisecond

// cpuTime is the user and system time the processes used so far, from
// /proc; false where there is no /proc.
func cpuTime(procs []*member) (time.Duration, bool) {
	var total time.Duration
	for _, m := range procs {
		t, err := procCPU(m.cmd.Process.Pid)
		if err != nil {
			return 0, false
		}
		total += t
	}
	return total, true
}

func procCPU(pid int) (time.Duration, error) {
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
