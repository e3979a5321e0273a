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
	// TLS to the members: a CA to trust, and a certificate to show.
	cacert, cert, key string
	// authToken is a user's bearer token, when the cluster has
	// authentication on and the user has no certificate.
	authToken string
}

func defaultGlobals() globals {
	return globals{endpoints: DefaultEndpoints, timeout: 10 * time.Second}
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.endpoints, "endpoints", g.endpoints, "comma-separated client addresses of members (env BATON_ENDPOINTS)")
	fs.BoolVar(&g.json, "json", g.json, "print JSON instead of a table")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "how long to try before giving up (per command)")
	fs.StringVar(&g.cacert, "cacert", g.cacert, "talk TLS to the members, trusting the CA certificates in this PEM file (env BATON_CACERT)")
	fs.StringVar(&g.cert, "cert", g.cert, "client certificate (PEM) to show members that require one; with --key (env BATON_CERT)")
	fs.StringVar(&g.key, "key", g.key, "the client certificate's key (PEM) (env BATON_KEY)")
	fs.StringVar(&g.authToken, "auth-token", g.authToken, "a user's bearer token, for a cluster with authentication on (env BATON_AUTH_TOKEN; prefer the environment: a flag shows in ps)")
}

// options are the client options the globals ask for.
func (g globals) options() ([]baton.Option, error) {
	cfg, err := clientTLS(g.cacert, g.cert, g.key)
	if err != nil {
		return nil, err
	}
	var opts []baton.Option
	if cfg != nil {
		opts = append(opts, baton.WithTLS(cfg))
	}
	if g.authToken != "" {
		opts = append(opts, baton.WithToken(g.authToken))
	}
	return opts, nil
}

// dialGlobals connects to the members named by g, with its TLS.
func dialGlobals(ctx context.Context, g globals) (*baton.Client, error) {
	opts, err := g.options()
	if err != nil {
		return nil, err
	}
	return baton.Dial(ctx, g.endpoints, opts...)
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
	for name, v := range map[string]*string{"endpoints": &g.endpoints, "cacert": &g.cacert, "cert": &g.cert, "key": &g.key, "auth-token": &g.authToken} {
		if !set[name] {
			if e := os.Getenv("BATON_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); e != "" {
				*v = e
			}
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

// usageError is a mistake on the command line: exit status 2, as for an
// argument the client refuses (baton.ErrInvalidArgument: a lock name, a
// member name or address no member would accept).
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
	msg := strings.TrimPrefix(err.Error(), "baton: ")
	switch {
	case strings.Contains(msg, "error reading server preface: EOF"):
		// What a plaintext client sees from a TLS port.
		msg += " (does the member serve TLS? then give --cacert)"
	case strings.Contains(msg, "tls: certificate required"):
		msg += " (the member requires a client certificate: --cert and --key)"
	}
	fmt.Fprintf(os.Stderr, "baton %s: %s\n", cmd, msg)
	var ue *usageError
	if errors.As(err, &ue) || errors.Is(err, baton.ErrInvalidArgument) {
		return 2
	}
	return 1
}

// dial connects to the cluster named by g within its timeout.
func dial(ctx context.Context, g globals) (*baton.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	return dialGlobals(ctx, g)
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
