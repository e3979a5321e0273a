package sim

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
	"github.com/batonlock/baton/internal/raftnode"
)

func protoClone[T proto.Message](m T) T { return proto.Clone(m).(T) }

var deterministic = proto.MarshalOptions{Deterministic: true}

// encode is m's deterministic encoding. fsmpb and raftpb's ConfChange
// have no floating-point fields, and what is compared here has no
// unknown fields, so two commands or results are proto.Equal exactly
// when their encodings are the same bytes; encoding is the cheaper.
func encode(m proto.Message) []byte {
	b, err := deterministic.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// logEntry is the checker's record of one committed command: data and
// resData are the command's and the result's encodings.
type logEntry struct {
	cmd           *fsmpb.Command
	data, resData []byte
	res           *fsmpb.Result
	firstAt       int64 // virtual time it was first applied anywhere (= committed)
	firstPos      int64 // history clock then: a point at which it took effect
}

type ackRecord struct {
	index uint64
	cmd   *fsmpb.Command
	res   *fsmpb.Result
}

// internalOp is a proposal a member makes itself (a leader's liveness
// tracker, or a cleanup for a caller that went away), recorded as an
// operation of the history when it changes what clients observe (an
// expiry, an abandoned wait's release). An abandon's token is filled in
// when its result says which hold it released.
type internalOp struct {
	kind    opKind
	session uint64
	owner   string // the owner key of the hold it names (expire-hold, abandon)
	lock    string
	token   uint64
	call    int64
	ret     int64
	out     outcome
	done    bool
	key     string // proposalKey of its command
	index   uint64 // where it applied, when done with no error
}

// proposalKey names what a proposal asks, whoever proposes it and when:
// its command without the proposer's wall time.
func proposalKey(cmd *fsmpb.Command) string {
	c := protoClone(cmd)
	c.WallTimeUnixNano = 0
	return string(encode(c))
}

type fencedWrite struct {
	client  int
	lock    string
	key     string // the owner key of the hold the client wrote under
	token   uint64
	session uint64
	issued  int64
	arrived int64
}

type resource struct {
	maxToken uint64
	accepted []fencedWrite
}

// confEntry is the checker's record of one committed membership change.
type confEntry struct {
	cc   *raftpb.ConfChange
	data []byte
}

// checker holds what the checkers need across a run.
type checker struct {
	s           *Sim
	log         map[uint64]*logEntry
	conf        map[uint64]*confEntry // membership changes, by index
	acks        []ackRecord
	pos         int64 // history clock: one tick per call or return
	history     []porcupine.Operation
	internal    []*internalOp
	resources   map[string]*resource
	linVerdict  string
	fullHistory []porcupine.Operation
	// The disk guard's (space.go): the (session, seq) of every seq fence
	// proposed for a NO_SPACE refusal, and the secret hashes of the
	// opens whose clients were told NO_SPACE.
	noSpaceFences map[sessionSeq]bool
	refusedOpens  map[string]bool
}

func (k *checker) init(s *Sim) {
	k.s = s
	k.log = make(map[uint64]*logEntry)
	k.conf = make(map[uint64]*confEntry)
	k.resources = make(map[string]*resource)
	k.noSpaceFences = make(map[sessionSeq]bool)
	k.refusedOpens = make(map[string]bool)
}

func (k *checker) call() int64 { k.pos++; return k.pos }

// applied records member m applying cmd at index, and checks that every
// member applies the same command with the same result at an index (d).
func (k *checker) applied(m *member, index uint64, cmd *fsmpb.Command, res *fsmpb.Result) {
	data := encode(cmd)
	if c := k.conf[index]; c != nil {
		k.s.fail("d/log", "member %d applied %v at index %d; another member applied membership change %v", m.id, cmd, index, c.cc)
		return
	}
	e := k.log[index]
	if e == nil {
		k.log[index] = &logEntry{cmd: protoClone(cmd), data: data, res: protoClone(res), resData: encode(res), firstAt: k.s.now, firstPos: k.call()}
		k.s.stats.Entries++
		if cmd.GetSetLogVersion() != nil {
			k.s.stats.VersionRaises++
		}
		k.s.tracef("apply %d@%d %x", index, m.id, data)
		return
	}
	if string(e.data) != string(data) {
		k.s.fail("d/log", "member %d applied %v at index %d; another member applied %v", m.id, cmd, index, e.cmd)
		return
	}
	if string(e.resData) != string(encode(res)) {
		k.s.fail("d/determinism", "member %d got %v at index %d; another member got %v", m.id, res, index, e.res)
	}
}

// appliedConf records member m applying membership change cc at index,
// and checks that every member applies the same change there (d).
func (k *checker) appliedConf(m *member, index uint64, cc *raftpb.ConfChange) {
	data := encode(cc)
	if e := k.log[index]; e != nil {
		k.s.fail("d/log", "member %d applied membership change %v at index %d; another member applied %v", m.id, cc, index, e.cmd)
		return
	}
	c := k.conf[index]
	if c == nil {
		k.conf[index] = &confEntry{cc: protoClone(cc), data: data}
		k.s.tracef("apply conf %d@%d %v %d", index, m.id, cc.GetType(), cc.GetNodeId())
		return
	}
	if string(c.data) != string(data) {
		k.s.fail("d/log", "member %d applied membership change %v at index %d; another member applied %v", m.id, cc, index, c.cc)
	}
}

// acked records a result a client was told, to check it is never lost.
func (k *checker) acked(m *member, r *request, res *fsmpb.Result, index uint64) {
	e := k.log[index]
	if e == nil || string(e.data) != string(encode(r.cmd)) {
		k.s.fail("d/ack", "member %d acknowledged %v at index %d but the log has %v there", m.id, r.cmd, index, e)
		return
	}
	k.acks = append(k.acks, ackRecord{index: index, cmd: protoClone(r.cmd), res: protoClone(res)})
}

// checkMember checks (a) on one member's applied state.
func (k *checker) checkMember(m *member) {
	m.node.View(func(fm *fsm.Machine) {
		for _, l := range fm.Locks("", "", 0) {
			if err := checkHolders(l); err != nil {
				k.s.fail("a/holders", "member %d: %v", m.id, err)
			}
		}
	})
}

func (k *checker) resourceWrite(c *client, ref holdRef, token, session uint64, issued int64) {
	lock := ref.lock
	r := k.resources[lock]
	if r == nil {
		r = &resource{}
		k.resources[lock] = r
	}
	// A mutex's resource keeps the highest token it has seen and rejects
	// lower ones (fencing). A semaphore's permits are held side by side,
	// so its resource takes every write; the final check still holds each
	// to the hold it names.
	if token < r.maxToken && !isSemaphore(lock) {
		k.s.stats.WritesRejected++
		k.s.tracef("write %s %d rejected", lock, token)
		return
	}
	r.maxToken = max(r.maxToken, token)
	r.accepted = append(r.accepted, fencedWrite{client: c.id, lock: lock, key: ref.key, token: token, session: session, issued: issued, arrived: k.s.now})
	k.s.tracef("write %s %d accepted", lock, token)
}

func (k *checker) internalStart(op *internalOp) {
	op.call = k.call()
	k.internal = append(k.internal, op)
}

func (k *checker) internalDone(op *internalOp, res *fsmpb.Result, index uint64, err error) {
	op.done = true
	op.ret = k.call()
	if err != nil {
		op.ret, op.out = 1<<60, outcome{unknown: true}
		return
	}
	op.index = index
	op.settle(res)
	if op.kind == opExpireHold && res.GetError() == fsmpb.Error_ERROR_NONE {
		k.s.stats.HoldsExpired++
	}
	if op.kind == opEndRevoked && res.GetError() == fsmpb.Error_ERROR_NONE {
		k.s.stats.HoldsRevoked++
	}
	if op.kind == opAbandon && res.GetAcquire().GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
		if op.out.granted {
			k.s.stats.AbandonsReleased++
		} else {
			k.s.stats.AbandonsKept++ // claimed by a retry, or its answer forgotten
		}
	}
}

// settle sets op's outcome from the result of its entry. An abandon whose
// grant had won the race with it released one count of that grant, and
// learns the grant's token.
func (op *internalOp) settle(res *fsmpb.Result) {
	op.out = outcome{code: res.GetError()}
	if op.kind != opAbandon || res.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED || res.GetError() != fsmpb.Error_ERROR_NONE {
		return
	}
	op.token = res.GetAcquire().GetToken()
	op.out.granted, op.out.token, op.out.remaining = true, op.token, res.GetRemainingCount()
}

// record adds a client operation to the history.
func (k *checker) record(c *client, op *clientOp, o outcome) {
	ret := k.call()
	if o.unknown {
		ret = 1 << 60 // may take effect at any time after its call
	}
	k.history = append(k.history, porcupine.Operation{
		ClientId: c.id,
		Input: linInput{kind: op.kind, session: op.session, key: op.key, seq: op.seq, lock: op.lock, token: op.token, shared: op.shared(),
			value: op.cmd.GetAcquire().GetValue() + op.cmd.GetProclaim().GetValue()},
		Call:   op.call,
		Output: o,
		Return: ret,
	})
}

// countHistory adds to the stats the ends of holds in member m's
// replicated history, those with values, and whether it has a floor:
// the comparison of the members' hashes compares those too
// (fsm.Machine.Hash, from fsm.HistoryVersion and
// fsm.WatchHistoryVersion), and so does the replay of the log from
// scratch.
func (k *checker) countHistory(m *member) {
	var snap []byte
	m.node.View(func(fm *fsm.Machine) {
		if fm.HistoryReplicated() {
			snap, _ = fm.Snapshot()
		}
	})
	var p fsmpb.Snapshot
	if err := proto.Unmarshal(snap, &p); err != nil {
		k.s.fail("f/converge", "member %d's snapshot does not decode: %v", m.id, err)
		return
	}
	for _, h := range p.GetHistory() {
		k.s.stats.HistoryEnds += uint64(len(h.GetHolds()))
		for _, e := range h.GetHolds() {
			if e.GetValue() != "" {
				k.s.stats.HistoryValues++
			}
		}
	}
	if p.GetHistoryFloor() != 0 {
		k.s.stats.HistoryFloors++
	}
}

// finalChecks run after the calm phase.
func (k *checker) finalChecks() {
	s := k.s
	// (f) convergence of the group the leader ends with. A member that
	// stopped as removed must not be in it; members added whose change
	// never applied are not.
	lead := s.leader()
	if lead == 0 {
		s.fail("f/converge", "no leader after heal")
		return
	}
	group := s.nodes[lead].node.Membership()
	var hash string
	var applied uint64
	for _, id := range append(slices.Clone(group.Voters), group.Learners...) {
		m := s.nodes[id]
		switch {
		case m == nil:
			s.fail("f/converge", "the group %v has member %d, which never ran", group, id)
			return
		case m.retired:
			s.fail("f/removed", "member %d stopped as removed, but the group %v has it", id, group)
			return
		case !m.up():
			s.fail("f/converge", "member %d is down after heal", id)
			return
		}
		var h string
		m.node.View(func(fm *fsm.Machine) { h = fm.Hash() })
		st := m.node.Status()
		if got := m.node.Membership(); !slices.Equal(got.Voters, group.Voters) || !slices.Equal(got.Learners, group.Learners) {
			s.fail("f/converge", "member %d has voters %v learners %v; leader %d has %v %v", id, got.Voters, got.Learners, lead, group.Voters, group.Learners)
			return
		}
		if hash == "" {
			hash, applied = h, st.Applied
			k.countHistory(m)
			continue
		}
		if h != hash || st.Applied != applied {
			s.fail("f/converge", "member %d: hash %.12s applied %d; the first of the group: hash %.12s applied %d",
				id, h, st.Applied, hash, applied)
			return
		}
	}
	// Every member reads this release's log version after heal: the
	// leader must have raised the cluster's to it.
	if v := s.nodes[lead].node.LogVersion(); v != fsm.LogVersion {
		s.fail("f/version", "after heal every member reads log version %d, the cluster is at %d", fsm.LogVersion, v)
		return
	}
	// (a), (b), (d) on the committed log, replayed from scratch.
	idx := sortedKeys(k.log)
	for i := range k.conf {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	fm := fsm.New()
	// A hold is a lock, a token, a session and an owner key: one entry
	// may grant several locks, and several permits of one semaphore, to
	// several sessions or to one session under several keys (Config.Keys:
	// its holds then share the token, and each ends on its own).
	type hold struct {
		lock    string
		token   uint64
		session uint64
		key     string
	}
	delays := map[string]delayRun{} // lock → the lock-delay it is in
	revokes := map[revokedHold]revokeRun{}
	cur := map[hold]bool{}           // the holds after the previous entry
	last := map[string]uint64{}      // lock → highest token ever granted
	endAt := map[hold]uint64{}       // hold → index of the entry that ended it
	seen := map[hold]bool{}          // every hold there ever was
	refused := map[sessionSeq]bool{} // acquires refused as deadlocks
	fenced := map[sessionSeq]bool{}  // seqs a fence settled as refused
	var prev []*fsmpb.Lock           // the locks after the previous entry
	for _, i := range idx {
		if c := k.conf[i]; c != nil {
			raftnode.ApplyMembership(fm, i, c.cc)
			continue
		}
		e := k.log[i]
		var before []*fsmpb.Lock
		if e.cmd.GetAcquire().GetWait() {
			before = fm.Locks("", "", 0)
		}
		res := fm.Apply(i, protoClone(e.cmd))
		if string(encode(res)) != string(e.resData) {
			s.fail("d/replay", "replaying index %d gives %v; members applied %v", i, res, e.res)
			return
		}
		// A retry's refusal is the first attempt's, from the cache:
		// checked at the entry that decided it.
		if res.GetError() == fsmpb.Error_ERROR_DEADLOCK && !refused[sessionSeq{e.cmd.GetSessionId(), e.cmd.GetSeq()}] {
			refused[sessionSeq{e.cmd.GetSessionId(), e.cmd.GetSeq()}] = true
			s.stats.Deadlocks++
			if err := checkDeadlock(before, e.cmd, res); err != nil {
				s.fail("i/deadlock", "index %d %v refused as a deadlock: %v", i, e.cmd, err)
				return
			}
		}
		locks := fm.Locks("", "", 0)
		for _, w := range res.GetWaitsEnded() {
			if w.GetError() != fsmpb.Error_ERROR_DEADLOCK {
				continue
			}
			s.stats.DeadlocksEnded++
			if err := checkDeadlockEnd(prev, locks, w); err != nil {
				s.fail("i/deadlock", "index %d %v ended wait %v as a deadlock: %v", i, e.cmd, w, err)
				return
			}
			// A retry of its acquire is answered from the cache with
			// this end's refusal and cycle: checked here, at the entry
			// that decided it, not against the state the retry meets.
			refused[sessionSeq{w.GetSessionId(), w.GetAcquireSeq()}] = true
		}
		if !k.checkFence(i, e.cmd, res, prev, locks, fenced) {
			return
		}
		k.countKeys(i, e.cmd, res, prev, locks)
		prev = locks
		now := map[hold]bool{}
		for _, l := range locks {
			hs := l.GetHolders()
			if err := checkHolders(l); err != nil {
				s.fail("a/log", "after index %d: %v", i, err)
				return
			}
			for _, h := range hs {
				now[hold{l.GetName(), h.GetToken(), h.GetSessionId(), h.GetOwnerKey()}] = true
				seen[hold{l.GetName(), h.GetToken(), h.GetSessionId(), h.GetOwnerKey()}] = true
			}
		}
		for h := range cur {
			if !now[h] {
				endAt[h] = i
			}
		}
		// A new hold's token is the index of the entry that granted it,
		// above every earlier hold's of its lock.
		for h := range now {
			if cur[h] {
				continue
			}
			if h.token != i || (h.token <= last[h.lock] && last[h.lock] != i) {
				s.fail("b/tokens", "lock %s granted token %d at index %d (highest before: %d)", h.lock, h.token, i, last[h.lock])
				return
			}
			last[h.lock] = h.token
		}
		if err := k.checkDelays(i, e, res, delays, func(yield func(string) bool) {
			for h := range now {
				if !cur[h] && !yield(h.lock) {
					return
				}
			}
		}); err != nil {
			s.fail("h/lock-delay", "%v", err)
			return
		}
		if err := k.checkRevokes(i, e, res, revokes); err != nil {
			s.fail("j/revoke", "%v", err)
			return
		}
		if am := e.cmd.GetAcquireMany(); am != nil {
			// The holds of lock as (session, token) pairs, sorted as
			// pairs: a semaphore in a mixed set has several.
			pairs := func(holds map[hold]bool, lock string) []uint64 {
				var hs []hold
				for h := range holds {
					if h.lock == lock {
						hs = append(hs, h)
					}
				}
				slices.SortFunc(hs, func(a, b hold) int {
					return cmp.Or(cmp.Compare(a.session, b.session), cmp.Compare(a.token, b.token))
				})
				var out []uint64
				for _, h := range hs {
					out = append(out, h.session, h.token)
				}
				return out
			}
			if err := checkMany(i, e.cmd.GetSessionId(), am, res, func(lock string) (before, after []uint64) {
				return pairs(cur, lock), pairs(now, lock)
			}); err != nil {
				s.fail("a/many", "%v", err)
				return
			}
		}
		cur = now
	}
	if fm.Hash() != hash {
		s.fail("f/replay", "replayed log hash %.12s differs from the members' %.12s", fm.Hash(), hash)
		return
	}
	for _, a := range k.acks {
		if a.index > applied {
			s.fail("d/lost", "acknowledged index %d (%v) is beyond every member's applied index %d", a.index, a.cmd, applied)
			return
		}
	}
	// (c) fenced writes: each accepted write was issued while its token
	// was the lock's hold of record, by the holding session.
	for _, name := range sortedKeys(k.resources) {
		for _, w := range k.resources[name].accepted {
			g := k.log[w.token]
			h := hold{name, w.token, w.session, w.key}
			switch {
			case g == nil || g.firstAt > w.issued:
				s.fail("c/fence", "write %+v: token %d was not granted before the write was issued", w, w.token)
				return
			case !seen[h]:
				s.fail("c/fence", "write %+v: session %d key %q never held %s with token %d", w, w.session, w.key, name, w.token)
				return
			}
			if end, ok := endAt[h]; ok && k.log[end].firstAt <= w.issued {
				s.fail("c/fence", "write %+v issued at %v, after its hold ended by index %d (%v) at %v",
					w, time.Duration(w.issued), end, k.log[end].cmd, time.Duration(k.log[end].firstAt))
				return
			}
		}
	}
	k.linearizability()
}

// resolveInternal is the internal operations that change what clients
// observe, each with a known outcome where the log tells it. A member's own
// proposal may never learn its outcome (its leader lost office, or the
// member stopped), yet whether it took effect is in the log: an entry with
// its command that was applied after the proposal was made. Each such entry
// not claimed by a proposal that learnt its outcome is given to the earliest
// unresolved proposal of the same command (two leaders' trackers may both
// propose one expiry); it then returns when the entry was first applied,
// with the entry's result. A proposal left with no entry never took effect
// and is dropped. This is exact for the model, and it keeps the history
// free of operations open until the end of time, which porcupine's search
// pays for dearly.
func (k *checker) resolveInternal() []*internalOp {
	type applied struct {
		index uint64
		e     *logEntry
	}
	claimed := map[uint64]bool{}
	var ops, open []*internalOp
	for _, op := range k.internal {
		if op.kind != opExpire && op.kind != opAbandon && op.kind != opExpireHold && op.kind != opEndRevoked {
			continue
		}
		if op.done && !op.out.unknown {
			claimed[op.index] = true
			ops = append(ops, op)
			continue
		}
		open = append(open, op)
	}
	if len(open) == 0 {
		return ops
	}
	byKey := map[string][]applied{}
	for _, i := range sortedKeys(k.log) {
		e := k.log[i]
		if claimed[i] || e.cmd.GetExpireSession() == nil && e.cmd.GetExpireHold() == nil && e.cmd.GetCancelWait() == nil &&
			e.cmd.GetEndRevokedHold() == nil {
			continue
		}
		key := proposalKey(e.cmd)
		byKey[key] = append(byKey[key], applied{i, e})
	}
	slices.SortFunc(open, func(a, b *internalOp) int { return cmp.Compare(a.call, b.call) })
	for _, op := range open {
		es := byKey[op.key]
		j := slices.IndexFunc(es, func(a applied) bool { return a.e.firstPos > op.call })
		if j < 0 {
			continue // never applied: no effect
		}
		r := *op
		r.settle(es[j].e.res)
		r.ret = es[j].e.firstPos
		byKey[op.key] = slices.Delete(es, j, j+1)
		ops = append(ops, &r)
	}
	return ops
}

// linearizability is check (e): the client history against the
// per-lock model.
func (k *checker) linearizability() {
	s := k.s
	hist := make([]porcupine.Operation, 0, len(k.history)+len(k.internal))
	granted := k.grantedAcquires()
	for _, op := range k.history {
		// A check changes nothing: one whose answer never came is no
		// operation at all (its step is the identity), and dropping it
		// spares the search an operation open until the end of time;
		// so for an acquire the log never granted (unknown.go).
		if op.Input.(linInput).kind == opCheck && op.Output.(outcome).unknown || neverGranted(op.Input.(linInput), op.Output.(outcome), granted) {
			continue
		}
		hist = append(hist, op)
	}
	for _, op := range k.resolveInternal() {
		hist = append(hist, porcupine.Operation{ClientId: -1, Input: linInput{kind: op.kind, session: op.session, key: op.owner, lock: op.lock, token: op.token}, Call: op.call, Output: op.out, Return: op.ret})
	}
	k.fullHistory = hist
	verdict := porcupine.CheckOperationsTimeout(lockModel, hist, 20*time.Second)
	k.linVerdict = string(verdict)
	switch verdict {
	case porcupine.Illegal:
		s.fail("e/linearizable", "client history of %d operations is not linearizable", len(hist))
	case porcupine.Unknown:
		// A check that gave up has checked nothing: fail rather than pass.
		s.fail("e/linearizable", "porcupine gave up after 20s on a history of %d operations: not checked", len(hist))
	}
}

func (s *Sim) finalChecks() {
	s.chk.finalChecks()
	if s.err == nil {
		s.chk.checkOrphans()
	}
}

func (e *logEntry) String() string { return fmt.Sprint(e.cmd) }

// checkHolders checks DESIGN.md 5.1 on one lock: at most its limit of
// holders, and an exclusive holder alone.
func checkHolders(l *fsmpb.Lock) error {
	hs := l.GetHolders()
	if len(hs) > holderLimit(l.GetName()) {
		return fmt.Errorf("lock %s has %d holders: %v", l.GetName(), len(hs), hs)
	}
	for _, h := range hs {
		if !h.GetShared() && len(hs) > 1 {
			return fmt.Errorf("lock %s has an exclusive holder beside others: %v", l.GetName(), hs)
		}
	}
	return nil
}

// checkMany checks acquire_many entry index of session against its result
// res and the holds of each of its locks before and after it (pairs of
// session and token, sorted): it answers each lock once, in order; a
// lock answered GRANTED is held by the session afterwards, any other is
// left as it was; with all, every lock is granted or none is (the busy
// ones BUSY, the others SKIPPED), and without it none is SKIPPED. A retry
// answered from the cache says BUSY without a holder for a lock whose
// hold, granted by the first attempt, has ended since.
func checkMany(index, session uint64, am *fsmpb.AcquireMany, res *fsmpb.Result, holds func(lock string) (before, after []uint64)) error {
	outs := res.GetAcquireMany()
	if res.GetError() != fsmpb.Error_ERROR_NONE {
		outs = nil
	} else if len(outs) != len(am.GetLocks()) {
		return fmt.Errorf("index %d: acquire_many of %d locks answered %d outcomes: %v", index, len(am.GetLocks()), len(outs), res)
	}
	granted, skipped, ended := 0, 0, 0
	for j, lock := range am.GetLocks() {
		before, after := holds(lock)
		if outs == nil {
			if !slices.Equal(before, after) {
				return fmt.Errorf("index %d: acquire_many refused (%v) but changed the holds of %s", index, res.GetError(), lock)
			}
			continue
		}
		o := outs[j]
		if o.GetLock() != lock {
			return fmt.Errorf("index %d: acquire_many's outcome %d is for %s, not %s", index, j, o.GetLock(), lock)
		}
		switch o.GetStatus() {
		case fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED:
			granted++
			held := false
			for k := 0; k < len(after); k += 2 {
				held = held || (after[k] == session && after[k+1] == o.GetToken())
			}
			if !held {
				return fmt.Errorf("index %d: acquire_many answered %s granted with token %d, but session %d does not hold it so", index, lock, o.GetToken(), session)
			}
		case fsmpb.AcquireStatus_ACQUIRE_STATUS_SKIPPED:
			skipped++
			fallthrough
		default:
			if o.GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_BUSY && o.GetHolder() == nil && o.GetDelayedUntilUnixNano() == 0 {
				// A retry answered from the cache: the hold the first
				// attempt got has ended since. It counts as granted
				// for all or none.
				ended++
			}
			if !slices.Equal(before, after) {
				return fmt.Errorf("index %d: acquire_many answered %s %v but changed its holds", index, lock, o.GetStatus())
			}
		}
	}
	if got := granted + ended; am.GetAll() && got != 0 && got != len(am.GetLocks()) {
		return fmt.Errorf("index %d: all-or-none acquire_many granted %d of its %d locks (%d of them since ended)", index, got, len(am.GetLocks()), ended)
	}
	if !am.GetAll() && skipped > 0 {
		return fmt.Errorf("index %d: acquire_many without all skipped %d locks", index, skipped)
	}
	return nil
}

// delayRun is a lock-delay the replayed log started: the entry, its wall
// clock (the proposing leader's) and the delay's length.
type delayRun struct {
	from  uint64
	wall  int64
	nanos int64
}

// checkDelays follows the lock-delays the entry at index i ended and
// started (its result's report to the tracker) and checks (h) that the
// entry granted no lock in a delay (granted yields the locks of the holds
// it made), that an EndLockDelay ends the delay that runs, and that it was
// proposed no earlier than the delay's length after the entry that
// started it: each leader times a delay from its own apply, or, new, in
// full from its election.
func (k *checker) checkDelays(i uint64, e *logEntry, res *fsmpb.Result, delays map[string]delayRun, granted iter.Seq[string]) error {
	lv := res.GetLiveness()
	if d := lv.GetLockDelayEnded(); d != nil {
		run, ok := delays[d.GetLock()]
		switch {
		case !ok || run.from != d.GetDelayFrom():
			return fmt.Errorf("index %d ended the lock-delay of %s from %d; the log has %+v running", i, d.GetLock(), d.GetDelayFrom(), run)
		case e.cmd.GetWallTimeUnixNano()-run.wall < run.nanos:
			return fmt.Errorf("index %d ended the lock-delay of %s from index %d %v after it started, before its length %v",
				i, d.GetLock(), run.from, time.Duration(e.cmd.GetWallTimeUnixNano()-run.wall), time.Duration(run.nanos))
		}
		delete(delays, d.GetLock())
		k.s.stats.LockDelaysEnded++
	}
	for _, d := range lv.GetLockDelaysStarted() {
		delays[d.GetLock()] = delayRun{from: i, wall: e.cmd.GetWallTimeUnixNano(), nanos: d.GetDelayNanos()}
		k.s.stats.LockDelays++
	}
	for lock := range granted {
		if run, ok := delays[lock]; ok {
			return fmt.Errorf("index %d (%v) granted %s in its lock-delay from index %d", i, e.cmd, lock, run.from)
		}
	}
	return nil
}

type sessionSeq struct{ session, seq uint64 }

// checkFence is check (k) on entry i of the replayed log, cmd with result
// res, which left locks where prev were: a seq fence changes no lock, and
// once one settled its seq no request of that seq applies.
func (k *checker) checkFence(i uint64, cmd *fsmpb.Command, res *fsmpb.Result, prev, locks []*fsmpb.Lock, fenced map[sessionSeq]bool) bool {
	s := k.s
	ss := sessionSeq{cmd.GetSessionId(), cmd.GetSeq()}
	cw := cmd.GetCancelWait()
	switch {
	case cw != nil && ss.session != 0 && cw.GetSessionId() == ss.session && cw.GetAcquireSeq() == ss.seq:
		switch fsm.FenceOutcome(res) {
		case fsm.FenceSettled:
			s.stats.FencesSettled++
			fenced[ss] = true
		case fsm.FenceFoundAnswer:
			s.stats.FencesFoundAnswer++
		}
		k.countNoSpaceFence(ss, fsm.FenceOutcome(res))
	case fenced[ss]:
		if res.GetError() == fsmpb.Error_ERROR_NONE {
			s.fail("k/fence", "index %d: %v applied after a fence settled its seq as refused: %v", i, cmd, res)
			return false
		}
		if res.GetError() == fsmpb.Error_ERROR_REFUSED {
			s.stats.FencedRetries++
			k.countNoSpaceRetry(ss)
		}
	default:
		return true
	}
	if !slices.EqualFunc(prev, locks, func(a, b *fsmpb.Lock) bool { return proto.Equal(a, b) }) {
		s.fail("k/fence", "index %d: %v of a fenced seq changed the locks: %v, then %v", i, cmd, prev, locks)
		return false
	}
	return true
}
