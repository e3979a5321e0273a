package sim

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/cryptotest"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// TestIdleSkipKeepsDeadlines runs seeds with the calm's idle skip and
// without it: the skip must happen and save raft messages, and the same
// sessions and holds must expire, each proposed within a tick of when it
// was without the skip. (Not at the very same time: once a run skips, its
// random draws go to other message delays, and an entry applied a few
// milliseconds apart moves a deadline across a tick.) A skip past the
// leader's next deadline would propose an expiry late by the overshoot.
func TestIdleSkipKeepsDeadlines(t *testing.T) {
	n := uint64(40)
	if raceEnabled || testing.Short() {
		n = 10
	}
	skipped, expiries := uint64(0), uint64(0)
	var with, without uint64
	for seed := uint64(1); seed <= n; seed++ {
		a, an := runTraced(t, seed, true)
		b, bn := runTraced(t, seed, false)
		with, without = with+an, without+bn
		if strings.Contains(a, " idle until ") {
			skipped++
		}
		ea, eb := trackerExpiries(t, a), trackerExpiries(t, b)
		if !slices.Equal(slices.Sorted(maps.Keys(ea)), slices.Sorted(maps.Keys(eb))) {
			t.Errorf("seed %d: expiries with the idle skip %v, without it %v", seed, ea, eb)
			continue
		}
		for what, at := range ea {
			if d := time.Duration(at - eb[what]); d > tick || d < -tick {
				t.Errorf("seed %d: %s proposed at %v with the idle skip, at %v without it", seed, what, time.Duration(at), time.Duration(eb[what]))
			}
		}
		expiries += uint64(len(ea))
	}
	if skipped < n/2 || expiries < n {
		t.Errorf("%d of %d seeds skipped idle time, with %d expiries: too few to compare", skipped, n, expiries)
	}
	if with >= without {
		t.Errorf("the idle skip sent %d raft messages, %d without it", with, without)
	}
	t.Logf("%d of %d seeds skipped, %d expiries compared; %d raft messages with the skip, %d without", skipped, n, expiries, with, without)
}

// runTraced runs seed with the idle skip on or off and returns its trace
// and raft message count.
func runTraced(t *testing.T, seed uint64, skip bool) (string, uint64) {
	t.Helper()
	defer func(was bool) { idleSkips = was }(idleSkips)
	idleSkips = skip
	var res Result
	var trace bytes.Buffer
	t.Run(fmt.Sprintf("seed=%d/skip=%v", seed, skip), func(t *testing.T) {
		cryptotest.SetGlobalRandom(t, seed)
		cfg := ConfigFor(seed)
		cfg.Trace = &trace
		res = Run(cfg)
		if res.Err != nil {
			t.Fatalf("seed %d failed: %v", seed, res.Err)
		}
	})
	return trace.String(), res.Stats.Messages
}

// trackerExpiries returns the ExpireSession and ExpireHold commands the
// trace's log applied, each with the virtual time it was proposed at.
func trackerExpiries(t *testing.T, trace string) map[string]int64 {
	t.Helper()
	out := make(map[string]int64)
	sc := bufio.NewScanner(strings.NewReader(trace))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[1] != "apply" {
			continue
		}
		data, err := hex.DecodeString(f[3])
		if err != nil {
			t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		cmd := &fsmpb.Command{}
		if err := proto.Unmarshal(data, cmd); err != nil {
			t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		at := cmd.GetWallTimeUnixNano() - epoch.UnixNano()
		switch {
		case cmd.GetExpireSession() != nil:
			out[fmt.Sprintf("expire session %d", cmd.GetExpireSession().GetSessionId())] = at
		case cmd.GetExpireHold() != nil:
			h := cmd.GetExpireHold()
			out[fmt.Sprintf("expire hold %s/%d/%d", h.GetLock(), h.GetSessionId(), h.GetToken())] = at
		}
	}
	return out
}
