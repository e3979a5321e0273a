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
// member name or address no member would accept). exitCode prints it in
// one line and, below it, how to get the command's usage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// helpLine is what follows a usage error: how to get cmd's usage.
func helpLine(cmd string) string {
	if cmd == "" {
		return "run 'baton --help' for usage"
	}
	return "run 'baton " + cmd + " --help' for usage"
}

// parseCommand parses cmd's command line with fs (parseArgs). On -h or
// --help it prints fs's usage and returns exit status 0; on a mistake it
// prints one line naming it, and how to get the usage, and returns 2.
// Go's flag package would print its error and then the whole usage. ok
// reports whether the command goes on with pos and rest.
func parseCommand(cmd string, fs *flag.FlagSet, args []string) (pos, rest []string, code int, ok bool) {
	fs.SetOutput(io.Discard)
	pos, rest, err := parseArgs(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(os.Stderr)
		fs.Usage()
		return nil, nil, 0, false
	case err != nil:
		return nil, nil, exitCode(cmd, usagef("%s", flagMistake(err))), false
	}
	return pos, rest, 0, true
}

// flagMistake says what the flag package found wrong, with flags spelt
// as this command line spells them (--name): "unknown flag --bogus".
func flagMistake(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag --" + name
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "flag --" + name + " needs a value"
	}
	// invalid value "x" for flag -tick: ...; invalid boolean value "x" for -json: ...
	if before, after, ok := strings.Cut(msg, " for flag -"); ok {
		return before + " for --" + after
	}
	if before, after, ok := strings.Cut(msg, " for -"); ok {
		return before + " for --" + after
	}
	return msg
}

// argCount checks that a command got min..max positional arguments
// (max < 0: any number), and says which is missing or which is one too
// many. names are the arguments' names, as the synopsis gives them.
func argCount(pos []string, min, max int, names []string) error {
	switch {
	case len(pos) < min && len(names) >= min:
		return usagef("missing %s", strings.Join(names[len(pos):min], " and "))
	case len(pos) < min:
		return usagef("want at least %d arguments, got %d", min, len(pos))
	case max >= 0 && len(pos) > max:
		return usagef("unexpected argument %q", pos[max])
	}
	return nil
}

// synopsisArgs lists the positional arguments a synopsis names after the
// command's own words (skip of them): its upper-case words, optional or
// not, leaving out flags and their values. "check NAME TOKEN [flags]"
// gives NAME, TOKEN; "release NAME --session S [--token T]" gives NAME.
func synopsisArgs(synopsis string, skip int) []string {
	words := strings.Fields(synopsis)
	var out []string
	for i := skip; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(strings.TrimPrefix(w, "["), "-") {
			if !strings.HasSuffix(w, "]") && i+1 < len(words) && isPlaceholder(words[i+1]) {
				i++ // the flag's value
			}
			continue
		}
		if isPlaceholder(w) {
			out = append(out, strings.Trim(w, "[]."))
		}
	}
	return out
}

// isPlaceholder reports whether w is an upper-case word of a synopsis
// (NAME, [PREFIX], PEER_ADDR).
func isPlaceholder(w string) bool {
	w = strings.Trim(w, "[].")
	return w != "" && strings.ToUpper(w) == w && strings.IndexFunc(w, func(r rune) bool { return r != '_' && (r < 'A' || r > 'Z') }) < 0
}

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
	if _, ok := errors.AsType[*usageError](err); ok {
		fmt.Fprintln(os.Stderr, helpLine(cmd))
		return 2
	}
	if errors.Is(err, baton.ErrInvalidArgument) {
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
