// Command mutate breaks the safety rules of Baton one at a time and reports
// which tests notice. Each mutant (mutants.go) is one small edit of the
// source, named for the rule it breaks: the file, the exact original text
// and its replacement. For each mutant the command applies the edit to a
// private copy of the tree, runs the mutant's test commands in order
// (go test -count=1 -failfast, each with a timeout) until one fails, and
// puts the source back. A mutant is killed when a test command fails, and
// survives when all pass; a survivor is either given a test that kills it
// or, in the table, the reason it is acceptable.
//
// Run it from the repository, before a release (docs/ARCHITECTURE.md,
// "Mutation testing"):
//
//	go run ./scripts/mutate                 # every mutant
//	go run ./scripts/mutate -run 'liveness/' # those whose name matches
//	go run ./scripts/mutate -list           # the table, without running it
//
// The checkout is never edited: the tree (tracked files and untracked ones
// that are not ignored, so a test being written counts) is copied to a
// temporary directory first, and that copy is removed at the end, also on
// an interrupt. The command exits 1 if a mutant survives without a reason,
// does not compile, or names text the source no longer has.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	runFlag := flag.String("run", "", "run only the mutants whose name matches this regular expression")
	list := flag.Bool("list", false, "print the mutants and exit")
	all := flag.Bool("all", false, "run every test command of a mutant, not only up to the first that kills it")
	baseline := flag.Bool("baseline", true, "first run the test commands on the unmutated copy: they must pass")
	flag.Parse()

	chosen, err := choose(mutants, *runFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	if *list {
		printList(os.Stdout, chosen)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, chosen, *all, *baseline)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

// choose returns the mutants whose name matches pattern (all if empty).
func choose(ms []mutant, pattern string) ([]mutant, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("-run: %w", err)
	}
	var out []mutant
	for _, m := range ms {
		if re.MatchString(m.name) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no mutant matches %q", pattern)
	}
	return out, nil
}

// run copies the tree, checks that every chosen mutant applies, runs the
// baseline and then each mutant, and prints the report. It returns the
// exit code.
func run(ctx context.Context, ms []mutant, all, baseline bool) (int, error) {
	start := time.Now()
	root, err := repoRoot()
	if err != nil {
		return 0, err
	}
	tree, err := copyTree(root)
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tree)
	// Every mutant applies before any runs: text that moved fails the
	// run at once, not after half an hour.
	if errs := checkApply(tree, ms); len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(os.Stderr, "mutate:", e)
		}
		return 0, fmt.Errorf("%d mutants do not apply to the source: update their text in scripts/mutate/mutants.go", len(errs))
	}
	fmt.Fprintf(os.Stderr, "mutate: %d mutants, working in %s\n", len(ms), tree)
	if baseline {
		for _, c := range checksOf(ms) {
			fmt.Fprintf(os.Stderr, "mutate: baseline %s ...", c.name)
			r := c.run(ctx, tree)
			fmt.Fprintf(os.Stderr, " %s (%s)\n", r.verdict(), r.took.Round(time.Second))
			if r.failed || r.err != nil {
				return 0, fmt.Errorf("the baseline of %s fails without a mutant: fix the tests first\n%s", c.name, r.tail())
			}
		}
	}
	var results []result
	for i, m := range ms {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("interrupted")
		}
		fmt.Fprintf(os.Stderr, "mutate: [%d/%d] %s ...", i+1, len(ms), m.name)
		r, err := m.run(ctx, tree, all)
		if err != nil {
			fmt.Fprintln(os.Stderr)
			return 0, err
		}
		fmt.Fprintf(os.Stderr, " %s (%s)\n", r.status(), r.took.Round(time.Second))
		results = append(results, r)
	}
	if ctx.Err() != nil {
		return 0, fmt.Errorf("interrupted")
	}
	return report(os.Stdout, results, time.Since(start)), nil
}

// checksOf lists, once each and in first-use order, the checks of ms.
func checksOf(ms []mutant) []check {
	var out []check
	for _, m := range ms {
		for _, c := range m.checks {
			if !slices.ContainsFunc(out, func(o check) bool { return o.name == c.name }) {
				out = append(out, c)
			}
		}
	}
	return out
}

// report prints the table of results and returns the exit code: 1 if a
// mutant survived without a reason or did not compile.
func report(w io.Writer, rs []result, took time.Duration) int {
	width := len("mutant")
	for _, r := range rs {
		width = max(width, len(r.m.name))
	}
	fmt.Fprintf(w, "%-*s  %-9s  %s\n", width, "mutant", "result", "by")
	killed, accepted, survived, broken := 0, 0, 0, 0
	for _, r := range rs {
		fmt.Fprintf(w, "%-*s  %-9s  %s\n", width, r.m.name, r.status(), r.by())
		switch {
		case r.err != nil:
			broken++
		case len(r.killers) > 0:
			killed++
		case r.m.accepted != "":
			accepted++
		default:
			survived++
		}
	}
	fmt.Fprintf(w, "\n%d mutants: %d killed, %d survived with a reason, %d survived without one, %d did not run; %s\n",
		len(rs), killed, accepted, survived, broken, took.Round(time.Second))
	for _, r := range rs {
		if r.err == nil && len(r.killers) == 0 {
			reason := r.m.accepted
			if reason == "" {
				reason = "NO REASON: add a test that kills it, or say why it is acceptable"
			}
			fmt.Fprintf(w, "  %s: %s\n", r.m.name, reason)
		}
	}
	if survived > 0 || broken > 0 {
		return 1
	}
	return 0
}

// printList prints the table of mutants.
func printList(w io.Writer, ms []mutant) {
	for _, m := range ms {
		var names []string
		for _, c := range m.checks {
			names = append(names, c.name)
		}
		fmt.Fprintf(w, "%s\n\t%s; checked by %s\n", m.name, m.file, strings.Join(names, ", "))
		if m.accepted != "" {
			fmt.Fprintf(w, "\taccepted if it survives: %s\n", m.accepted)
		}
	}
}
