package sim

// A client's keepalives and hold renewals: what keeps its session, and its
// renewed holds, alive on the leader, and the deadline the client keeps
// from the send of each.

// renewHolds sends a renewal of one renewed hold whose limit is half
// gone, if none is in flight.
func (c *client) renewHolds() {
	s := c.s
	if c.rnInFlight {
		return
	}
	for _, l := range sortedRefs(c.holdUntil) {
		if !c.renewing[l] || c.holdUntil[l]-s.now > int64(c.holdLimit[l]/2) {
			continue
		}
		c.nextAttempt++
		// A renewal names the lock, session and token, not the key: the
		// leader renews every hold of the session's that has them (one
		// entry's grants under two keys share its token).
		c.rnAttempt, c.rnSentAt, c.rnRef, c.rnToken, c.rnSession = c.nextAttempt, s.now, l, c.holds[l], c.session
		c.rnInFlight = true
		attempt := c.rnAttempt
		s.after(reqTimeout, func() {
			if c.rnInFlight && c.rnAttempt == attempt {
				c.rnInFlight = false
				c.leader = 0
			}
		})
		s.sendRequest(c.target(), &request{from: c, attempt: attempt, kind: reqRenewHold, session: c.session, secret: c.secret, lock: l.lock, token: c.rnToken})
		return
	}
}

// onRenewal takes a renewal's answer: a new deadline from when it was
// sent, if the client still holds that hold.
func (c *client) onRenewal(r *response) {
	c.rnInFlight = false
	l := c.rnRef
	if c.rnSession != c.session || c.holds[l] != c.rnToken {
		return // an answer about a hold given up since
	}
	switch {
	case r.notLeader:
		c.leader = r.hint
	case r.lost:
		c.forget(l)
		c.tainted[l] = true
	case r.unknown || r.retry:
		c.leader = 0
	default:
		c.s.stats.Renewals++
		c.holdUntil[l] = max(c.holdUntil[l], c.rnSentAt+int64(r.ttl-safetyMargin))
	}
}

// keepAlive sends a heartbeat every TTL/4 unless paused.
func (c *client) keepAlive() {
	s := c.s
	if c.kaInFlight || s.now < c.kaPausedUntil || s.now-c.kaSentAt < int64(c.ttl/4) {
		return
	}
	c.nextAttempt++
	c.kaAttempt = c.nextAttempt
	c.kaSentAt = s.now
	c.kaSession = c.session
	c.kaInFlight = true
	attempt, session := c.kaAttempt, c.session
	s.after(reqTimeout, func() {
		if c.kaInFlight && c.kaAttempt == attempt {
			c.kaInFlight = false
			c.leader = 0
		}
	})
	s.sendRequest(c.target(), &request{from: c, attempt: attempt, kind: reqKeepAlive, session: session, secret: c.secret})
}

func (c *client) onKeepAlive(r *response) {
	c.kaInFlight = false
	if c.kaSession != c.session {
		return // an answer about an earlier session
	}
	switch {
	case r.notLeader:
		c.leader = r.hint
		c.kaSentAt = 0 // retry soon
	case r.lost:
		c.lose("keepalive refused")
	case r.unknown || r.retry:
		c.leader = 0
	default:
		c.validUntil = max(c.validUntil, c.kaSentAt+int64(r.ttl-safetyMargin))
	}
}
