package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/batonlock/baton"
)

// runWatch follows one lock and prints a line each time it changes, until
// interrupted.
func runWatch(g globals, args []string) int {
	return follow(g, "watch", "baton watch leader/scheduler", "the watch ended", args,
		func(ctx context.Context, c *baton.Client, name string) (<-chan baton.LockEvent, error) {
			return c.Watch(ctx, name)
		},
		func(_ string, ev baton.LockEvent) string { return describeEvent(ev) })
}

// follow is `baton watch` and `baton observe`: it opens a stream of
// events about the lock NAME with start and prints each (describe, or one
// JSON object per line with --json), until interrupted.
func follow[T any](g globals, cmd, example, ended string, args []string,
	start func(context.Context, *baton.Client, string) (<-chan T, error), describe func(string, T) string) int {
	fs := newFlagSet(cmd, cmd+" NAME [flags]", example, &g)
	pos, _, code, ok := parseCommand(cmd, fs, args)
	if !ok {
		return code
	}
	if err := argCount(pos, 1, 1, []string{"NAME"}); err != nil {
		return exitCode(cmd, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := dial(ctx, g)
	if err != nil {
		return exitCode(cmd, err)
	}
	defer c.Close()
	ch, err := start(ctx, c, pos[0])
	if err != nil {
		return exitCode(cmd, err)
	}
	enc := json.NewEncoder(os.Stdout) // one object per line
	for ev := range ch {
		if g.json {
			if err := enc.Encode(ev); err != nil {
				return exitCode(cmd, err)
			}
			continue
		}
		fmt.Println(describe(pos[0], ev))
	}
	if ctx.Err() == nil {
		return exitCode(cmd, errors.New(ended+": client closed"))
	}
	return 0
}

// describeEvent is what `baton watch` prints for ev: one line, after a
// line for each hold that ended in the gap before it, if any.
func describeEvent(ev baton.LockEvent) string {
	l := ev.Lock
	var missed string
	if ev.Gap {
		for _, p := range ev.Missed {
			missed += fmt.Sprintf("index %d: %s: the hold of %s, key %q, token %d ended (%s)", p.EndedIndex, oneLine(l.Name),
				owner(p.Owner, p.SessionID), p.OwnerKey, p.Token, p.How)
			if p.Value != "" {
				missed += fmt.Sprintf(", value %q", p.Value)
			}
			missed += "\n"
		}
		if !ev.MissedAll {
			missed += fmt.Sprintf("index %d: %s: after a gap: earlier holds may have come and gone unseen\n", ev.Index, oneLine(l.Name))
		}
	}
	line := missed + fmt.Sprintf("index %d: %s ", ev.Index, oneLine(l.Name))
	switch len(l.Holders) {
	case 0:
		line += "free"
	case 1:
		h := l.Holders[0]
		line += fmt.Sprintf("held by %s, key %q, token %d, count %d", owner(h.Owner, h.SessionID), h.OwnerKey, h.Token, h.Count)
		if h.Value != "" {
			line += fmt.Sprintf(", value %q", h.Value)
		}
	default:
		line += fmt.Sprintf("held by %d of %d (first: %s, token %d)", len(l.Holders), l.Limit, owner(l.Holders[0].Owner, l.Holders[0].SessionID), l.Holders[0].Token)
	}
	if n := len(l.Waiters); n > 0 {
		line += fmt.Sprintf(", %d waiting", n)
	}
	return line
}
