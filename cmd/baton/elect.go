package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/api/rules"
)

// runElect is `baton elect NAME VALUE -- CMD`: it campaigns in the
// election NAME with VALUE and runs CMD while it leads, as `baton lock`
// runs one while it holds a lock (holdAndRun).
func runElect(g globals, args []string) int {
	var (
		ttl       = 10 * time.Second
		ownerFlag string
		grace     = DefaultKillGrace
		lockDelay time.Duration
	)
	fs := newFlagSet("elect", "elect [--ttl 10s] [--owner LABEL] [--lock-delay 15s] [--kill-grace 10s] NAME VALUE -- CMD [ARGS...]",
		"baton elect leader/scheduler 10.0.0.7:8080 -- ./scheduler", &g)
	fs.DurationVar(&ttl, "ttl", ttl, "session TTL: how long the leadership outlives a silent client")
	fs.StringVar(&ownerFlag, "owner", "", "owner label shown to operators and observers (default host/pid/baton-elect)")
	fs.DurationVar(&grace, "kill-grace", grace, "after SIGTERM, how long CMD has before SIGKILL when the leadership is lost; by default 10s, or less to fit inside the hold's lock-delay")
	fs.DurationVar(&lockDelay, "lock-delay", 0, "if the leadership is lost by expiry (this client silent for the TTL), nobody leads for this long, so CMD's last writes drain before the next leader starts (0s..60s, whole seconds; unset: the server's default)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: baton elect [flags] NAME VALUE -- CMD [ARGS...]

Campaigns in the leader election NAME with VALUE (what the leader
publishes to observers, say its address: up to %d bytes on one line) and
runs CMD once elected, for as long as it leads. Candidates lead in the
order they campaigned; `+"`baton observe NAME`"+` follows who leads.

While it waits to lead, SIGINT or SIGTERM withdraws the candidacy. Once
it leads, it runs CMD as `+"`baton lock`"+` does: in its own process group,
with BATON_LOCK (NAME), BATON_TOKEN (the term, a fencing token larger
than every earlier leader's), BATON_SESSION and BATON_SESSION_SECRET and
BATON_ELECTION_VALUE (VALUE) in its environment; SIGINT and SIGTERM are
forwarded to CMD's group. If the leadership may be lost (no keepalive
answer before the session's conservative deadline), CMD's group gets
SIGTERM at once, before anyone else can lead, then SIGKILL after
--kill-grace, and baton exits 76. A revoke of the leader's hold (baton
revoke NAME) sends CMD's group SIGTERM too: finish and exit within its
grace. When CMD ends, baton resigns (the next candidate leads) and exits
with CMD's status.

Examples:
  baton elect leader/scheduler 10.0.0.7:8080 -- ./scheduler
  baton observe leader/scheduler

Flags:
`, rules.MaxHoldValueLen)
		fs.PrintDefaults()
	}
	pos, cmdArgs, code, ok := parseCommand("elect", fs, args)
	if !ok {
		return code
	}
	switch {
	case len(pos) < 2:
		return exitCode("elect", usagef("missing %s", strings.Join([]string{"NAME", "VALUE"}[len(pos):], " and ")))
	case len(pos) > 2 && cmdArgs == nil:
		return exitCode("elect", usagef("unexpected argument %q: put the command after --, e.g. baton elect %s %s -- %s", pos[2], pos[0], pos[1], strings.Join(pos[2:], " ")))
	case len(pos) > 2:
		return exitCode("elect", usagef("unexpected argument %q: NAME and VALUE go before --", pos[2]))
	case len(cmdArgs) == 0:
		return exitCode("elect", usagef("no command: put it after --, e.g. baton elect %s %s -- ./serve.sh", pos[0], pos[1]))
	case isSet(fs, "kill-grace") && grace < 0:
		return exitCode("elect", usagef("--kill-grace %s is negative", grace))
	}
	if err := rules.CheckLockDelay(lockDelay); err != nil {
		return exitCode("elect", usagef("--lock-delay: %v", err))
	}
	name, value := pos[0], pos[1]
	// Refused before anything is sent (the client would refuse them too,
	// but after opening a session).
	if err := rules.CheckLockName(name); err != nil {
		return exitCode("elect", fmt.Errorf("%w: %w", baton.ErrInvalidArgument, err))
	}
	if err := rules.CheckHoldValue(value); err != nil {
		return exitCode("elect", fmt.Errorf("%w: VALUE: %w", baton.ErrInvalidArgument, err))
	}
	var opts []baton.HoldOption
	if isSet(fs, "lock-delay") {
		opts = append(opts, baton.WithLockDelay(lockDelay))
	}
	campaign := func(ctx context.Context, s *baton.Session) ([]*baton.Lease, error) {
		l, err := s.Election(name, opts...).Campaign(ctx, value)
		if err != nil {
			return nil, err
		}
		return []*baton.Lease{l}, nil
	}
	refused := func(_ *baton.Client, _ *baton.Session, err error) int { return exitCode("elect", err) }
	env := []string{"BATON_ELECTION_VALUE=" + value}
	return holdAndRun(g, "elect", name, cmdArgs, env, ttl, ownerFlag, grace, isSet(fs, "kill-grace"), campaign, refused)
}

// runObserve is `baton observe NAME`: a line each time the election's
// leader or its value changes (the first line is the leader now), until
// interrupted. An observer needs no session.
func runObserve(g globals, args []string) int {
	return follow(g, "observe", "baton observe leader/scheduler", "the observation ended", args,
		func(ctx context.Context, c *baton.Client, name string) (<-chan baton.Leader, error) {
			return c.Election(name).Observe(ctx)
		}, describeLeader)
}

// describeLeader is one line of `baton observe`.
func describeLeader(name string, l baton.Leader) string {
	gap := ""
	if l.Gap {
		gap = " (after a gap: earlier leaders may have come and gone unseen)"
	}
	if l.Term == 0 {
		return fmt.Sprintf("index %d: %s has no leader%s", l.Index, oneLine(name), gap)
	}
	return fmt.Sprintf("index %d: %s led by %s, term %d, value %q%s", l.Index, oneLine(name), owner(l.Owner, l.SessionID), l.Term, l.Value, gap)
}
