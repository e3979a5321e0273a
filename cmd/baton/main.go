// Command baton is the Baton lock service and its command line: `baton
// server` runs a member; the other commands talk to a cluster.
package main

import (
	"fmt"
	"os"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(g globals, args []string) int
}

var commands []command

func init() {
	commands = []command{
		{"server", "run a Baton member (single node by default)", global(runServer)},
		{"lock", "run a command while holding a lock: baton lock NAME -- CMD", runLock},
		{"bench", "measure lock throughput and latency against a cluster", runBench},
		{"locks", "list locks: holder, token, since, queue length", runLocks},
		{"get", "show one lock in full, with its queue", runGet},
		{"history", "list a lock's recent holders: how and when each hold ended", runHistory},
		{"watch", "follow a lock: a line each time its holders or queue change", runWatch},
		{"elect", "run a command while leading an election: baton elect NAME VALUE -- CMD", runElect},
		{"observe", "follow an election: a line each time its leader or value changes", runObserve},
		{"check", "exit 0 if TOKEN is the current hold of NAME, 1 if not", runCheck},
		{"sessions", "list sessions", runSessions},
		{"blacklist", "evict a stuck session safely (it expires, releasing its locks)", runBlacklist},
		{"release", "release a lock only if SESSION (and TOKEN) still hold it", runRelease},
		{"revoke", "ask a lock's holder to let go within a grace; the leader ends it then", runRevoke},
		{"status", "show members, leader, term and indexes", runStatus},
		{"member", "add, promote or remove a member of the cluster", runMember},
		{"leader", "hand the leader's office to another member", runLeader},
		{"auth", "turn authentication on or off, or show who may do what", runAuth},
		{"user", "add or remove a user, give or take its roles", runUser},
		{"role", "add or remove a role, set its permissions over prefixes", runRole},
		{"audit", "list the recent admin and auth actions", runAudit},
		{"keys", "list the signed-token keys, or rotate: baton keys rotate", runKeys},
		{"snapshot", "back the cluster up, check a backup, or restore one into a new cluster", runSnapshot},
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, "Usage: baton COMMAND [flags] [args]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'baton COMMAND -h' for a command's flags and an example.\n")
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// global adapts a command that takes no client globals.
func global(f func(args []string) int) func(globals, []string) int {
	return func(_ globals, args []string) int { return f(args) }
}

func run(args []string) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		usage()
		return 0
	}
	g, args, err := leadingGlobals(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "baton: %s\n%s\n", flagMistake(err), helpLine(""))
		return 2
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(g, args[1:])
		}
	}
	fmt.Fprintf(os.Stderr, "baton: unknown command %q\n%s\n", args[0], helpLine(""))
	return 2
}
