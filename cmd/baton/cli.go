package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/batonlock/baton"
)

// DefaultEndpoints is where the CLI looks for a cluster when neither
// --endpoints nor BATON_ENDPOINTS says otherwise: the single-node default.
const DefaultEndpoints = "127.0.0.1:7700"

// globals are the flags every client command takes, before or after its
// name: `baton --endpoints E lock ...` and `baton lock --endpoints E ...`.
type globals struct {
	endpoints string
	json      bool
	timeout   time.Duration
}

func defaultGlobals() globals {
	return globals{endpoints: DefaultEndpoints, timeout: 10 * time.Second}
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.endpoints, "endpoints", g.endpoints, "comma-separated client addresses of members (env BATON_ENDPOINTS)")
	fs.BoolVar(&g.json, "json", g.json, "print JSON instead of a table")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "how long to try before giving up (per command)")
}

// leadingGlobals takes the global flags given before the command name and
// returns the rest of args, starting with the command name.
func leadingGlobals(args []string) (globals, []string, error) {
	g := defaultGlobals()
	fs := flag.NewFlagSet("baton", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs)
	if err := fs.Parse(args); err != nil {
		return g, nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["endpoints"] {
		if v := os.Getenv("BATON_ENDPOINTS"); v != "" {
			g.endpoints = v
		}
	}
	return g, fs.Args(), nil
}

// parseArgs parses flags anywhere among the positional arguments (so
// `baton get NAME --json` works) and returns the positional ones. Everything
// after a "--" is positional and returned in rest.
func parseArgs(fs *flag.FlagSet, args []string) (pos, rest []string, err error) {
	if i := indexOf(args, "--"); i >= 0 {
		args, rest = args[:i], args[i+1:]
		if rest == nil {
			rest = []string{}
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, rest, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func indexOf(args []string, s string) int {
	for i, a := range args {
		if a == s {
			return i
		}
	}
	return -1
}

// newFlagSet makes a command's flag set with the globals registered and a
// usage text with its synopsis and example.
func newFlagSet(name, synopsis, example string, g *globals) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	g.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: baton %s\n\nExample:\n  %s\n\nFlags:\n", synopsis, example)
		fs.PrintDefaults()
	}
	return fs
}

// usageError is a mistake on the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// exitCode prints err as one line and returns the command's exit status.
func exitCode(cmd string, err error) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(os.Stderr, "baton %s: %s\n", cmd, strings.TrimPrefix(err.Error(), "baton: "))
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// dial connects to the cluster named by g within its timeout.
func dial(ctx context.Context, g globals) (*baton.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	return baton.Dial(ctx, g.endpoints)
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

func owner(label string, session uint64) string {
	if label == "" {
		return fmt.Sprintf("session %d", session)
	}
	return fmt.Sprintf("%s (session %d)", label, session)
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
