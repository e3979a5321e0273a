package sim

import (
	"time"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// What a client believes it holds, per (lock, owner key), and how its
// operations' outcomes change that; and the fenced writes it makes under
// what it believes.

// forget drops the client's belief that it holds r.
func (c *client) forget(r holdRef) {
	delete(c.holds, r)
	delete(c.counts, r)
	delete(c.holdUntil, r)
}

// holdsWith reports whether the client believes it holds r with token.
func (c *client) holdsWith(r holdRef, token uint64) bool {
	tok, ok := c.holds[r]
	return ok && tok == token
}

// holdsLock reports whether the client believes it holds r.
func (c *client) holdsLock(r holdRef) bool {
	_, ok := c.holds[r]
	return ok
}

// lose forgets the session: the client no longer believes it holds
// anything (DESIGN.md §2: it must learn this before the server acts).
func (c *client) lose(why string) {
	c.s.tracef("client %d loses session %d: %s", c.id, c.session, why)
	c.session = 0
	clear(c.holds)
	clear(c.counts)
	clear(c.holdUntil)
	clear(c.tainted)
	clear(c.revokedEarly)
}

// believe updates what the client believes it holds after op's outcome,
// about the hold of op's lock under op's owner key.
func (c *client) believe(op *clientOp, o outcome) {
	s := c.s
	if op.session != c.session {
		return
	}
	r := holdRef{op.lock, op.key}
	switch {
	case o.code == fsmpb.Error_ERROR_SESSION_NOT_FOUND:
		c.lose("server says not found")
	case op.kind == opClose:
		c.lose("closed")
	case (op.kind == opAcquireTry || op.kind == opAcquireWait) && o.granted && !op.reentrant && c.holdsWith(r, o.token):
		// The hold the client believes it has, granted again: two
		// workers' waits for the lock under one key (Config.Keys), the
		// later re-entering the earlier's at its grant, whose answers
		// come in either order (a pushed grant says no count).
		c.counts[r] = max(c.counts[r]+1, o.count)
	case (op.kind == opAcquireTry || op.kind == opAcquireWait) && o.granted && (op.reentrant || op.concurrent) && o.count > 1:
		// Another count of the hold. One the client gave up while the
		// acquire was under way (its deadline passed) stays given up.
		// An acquire made while the other worker waited may re-enter
		// the hold that wait was granted, at the grant (Config.Keys):
		// if the client has not learnt that grant yet (or lost its
		// answer), the session holds the lock under the key, and it
		// will not take it again under that key.
		if op.reentrant {
			s.stats.Reentered++
		}
		if tok, ok := c.holds[r]; ok {
			if tok != o.token {
				s.fail("client", "client %d re-entered lock %v, which it holds with token %d: granted count %d with token %d", c.id, r, tok, o.count, o.token)
			}
			c.counts[r] = o.count
		} else if !op.reentrant {
			c.tainted[r] = true
		}
	case (op.kind == opAcquireTry || op.kind == opAcquireWait) && o.granted:
		if o.count > 1 {
			s.fail("client", "client %d re-entered lock %v it did not believe it held (count %d)", c.id, r, o.count)
		}
		// A reentrant acquire granted count 1 found the hold it meant
		// ended (at its limit): this is a new one.
		c.holds[r] = o.token
		c.counts[r] = 1
		if c.revokedEarly[r] == o.token {
			delete(c.revokedEarly, r)
			c.revoked(r, o.token)
			break
		}
		if op.holdLimit > 0 {
			// Counted from the acquire's first send: the server's count
			// began at the grant, later.
			c.holdUntil[r] = op.firstSent + int64(op.holdLimit-safetyMargin)
			c.holdLimit[r] = op.holdLimit
			c.renewing[r] = s.rng.IntN(2) == 0
			if s.now >= c.holdUntil[r] {
				c.forget(r)
				c.tainted[r] = true
			}
		}
	case (op.kind == opAcquireTry || op.kind == opAcquireWait) && (o.unknown || o.ambiguous):
		c.tainted[r] = true
	case op.kind == opRelease && c.holds[r] == op.token && o.code == fsmpb.Error_ERROR_NONE && !o.unknown && o.remaining > 0:
		c.counts[r] = o.remaining // one count of several released
		s.stats.CountsReleased++
	case op.kind == opRelease && o.unknown:
		c.forget(r)
		c.tainted[r] = true // may still hold it: never re-enter by accident
	case op.kind == opRelease && c.holds[r] == op.token:
		// The release of one count of several ended the hold, or was
		// refused: the client no longer knows what it holds.
		c.forget(r)
		c.tainted[r] = true
	}
}

// write sends a write to the fenced resource of r's lock, if the client
// still believes its session valid. A GC pause delays the write after the
// check.
func (c *client) write(r holdRef, token uint64) {
	s := c.s
	if s.now >= c.validUntil {
		return
	}
	d := s.dur(200*time.Microsecond, 3*time.Millisecond)
	if c.gcPause {
		c.gcPause = false
		d = s.dur(500*time.Millisecond, 4*time.Second)
	}
	issued := s.now
	session := c.session
	s.stats.Writes++
	s.after(d, func() { s.chk.resourceWrite(c, r, token, session, issued) })
}
