package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/api/rules"
)

// runRevoke asks the holders of a lock to let go within a grace: their
// clients are told at once (`baton lock` sends its command SIGTERM), and
// the leader ends a hold still there when the grace passes.
func runRevoke(g globals, args []string) int {
	var (
		grace time.Duration
		token uint64
	)
	return clientCommand("revoke", "revoke NAME [--grace 30s] [--token T] [flags]", "baton revoke jobs/42 --grace 1m --token 5678", 1, 1, g, args,
		func(fs *flag.FlagSet) {
			fs.DurationVar(&grace, "grace", rules.DefaultRevokeGrace,
				fmt.Sprintf("how long the holder has to let go before the leader ends its hold (%s..%s)", rules.MinRevokeGrace, rules.MaxRevokeGrace))
			fs.Uint64Var(&token, "token", 0, "ask only the hold with this token, the one you saw (0: every holder of the lock)")
		},
		func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
			revs, err := c.RevokeLock(ctx, pos[0], baton.WithGrace(grace), baton.WithRevokeToken(token))
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(revs)
			}
			for _, r := range revs {
				fmt.Printf("asked the hold of %s with token %d (key %q) to let go: the leader ends it at %s (%s) unless it is released first\n",
					oneLine(r.Name), r.Token, r.OwnerKey, r.Deadline.Format(time.RFC3339), until(r.Deadline))
			}
			return nil
		})
}
