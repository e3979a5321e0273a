package sim

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// strangerSeq is where a stranger's sequence numbers start: far above any
// a client reaches in a run, so that one admitted would move the
// victim's window past its next request (STALE_SEQUENCE, check
// "secret").
const strangerSeq = 1_000_000

// stranger acts for sessions that are not its own (Config.Strangers). It
// knows what is public of them: their ids, the locks they hold and the
// tokens. It does not know their secrets. Every so often it picks a
// client's live session that has a secret and holds a lock, and sends a
// random member one request for it: a release of a hold, an acquire of
// another lock with a high seq, a close of the session, a keepalive of
// it, or a renewal of a limited hold, showing no secret, a random one or
// another session's. No answer may be a success; the other checkers then
// see that the victims went on as if nothing had happened.
type stranger struct {
	s       *Sim
	attempt uint64
	seq     uint64
	// sent are the requests not answered yet, by attempt: a dropped one
	// stays, so an answer however late is still checked.
	sent map[uint64]string
}

func newStranger(s *Sim) *stranger {
	return &stranger{s: s, seq: strangerSeq, sent: make(map[uint64]string)}
}

func (st *stranger) String() string { return "stranger" }

// act sends one request for a victim's session, if there is one, and
// schedules the next until the calm.
func (st *stranger) act() {
	s := st.s
	if s.calm {
		return
	}
	defer s.after(s.dur(20*time.Millisecond, 200*time.Millisecond), st.act)
	var victims []*client
	for _, c := range s.clients {
		if c.session != 0 && len(c.holds) > 0 && st.hasSecret(c.session) {
			victims = append(victims, c)
		}
	}
	if len(victims) == 0 {
		return
	}
	c := victims[s.rng.IntN(len(victims))]
	shown, showing := st.guess(c)
	held := sortedRefs(c.holds)
	r := &request{from: st, session: c.session, secret: shown}
	var what string
	switch k := s.rng.IntN(5); {
	case k == 4 && len(c.holdUntil) > 0: // (with no limited hold, a release)
		limited := sortedRefs(c.holdUntil)
		h := limited[s.rng.IntN(len(limited))]
		r.kind, r.lock, r.token = reqRenewHold, h.lock, c.holds[h]
		what = fmt.Sprintf("renewal of the hold of %s token %d", r.lock, r.token)
	case k == 3:
		r.kind = reqKeepAlive
		what = "keepalive"
	case k == 2:
		r.cmd = st.command(c, shown)
		r.cmd.Op = &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{}}
		what = fmt.Sprintf("close seq %d", r.cmd.GetSeq())
	case k == 1:
		// Another lock than those it holds, if there is one.
		var free []string
		for i := range s.cfg.Locks {
			if !slices.ContainsFunc(held, func(h holdRef) bool { return h.lock == c.lockName(i) }) {
				free = append(free, c.lockName(i))
			}
		}
		l := held[s.rng.IntN(len(held))].lock
		if len(free) > 0 {
			l = free[s.rng.IntN(len(free))]
		}
		r.cmd = st.command(c, shown)
		r.cmd.Op = &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: l}}
		what = fmt.Sprintf("acquire of %s seq %d", l, r.cmd.GetSeq())
	default:
		h := held[s.rng.IntN(len(held))]
		r.cmd = st.command(c, shown)
		r.cmd.Op = &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: h.lock, Token: c.holds[h], OwnerKey: h.key}}
		what = fmt.Sprintf("release of %v token %d seq %d", h, c.holds[h], r.cmd.GetSeq())
	}
	if r.cmd != nil {
		r.kind = reqPropose
	}
	st.attempt++
	r.attempt = st.attempt
	to := s.peers[s.rng.IntN(len(s.peers))]
	what = fmt.Sprintf("%s for session %d (client %d's), showing %s, to member %d at t=%v", what, c.session, c.id, showing, to, time.Duration(s.now))
	st.sent[r.attempt] = what
	s.stats.StrangerSent++
	s.tracef("stranger a%d: %s", r.attempt, what)
	s.sendRequest(to, r)
}

// command is a command for c's session, without its operation, with the
// stranger's next seq (its min unacked too) and the hash it shows.
func (st *stranger) command(c *client, shown []byte) *fsmpb.Command {
	st.seq++
	return &fsmpb.Command{SessionId: c.session, Seq: st.seq, MinUnackedSeq: st.seq, SecretHash: shown}
}

// guess is the hash the stranger shows for victim's session, and what it
// is: none, random bytes, or another client's session's.
func (st *stranger) guess(victim *client) ([]byte, string) {
	s := st.s
	switch s.rng.IntN(3) {
	case 0:
		return nil, "no secret"
	case 1:
		others := slices.DeleteFunc(slices.Clone(s.clients), func(c *client) bool {
			return c.secret == nil || slices.Equal(c.secret, victim.secret)
		})
		if len(others) > 0 {
			c := others[s.rng.IntN(len(others))]
			return c.secret, fmt.Sprintf("client %d's secret", c.id)
		}
	}
	h := make([]byte, fsm.SecretHashLen)
	for i := 0; i < len(h); i += 8 {
		binary.LittleEndian.PutUint64(h[i:], s.rng.Uint64())
	}
	return h, "a random secret"
}

// hasSecret reports whether session was opened with a secret, as its
// open was committed: a member below log version 3, or a leader that
// had not heard every member say it reads version 3 yet, left it out,
// and such a session admits any request.
func (st *stranger) hasSecret(session uint64) bool {
	e := st.s.chk.log[session] // a session's id is its open's index
	return e != nil && len(e.cmd.GetOpenSession().GetSecretHash()) > 0
}

// onResponse checks an answer: nothing done (not the leader, overloaded,
// unknown), refused for the secret, or the session or hold gone; anything
// else fails the run.
func (st *stranger) onResponse(r *response) {
	s := st.s
	what, ok := st.sent[r.attempt]
	if !ok {
		return
	}
	delete(st.sent, r.attempt)
	code := r.res.GetError()
	switch {
	case r.notLeader, r.unknown, r.retry:
	case r.mismatch:
		s.stats.StrangerRefused++
		s.stats.StrangerRefusedByTracker++
	case r.res != nil && code == fsmpb.Error_ERROR_SECRET_MISMATCH:
		s.stats.StrangerRefused++
	case r.lost, r.res != nil && code == fsmpb.Error_ERROR_SESSION_NOT_FOUND:
		// The victim's session, or its hold, ended meanwhile.
	default:
		s.fail("stranger", "seed %d: a stranger's %s was answered %s; only the session's owner may act for it",
			s.cfg.Seed, what, describeResponse(r))
	}
}

func describeResponse(r *response) string {
	switch {
	case r.noSpace:
		return "NO_SPACE, after its seq fence settled the seq"
	case r.res != nil && r.res.GetError() != fsmpb.Error_ERROR_NONE:
		return fmt.Sprintf("%v (%s)", r.res.GetError(), r.res.GetMessage())
	case r.res != nil:
		return fmt.Sprintf("ok at index %d: %v", r.index, r.res)
	default:
		return fmt.Sprintf("ok, a TTL or hold limit of %v", r.ttl)
	}
}
