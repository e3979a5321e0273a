package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/batonlock/baton"
)

// subcommand is one verb of `baton auth|user|role`.
type subcommand struct {
	verb, synopsis, example string
	minArgs, maxArgs        int
	extra                   func(fs *flag.FlagSet)
	run                     func(ctx context.Context, c *baton.Client, pos []string, g globals) error
}

// runSubcommands runs `baton NAME VERB ...` with one of subs.
func runSubcommands(name string, g globals, args []string, subs []subcommand) int {
	var verbs []string
	for _, s := range subs {
		verbs = append(verbs, s.verb)
	}
	if len(args) == 0 {
		return exitCode(name, usagef("missing subcommand: want one of %s", strings.Join(verbs, ", ")))
	}
	if args[0] == "-h" || args[0] == "--help" {
		for _, s := range subs {
			fmt.Fprintf(os.Stderr, "  baton %s\n", s.synopsis)
		}
		return 0
	}
	for _, s := range subs {
		if s.verb == args[0] {
			return clientCommand(name+" "+s.verb, s.synopsis+" [flags]", s.example, s.minArgs, s.maxArgs, g, args[1:], s.extra, s.run)
		}
	}
	return exitCode(name, usagef("unknown %s command %q: want one of %s", name, args[0], strings.Join(verbs, ", ")))
}

// done prints what a change did, unless --json (then nothing: the exit
// status says it).
func done(g globals, format string, args ...any) error {
	if !g.json {
		fmt.Printf(format+"\n", args...)
	}
	return nil
}

// runAuth is `baton auth enable|disable|status`.
func runAuth(g globals, args []string) int {
	return runSubcommands("auth", g, args, []subcommand{
		{verb: "enable", synopsis: "auth enable", example: "baton user add root --token && baton user grant root root && baton auth enable",
			run: func(ctx context.Context, c *baton.Client, _ []string, g globals) error {
				if err := c.EnableAuth(ctx); err != nil {
					return err
				}
				return done(g, "authentication is on: every call must show a user's token (--auth-token, BATON_AUTH_TOKEN) or certificate")
			}},
		{verb: "disable", synopsis: "auth disable", example: "BATON_AUTH_TOKEN=... baton auth disable",
			run: func(ctx context.Context, c *baton.Client, _ []string, g globals) error {
				if err := c.DisableAuth(ctx); err != nil {
					return err
				}
				return done(g, "authentication is off: every client may do everything")
			}},
		{verb: "status", synopsis: "auth status", example: "baton auth status",
			run: func(ctx context.Context, c *baton.Client, _ []string, g globals) error {
				st, err := c.GetAuth(ctx)
				if err != nil || g.json {
					if err == nil {
						err = printJSON(st)
					}
					return err
				}
				on := "off"
				if st.Enabled {
					on = "on"
				}
				fmt.Printf("authentication is %s", on)
				if st.You != "" {
					fmt.Printf("; you are %q", st.You)
				}
				fmt.Println()
				tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "USER\tROLES\tTOKEN")
				for _, u := range st.Users {
					fmt.Fprintf(tw, "%s\t%s\t%v\n", u.Name, strings.Join(u.Roles, ","), u.HasToken)
				}
				fmt.Fprintln(tw, "\nROLE\tPREFIX\tPERMISSIONS")
				fmt.Fprintln(tw, "root\t(every name)\tread,lock,admin")
				for _, r := range st.Roles {
					if len(r.Permissions) == 0 {
						fmt.Fprintf(tw, "%s\t-\t-\n", r.Name)
					}
					for _, p := range r.Permissions {
						fmt.Fprintf(tw, "%s\t%q\t%s\n", r.Name, p.Prefix, p.Perms)
					}
				}
				return tw.Flush()
			}},
	})
}

// runUser is `baton user add|remove|grant|revoke`.
func runUser(g globals, args []string) int {
	var withToken bool
	return runSubcommands("user", g, args, []subcommand{
		{verb: "add", synopsis: "user add NAME [--token]", example: "baton user add ci-runner --token   (prints its token, this once)", minArgs: 1, maxArgs: 1,
			extra: func(fs *flag.FlagSet) {
				fs.BoolVar(&withToken, "token", false, "draw a bearer token for the user and print it (without: the user shows a client certificate whose common name is NAME)")
			},
			run: func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
				tok, err := c.AddUser(ctx, pos[0], withToken)
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(map[string]string{"user": pos[0], "token": tok})
				}
				if tok == "" {
					return done(g, "added user %s: it shows a client certificate whose common name is %s", pos[0], pos[0])
				}
				fmt.Fprintf(os.Stderr, "added user %s; its token (shown this once, keep it as a password):\n", pos[0])
				fmt.Println(tok)
				return nil
			}},
		{verb: "remove", synopsis: "user remove NAME", example: "baton user remove ci-runner", minArgs: 1, maxArgs: 1,
			run: func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
				if err := c.DeleteUser(ctx, pos[0]); err != nil {
					return err
				}
				return done(g, "removed user %s", pos[0])
			}},
		{verb: "grant", synopsis: "user grant NAME ROLE", example: "baton user grant ci-runner jobs", minArgs: 2, maxArgs: 2,
			run: func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
				if err := c.GrantRole(ctx, pos[0], pos[1]); err != nil {
					return err
				}
				return done(g, "user %s has the role %s", pos[0], pos[1])
			}},
		{verb: "revoke", synopsis: "user revoke NAME ROLE", example: "baton user revoke ci-runner jobs", minArgs: 2, maxArgs: 2,
			run: func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
				if err := c.RevokeRole(ctx, pos[0], pos[1]); err != nil {
					return err
				}
				return done(g, "user %s no longer has the role %s", pos[0], pos[1])
			}},
	})
}

// runRole is `baton role add|remove|grant|revoke`.
func runRole(g globals, args []string) int {
	return runSubcommands("role", g, args, []subcommand{
		{verb: "add", synopsis: "role add ROLE", example: "baton role add jobs", minArgs: 1, maxArgs: 1,
			run: func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
				if err := c.AddRole(ctx, pos[0]); err != nil {
					return err
				}
				return done(g, "added role %s (no permissions yet: baton role grant %s PREFIX PERMS)", pos[0], pos[0])
			}},
		{verb: "remove", synopsis: "role remove ROLE", example: "baton role remove jobs", minArgs: 1, maxArgs: 1,
			run: func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
				if err := c.DeleteRole(ctx, pos[0]); err != nil {
					return err
				}
				return done(g, "removed role %s", pos[0])
			}},
		{verb: "grant", synopsis: "role grant ROLE PREFIX PERMS", example: `baton role grant jobs jobs/ lock,read   (PERMS: read, lock, admin, comma-separated, or all; PREFIX "" is every name)`,
			minArgs: 3, maxArgs: 3,
			run: func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
				if err := c.Grant(ctx, pos[0], pos[1], pos[2]); err != nil {
					return err
				}
				return done(g, "role %s has %s over %q", pos[0], pos[2], pos[1])
			}},
		{verb: "revoke", synopsis: "role revoke ROLE PREFIX", example: "baton role revoke jobs jobs/", minArgs: 2, maxArgs: 2,
			run: func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
				if err := c.Revoke(ctx, pos[0], pos[1]); err != nil {
					return err
				}
				return done(g, "role %s has no permissions over %q", pos[0], pos[1])
			}},
	})
}

// runAudit is `baton audit`.
func runAudit(g globals, args []string) int {
	return clientCommand("audit", "audit [flags]", "baton audit", 0, 0, g, args, nil,
		func(ctx context.Context, c *baton.Client, _ []string, g globals) error {
			entries, err := c.Audit(ctx)
			if err != nil || g.json {
				if err == nil {
					err = printJSON(entries)
				}
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "INDEX\tTIME\tBY\tACTION")
			for _, e := range entries {
				by := e.Principal
				if by == "" {
					by = "-"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", e.Index, e.Time.Format("2006-01-02 15:04:05"), by, oneLine(e.Action))
			}
			return tw.Flush()
		})
}
