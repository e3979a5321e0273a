package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"
)

// check is one test command that may kill a mutant: go test -count=1
// -failfast -timeout=timeout, with args.
type check struct {
	name    string // as the report names it
	args    []string
	timeout time.Duration
}

// checkRun is how one check went.
type checkRun struct {
	check  check
	failed bool     // the tests failed (or timed out)
	tests  []string // the failing tests, as go test names them
	seeds  int      // the simulation seeds that failed
	err    error    // the command could not run, or the code did not build
	output []byte
	took   time.Duration
}

// runSlack is how long past its test timeout a check may take: building
// the package and linking its test binary.
const runSlack = 3 * time.Minute

// run runs c in the tree at dir.
func (c check) run(ctx context.Context, dir string) checkRun {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.timeout+runSlack)
	defer cancel()
	args := append([]string{"test", "-count=1", "-failfast", "-timeout=" + c.timeout.String()}, c.args...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	ownGroup(cmd)
	err := cmd.Run()
	r := checkRun{check: c, output: out.Bytes(), took: time.Since(start)}
	switch {
	case ctx.Err() != nil:
		r.err = fmt.Errorf("%s: %w after %v", c.name, ctx.Err(), r.took.Round(time.Second))
	case buildFailed(r.output):
		r.err = fmt.Errorf("%s: the mutated code does not build:\n%s", c.name, r.tail())
	case err != nil:
		r.failed = true
		r.tests = failingTests(r.output)
		r.seeds = len(failedSeed.FindAll(r.output, -1))
		if len(r.tests) == 0 {
			if _, ok := err.(*exec.ExitError); !ok {
				r.failed, r.err = false, fmt.Errorf("%s: %w", c.name, err)
			}
		}
	}
	return r
}

// verdict is "pass", "FAIL" or "ERROR".
func (r checkRun) verdict() string {
	switch {
	case r.err != nil:
		return "ERROR"
	case r.failed:
		return "FAIL"
	}
	return "pass"
}

// tail is the end of the output, for a message.
func (r checkRun) tail() string {
	lines := strings.Split(strings.TrimRight(string(r.output), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}

var (
	failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)
	// A test timeout panics and lists the tests running then.
	timedOut    = regexp.MustCompile(`(?m)^panic: test timed out after .*\n(?:.*\n)*?\s*running tests:\n((?:\s+\S+ \(.*\)\n)+)`)
	runningTest = regexp.MustCompile(`(?m)^\s+(\S+) \(`)
	failedSeed  = regexp.MustCompile(`(?m)seed \d+ failed`)
	setupFailed = regexp.MustCompile(`(?m)^FAIL\s+\S+ \[(build|setup) failed\]$|^# \S+\n.*\.go:\d+:\d+: `)
)

func buildFailed(out []byte) bool { return setupFailed.Match(out) }

// failingTests lists the failing tests, deepest first (a subtest rather
// than its parent), or those running when the test binary timed out.
func failingTests(out []byte) []string {
	var names []string
	for _, m := range failLine.FindAllSubmatch(out, -1) {
		names = append(names, string(m[1]))
	}
	if m := timedOut.FindSubmatch(out); m != nil {
		for _, t := range runningTest.FindAllSubmatch(m[1], -1) {
			names = append(names, string(t[1])+" (timed out)")
		}
	}
	// Keep the leaves: a parent fails because its subtest did.
	var leaves []string
	for _, n := range names {
		parent := slices.ContainsFunc(names, func(o string) bool { return strings.HasPrefix(o, n+"/") })
		if !parent && !slices.Contains(leaves, n) {
			leaves = append(leaves, n)
		}
	}
	return leaves
}

// result is how one mutant went.
type result struct {
	m       mutant
	killers []checkRun // the checks that failed
	err     error      // the mutant did not build or a check could not run
	took    time.Duration
}

// run applies m in the tree at dir, runs its checks in order (all of them
// with all, else up to the first that fails) and restores the source. The
// error is for the run as a whole (the source could not be restored, or
// the run was interrupted); a mutant's own trouble is in the result.
func (m mutant) run(ctx context.Context, dir string, all bool) (res result, err error) {
	start := time.Now()
	res = result{m: m}
	restore, err := m.apply(dir)
	if err != nil {
		return res, err
	}
	defer func() {
		if rerr := restore(); rerr != nil && err == nil {
			err = fmt.Errorf("restore %s: %w", m.file, rerr)
		}
		res.took = time.Since(start)
	}()
	for _, c := range m.checks {
		r := c.run(ctx, dir)
		if ctx.Err() != nil {
			return res, fmt.Errorf("interrupted")
		}
		if r.err != nil {
			res.err = r.err
			fmt.Fprintf(os.Stderr, "\n%s: %v\n", m.name, r.err)
			return res, nil
		}
		if r.failed {
			res.killers = append(res.killers, r)
			if !all {
				break
			}
		}
	}
	return res, nil
}

// status is "killed", "survived", "accepted" (survived with a reason) or
// "ERROR".
func (r result) status() string {
	switch {
	case r.err != nil:
		return "ERROR"
	case len(r.killers) > 0:
		return "killed"
	case r.m.accepted != "":
		return "accepted"
	}
	return "SURVIVED"
}

// by names what killed the mutant: each failing check and its failing
// tests.
func (r result) by() string {
	var parts []string
	for _, k := range r.killers {
		s := k.check.name + ": " + strings.Join(k.tests[:min(3, len(k.tests))], ", ")
		if len(k.tests) == 0 {
			s += "failed outside a test (TestMain, a package's init)"
		}
		if len(k.tests) > 3 {
			s += fmt.Sprintf(" and %d more", len(k.tests)-3)
		}
		if k.seeds > 0 {
			s += fmt.Sprintf(" (%d seeds)", k.seeds)
		}
		parts = append(parts, s)
	}
	if r.err != nil {
		parts = append(parts, strings.SplitN(r.err.Error(), "\n", 2)[0])
	}
	return strings.Join(parts, "; ")
}
