package sim

import (
	"cmp"
	"slices"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
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

// Two workers. With Config.Keys a client's queued wait may be left
// waiting (bg) while the client goes on with other operations under
// either key: a worker pool's goroutines, one blocked in an acquire while
// another works. A (session, key) may then wait for two locks at once, or
// twice for one lock, as log version 14's rules need: its other waits for
// a lock it is granted re-enter that hold (reenterWaits), and a grant or
// cancel that leaves it deadlocked ends its waits (deadlock_grant.go).

// leaveWaiting hands the client's queued wait to its other worker, three
// times in four that it finds one to hand, with Config.Keys and no wait
// left already; it reports whether it did.
func (c *client) leaveWaiting() bool {
	op := c.op
	if !c.s.cfg.Keys || c.bg != nil || op.kind != opAcquireWait || !op.queued || op.cancelling || c.s.rng.IntN(4) == 0 {
		return false
	}
	c.bg, c.op = op, nil
	c.s.stats.WaitsLeft++
	c.s.tracef("client %d leaves its wait %v seq %d waiting", c.id, holdRef{op.lock, op.key}, op.seq)
	return true
}

// waiting reports whether the client's other worker waits in its session.
func (c *client) waiting() bool { return c.bg != nil && c.bg.session == c.session }

// waitsFor reports whether the client's other worker waits for r.
func (c *client) waitsFor(r holdRef) bool {
	return c.waiting() && c.bg.lock == r.lock && c.bg.key == r.key
}

// current reports whether op is one of the client's operations under way.
func (c *client) current(op *clientOp) bool { return op != nil && (c.op == op || c.bg == op) }

// opFor is the client's operation under way whose attempt is attempt, or
// nil.
func (c *client) opFor(attempt uint64) *clientOp {
	for _, op := range [...]*clientOp{c.op, c.bg} {
		if op != nil && op.attempt == attempt {
			return op
		}
	}
	return nil
}

// minUnacked is the MinUnackedSeq of the client's next command (of seq
// c.seq): the seq of the wait its other worker has under way in this
// session, if any, whose answer (and retries' cached answer) the session
// must keep; else the command's own.
func (c *client) minUnacked() uint64 {
	if c.waiting() && c.bg.seq != 0 {
		return min(c.bg.seq, c.seq)
	}
	return c.seq
}

// countKeys adds to the stats what only several owner keys per session
// make, at entry i of the replayed log: cmd with result res, which left
// locks where prev were.
func (k *checker) countKeys(i uint64, cmd *fsmpb.Command, res *fsmpb.Result, prev, locks []*fsmpb.Lock) {
	st := &k.s.stats
	// A node's waits granted in one entry beyond its first for a lock
	// re-entered that hold (its key is its waiter's, before the entry).
	type node struct {
		lock    string
		session uint64
		key     string
	}
	var nodes []node
	for _, g := range res.GetGrants() {
		for _, l := range prev {
			if l.GetName() != g.GetLock() {
				continue
			}
			for _, w := range l.GetWaiters() {
				if w.GetSessionId() == g.GetSessionId() && w.GetAcquireSeq() == g.GetAcquireSeq() {
					n := node{g.GetLock(), g.GetSessionId(), w.GetOwnerKey()}
					if slices.Contains(nodes, n) {
						st.ReenteredAtGrant++
					}
					nodes = append(nodes, n)
				}
			}
		}
	}
	if a := cmd.GetAcquire(); a != nil && res.GetError() == fsmpb.Error_ERROR_NONE {
		if status := res.GetAcquire().GetStatus(); status == fsmpb.AcquireStatus_ACQUIRE_STATUS_BUSY || status == fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
			for _, l := range prev {
				if l.GetName() == a.GetLock() && slices.ContainsFunc(l.GetHolders(), func(h *fsmpb.Holder) bool {
					return h.GetSessionId() == cmd.GetSessionId() && h.GetOwnerKey() != a.GetOwnerKey()
				}) {
					st.OwnKeyBusy++
				}
			}
		}
	}
	for _, l := range locks {
		hs := l.GetHolders()
		for _, h := range hs {
			if h.GetToken() != i {
				continue // not granted by this entry
			}
			for _, o := range hs {
				if o.GetSessionId() == h.GetSessionId() && o.GetOwnerKey() != h.GetOwnerKey() {
					st.SessionKeyHolds++
					if o.GetToken() == h.GetToken() {
						st.SameTokenHolds++
					}
					break
				}
			}
		}
	}
}
