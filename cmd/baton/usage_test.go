package main

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

// runCaptured runs the command line args and returns its exit status and
// what it wrote to stderr.
func runCaptured(t *testing.T, args ...string) (int, string) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := os.Stderr
	os.Stderr = f
	code := run(args)
	os.Stderr = saved
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return code, string(b)
}

// everyCommand is every command and subcommand of the CLI.
var everyCommand = []string{
	"server", "lock", "bench", "locks", "get", "history", "watch", "check", "sessions", "blacklist", "release", "revoke", "status",
	"member add", "member promote", "member remove", "member list", "leader transfer",
	"auth enable", "auth disable", "auth status",
	"user add", "user remove", "user grant", "user revoke",
	"role add", "role remove", "role grant", "role revoke", "audit", "keys", "keys rotate",
	"snapshot save", "snapshot status", "snapshot restore",
	"elect", "observe",
}

// TestEveryCommandListed keeps everyCommand in step with the commands.
func TestEveryCommandListed(t *testing.T) {
	for _, c := range commands {
		if !slices.ContainsFunc(everyCommand, func(s string) bool { return strings.Fields(s)[0] == c.name }) {
			t.Errorf("command %q is missing from everyCommand", c.name)
		}
	}
}

// TestUsageErrorsAreOneLine: a mistake on the command line prints one
// line naming it and one saying how to get help, and exits 2, for every
// command; never Go's flag error followed by the whole usage.
func TestUsageErrorsAreOneLine(t *testing.T) {
	type tc struct {
		args []string
		cmd  string // as it names itself; "" for baton's own
		want string
	}
	var cases []tc
	for _, c := range everyCommand {
		cases = append(cases, tc{append(strings.Fields(c), "--bogus"), c, "unknown flag --bogus"})
	}
	cases = append(cases,
		tc{[]string{"check", "x"}, "check", "missing TOKEN"},
		tc{[]string{"check"}, "check", "missing NAME and TOKEN"},
		tc{[]string{"get"}, "get", "missing NAME"},
		tc{[]string{"history"}, "history", "missing NAME"},
		tc{[]string{"history", "a", "b"}, "history", `unexpected argument "b"`},
		tc{[]string{"watch"}, "watch", "missing NAME"},
		tc{[]string{"lock"}, "lock", "missing NAME"},
		tc{[]string{"lock", "job"}, "lock", "no command: put it after --, e.g. baton lock job -- ./job.sh"},
		tc{[]string{"lock", "job", "./job.sh"}, "lock", `unexpected argument "./job.sh": put the command after --, e.g. baton lock job -- ./job.sh`},
		tc{[]string{"lock", "--reader", "cfg"}, "lock", "no command: put it after --, e.g. baton lock --reader cfg -- ./job.sh"},
		tc{[]string{"lock", "a", "b", "a", "--", "true"}, "lock", `lock "a" is named twice (a and a): a set holds each lock once`},
		tc{[]string{"lock", "--read", "doc", "--writer", "doc", "--", "true"}, "lock", `lock "doc" is named twice (a read of doc and the write of doc): a set holds each lock once`},
		tc{[]string{"lock", "--permit", "pool=3", "--permit", "pool=4", "--", "true"}, "lock",
			`semaphore "pool" is named twice, with 3 and 4 permits: a lock has one size, and a set holds it once`},
		tc{[]string{"lock", "--permit", "pool", "--", "true"}, "lock", `invalid value "pool" for --permit: want NAME=N (a semaphore of N permits), e.g. pool/encoders=4`},
		tc{[]string{"lock", "--permit", "pool=0", "--", "true"}, "lock", `invalid value "pool=0" for --permit: "0" is not a number of permits 1..10000`},
		tc{[]string{"lock", "--max-readers", "5", "--permit", "p=2", "x", "--", "true"}, "lock", "--max-readers needs --read, --write, --reader or --writer"},
		tc{[]string{"elect"}, "elect", "missing NAME and VALUE"},
		tc{[]string{"elect", "leader/x"}, "elect", "missing VALUE"},
		tc{[]string{"elect", "leader/x", "10.0.0.1:80"}, "elect", "no command: put it after --, e.g. baton elect leader/x 10.0.0.1:80 -- ./serve.sh"},
		tc{[]string{"elect", "leader/x", "v", "./serve.sh"}, "elect", `unexpected argument "./serve.sh": put the command after --, e.g. baton elect leader/x v -- ./serve.sh`},
		tc{[]string{"observe"}, "observe", "missing NAME"},
		tc{[]string{"blacklist"}, "blacklist", "missing SESSION"},
		tc{[]string{"release"}, "release", "missing NAME"},
		tc{[]string{"member", "add", "n4"}, "member add", "missing PEER_ADDR"},
		tc{[]string{"user", "grant", "bob"}, "user grant", "missing ROLE"},
		tc{[]string{"role", "grant", "jobs"}, "role grant", "missing PREFIX and PERMS"},
		tc{[]string{"status", "x"}, "status", `unexpected argument "x"`},
		tc{[]string{"server", "x"}, "server", `unexpected argument "x"`},
		tc{[]string{"server", "--tick"}, "server", "flag --tick needs a value"},
		tc{[]string{"server", "--tick", "soon"}, "server", `invalid value "soon" for --tick: parse error`},
		tc{[]string{"status", "--json=maybe"}, "status", `invalid boolean value "maybe" for --json: parse error`},
		tc{[]string{"member"}, "member", "missing subcommand: want add, promote, remove or list"},
		tc{[]string{"member", "join"}, "member", `unknown subcommand "join": want add, promote, remove or list`},
		tc{[]string{"leader"}, "leader", "missing subcommand: want transfer"},
		tc{[]string{"snapshot"}, "snapshot", "missing subcommand: want save, status or restore"},
		tc{[]string{"snapshot", "save"}, "snapshot save", "missing FILE"},
		tc{[]string{"snapshot", "status"}, "snapshot status", "missing FILE"},
		tc{[]string{"snapshot", "restore", "b.snap", "--name", "r1"}, "snapshot restore", "missing --data-dir: the new member's data directory"},
		tc{[]string{"snapshot", "restore", "b.snap", "--data-dir", "d"}, "snapshot restore", "missing --name: the new member's name"},
		tc{[]string{"auth"}, "auth", "missing subcommand: want one of enable, disable, status"},
		tc{[]string{"frob"}, "", `unknown command "frob"`},
		tc{[]string{"--bogus", "status"}, "", "unknown flag --bogus"},
	)
	for _, tt := range cases {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stderr := runCaptured(t, tt.args...)
			first := "baton: " + tt.want
			if tt.cmd != "" {
				first = "baton " + tt.cmd + ": " + tt.want
			}
			if want := first + "\n" + helpLine(tt.cmd) + "\n"; code != 2 || stderr != want {
				t.Errorf("baton %q exited %d, stderr:\n%s\nwant 2 and:\n%s", tt.args, code, stderr, want)
			}
		})
	}
}

// TestHelpExitsZero: --help prints the command's usage and exits 0.
func TestHelpExitsZero(t *testing.T) {
	for _, c := range []string{"server", "lock", "elect", "observe", "status", "check", "member add"} {
		code, stderr := runCaptured(t, append(strings.Fields(c), "--help")...)
		if code != 0 || !strings.HasPrefix(stderr, "Usage: baton "+strings.Fields(c)[0]) {
			t.Errorf("baton %s --help exited %d, stderr %q; want 0 and the usage", c, code, stderr)
		}
	}
}

func TestSynopsisArgs(t *testing.T) {
	for _, tt := range []struct {
		synopsis string
		skip     int
		want     []string
	}{
		{"check NAME TOKEN [flags]", 1, []string{"NAME", "TOKEN"}},
		{"locks [PREFIX] [flags]", 1, []string{"PREFIX"}},
		{"release NAME --session S [--token T] [flags]", 1, []string{"NAME"}},
		{"member add NAME PEER_ADDR [--learner] [flags]", 2, []string{"NAME", "PEER_ADDR"}},
		{"leader transfer [--to NAME] [flags]", 2, nil},
		{"user add NAME [--token] [flags]", 2, []string{"NAME"}},
		{"status [flags]", 1, nil},
	} {
		if got := synopsisArgs(tt.synopsis, tt.skip); !slices.Equal(got, tt.want) {
			t.Errorf("synopsisArgs(%q) = %q; want %q", tt.synopsis, got, tt.want)
		}
	}
}
