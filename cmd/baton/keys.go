package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/api/rules"
)

// runKeys is `baton keys` (list the cluster's signed-token keys) and
// `baton keys rotate`.
func runKeys(g globals, args []string) int {
	if len(args) > 0 && args[0] == "rotate" {
		var retention time.Duration
		return clientCommand("keys rotate", "keys rotate [--retention 24h] [flags]",
			"baton keys rotate --retention 1h   (0s after a member's data dir or a snapshot was exposed: the old key stops verifying at once)",
			0, 0, g, args[1:],
			func(fs *flag.FlagSet) {
				fs.DurationVar(&retention, "retention", rules.DefaultKeyRetention,
					fmt.Sprintf("how long the key rotated out still verifies the tokens it signed: 0s .. %v", rules.MaxKeyRetention))
			},
			func(ctx context.Context, c *baton.Client, _ []string, g globals) error {
				cur, keys, err := c.RotateSigningKey(ctx, retention)
				if err != nil || g.json {
					if err == nil {
						err = printJSON(keys)
					}
					return err
				}
				return done(g, "key %d is current; the key before it verifies for %v", cur.ID, retention)
			})
	}
	return clientCommand("keys", "keys [flags]", "baton keys   (then: baton keys rotate)", 0, 0, g, args, nil,
		func(ctx context.Context, c *baton.Client, _ []string, g globals) error {
			keys, err := c.Keys(ctx)
			if err != nil || g.json {
				if err == nil {
					err = printJSON(keys)
				}
				return err
			}
			if len(keys) == 0 {
				fmt.Println("the cluster has no signing key: start its members with --signed-tokens, or run baton keys rotate")
				return nil
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tCREATED\tSTATE\tPUBLIC KEY")
			for _, k := range keys {
				state := "current"
				if !k.Current {
					state = "retired, verifies until " + k.NotAfter.Format(time.DateTime)
					if !time.Now().Before(k.NotAfter) {
						state = "retired, no longer verifies"
					}
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", k.ID, k.Created.Format(time.DateTime), state, base64.StdEncoding.EncodeToString(k.PublicKey))
			}
			return tw.Flush()
		})
}
