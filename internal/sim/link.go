package sim

import "time"

// The link between the processes that ask (clients, strangers) and the
// members: one trip each way, usually a few milliseconds, sometimes a long
// stall, and during the chaos sometimes lost (the asker's timeout covers
// it). A member answers whoever sent the request.

// asker is what sends requests to members and takes their answers.
type asker interface {
	onResponse(*response)
	// String names the asker in the trace.
	String() string
}

// sendRequest carries r to member id over the link (it may be lost).
func (s *Sim) sendRequest(id uint64, r *request) {
	if !s.calm && s.rng.IntN(100) < 2 {
		return
	}
	s.after(s.clientDelay(), func() {
		m := s.nodes[id]
		var handle func()
		handle = func() {
			if !m.up() || m.deferred(handle) {
				return
			}
			s.tracef("req %v a%d -> %d", r.from, r.attempt, id)
			m.srv.handle(r)
		}
		handle()
	})
}

// clientDelay is one trip between a client and a member: usually a few
// milliseconds, sometimes a long stall (a slow or congested link).
func (s *Sim) clientDelay() time.Duration {
	if !s.calm && s.rng.IntN(100) < 3 {
		s.stats.SlowReplies++
		return s.dur(50*time.Millisecond, 600*time.Millisecond)
	}
	return s.dur(200*time.Microsecond, 3*time.Millisecond)
}

// respond carries an answer back to whoever sent r.
func (s *Sim) respond(r *request, resp *response) {
	resp.attempt = r.attempt
	if !s.calm && s.rng.IntN(100) < 2 {
		return
	}
	s.after(s.clientDelay(), func() { r.from.onResponse(resp) })
}

// sendAbandon tells member id that the caller of (session, seq) is gone.
func (s *Sim) sendAbandon(id, session, seq uint64) {
	s.after(s.clientDelay(), func() {
		m := s.nodes[id]
		var handle func()
		handle = func() {
			if !m.up() || m.deferred(handle) {
				return
			}
			m.srv.abandon(session, seq)
		}
		handle()
	})
}
