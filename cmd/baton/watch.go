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
	fs := newFlagSet("watch", "watch NAME [flags]", "baton watch leader/scheduler", &g)
	pos, _, code, ok := parseCommand("watch", fs, args)
	if !ok {
		return code
	}
	if err := argCount(pos, 1, 1, []string{"NAME"}); err != nil {
		return exitCode("watch", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := dial(ctx, g)
	if err != nil {
		return exitCode("watch", err)
	}
	defer c.Close()
	ch, err := c.Watch(ctx, pos[0])
	if err != nil {
		return exitCode("watch", err)
	}
	enc := json.NewEncoder(os.Stdout) // one object per line
	for ev := range ch {
		if g.json {
			if err := enc.Encode(ev); err != nil {
				return exitCode("watch", err)
			}
			continue
		}
		fmt.Println(describeEvent(ev))
	}
	if ctx.Err() == nil {
		return exitCode("watch", errors.New("the watch ended: client closed"))
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
