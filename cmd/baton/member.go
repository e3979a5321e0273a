package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/batonlock/baton"
)

// runMember is `baton member add|promote|remove|list`.
func runMember(g globals, args []string) int {
	const synopsis = `member add NAME PEER_ADDR [--learner] | member promote NAME | member remove NAME | member list`
	const example = `baton member add n4 10.0.0.4:7701 --learner   (then start n4 with the printed command; then: baton member promote n4)`
	if len(args) == 0 {
		return exitCode("member", usagef("missing subcommand: want add, promote, remove or list"))
	}
	if args[0] == "-h" || args[0] == "--help" {
		fs := newFlagSet("member", synopsis, example, &g)
		fs.Usage()
		return 0
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "add":
		var learner bool
		return clientCommand("member add", "member add NAME PEER_ADDR [--learner] [flags]", example, 2, 2, g, rest,
			func(fs *flag.FlagSet) {
				fs.BoolVar(&learner, "learner", false, "add it as a learner: it receives the log without voting until 'baton member promote' (safer while it catches up)")
			},
			func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
				members, initial, err := c.AddMember(ctx, pos[0], pos[1], learner)
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(map[string]any{"members": members, "initial_cluster": initial})
				}
				kind := "voter"
				if learner {
					kind = "learner"
				}
				fmt.Printf("added %s as a %s. Start it with an empty data dir:\n  baton server --name %s --peer-addr %s --join --initial-cluster %s [--data-dir ... --client-addr ...]\n",
					pos[0], kind, pos[0], pos[1], initial)
				if learner {
					fmt.Printf("then, once it caught up: baton member promote %s\n", pos[0])
				}
				return printMembers(members)
			})
	case "promote":
		return clientCommand("member promote", "member promote NAME [flags]", "baton member promote n4", 1, 1, g, rest, nil,
			func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
				members, err := c.PromoteMember(ctx, pos[0])
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(members)
				}
				fmt.Printf("promoted %s to a voter\n", pos[0])
				return printMembers(members)
			})
	case "remove":
		return clientCommand("member remove", "member remove NAME [flags]", "baton member remove n2", 1, 1, g, rest, nil,
			func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
				members, err := c.RemoveMember(ctx, pos[0])
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(members)
				}
				fmt.Printf("removed %s: it stops once it applies its removal\n", pos[0])
				return printMembers(members)
			})
	case "list":
		return clientCommand("member list", "member list [flags]", "baton member list", 0, 0, g, rest, nil,
			func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
				st, err := c.Status(ctx)
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(st.Members)
				}
				return printMembers(st.Members)
			})
	}
	return exitCode("member", usagef("unknown subcommand %q: want add, promote, remove or list", sub))
}

func printMembers(ms []baton.Member) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tROLE\tCLIENT\tPEER\tREADS LOG")
	for _, m := range ms {
		role := "voter"
		if m.Learner {
			role = "learner"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", m.Name, role, orDash(m.ClientAddr), m.PeerAddr, logVersion(m.LogVersion))
	}
	return w.Flush()
}
