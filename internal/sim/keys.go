package sim

import (
	"cmp"
	"slices"
)

// Owner keys (Config.Keys). A session may hold and wait under several
// owner keys, as a worker pool's goroutines sharing one session do: each
// (session, owner key) is an owner of its own (fsm doc.go, "Choices
// where DESIGN.md is silent"). With Keys, each client acquires under
// one of two keys, drawn per operation, and believes what it holds per
// (lock, key).

// secondKey is the owner key of a client's second worker; the first's
// is "".
const secondKey = "k2"

// drawKey is the owner key of a client's next acquire: "" without
// Config.Keys (no draw, so scenarios without keys keep their schedules),
// else "" or secondKey, one time in two.
func (c *client) drawKey() string {
	if !c.s.cfg.Keys || c.s.rng.IntN(2) == 0 {
		return ""
	}
	return secondKey
}

// holdRef names a hold as its client knows it: the lock and the owner key
// it holds it under.
type holdRef struct{ lock, key string }

func (r holdRef) String() string {
	if r.key == "" {
		return r.lock
	}
	return r.lock + "@" + r.key
}

// sortedRefs is m's keys in (lock, key) order.
func sortedRefs[V any](m map[holdRef]V) []holdRef {
	rs := make([]holdRef, 0, len(m))
	for r := range m {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b holdRef) int { return cmp.Or(cmp.Compare(a.lock, b.lock), cmp.Compare(a.key, b.key)) })
	return rs
}
