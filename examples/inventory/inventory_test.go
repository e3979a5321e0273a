package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/batonlock/baton/internal/testpg"
)

// TestModes runs the command with --json on a PostgreSQL of its own and
// checks each mode's outcome. Worker 0's pause is injected by the
// scenario (it waits until another worker has sold, and in the lock modes
// its session expires meanwhile), not left to chance, so the unfenced
// modes always sell unit 10 twice: once by the worker that got the lock
// (or raced) and once by worker 0's late write.
func TestModes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Baton member on a loopback port")
	}
	pg := testpg.ForTest(t)
	var out bytes.Buffer
	const stock = 10
	if err := inventory([]string{"--json", "--workers", "3", "--stock", "10", "--dsn", pg.DSN()}, &out); err != nil {
		t.Fatal(err)
	}
	t.Logf("output:\n%s", out.String())
	got := map[string]map[string]any{}
	for line := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		for _, k := range []string{"mode", "stock", "sold", "refused_writes"} {
			if _, ok := obj[k]; !ok {
				t.Errorf("line %q lacks %q", line, k)
			}
		}
		got[obj["mode"].(string)] = obj
	}
	if len(got) != len(allModes) {
		t.Fatalf("modes %v; want %v", got, allModes)
	}
	num := func(mode, k string) int { return int(got[mode][k].(float64)) }
	for _, mode := range allModes {
		if s := num(mode, "stock"); s != stock {
			t.Errorf("%s: stock %d; want %d", mode, s, stock)
		}
	}
	// Fenced: exactly the stock sold, and worker 0's late write refused.
	if sold, refused, final := num(modeFenced, "sold"), num(modeFenced, "refused_writes"), num(modeFenced, "final_stock"); sold != stock || refused < 1 || final != 0 ||
		got[modeFenced]["paused_write"] != "refused" || num(modeFenced, "double_sold") != 0 {
		t.Errorf("fenced: sold %d, refused %d, final stock %d, paused write %v; want %d sold, the paused write refused, 0 left",
			sold, refused, final, got[modeFenced]["paused_write"], stock)
	}
	// Unfenced: worker 0's late write applied and sold a unit twice.
	for _, mode := range []string{modeNone, modeLock} {
		if got[mode]["paused_write"] != "applied" || num(mode, "sold") <= stock || num(mode, "double_sold") < 1 || num(mode, "refused_writes") != 0 {
			t.Errorf("%s: %v; want the paused write applied, a unit sold twice, more sold than the stock", mode, got[mode])
		}
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--workers", "1"},
		{"--stock", "0"},
		{"--modes", "none,locked"},
		{"--no-such-flag"},
	} {
		var out bytes.Buffer
		if err := inventory(args, &out); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
