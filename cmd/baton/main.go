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
	run     func(args []string) int
}

var commands []command

func init() {
	commands = []command{
		{"server", "run a Baton member (single node by default)", runServer},
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

func run(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:])
		}
	}
	fmt.Fprintf(os.Stderr, "baton: unknown command %q\n", args[0])
	usage()
	return 2
}
