package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
	apiserver "github.com/batonlock/baton/internal/server"
)

// The disk guard (Config.DiskGuard): a member's data dir is low on space
// for stretches of the chaos, and while it is and the member leads, it
// refuses opens and acquires with NO_SPACE by internal/server's own rule
// (DiskGuard.Low, AddsNothing), after a read barrier, and answers an
// acquire's refusal only once its seq fence settled the seq
// (raftnode.Node.SubmitRefusal): server.admitGrowth, step for step on
// the non-blocking API.

// simMinFree is every member's --min-free-disk. Its value does not
// matter: a low data dir has less free, any other more.
const simMinFree = 256 << 20

// errNoSpace is the refusal a member's guard answers; the client is
// told NO_SPACE (response.noSpace).
var errNoSpace = errors.New("no space")

// diskGuard is member m's guard: off without Config.DiskGuard.
func (m *member) diskGuard() apiserver.DiskGuard {
	if !m.s.cfg.DiskGuard {
		return apiserver.DiskGuard{}
	}
	return apiserver.DiskGuard{MinFree: simMinFree, Free: m.diskFree}
}

// diskFree is what the member's poller measured of its data dir.
func (m *member) diskFree() (uint64, bool) {
	if m.s.now < m.diskLowUntil {
		return simMinFree - simMinFree/8, true
	}
	return 4 * simMinFree, true
}

// fillDisk is the chaos's disk fault: for a while the data dir of one
// member (often the leader), or of every member (they hold the same
// log), is under its minimum free space.
func (s *Sim) fillDisk(lead uint64) {
	until := s.now + int64(s.dur(200*time.Millisecond, 2*time.Second))
	victims := s.peers
	if s.rng.IntN(3) != 0 {
		victim := s.peers[s.rng.IntN(len(s.peers))]
		if lead != 0 && s.rng.IntN(2) == 0 {
			victim = lead
		}
		victims = []uint64{victim}
	}
	for _, id := range victims {
		m := s.nodes[id]
		m.diskLowUntil = max(m.diskLowUntil, until)
	}
	s.stats.DiskLows++
	s.tracef("disk low %v until %v", victims, time.Duration(until))
}

// admitGrowth is the start of server.admitGrowth for r, a proposal that
// has just arrived: it reports false when r goes on to be proposed at
// once (it adds no state, the data dir is not low, or the member does
// not lead: the proposal's NOT_LEADER sends the client on). Otherwise
// the guard takes r over: a read barrier first, so that a new leader
// has applied what its predecessors committed before it looks
// (admitted).
func (v *server) admitGrowth(r *request) bool {
	cmd := r.cmd
	if cmd.GetOpenSession() == nil && cmd.GetAcquire() == nil && cmd.GetAcquireMany() == nil {
		return false
	}
	m := v.m
	if !m.diskGuard().Low() || !m.node.IsLeader() {
		return false
	}
	f, err := m.node.StartRead()
	if err != nil {
		m.s.respond(r, submitError(err))
		return true
	}
	v.reads = append(v.reads, &pendingRead{req: r, f: f, admit: true})
	return true
}

// admitted is the rest of server.admitGrowth once r's read barrier
// passed: a retry that adds nothing is proposed; anything else is
// refused NO_SPACE once its seq fence settled the seq (an open has none:
// refused at once).
func (v *server) admitted(r *request) {
	m, s := v.m, v.m.s
	retry := false
	m.node.View(func(fm *fsm.Machine) { retry = apiserver.AddsNothing(fm, r.cmd) })
	defer v.kick()
	if retry {
		s.stats.NoSpaceAdmitted++
		v.propose(r)
		return
	}
	s.stats.NoSpaceRefused++
	if fsm.SeqFence(r.cmd) != nil {
		s.chk.noSpaceFences[sessionSeq{r.cmd.GetSessionId(), r.cmd.GetSeq()}] = true
	}
	refusal := fmt.Errorf("%w: member %d's data dir is under its minimum free space", errNoSpace, m.id)
	f, err := m.node.SubmitRefusal(r.cmd, refusal)
	if err != nil {
		s.respond(r, submitError(err))
		return
	}
	v.props = append(v.props, &pendingProp{req: r, f: f, refusal: true})
}

// refusalDone answers the request whose seq fence p completed: NO_SPACE
// once the fence settled the seq, NOT_LEADER naming this member when an
// earlier attempt applied first (the retry is answered from the cache),
// or the log's own refusal of the seq.
func (v *server) refusalDone(p *pendingProp, err error) {
	if err == nil {
		v.m.s.fail("server", "member %d: the seq fence of refused %v completed without an answer", v.m.id, p.req.cmd)
		return
	}
	v.m.s.respond(p.req, submitError(err))
}

// kick runs the member's loop soon, for what the server submitted
// outside a request's arrival (after a read barrier passed).
func (v *server) kick() {
	m := v.m
	var run func()
	run = func() {
		if v.dead || m.deferred(run) {
			return
		}
		m.pump()
	}
	m.s.after(0, run)
}

// noSpaceTold is client c's open or acquire op answered NO_SPACE: a
// definitive refusal of that request, as the Go client takes it
// (ErrNoSpace, not retried). An acquire took nothing (its seq fence
// settled the seq first); an open opened nothing the client knows of.
func (c *client) noSpaceTold(op *clientOp) {
	s := c.s
	s.stats.NoSpaceTold++
	if op.kind != opOpen {
		c.finish(op, outcome{noSpace: true})
		return
	}
	c.op, c.opening = nil, false
	s.chk.refusedOpens[string(c.secret)] = true
	s.tracef("client %d open refused: no space", c.id)
}

// countNoSpaceFence counts, for check (k), the verdict of a seq fence
// for (session, seq) in the replayed log, if a member proposed it for a
// NO_SPACE refusal (a seq fenced for the log version too counts here).
func (k *checker) countNoSpaceFence(ss sessionSeq, verdict fsm.FenceVerdict) {
	if !k.noSpaceFences[ss] {
		return
	}
	switch verdict {
	case fsm.FenceSettled:
		k.s.stats.NoSpaceFencesSettled++
	case fsm.FenceFoundAnswer:
		k.s.stats.NoSpaceFencesFoundAnswer++
	}
}

// countNoSpaceRetry counts a later attempt of (session, seq) refused
// after a NO_SPACE fence settled its seq.
func (k *checker) countNoSpaceRetry(ss sessionSeq) {
	if k.noSpaceFences[ss] {
		k.s.stats.NoSpaceFencedRetries++
	}
}

// checkOrphans is the part of check (k) an open needs. An OpenSession
// has no seq to fence, so a delayed earlier attempt of an open its
// client was told NO_SPACE may still open a session: the client never
// learns of it, and it expires at its TTL. That is all it may do: no
// command of that session is in the log (none of it ever held or waited
// for anything).
func (k *checker) checkOrphans() {
	if len(k.refusedOpens) == 0 {
		return
	}
	orphans := map[uint64]bool{}
	for _, i := range sortedKeys(k.log) {
		e := k.log[i]
		if o := e.cmd.GetOpenSession(); o != nil && k.refusedOpens[string(o.GetSecretHash())] && e.res.GetError() == fsmpb.Error_ERROR_NONE {
			if !orphans[e.res.GetSessionId()] {
				k.s.stats.NoSpaceOrphans++
			}
			orphans[e.res.GetSessionId()] = true
			continue
		}
		if id := e.cmd.GetSessionId(); orphans[id] {
			k.s.fail("k/orphan", "index %d: %v names session %d, opened by an open its client was told NO_SPACE", i, e.cmd, id)
			return
		}
	}
}
