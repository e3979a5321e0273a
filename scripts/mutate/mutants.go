package main

import "time"

// mutant is one deliberate break of a safety rule: in file (from the
// repository's top), the text from, found exactly once, becomes to. Its
// name is "<area>/<what the broken code does>". checks are the test
// commands that should notice, cheapest first. accepted, for a mutant
// no test kills, says why that is acceptable (the change is equivalent,
// or what it breaks is guarded elsewhere); a survivor without it fails
// the run.
type mutant struct {
	name     string
	file     string
	from, to string
	checks   []check
	accepted string
}

// The test commands. The simulation runs its fixed CI seeds; the root
// package's tests are the client's, against real members.
var (
	fsmTests      = check{"fsm", []string{"./internal/fsm"}, 5 * time.Minute}
	livenessTests = check{"liveness", []string{"./internal/liveness"}, 2 * time.Minute}
	raftnodeTests = check{"raftnode", []string{"./internal/raftnode"}, 5 * time.Minute}
	simSeeds      = check{"sim", []string{"./internal/sim"}, 10 * time.Minute}
	embedTests    = check{"embed", []string{"./embed"}, 5 * time.Minute}
	clientTests   = check{"client", []string{"."}, 5 * time.Minute}
)

var (
	fsmChecks      = []check{fsmTests, simSeeds}
	livenessChecks = []check{livenessTests, simSeeds, embedTests}
	raftnodeChecks = []check{raftnodeTests, simSeeds}
	clientChecks   = []check{clientTests}
)

// mutants is the table. Keep each edit small and its text the code's, so
// a reviewer reads the rule it breaks from the diff.
var mutants = []mutant{
	// The state machine: who may hold a lock, in what order, with which
	// token; exactly-once; the ends of sessions and holds.
	{
		name: "fsm/grant-leaves-deadlock", file: "internal/fsm/lock.go", checks: fsmChecks,
		from: "\t\tm.mayStall(a, s, w.ownerKey)\n",
		to:   "",
	},
	{
		name: "fsm/own-waits-do-not-reenter-at-the-grant", file: "internal/fsm/lock.go", checks: fsmChecks,
		from: "\t\t\tm.reenterWaits(a, l, s, w.ownerKey)\n",
		to:   "",
	},
	{
		name: "fsm/cancel-leaves-deadlock", file: "internal/fsm/cancelwait.go", checks: fsmChecks,
		from: "\tm.mayStall(a, ws, ownerKey)\n",
		to:   "\t_ = ownerKey\n",
	},
	{
		name: "fsm/deadlock-search-skipped-for-waiting-holders", file: "internal/fsm/deadlock_grant.go", checks: fsmChecks,
		from: "return !slices.ContainsFunc(l.holders, func(h holder) bool { return len(h.s.waits) > 0 })",
		to:   "return !slices.ContainsFunc(l.holders, func(h holder) bool { return len(h.s.waits) > 1 })",
	},
	{
		name: "fsm/stalled-searches-unbounded", file: "internal/fsm/deadlock_grant.go", checks: fsmChecks,
		from: "case bounded && searches == MaxStalledSearches:",
		to:   "case bounded && searches == MaxStalledSearches+1:",
	},
	{
		name: "fsm/stalled-searches-bounded-below-version-15", file: "internal/fsm/deadlock_grant.go", checks: fsmChecks,
		from: "bounded := m.LogVersion() >= StalledSearchBoundVersion",
		to:   "bounded := m.LogVersion() >= DeadlockAtGrantVersion",
	},
	{
		name: "fsm/deadlock-search-counts-own-waits-below-15", file: "internal/fsm/deadlock.go", checks: fsmChecks,
		from: "d.ownOnly = m.LogVersion() >= OwnWaitsVersion",
		to:   "d.ownOnly = m.LogVersion() >= DeadlockVersion",
	},
	{
		name: "fsm/deadlock-search-counts-the-sessions-waits-from-15", file: "internal/fsm/deadlock.go", checks: fsmChecks,
		from: "d.ownOnly = m.LogVersion() >= OwnWaitsVersion",
		to:   "d.ownOnly = false",
	},
	{
		name: "fsm/deadlock-search-reads-another-keys-waits", file: "internal/fsm/deadlock.go", checks: fsmChecks,
		from: "\t\t\tif e.key == nd.key {\n\t\t\t\tkeys = append(keys, k)",
		to:   "\t\t\tif e.key == nd.key || true {\n\t\t\t\tkeys = append(keys, k)",
	},
	{
		name: "fsm/deadlock-place-indexes-the-whole-queue", file: "internal/fsm/deadlock.go", checks: fsmChecks,
		from: "\t\ti, ok := d.placeOwn(li, n, k.seq)\n",
		to:   "\t\ti, ok := int32(d.waiterIndex(n, d.locks[li].l, k.seq)), true\n\t\tif i >= 0 {\n\t\t\tok = d.need(li, i, n, false)\n\t\t}\n",
	},
	{
		name: "fsm/deadlock-place-trusts-where-it-met-the-node", file: "internal/fsm/deadlock.go", checks: fsmChecks,
		from: "at.lock == li && ws[at.pos].s == s && ws[at.pos].acquireSeq == seq {",
		to:   "at.lock == li {",
	},
	{
		name: "fsm/deadlock-place-skips-the-copied-prefix", file: "internal/fsm/deadlock.go", checks: fsmChecks,
		from: "\tfor p := d.locks[li].placed; p < copied; p++ {\n",
		to:   "\tfor p := copied; p < copied; p++ {\n",
		accepted: "equivalent in outcome: placeOwn records the places of the waiters it copies, so the prefix it has not recorded is only what " +
			"findDeadlock's need copied of the new wait's own queue, whole; a waiter there is missed only if its node waits twice in that queue, " +
			"and that second wait's blockers (its node, waiters between) are all ahead of the new wait, met at cycle's first level, and no copy is extended " +
			"(so no count moves); kept so that a place found never rests on that argument",
	},
	{
		name: "fsm/deadlock-place-copies-past-a-known-place", file: "internal/fsm/deadlock.go", checks: fsmChecks,
		from: "if i, ok := d.places[waiterRef{l, s, seq}]; ok {",
		to:   "if i, ok := d.places[waiterRef{l, s, seq}]; ok && false {",
	},
	{
		name: "fsm/deadlock-search-reads-one-keys-index-for-every-node", file: "internal/fsm/deadlock.go", checks: fsmChecks,
		from: "keys = append(keys, nd.s.keyWaits[nd.key]...)",
		to:   "keys = append(keys, nd.s.keyWaits[\"\"]...)",
	},
	{
		name: "fsm/reentry-check-reads-another-keys-index", file: "internal/fsm/deadlock_grant.go", checks: fsmChecks,
		from: "again = slices.ContainsFunc(s.keyWaits[key], ",
		to:   "again = slices.ContainsFunc(s.keyWaits[key+\"x\"], ",
	},
	{
		name: "fsm/deadlock-cycle-reads-the-queue-again-for-each-wait", file: "internal/fsm/deadlock_cycle.go", checks: fsmChecks,
		from: "\t\t\t\tif dl.firstDead < int(w.pos) {\n\t\t\t\t\tfor ; dl.read",
		to:   "\t\t\t\tif dl.firstDead < int(w.pos) {\n\t\t\t\t\tdl.read = dl.head\n\t\t\t\t\tfor ; dl.read",
	},
	{
		name: "fsm/deadlock-cycle-first-dead-skips-the-head", file: "internal/fsm/deadlock_cycle.go", checks: fsmChecks,
		from: "for i := dl.head; i < len(dl.queue); i++ {",
		to:   "for i := dl.head + 1; i < len(dl.queue); i++ {",
	},
	{
		name: "fsm/deadlock-cycle-chain-blocked-by-holders-only", file: "internal/fsm/deadlock_cycle.go", checks: fsmChecks,
		from: "\tif dl.firstDead < int(w.pos) {\n\t\treturn dl.queue[dl.firstDead].node, true",
		to:   "\tif false {\n\t\treturn dl.queue[dl.firstDead].node, true",
	},
	{
		name: "fsm/key-waits-swap-leaves-the-moved-place", file: "internal/fsm/session.go", checks: fsmChecks,
		from: "\t\ts.waits[last] = le\n",
		to:   "\t\t_ = le\n",
	},
	{
		name: "fsm/key-waits-built-without-the-waits-before", file: "internal/fsm/session.go", checks: fsmChecks,
		from: "\t\tfor k, e := range s.waits {\n\t\t\te.at = int32(len(s.keyWaits[e.key]))",
		to:   "\t\tfor k, e := range s.waits {\n\t\t\tif len(s.keyWaits) > 0 {\n\t\t\t\tbreak\n\t\t\t}\n\t\t\te.at = int32(len(s.keyWaits[e.key]))",
	},
	{
		name: "fsm/deadlock-node-index-misses-the-chain", file: "internal/fsm/deadlock.go", checks: fsmChecks,
		from: "\t\td.byNode[d.nodes[id].node] = id\n",
		to:   "\t\t_ = id\n",
	},
	{
		name: "fsm/deadlock-search-reads-one-wait-of-many", file: "internal/fsm/deadlock.go", checks: fsmChecks,
		from: "at.lock >= 0 && len(nd.s.waits) == 1 {",
		to:   "at.lock >= 0 {",
	},
	{
		name: "fsm/deadlock-search-trusts-a-place-unchecked", file: "internal/fsm/deadlock.go", checks: fsmChecks,
		from: "w.s == nd.node.s && w.acquireSeq == seq {",
		to:   "w.s == nd.node.s {",
	},
	{
		name: "fsm/deadlock-search-index-misses-a-waiter", file: "internal/fsm/deadlock.go", checks: fsmChecks,
		from: "\t\treturn int(i)\n\t}\n\treturn -1\n",
		to:   "\t\treturn int(i)\n\t}\n\treturn 0\n",
		accepted: "equivalent: every wait of a session is in its lock's queue (checkInvariants holds it after every entry), so the index never misses; " +
			"-1 is lock.waiterIndex's answer for a wait not queued, kept alike",
	},
	{
		name: "fsm/deadlock-search-reads-another-sessions-waits", file: "internal/fsm/deadlock.go", checks: fsmChecks,
		from: "if ws, ok := d.sessionWaits[s]; ok {",
		to:   "for _, ws := range d.sessionWaits {",
	},
	{
		name: "fsm/hold-end-rewrites-other-keys", file: "internal/fsm/session.go", checks: fsmChecks,
		from: "\t\tif c.keyed && c.ownerKey != ownerKey {\n",
		to:   "\t\tif c.keyed && c.ownerKey != ownerKey && false {\n",
	},
	{
		name: "fsm/expire-hold-ignores-owner-key", file: "internal/fsm/lock.go", checks: fsmChecks,
		from: "\t\tcase op.OwnerKey != nil:\n",
		to:   "\t\tcase op.OwnerKey != nil && false:\n",
	},
	{
		name: "liveness/same-token-limits-expire-one", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "for _, key := range j.keys {",
		to:   "for _, key := range j.keys[:1] {",
	},
	{
		name: "liveness/shared-hold-clock-runs-on-the-first-limit", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "\tif limit <= h.limit {\n",
		to:   "\tif true {\n",
	},
	{
		name: "fsm/second-exclusive-holder", file: "internal/fsm/lock.go", checks: fsmChecks,
		from: "if len(l.holders) == 0 {\n\t\treturn true",
		to:   "if len(l.holders) <= 1 {\n\t\treturn true",
	},
	{
		name: "fsm/permit-beyond-limit", file: "internal/fsm/lock.go", checks: fsmChecks,
		from: "len(l.holders) < int(l.holders[0].limit)",
		to:   "len(l.holders) <= int(l.holders[0].limit)",
	},
	{
		name: "fsm/reader-beside-writer", file: "internal/fsm/lock.go", checks: fsmChecks,
		from: "return shared && l.holders[0].shared && len(",
		to:   "return shared && len(",
	},
	{
		name: "fsm/acquire-jumps-queue", file: "internal/fsm/delay.go", checks: fsmChecks,
		from: "return l.admits(shared) && len(l.waiters()) == 0 && !l.delayed()",
		to:   "return l.admits(shared) && !l.delayed()",
	},
	{
		name: "fsm/acquire-in-lock-delay", file: "internal/fsm/delay.go", checks: fsmChecks,
		from: "return l.admits(shared) && len(l.waiters()) == 0 && !l.delayed()",
		to:   "return l.admits(shared) && len(l.waiters()) == 0",
	},
	{
		name: "fsm/waiter-granted-in-lock-delay", file: "internal/fsm/lock.go", checks: fsmChecks,
		from: "for !l.delayed() && len(l.waiters()) > 0 && l.grantable(&l.waiters()[0]) {",
		to:   "for len(l.waiters()) > 0 && l.grantable(&l.waiters()[0]) {",
	},
	{
		name: "fsm/close-starts-lock-delay", file: "internal/fsm/delay.go", checks: fsmChecks,
		from: "return e == EndSessionExpired || e == EndHoldExpired",
		to:   "return e == EndSessionExpired || e == EndHoldExpired || e == EndSessionClosed",
	},
	{
		name: "fsm/revoked-end-starts-no-lock-delay", file: "internal/fsm/delay.go", checks: fsmChecks,
		from: "e == EndHoldExpired || e == EndRevoked\n",
		to:   "e == EndHoldExpired\n",
	},
	{
		name: "fsm/second-revoke-replaces-the-first", file: "internal/fsm/revoke.go", checks: fsmChecks,
		from: "r := l.revocationOf(h)\n\t\tif r == nil {",
		to:   "var r *revocation\n\t\tif r == nil {",
	},
	{
		name: "fsm/queue-last-in-first-out", file: "internal/fsm/lock.go", checks: fsmChecks,
		from: "l.queue.waiters = append(l.queue.waiters, w)",
		to:   "l.queue.waiters = append([]waiter{w}, l.queue.waiters...)",
	},
	{
		name: "fsm/token-not-increasing", file: "internal/fsm/lock.go", checks: fsmChecks,
		from: "token:      a.index,",
		to:   "token:      uint64(len(l.holders)) + 1,",
	},
	{
		name: "fsm/retry-applied-again", file: "internal/fsm/machine.go", checks: fsmChecks,
		from: "if c := s.cachedEntry(seq); c != nil {",
		to:   "if c := s.cachedEntry(seq); c != nil && false {",
	},
	{
		name: "fsm/blacklisted-session-acquires", file: "internal/fsm/lock.go", checks: fsmChecks,
		from: "if s.blacklisted {",
		to:   "if false {",
	},
	{
		name: "fsm/blacklist-not-told-to-tracker", file: "internal/fsm/session.go", checks: fsmChecks,
		from: "a.liveness().SessionBlacklisted = s.id",
		to:   "",
	},
	{
		name: "fsm/ended-session-keeps-holds", file: "internal/fsm/session.go", checks: fsmChecks,
		from: "for _, l := range held {",
		to:   "for _, l := range held[:0] {",
	},
	{
		name: "fsm/ended-session-strands-waiters", file: "internal/fsm/session.go", checks: fsmChecks,
		from: "\t\tm.grantWaiters(a, l)\n\t}\n\tm.dropSession(s)",
		to:   "\t}\n\tm.dropSession(s)",
	},
	{
		name: "fsm/release-ignores-token", file: "internal/fsm/lock.go", checks: fsmChecks,
		from: "if h.token != op.GetToken() {",
		to:   "if false {",
	},
	{
		name: "fsm/cas-release-ignores-token", file: "internal/fsm/lock.go", checks: fsmChecks,
		from: "(token == 0 || h.token == token)",
		to:   "true",
	},
	{
		name: "fsm/lock-set-partly-granted", file: "internal/fsm/many.go", checks: fsmChecks,
		from: "if busy > 0 && op.GetAll() {",
		to:   "if busy == len(names) && op.GetAll() {",
	},
	{
		name: "fsm/timed-wait-not-told-to-tracker", file: "internal/fsm/lock.go", checks: fsmChecks,
		from: "if t := op.GetWaitTimeoutNanos(); t > 0 {",
		to:   "if t := op.GetWaitTimeoutNanos(); t < 0 {",
	},
	{
		name: "fsm/limited-hold-not-told-to-tracker", file: "internal/fsm/lock.go", checks: fsmChecks,
		from: "if holdLimit != 0 {\n\t\tlv := a.liveness()",
		to:   "if holdLimit != 0 && false {\n\t\tlv := a.liveness()",
	},

	// The leader's clocks: session deadlines, wait timeouts, hold limits,
	// and what a new leader grants.
	{
		name: "liveness/keepalive-extends-half-ttl", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "if d := received.Add(s.ttl); d.After(s.deadline) {",
		to:   "if d := received.Add(s.ttl / 2); d.After(s.deadline) {",
	},
	{
		name: "liveness/keepalive-counts-from-processing", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "if d := received.Add(s.ttl); d.After(s.deadline) {",
		to:   "if d := t.now().Add(s.ttl); d.After(s.deadline) {",
	},
	{
		name: "liveness/late-keepalive-moves-deadline-back", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "if d := received.Add(s.ttl); d.After(s.deadline) {",
		to:   "if d := received.Add(s.ttl); true {",
	},
	{
		name: "liveness/keepalive-after-expiry-proposed", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "case s == nil || s.expiring:\n\t\treturn nil, ErrSessionLost",
		to:   "case s == nil:\n\t\treturn nil, ErrSessionLost",
	},
	{
		name: "liveness/blacklisted-keepalive-accepted", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "case s.blacklisted:\n\t\treturn nil, ErrBlacklisted",
		to:   "case false:\n\t\treturn nil, ErrBlacklisted",
	},
	{
		name: "liveness/expiry-ignores-keepalives", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "case now.Before(s.deadline):",
		to:   "case false:",
	},
	{
		name: "liveness/new-leader-ends-lock-delays-at-once", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "t.delays[d.Lock] = &lockDelay{from: d.DelayFrom, deadline: now.Add(time.Duration(d.DelayNanos))}",
		to:   "t.delays[d.Lock] = &lockDelay{from: d.DelayFrom, deadline: now}",
	},
	{
		name: "liveness/new-leader-ends-revoked-holds-at-once", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "&revocation{deadline: now.Add(time.Duration(r.GraceNanos))}",
		to:   "&revocation{deadline: now}",
	},
	{
		name: "liveness/open-grants-half-ttl", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "deadline: now.Add(ttl), secret: secret}\n\t\tt.queueSession(o.GetSessionId(), now.Add(ttl))",
		to:   "deadline: now.Add(ttl / 2), secret: secret}\n\t\tt.queueSession(o.GetSessionId(), now.Add(ttl/2))",
	},
	{
		name: "liveness/wait-times-out-late", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "at := now.Add(time.Duration(w.GetWaitTimeoutNanos()))",
		to:   "at := now.Add(2 * time.Duration(w.GetWaitTimeoutNanos()))",
	},
	{
		name: "liveness/renewal-extends-half-limit", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "if d := received.Add(h.limit); d.After(h.deadline) {",
		to:   "if d := received.Add(h.limit / 2); d.After(h.deadline) {",
	},
	{
		name: "liveness/renewal-counts-from-processing", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "if d := received.Add(h.limit); d.After(h.deadline) {",
		to:   "if d := t.now().Add(h.limit); d.After(h.deadline) {",
	},
	{
		name: "liveness/hold-outlives-its-limit", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "t.queueHold(k, now.Add(limit))",
		to:   "t.queueHold(k, now.Add(2*limit))",
	},
	{
		name: "liveness/new-leader-grants-half-ttl", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "t.sessions[s.ID] = &session{ttl: ttl, deadline: now.Add(ttl),",
		to:   "t.sessions[s.ID] = &session{ttl: ttl, deadline: now.Add(ttl / 2),",
	},
	{
		name: "liveness/new-leader-expires-holds-at-once", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "t.holds[k] = &hold{limit: limit, deadline: now.Add(limit), keys: []string{h.OwnerKey}}",
		to:   "t.holds[k] = &hold{limit: limit, deadline: now, keys: []string{h.OwnerKey}}",
	},
	{
		// Two revoked holds of one session sharing a token timed as one:
		// the second outlives its grace.
		name: "liveness/revoked-holds-sharing-a-token-timed-as-one", file: "internal/liveness/tracker.go", checks: livenessChecks,
		from: "k := holdKey{r.GetLock(), r.GetSessionId(), r.GetToken(), r.GetOwnerKey()}",
		to:   "k := holdKey{r.GetLock(), r.GetSessionId(), r.GetToken(), \"\"}",
	},

	// Raft plumbing: durable before anyone hears of it; apply committed
	// entries, in order, and tell the tracker before the proposer.
	{
		name: "raftnode/ack-before-persist", file: "internal/raftnode/ready.go", checks: raftnodeChecks,
		from: "\t\t\tn.noteMustTell(m.GetEntries())\n\t\t\tn.appends.put(m)\n",
		to: `			n.noteMustTell(m.GetEntries())
			toPeer := func(r *raftpb.Message) bool {
				return r.GetTo() != n.cfg.ID && r.GetTo() != raft.LocalAppendThread && r.GetTo() != raft.LocalApplyThread
			}
			for _, r := range m.GetResponses() {
				if toPeer(r) {
					peers = append(peers, r)
				}
			}
			m.Responses = slices.DeleteFunc(m.Responses, toPeer)
			n.appends.put(m)
`,
	},
	{
		name: "raftnode/vote-not-synced", file: "internal/raftnode/append.go", checks: raftnodeChecks,
		from: "\t\t\tsync = true\n\t\t\tn.savedTerm, n.savedVote = hs.GetTerm(), hs.GetVote()",
		to:   "\t\t\tn.savedTerm, n.savedVote = hs.GetTerm(), hs.GetVote()",
	},
	{
		name: "raftnode/entries-not-synced", file: "internal/raftnode/append.go", checks: raftnodeChecks,
		from: "ents = append(ents[:keep], es...)\n\t\t\tsync = true",
		to:   "ents = append(ents[:keep], es...)",
	},
	{
		name: "raftnode/snapshot-commit-not-synced", file: "internal/raftnode/append.go", checks: raftnodeChecks,
		from: "\t\t\tsync = true\n\t\t\tif err := n.ms.ApplySnapshot(",
		to:   "\t\t\tif err := n.ms.ApplySnapshot(",
	},
	{
		name: "raftnode/entries-share-snapshot-write", file: "internal/raftnode/append.go", checks: raftnodeChecks,
		from: "\t\tif hasSnap {\n\t\t\t// The hard state that commits the snapshot",
		to:   "\t\tif false {\n\t\t\t// The hard state that commits the snapshot",
	},
	{
		name: "raftnode/snapshot-above-logged-commit", file: "internal/raftnode/ready.go", checks: raftnodeChecks,
		from: "if n.writtenCommit.Load() < n.applied {",
		to:   "if false {",
	},
	{
		name: "raftnode/apply-uncommitted", file: "internal/raftnode/ready.go", checks: raftnodeChecks,
		from: "\t\t\tn.appends.put(m)\n",
		to:   "\t\t\tn.applyEntries(m.GetEntries())\n\t\t\tn.appends.put(m)\n",
	},
	{
		name: "raftnode/apply-out-of-order", file: "internal/raftnode/ready.go", checks: raftnodeChecks,
		from: "for _, e := range ents {\n\t\tidx := e.GetIndex()",
		to:   "for _, e := range slices.Backward(ents) {\n\t\tidx := e.GetIndex()",
	},
	{
		name: "raftnode/proposer-told-before-tracker", file: "internal/raftnode/ready.go",
		checks: []check{raftnodeTests, simSeeds, clientTests},
		from: `		if n.cfg.Observer != nil {
			n.cfg.Observer.Applied(a.index, a.cmd, a.res)
		}
		if a.cmd.GetProposer() == n.cfg.ID {
			n.finish(a.cmd.GetProposalId(), a.res, a.index, nil)
		}`,
		to: `		if a.cmd.GetProposer() == n.cfg.ID {
			n.finish(a.cmd.GetProposalId(), a.res, a.index, nil)
		}
		if n.cfg.Observer != nil {
			n.cfg.Observer.Applied(a.index, a.cmd, a.res)
		}`,
	},
	{
		// A refusal before the log without its seq fence: a delayed
		// earlier attempt of the request applies after the client was
		// told it was refused.
		name: "raftnode/version-refusal-without-seq-fence", file: "internal/raftnode/propose.go", checks: raftnodeChecks,
		from: "fence, ok := n.fence(cmd, p, refusal)\n\t\t\t\tif !ok {\n\t\t\t\t\treturn nil, refusal\n\t\t\t\t}\n\t\t\t\tcmd = fence",
		to:   "return nil, refusal",
	},
	{
		// The no-space guard refuses without settling the seq: the
		// refused acquire, arriving again once space is back, applies.
		name: "server/no-space-refusal-without-seq-fence", file: "internal/server/space.go", checks: []check{embedTests},
		from: "return s.node.Refuse(ctx, cmd, refusal)",
		to:   "return refusal",
	},
	{
		// A fence that found the earlier attempt applied still refuses:
		// the client is told "refused" of a request that took effect.
		name: "raftnode/fence-that-found-an-answer-refuses", file: "internal/raftnode/node.go", checks: raftnodeChecks,
		from: "res, index, err = nil, 0, &NotLeaderError{Leader: f.leader}",
		to:   "res, index, err = nil, 0, f.refusal",
	},
	{
		name: "raftnode/held-proposals-go-after-the-next", file: "internal/raftnode/propose.go", checks: raftnodeChecks,
		from: "batch := append(n.deferral.held, first)",
		to:   "batch := append([]*proposal{first}, n.deferral.held...)",
	},
	{
		name: "raftnode/held-proposals-wait-from-the-last", file: "internal/raftnode/defer.go", checks: raftnodeChecks,
		from: "if d.c != nil || n.manual {",
		to:   "if n.manual {",
	},
	{
		name: "raftnode/held-proposals-outlast-the-tick", file: "internal/raftnode/members.go", checks: raftnodeChecks,
		from: "\tif n.manual {\n\t\tn.stepHeld()\n\t}\n",
		to:   "",
	},

	// The client's deadline: counted from the send of the keepalive,
	// less the safety margin, so the client gives up before the server
	// can expire the session.
	{
		name: "client/deadline-from-receive", file: "keepalive.go", checks: clientChecks,
		from: "s.extendLocked(c.sent, s.serverTTL(",
		to:   "s.extendLocked(time.Now(), s.serverTTL(",
	},
	{
		name: "client/revoke-not-told-on-resume", file: "leases.go", checks: clientChecks,
		from: "s.revokeRequestedLocked(r)",
		to:   "_ = r",
	},
	{
		name: "client/deadline-without-margin", file: "keepalive.go", checks: clientChecks,
		from: "nd := sent.Add(ttl - s.keepalive.margin)",
		to:   "nd := sent.Add(ttl)",
	},
	{
		name: "client/loss-declared-late", file: "keepalive.go", checks: clientChecks,
		from: "next := s.keepalive.deadline\n",
		to:   "next := s.keepalive.deadline.Add(s.keepalive.margin)\n",
	},
	{
		name: "client/late-answer-ends-jeopardy", file: "keepalive.go", checks: clientChecks,
		from: "if s.life.state == StateJeopardy && time.Now().Before(nd) {",
		to:   "if s.life.state == StateJeopardy {",
	},
	{
		name: "client/open-deadline-from-answer", file: "session.go", checks: clientChecks,
		from: "\tsent := time.Now()\n\tsc, resp, _, err := s.connect(ctx, open, true)\n",
		to:   "\tsc, resp, _, err := s.connect(ctx, open, true)\n\tsent := time.Now()\n",
	},
}
