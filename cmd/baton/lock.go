package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/api/rules"
)

// Exit statuses of `baton lock` besides the command's own.
const (
	// ExitNotAcquired is EX_TEMPFAIL: the lock was busy (--no-wait) or the
	// wait ran out; try again later.
	ExitNotAcquired = 75
	// ExitLockLost says the command was stopped because the lock may have
	// been lost (the session's conservative deadline passed unanswered, an
	// operator released it, or --max-hold passed).
	ExitLockLost = 76
)

func runLock(g globals, args []string) int {
	var (
		ttl       = 10 * time.Second
		wait      = 30 * time.Second
		noWait    bool
		ownerFlag string
		grace     = DefaultKillGrace
		kind      lockKind
		others    []lockMember // --reader, --writer, --permit
	)
	fs := newFlagSet("lock", "lock [--ttl 10s] [--wait 30s | --no-wait] [--owner LABEL] [--lock-delay 15s] [--kill-grace 10s] [--permits N | --read | --write] [--reader NAME] [--writer NAME] [--permit NAME=N] NAME... -- CMD [ARGS...]",
		"baton lock --wait 1m jobs/nightly -- ./run-nightly.sh", &g)
	fs.DurationVar(&ttl, "ttl", ttl, "session TTL: how long the lock outlives a silent client")
	fs.DurationVar(&wait, "wait", wait, "how long to wait for the lock (0: until it is free)")
	fs.BoolVar(&noWait, "no-wait", false, "fail at once (exit 75) if the lock is held")
	fs.StringVar(&ownerFlag, "owner", "", "owner label shown to operators (default host/pid/baton-lock)")
	fs.DurationVar(&grace, "kill-grace", grace, "after SIGTERM, how long CMD has before SIGKILL when the lock is lost; by default 10s, or less to fit inside the hold's lock-delay (its length less baton.SafetyMargin of it)")
	fs.DurationVar(&kind.lockDelay, "lock-delay", 0, "if the lock is lost by expiry (this client silent for the TTL, or --max-hold), the server grants it to no one for this long, so CMD's last writes drain before the next holder starts (0s..60s, whole seconds; unset: the server's default, --lock-delay of baton server)")
	fs.IntVar(&kind.permits, "permits", 0, "each NAME is a semaphore of `N` permits: hold one of them (every user of NAME must say the same N)")
	fs.BoolVar(&kind.read, "read", false, "each NAME is a read/write lock: hold it as one of its readers")
	fs.BoolVar(&kind.write, "write", false, "each NAME is a read/write lock: hold it as its one writer")
	fs.Var(memberFlag{&others, "reader"}, "reader", "also hold `NAME`, a read/write lock, as one of its readers (repeatable)")
	fs.Var(memberFlag{&others, "writer"}, "writer", "also hold `NAME`, a read/write lock, as its one writer (repeatable)")
	fs.Var(memberFlag{&others, "permit"}, "permit", "also hold a permit of `NAME=N`, a semaphore of N permits (repeatable)")
	fs.IntVar(&kind.maxReaders, "max-readers", baton.DefaultMaxReaders, "with --read, --write, --reader or --writer: the most readers at once of each read/write lock (every user of one must say the same)")
	fs.DurationVar(&kind.maxHold, "max-hold", 0, "hold the lock at most this long (1s..24h): then CMD is stopped as for a lost lock and the server frees the lock, even if baton's heartbeats go on (0: no limit)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: baton lock [flags] NAME... -- CMD [ARGS...]

Runs CMD while holding the lock NAME, then releases it. CMD runs in its own
process group with BATON_LOCK, BATON_TOKEN (the fencing token),
BATON_SESSION and BATON_SESSION_SECRET in its environment (with the last
two, CMD may act for the session over the API: renew, release; keep the
secret out of logs), and BATON_SIGNED_TOKEN (the grant signed by the
cluster, for resources that verify it offline) when the cluster signs
grants (baton server --signed-tokens); baton exits with CMD's exit status.
SIGINT and SIGTERM are forwarded to CMD's group; the lock is released when
CMD ends. A revoke of the hold (baton revoke NAME; of any one lock of a
set) sends CMD's group SIGTERM too: finish and exit within its grace.

If the lock is not acquired (--no-wait, or --wait ran out) baton says who
holds it and exits 75. If the session's conservative deadline passes with
no keepalive answer, the lock may be lost: baton sends SIGTERM to CMD's
group at once - before the server can give the lock to anyone else - then
SIGKILL after --kill-grace, and exits 76. (On Windows, which has neither
process groups nor signals between processes, CMD is killed at once.)

With a lock-delay (--lock-delay, or the server's default), the server
grants the lock to no one for that long after it ends the hold by
expiry, and by default --kill-grace shrinks to fit inside it: CMD is
SIGKILLed before the next holder can start, even if it ignores SIGTERM.
Without one, the next holder may start while CMD is still in its grace:
protect the data with fencing tokens (BATON_TOKEN) or set a lock-delay.

By default NAME is a mutex: one holder at a time. With --permits N it is a
semaphore that N may hold at once; with --read or --write, a read/write
lock that many readers or one writer hold. Waiters are served in FIFO
order either way.

Several locks: give several NAMEs (each in the mode --permits, --read or
--write gives), and add locks of other modes with --reader NAME, --writer
NAME and --permit NAME=N (each repeatable). baton takes them all or none:
at once if it can, in one request; else it waits for them in name order,
each in its lock's FIFO queue, so two baton locks of overlapping sets
cannot deadlock (it may hold some while it waits for the others). CMD
starts once it holds all of them, and is stopped as above when any one
of them may be lost. BATON_LOCK and BATON_TOKEN are the first lock's;
BATON_LOCKS and BATON_TOKENS (and BATON_SIGNED_TOKENS) list them all, one
a line: the NAMEs, then the locks of the flags in the order given. A lock
named twice is refused.

Examples:
  baton lock --wait 1m jobs/nightly -- ./run-nightly.sh
  baton lock --permits 4 pool/encoders -- ffmpeg -i in.mov out.mp4
  baton lock --read config/site -- ./render.sh
  baton lock jobs/render out/site --reader config/site --permit pool/encoders=4 -- ./render.sh

Flags:
`)
		fs.PrintDefaults()
	}
	pos, cmdArgs, code, ok := parseCommand("lock", fs, args)
	if !ok {
		return code
	}
	switch {
	case len(pos) == 0 && len(others) == 0:
		return exitCode("lock", usagef("missing NAME"))
	case len(pos) > 1 && cmdArgs == nil:
		return exitCode("lock", usagef("unexpected argument %q: put the command after --, e.g. baton lock %s -- %s", pos[1], pos[0], strings.Join(pos[1:], " ")))
	case len(cmdArgs) == 0:
		return exitCode("lock", usagef("no command: put it after --, e.g. baton lock %s -- ./job.sh", strings.Join(append(slices.Clone(pos), flagArgs(others)...), " ")))
	case noWait && isSet(fs, "wait"):
		return exitCode("lock", usagef("--wait and --no-wait exclude each other"))
	case kind.read && kind.write:
		return exitCode("lock", usagef("--read and --write exclude each other"))
	case isSet(fs, "permits") && (kind.read || kind.write):
		return exitCode("lock", usagef("--permits (a semaphore) and --read/--write (a read/write lock) exclude each other"))
	case isSet(fs, "permits") && (kind.permits < 1 || kind.permits > baton.MaxHolders):
		return exitCode("lock", usagef("--permits %d: want 1..%d", kind.permits, baton.MaxHolders))
	case isSet(fs, "max-readers") && !kind.read && !kind.write && !slices.ContainsFunc(others, func(mb lockMember) bool { return mb.read || mb.write }):
		return exitCode("lock", usagef("--max-readers needs --read, --write, --reader or --writer"))
	case kind.maxReaders < 1 || kind.maxReaders > baton.MaxHolders:
		return exitCode("lock", usagef("--max-readers %d: want 1..%d", kind.maxReaders, baton.MaxHolders))
	case isSet(fs, "max-hold") && (kind.maxHold < time.Second || kind.maxHold > 24*time.Hour):
		return exitCode("lock", usagef("--max-hold %s: want 1s..24h", kind.maxHold))
	case isSet(fs, "kill-grace") && grace < 0:
		return exitCode("lock", usagef("--kill-grace %s is negative", grace))
	}
	if err := rules.CheckLockDelay(kind.lockDelay); err != nil {
		return exitCode("lock", usagef("--lock-delay: %v", err))
	}
	kind.lockDelaySet = isSet(fs, "lock-delay")
	kind.graceSet = isSet(fs, "kill-grace")
	members := make([]lockMember, 0, len(pos)+len(others))
	for _, name := range pos {
		members = append(members, lockMember{name: name, permits: kind.permits, read: kind.read, write: kind.write, flag: "NAME"})
	}
	members = append(members, others...)
	// A name no member would accept, or a lock named twice, is refused
	// before anything is sent (the client would refuse it too, but after
	// opening a session).
	if err := checkMembers(members); err != nil {
		return exitCode("lock", err)
	}
	return lockAndRun(g, members, cmdArgs, ttl, wait, noWait, ownerFlag, grace, kind)
}

// flagArgs is the command line of the --reader, --writer and --permit
// locks others.
func flagArgs(others []lockMember) []string {
	var out []string
	for _, mb := range others {
		v := mb.name
		if mb.permits > 0 {
			v += "=" + strconv.Itoa(mb.permits)
		}
		out = append(out, mb.flag, v)
	}
	return out
}

// lockKind is the kind of lock `baton lock` holds as NAME (a mutex, a
// permit of a semaphore (permits > 0), or a read/write lock's reader or
// writer), and the options of every hold it takes.
type lockKind struct {
	permits     int
	read, write bool
	maxReaders  int
	maxHold     time.Duration
	// lockDelay is --lock-delay, when lockDelaySet; graceSet says
	// whether --kill-grace was given (else it fits the lock-delay).
	lockDelay    time.Duration
	lockDelaySet bool
	graceSet     bool
}

// acquirer is one way to acquire a lock: at once, within d, or waiting.
type acquirer struct {
	try    func(context.Context) (*baton.Lease, error)
	within func(context.Context, time.Duration) (*baton.Lease, error)
	wait   func(context.Context) (*baton.Lease, error)
}

// holdOptions are the options of every hold: --max-hold bounds the
// command's run, so nothing renews a hold; --lock-delay if given.
func (k lockKind) holdOptions() []baton.HoldOption {
	hold := []baton.HoldOption{baton.WithHoldLimit(k.maxHold), baton.WithManualRenewal()}
	if k.lockDelaySet {
		hold = append(hold, baton.WithLockDelay(k.lockDelay))
	}
	return hold
}

func (k lockKind) acquirer(s *baton.Session, mb lockMember) acquirer {
	hold := k.holdOptions()
	switch {
	case mb.permits > 0:
		sem := s.Semaphore(mb.name, mb.permits, hold...)
		return acquirer{sem.TryAcquire, sem.AcquireWithin, sem.Acquire}
	case mb.read, mb.write:
		rw := s.RWMutex(mb.name, append(hold, baton.WithMaxReaders(k.maxReaders))...)
		if mb.read {
			return acquirer{rw.TryRLock, rw.RLockWithin, rw.RLock}
		}
		return acquirer{rw.TryLock, rw.LockWithin, rw.Lock}
	}
	m := s.Mutex(mb.name, hold...)
	return acquirer{m.TryLock, m.LockWithin, m.Lock}
}

// acquireOne takes the one lock mb: at once with --no-wait, else waiting
// at most wait on the server (if not 0).
func acquireOne(ctx context.Context, s *baton.Session, mb lockMember, kind lockKind, wait time.Duration, noWait bool) ([]*baton.Lease, error) {
	m := kind.acquirer(s, mb)
	var l *baton.Lease
	var err error
	switch {
	case noWait:
		l, err = m.try(ctx)
	case wait > 0:
		l, err = m.within(ctx, wait)
	default:
		l, err = m.wait(ctx)
	}
	if err != nil {
		return nil, err
	}
	return []*baton.Lease{l}, nil
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func lockAndRun(g globals, members []lockMember, cmdArgs []string, ttl, wait time.Duration, noWait bool, owner string, grace time.Duration, kind lockKind) int {
	acquire := func(ctx context.Context, s *baton.Session) ([]*baton.Lease, error) {
		if len(members) == 1 {
			return acquireOne(ctx, s, members[0], kind, wait, noWait)
		}
		return acquireSet(ctx, s, members, kind, wait, noWait)
	}
	refused := func(c *baton.Client, s *baton.Session, err error) int {
		var busy *baton.BusyError
		name := members[0].name
		if errors.As(err, &busy) {
			name = busy.Name
		}
		shared := slices.ContainsFunc(members, func(mb lockMember) bool { return mb.name == name && mb.shared() })
		switch {
		case errors.As(err, &busy) && busy.Holder.SessionID == 0 && !busy.DelayedUntil.IsZero():
			fmt.Fprintf(os.Stderr, "baton lock: %s is in its lock-delay until %s (%s): a holder's session or hold limit expired, and the lock is granted to no one until then\n",
				name, busy.DelayedUntil.Format(time.RFC3339), until(busy.DelayedUntil))
			return ExitNotAcquired
		case errors.As(err, &busy) && shared:
			// Full, or a writer is queued ahead: the holder named is one
			// of several.
			fmt.Fprintf(os.Stderr, "baton lock: %s has no room for this hold now (full, or a waiter is ahead); its first holder is %s, token %d, since %s\n",
				name, owner4(busy.Holder), busy.Holder.Token, ago(busy.Holder.Since))
			return ExitNotAcquired
		case errors.As(err, &busy):
			fmt.Fprintf(os.Stderr, "baton lock: %s is held by %s, token %d, since %s\n",
				name, owner4(busy.Holder), busy.Holder.Token, ago(busy.Holder.Since))
			return ExitNotAcquired
		case errors.Is(err, baton.ErrWaitTimedOut) && len(members) > 1:
			ictx, icancel := context.WithTimeout(context.Background(), g.timeout)
			name, who := blocker(ictx, c, s, members)
			icancel()
			if name == "" {
				fmt.Fprintf(os.Stderr, "baton lock: %s not all acquired after waiting %s\n", setName(members), wait)
			} else {
				fmt.Fprintf(os.Stderr, "baton lock: %s not all acquired after waiting %s: %s is held by %s\n", setName(members), wait, name, who)
			}
			return ExitNotAcquired
		case errors.Is(err, baton.ErrWaitTimedOut):
			who := "someone"
			ictx, icancel := context.WithTimeout(context.Background(), g.timeout)
			if info, gerr := c.Get(ictx, name); gerr == nil && len(info.Holders) > 0 {
				h := info.Holders[0]
				who = fmt.Sprintf("%s, token %d, since %s", owner4(h), h.Token, ago(h.Since))
			}
			icancel()
			fmt.Fprintf(os.Stderr, "baton lock: %s still held after waiting %s, by %s\n", name, wait, who)
			return ExitNotAcquired
		}
		return exitCode("lock", err)
	}
	return holdAndRun(g, "lock", setName(members), cmdArgs, nil, ttl, owner, grace, kind.graceSet, acquire, refused)
}

// holdAndRun is `baton lock` and `baton elect`: it opens a session with
// ttl and owner (default host/pid/baton-CMDNAME), takes its holds of what
// (a lock or a set) with acquire (interrupted by SIGINT or SIGTERM, which
// withdraw them), and runs cmdArgs under them with env added to its
// environment (runUnderLease). refused turns acquire's error into the
// exit status.
func holdAndRun(g globals, cmdName, what string, cmdArgs, env []string, ttl time.Duration, owner string, grace time.Duration, graceSet bool,
	acquire func(context.Context, *baton.Session) ([]*baton.Lease, error), refused func(*baton.Client, *baton.Session, error) int) int {
	// Signals that arrive while we wait for the lock end the wait.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	dctx, dcancel := context.WithTimeout(ctx, g.timeout)
	c, err := dialGlobals(dctx, g)
	dcancel()
	if err != nil {
		return exitCode(cmdName, err)
	}
	defer c.Close()
	if owner == "" {
		host, _ := os.Hostname()
		owner = fmt.Sprintf("%s/%d/baton-%s", host, os.Getpid(), cmdName)
	}
	sctx, scancel := context.WithTimeout(ctx, g.timeout)
	s, err := c.NewSession(sctx, baton.WithTTL(ttl), baton.WithOwner(owner))
	scancel()
	if err != nil {
		return exitCode(cmdName, err)
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), g.timeout)
		defer ccancel()
		_ = s.Close(cctx)
	}()

	type result struct {
		leases []*baton.Lease
		err    error
	}
	got := make(chan result, 1)
	go func() {
		var r result
		r.leases, r.err = acquire(ctx, s)
		got <- r
	}()
	var leases []*baton.Lease
	select {
	case r := <-got:
		leases, err = r.leases, r.err
	case sig := <-sigs:
		cancel()
		r := <-got
		for _, l := range r.leases {
			_ = l.Release(context.Background())
		}
		fmt.Fprintf(os.Stderr, "baton %s: %s while waiting for %s\n", cmdName, sig, what)
		return 128 + int(sig.(syscall.Signal))
	}
	if err != nil {
		return refused(c, s, err)
	}
	grace = setKillGrace(cmdName, grace, graceSet, leases)
	return runUnderLease(cmdName, leases, s, cmdArgs, env, sigs, grace)
}

// setName names the locks of a set: "a" or "the set a, b, c".
func setName(members []lockMember) string {
	if len(members) == 1 {
		return members[0].name
	}
	names := make([]string, len(members))
	for i, mb := range members {
		names[i] = mb.name
	}
	return "the set " + strings.Join(names, ", ")
}

// DefaultKillGrace is how long `baton lock` gives a command between
// SIGTERM and SIGKILL when the lock is lost and the hold has no
// lock-delay: time to finish a write and exit cleanly.
const DefaultKillGrace = 10 * time.Second

// killGrace is the kill grace `baton lock` uses for a hold with the
// given lock-delay: --kill-grace if given (with a warning if it outlasts
// the lock-delay), else DefaultKillGrace, shortened to fit inside the
// lock-delay. SIGTERM goes at the client's deadline, which passes at
// least baton.SafetyMargin(TTL) before the server can end the hold; the
// lock-delay then runs on the leader's clock. SIGKILL at
// lockDelay - SafetyMargin(lockDelay) after SIGTERM leaves the same
// allowance for a difference of clock rates over the delay and for
// scheduling the kill: the command is dead before anyone else is
// granted the lock.
func killGrace(cmdName string, grace time.Duration, set bool, lockDelay time.Duration) time.Duration {
	if lockDelay <= 0 {
		return grace
	}
	fit := max(lockDelay-baton.SafetyMargin(lockDelay), 0)
	if !set {
		return min(grace, fit)
	}
	if grace > fit {
		fmt.Fprintf(os.Stderr, "baton %s: --kill-grace %s outlasts the hold's lock-delay %s (it fits %s): a command that ignores SIGTERM may still run when the next holder starts\n",
			cmdName, grace, lockDelay, fit)
	}
	return grace
}

func owner4(h baton.Holder) string { return owner(h.Owner, h.SessionID) }

// runUnderLease runs the command while every lease holds and releases
// them when the command ends; the loss of any one stops it, and so does a
// revoke of any one's hold (SIGTERM, as a signal to baton would). cmdName
// (lock, elect) names baton's command in its messages, and env is added
// to the command's environment.
func runUnderLease(cmdName string, leases []*baton.Lease, s *baton.Session, cmdArgs, env []string, sigs <-chan os.Signal, grace time.Duration) int {
	stopWatch := make(chan struct{})
	lostC, watchedLost := anyLost(leases, stopWatch)
	revokeC, watchedRevoked := anyRevoked(leases, stopWatch)
	defer func() {
		close(stopWatch)
		watchedLost()
		watchedRevoked()
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer rcancel()
		for _, lease := range leases {
			if err := lease.Release(rctx); err != nil && !errors.Is(err, baton.ErrNotHeld) && lease.Err() == nil {
				fmt.Fprintf(os.Stderr, "baton %s: release %s: %v\n", cmdName, lease.Name(), err)
			}
		}
	}()
	for _, lease := range leases {
		// A set that waited may have lost a hold it took first.
		if err := lease.Err(); err != nil {
			fmt.Fprintf(os.Stderr, "baton %s: lock %s was lost before the command started (%v)\n", cmdName, lease.Name(), err)
			return ExitLockLost
		}
	}
	cmd := exec.Command(cmdArgs[0], cmdArgs[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), lockEnv(leases)...)
	cmd.Env = append(cmd.Env,
		"BATON_SESSION="+strconv.FormatUint(s.ID(), 10),
		"BATON_SESSION_SECRET="+s.Secret(),
	)
	cmd.Env = append(cmd.Env, env...)
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "baton %s: start %s: %v\n", cmdName, cmdArgs[0], err)
		return 127
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	lost := false
	revoked := false
	var kill <-chan time.Time
	for {
		select {
		case lease := <-revokeC:
			// Asked to let go: the command stops as it would on a
			// signal, and the holds are released when it exits. If it
			// outlasts the grace, the leader ends the hold and the lost
			// case below kills it. A revoke of another hold of the set
			// after the first is told, not signalled again.
			r, _ := lease.Revocation()
			if revoked {
				fmt.Fprintf(os.Stderr, "baton %s: a revoke asks %s to be let go by %s (%s) too\n",
					cmdName, lease.Name(), r.Deadline.Format(time.RFC3339), until(r.Deadline))
				continue
			}
			revoked = true
			fmt.Fprintf(os.Stderr, "baton %s: a revoke asks %s to be let go by %s (%s); sending SIGTERM to the command\n",
				cmdName, lease.Name(), r.Deadline.Format(time.RFC3339), until(r.Deadline))
			_ = signalGroup(cmd.Process, terminate)
		case err := <-exited:
			if lost {
				return ExitLockLost
			}
			return exitStatus(err)
		case sig := <-sigs:
			_ = signalGroup(cmd.Process, sig)
		case lease := <-lostC:
			lostC = nil
			lost = true
			fmt.Fprintf(os.Stderr, "baton %s: lock %s may be lost (%v); sending SIGTERM to the command, SIGKILL in %s\n",
				cmdName, lease.Name(), lease.Err(), grace)
			_ = signalGroup(cmd.Process, terminate)
			kill = time.After(grace)
		case <-kill:
			fmt.Fprintf(os.Stderr, "baton %s: command still running %s after SIGTERM; sending SIGKILL\n", cmdName, grace)
			_ = signalGroup(cmd.Process, killAfter)
			kill = nil
		}
	}
}

// exitStatus maps a finished command to baton's exit status: its own, or
// 128+signal as shells do.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 1
}
