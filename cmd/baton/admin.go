package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonlock/baton"
)

// clientCommand runs f with a dialled client, the parsed positional
// arguments and the globals.
func clientCommand(name, synopsis, example string, minArgs, maxArgs int, g globals, args []string,
	extra func(fs *flag.FlagSet), f func(ctx context.Context, c *baton.Client, pos []string, g globals) error) int {
	fs := newFlagSet(name, synopsis, example, &g)
	if extra != nil {
		extra(fs)
	}
	pos, _, code, ok := parseCommand(name, fs, args)
	if !ok {
		return code
	}
	if err := argCount(pos, minArgs, maxArgs, synopsisArgs(synopsis, len(strings.Fields(name)))); err != nil {
		return exitCode(name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	c, err := dial(ctx, g)
	if err != nil {
		return exitCode(name, err)
	}
	defer c.Close()
	return exitCode(name, f(ctx, c, pos, g))
}

func runLocks(g globals, args []string) int {
	return clientCommand("locks", "locks [PREFIX] [flags]", "baton locks jobs/", 0, 1, g, args, nil,
		func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
			prefix := ""
			if len(pos) == 1 {
				prefix = pos[0]
			}
			locks, err := c.List(ctx, prefix)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(locks)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tHOLDER\tTOKEN\tSINCE\tWAITERS\tHOLDERS")
			for _, l := range locks {
				holder, token, since := "-", "-", "-"
				if l.Holder != nil {
					holder = owner(l.Holder.Owner, l.Holder.SessionID)
					token = strconv.FormatUint(l.Holder.Token, 10)
					since = ago(l.Holder.Since)
				}
				// HOLDERS: how many hold it of how many may (1/1 for a
				// held mutex); HOLDER is the first of them.
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d/%d\n", oneLine(l.Name), holder, token, since, l.Waiters, l.Holders, l.Limit)
			}
			return w.Flush()
		})
}

func runGet(g globals, args []string) int {
	return clientCommand("get", "get NAME [flags]", "baton get jobs/42 --json", 1, 1, g, args, nil,
		func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
			l, err := c.Get(ctx, pos[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(l)
			}
			if l.Limit > 1 {
				fmt.Printf("lock %s, up to %d holders\n", oneLine(pos[0]), l.Limit)
			} else {
				fmt.Printf("lock %s\n", oneLine(pos[0]))
			}
			if !l.DelayedUntil.IsZero() {
				fmt.Printf("  in its lock-delay until %s (%s): granted to no one, as a holder's session or hold limit expired\n",
					l.DelayedUntil.Format(time.RFC3339), until(l.DelayedUntil))
			} else if len(l.Holders) == 0 {
				fmt.Println("  free")
			}
			for _, h := range l.Holders {
				limit := ""
				if h.HoldLimit > 0 {
					limit = ", hold limit " + h.HoldLimit.String()
				}
				if h.LockDelay > 0 {
					limit += ", lock-delay " + h.LockDelay.String()
				}
				if h.Value != "" {
					limit += fmt.Sprintf(", value %q", h.Value)
				}
				if !h.RevokeDeadline.IsZero() {
					limit += fmt.Sprintf(", revoked: ends at %s (%s) unless released", h.RevokeDeadline.Format(time.RFC3339), until(h.RevokeDeadline))
				}
				fmt.Printf("  held by %s, key %q, token %d, count %d, since %s%s%s\n",
					owner(h.Owner, h.SessionID), h.OwnerKey, h.Token, h.Count, ago(h.Since), modeNote(h.Shared, l.Limit), limit)
			}
			for i, wt := range l.Waiters {
				limit := "until cancelled"
				if wt.WaitTimeout > 0 {
					limit = "up to " + wt.WaitTimeout.String()
				}
				fmt.Printf("  %d. waiting: %s, key %q, since %s, %s%s\n", i+1, owner(wt.Owner, wt.SessionID), wt.OwnerKey,
					ago(wt.Since), limit, modeNote(wt.Shared, l.Limit))
			}
			if len(l.History) > 0 {
				fmt.Println("  recently (latest first; baton history for more):")
			}
			for _, p := range l.History {
				fmt.Printf("    %s, key %q, token %d: held %s, %s %s\n", owner(p.Owner, p.SessionID), p.OwnerKey, p.Token,
					p.Ended.Sub(p.Since).Round(time.Millisecond), p.How, ago(p.Ended))
			}
			return nil
		})
}

func runHistory(g globals, args []string) int {
	return clientCommand("history", "history NAME [flags]", "baton history jobs/42", 1, 1, g, args, nil,
		func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
			h, err := c.History(ctx, pos[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(h)
			}
			if !h.Replicated {
				fmt.Fprintln(os.Stderr, "baton history: the cluster's log version is below 10 (a member runs an older release): "+
					"this is the answering member's own history, since it started or last installed a snapshot")
			}
			printHistory(os.Stdout, h.Holds)
			return nil
		})
}

// historyTime is how baton history shows the leaders' wall clocks: UTC,
// to the millisecond.
const historyTime = "2006-01-02T15:04:05.000Z07:00"

// printHistory writes one line per ended hold, the most recent first,
// under a header.
func printHistory(out io.Writer, holds []baton.PastHold) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOKEN\tSESSION\tOWNER\tOWNER KEY\tMODE\tSINCE\tENDED\tHOW\tENDED INDEX\tVALUE")
	for _, p := range holds {
		mode := "exclusive"
		if p.Shared {
			mode = "shared"
		}
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", p.Token, p.SessionID, dash(oneLine(p.Owner)), dash(oneLine(p.OwnerKey)),
			mode, p.Since.UTC().Format(historyTime), p.Ended.UTC().Format(historyTime), p.How, p.EndedIndex, dash(oneLine(p.Value)))
	}
	w.Flush()
}

// dash is s, or "-" if s is empty, so that a table's columns stay.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// until says how far off t is: "in 4s", or "passed" once it has.
func until(t time.Time) string {
	d := time.Until(t).Round(time.Second)
	if d <= 0 {
		return "passed"
	}
	return "in " + d.String()
}

// modeNote says whether a hold or wait is shared, where a lock admits
// more than one holder (a mutex's are all exclusive).
func modeNote(shared bool, limit int) string {
	switch {
	case limit <= 1:
		return ""
	case shared:
		return " (shared)"
	}
	return " (exclusive)"
}

func runCheck(g globals, args []string) int {
	checked, held := false, false
	code := clientCommand("check", "check NAME TOKEN [flags]", "baton check jobs/42 1234 && echo still mine", 2, 2, g, args, nil,
		func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
			token, err := strconv.ParseUint(pos[1], 10, 64)
			if err != nil {
				return usagef("TOKEN %q is not a number", pos[1])
			}
			held, err = c.Check(ctx, pos[0], token)
			if err != nil {
				return err
			}
			checked = true
			if held {
				fmt.Printf("token %d is the current hold of %s\n", token, pos[0])
			} else {
				fmt.Printf("token %d is not the current hold of %s\n", token, pos[0])
			}
			return nil
		})
	if checked && !held {
		return 1
	}
	return code
}

func runSessions(g globals, args []string) int {
	return clientCommand("sessions", "sessions [flags]", "baton sessions --json", 0, 0, g, args, nil,
		func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
			ss, err := c.Sessions(ctx)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(ss)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tOWNER\tTTL\tHOLDS\tBLACKLISTED\tCREATED")
			for _, s := range ss {
				fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%v\t%s\n", s.ID, oneLine(s.Owner), s.TTL, s.Holds, s.Blacklisted, ago(s.Created))
			}
			return w.Flush()
		})
}

func runBlacklist(g globals, args []string) int {
	return clientCommand("blacklist", "blacklist SESSION [flags]", "baton blacklist 1234", 1, 1, g, args, nil,
		func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
			id, err := strconv.ParseUint(pos[0], 10, 64)
			if err != nil || id == 0 {
				return usagef("SESSION %q is not a session id", pos[0])
			}
			if err := c.Blacklist(ctx, id); err != nil {
				return err
			}
			fmt.Printf("session %d blacklisted: its keepalives are refused and it expires within its TTL, releasing its locks\n", id)
			return nil
		})
}

func runRelease(g globals, args []string) int {
	var session, token uint64
	return clientCommand("release", "release NAME --session S [--token T] [flags]", "baton release jobs/42 --session 1234 --token 5678", 1, 1, g, args,
		func(fs *flag.FlagSet) {
			fs.Uint64Var(&session, "session", 0, "release only if this session holds the lock (required)")
			fs.Uint64Var(&token, "token", 0, "and only if the hold has this token (0: any)")
		},
		func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
			if session == 0 {
				return usagef("--session is required: a release names the holder it expects")
			}
			if err := c.CasRelease(ctx, pos[0], session, token); err != nil {
				return err
			}
			fmt.Printf("released %s (held by session %d)\n", pos[0], session)
			return nil
		})
}

func runStatus(g globals, args []string) int {
	return clientCommand("status", "status [flags]", "baton status --endpoints 127.0.0.1:7700,127.0.0.1:7710", 0, 0, g, args, nil,
		func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
			st, err := c.Status(ctx)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(st)
			}
			fmt.Printf("member %s (%s), leader %s, term %d, commit %d, applied %d, %d sessions, %d locks, log version %d\n",
				st.Name, st.Role, orDash(st.Leader), st.Term, st.CommitIndex, st.AppliedIndex, st.Sessions, st.Locks, st.LogVersion)
			fmt.Println(diskLine(st))
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tCLIENT\tPEER\tLEADER\tREADS LOG")
			for _, m := range st.Members {
				fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s\n", m.Name, orDash(m.ClientAddr), m.PeerAddr, m.ID == st.LeaderID, logVersion(m.LogVersion))
			}
			return w.Flush()
		})
}

// diskLine is what status says of the answering member's disk.
func diskLine(st *baton.Status) string {
	switch {
	case !st.DiskFreeKnown && st.MinFreeDisk == 0:
		return "disk: not guarded (--min-free-disk 0, or no statfs on this platform)"
	case !st.DiskFreeKnown:
		return fmt.Sprintf("disk: free space unknown (cannot measure it), keeps %s (--min-free-disk): nothing is refused for it", sizeString(st.MinFreeDisk))
	case st.LowDisk:
		return fmt.Sprintf("disk: LOW, %s free, under the %s it keeps (--min-free-disk): leading, it refuses new sessions and acquires",
			sizeString(st.DiskFree), sizeString(st.MinFreeDisk))
	case st.MinFreeDisk == 0:
		return fmt.Sprintf("disk: %s free (--min-free-disk 0: no guard)", sizeString(st.DiskFree))
	}
	return fmt.Sprintf("disk: %s free, keeps %s (--min-free-disk)", sizeString(st.DiskFree), sizeString(st.MinFreeDisk))
}

// sizeString is n bytes for people: "1.5 GiB".
func sizeString(n uint64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), 0
	for v >= 1024 && i < 4 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[i-1])
}

// logVersion prints a member's log version: "-" if not heard from.
func logVersion(v uint32) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
