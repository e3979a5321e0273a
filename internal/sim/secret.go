package sim

import (
	"encoding/binary"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// drawSecret draws the hash of a new session's secret (nothing here needs
// the secret itself: members only ever see its hash). The draws come from
// a stream of their own, so that they leave the scenario's schedule
// (s.rng) as it was before sessions had secrets: the regression seeds
// still run the schedules they were found with.
func (s *Sim) drawSecret() []byte {
	h := make([]byte, fsm.SecretHashLen)
	for i := 0; i < len(h); i += 8 {
		binary.LittleEndian.PutUint64(h[i:], s.secrets.Uint64())
	}
	h[0] |= 1 // all zero is no hash to the state machine
	return h
}

// checkOwnAnswer fails the run when r, an answer to one of client c's own
// requests, says what only a stranger's may: that the request did not
// show the session's secret (c shows it on every one), or, for c's
// current operation, that the session's sequence window has passed its
// seq (c numbers its requests upwards and moves the window only with
// them, so someone else moved it).
func (s *Sim) checkOwnAnswer(c *client, r *response) {
	code := r.res.GetError()
	switch {
	case r.mismatch || code == fsmpb.Error_ERROR_SECRET_MISMATCH:
		s.fail("secret", "client %d: a member refused its own request (attempt %d, session %d) for its secret: %+v", c.id, r.attempt, c.session, r)
	case code == fsmpb.Error_ERROR_STALE_SEQUENCE && c.opFor(r.attempt) != nil:
		op := c.opFor(r.attempt)
		s.fail("secret", "client %d: its %v seq %d of session %d found the session's sequence window past it: %v", c.id, op.kind, op.seq, op.session, r.res)
	}
}
