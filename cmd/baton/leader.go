package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/batonlock/baton"
)

// runLeader is `baton leader transfer [--to NAME]`.
func runLeader(g globals, args []string) int {
	const synopsis = `leader transfer [--to NAME]`
	const example = `baton leader transfer --to n2   (before maintenance of the leader's machine; a leader given SIGTERM does it by itself)`
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fs := newFlagSet("leader", synopsis, example, &g)
		fs.Usage()
		if len(args) == 0 {
			return exitCode("leader", usagef("want transfer"))
		}
		return 0
	}
	if args[0] != "transfer" {
		return exitCode("leader", usagef("unknown subcommand %q: want transfer", args[0]))
	}
	var to string
	return clientCommand("leader transfer", "leader transfer [--to NAME] [flags]", example, 0, 0, g, args[1:],
		func(fs *flag.FlagSet) {
			fs.StringVar(&to, "to", "", "the member to lead (default: the voter whose log is furthest along)")
		},
		func(ctx context.Context, c *baton.Client, _ []string, g globals) error {
			leader, err := c.TransferLeadership(ctx, to)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(map[string]string{"leader": leader})
			}
			fmt.Printf("%s leads now\n", leader)
			return nil
		})
}
