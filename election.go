package baton

// Elections: one lock name whose holder is the leader, built on the same
// mutex, FIFO queue and watch as every lock. A campaign is an acquire that
// waits in the queue and carries the candidate's value; the leadership is
// its Lease, whose fencing token is the term; Proclaim changes the value
// of the hold; Resign releases it; Leader reads the lock and Observe
// watches it.

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
)

// ErrNoLeader is returned by Election.Leader when nobody holds the
// election's lock: no candidate has won, or the last leader resigned or
// lost its session and no candidate waits.
var ErrNoLeader = errors.New("baton: election has no leader")

// Election is one session's handle on the leader election of a lock name,
// as etcd's concurrency.Election is: the session's holder of the name's
// mutex is the leader, and its hold's value (a few hundred bytes at most:
// rules.MaxHoldValueLen, one line of UTF-8) is what the leader publishes,
// say its address. A campaign waits in the lock's FIFO queue, so
// candidates win in the order they campaigned.
//
// A candidate's handle comes from Session.Election, because a leader is a
// hold and a hold needs a session; an observer's from Client.Election,
// which needs none (and, with authentication on, only read permission):
// Leader and Observe read the lock through the Client and work on either.
// Options are a Mutex's (WithOwnerKey, WithHoldLimit, WithLockDelay);
// WithMaxReaders is refused. An Election is safe for concurrent use.
type Election struct {
	c    *Client
	s    *Session // nil: an observer's handle
	name string
	hold holdConfig
	err  error // as Mutex.err

	mu          sync.Mutex
	leader      *Lease // the leadership this handle won; nil until then, or once resigned
	campaigning bool   // a Campaign waits
}

// Leader is an election's leader as of a log index.
type Leader struct {
	// Value is the leader's value, as it campaigned with or last
	// proclaimed.
	Value string
	// Term is the leadership's fencing token: every new leader's is
	// larger than every earlier one's, and it stays the same through
	// Proclaims. 0 in an Observe event when the election has no leader.
	Term uint64
	// SessionID and Owner are the leading session's id and owner label.
	SessionID uint64
	Owner     string
	// Index is the log index the leader is known as of, in Observe's
	// events (Leader's read gives 0).
	Index uint64
	// Gap, in an Observe event, says that leaders may have come and gone
	// before this event without Observe learning of them: more of them
	// ended while the observer was away than the election's history
	// keeps (see LockEvent.MissedAll).
	Gap bool
}

// Election returns a handle on the election of the lock name for this
// session. Nothing is sent until Campaign. A name or option that breaks a
// rule (see Mutex) makes Campaign fail at once with an error matching
// ErrInvalidArgument; Leader and Observe check the name alone.
func (s *Session) Election(name string, opts ...HoldOption) *Election {
	cfg := newHoldConfig(opts)
	m := s.mutex(name, cfg, "Election")
	return &Election{c: s.c, s: s, name: name, hold: cfg, err: m.err}
}

// Election returns an observer's handle on the election of the lock name:
// Leader and Observe, without a session. Campaign, Proclaim and Resign
// need a candidate's handle (Session.Election): on this one they fail
// with ErrInvalidArgument, sending nothing.
func (c *Client) Election(name string) *Election {
	return &Election{c: c, name: name, err: fmt.Errorf("%w: election %s: an observer's handle (Client.Election) cannot campaign, proclaim or resign: use Session.Election", ErrInvalidArgument, name)}
}

// Name is the election's lock name.
func (e *Election) Name() string { return e.name }

// Campaign makes the session a candidate with value and waits until it
// leads (or ctx ends, or the session does): it queues for the election's
// lock behind earlier candidates and returns the leadership, a Lease whose
// Token is the term. ctx bounds the wait only, never the leadership, as
// for Mutex.Lock: when it ends first, the candidacy is withdrawn. The
// leadership is lost as a Lease is: watch its Lost channel or run the
// leader's work under its Context, and fence what it writes with the term.
// A value that breaks rules.CheckHoldValue fails at once with
// ErrInvalidArgument, sending nothing, as does a Campaign while this
// handle leads or campaigns (Proclaim changes the value).
func (e *Election) Campaign(ctx context.Context, value string) (*Lease, error) {
	if e.err != nil {
		return nil, e.err
	}
	if err := rules.CheckHoldValue(value); err != nil {
		return nil, invalid(err)
	}
	e.mu.Lock()
	switch {
	case e.campaigning:
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: this handle already campaigns in election %s", ErrInvalidArgument, e.name)
	case e.leader != nil && e.leader.Err() == nil:
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: this handle already leads election %s (term %d): Proclaim changes the value", ErrInvalidArgument, e.name, e.leader.Token())
	}
	e.campaigning = true
	e.mu.Unlock()
	m := e.s.mutex(e.name, e.hold, "Election")
	m.value = value
	l, err := m.Lock(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.campaigning = false
	if err != nil {
		return nil, err
	}
	e.leader = l
	return l, nil
}

// Proclaim changes the leader's value without giving up the leadership
// (the term stays): what a leader does when the address it publishes
// changes. It is sent with a sequence number until the server answers, as
// a release is, so it takes effect once. It fails with an error matching
// ErrNotHeld when this handle does not lead (it never campaigned, it
// resigned, or its leadership was lost), and with ErrInvalidArgument,
// sending nothing, for a value that breaks rules.CheckHoldValue.
func (e *Election) Proclaim(ctx context.Context, value string) error {
	if e.s == nil {
		return e.err
	}
	if err := rules.CheckHoldValue(value); err != nil {
		return invalid(err)
	}
	e.mu.Lock()
	l := e.leader
	e.mu.Unlock()
	if l == nil {
		return fmt.Errorf("%w: election %s: this handle does not lead (Campaign first)", ErrNotHeld, e.name)
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("%w: election %s: the leadership of term %d was lost: %w", ErrNotHeld, e.name, l.Token(), err)
	}
	req := &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Proclaim{Proclaim: &batonpb.ProclaimRequest{
		Name: e.name, Token: l.Token(), OwnerKey: l.OwnerKey(), Value: value,
	}}}
	_, err := e.s.do(ctx, req, nil)
	return err
}

// Resign gives up the leadership, if this handle has it: the lock is
// released and the next candidate in the queue leads. It is Release of the
// leadership's Lease; resigning without leading returns nil.
func (e *Election) Resign(ctx context.Context) error {
	if e.s == nil {
		return e.err
	}
	e.mu.Lock()
	l := e.leader
	e.leader = nil
	e.mu.Unlock()
	if l == nil {
		return nil
	}
	err := l.Release(ctx)
	if errors.Is(err, ErrNotHeld) {
		return nil // the leadership had ended already
	}
	return err
}

// Leader returns the election's leader now (a linearizable read), or an
// error matching ErrNoLeader when there is none.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := rules.CheckLockName(e.name); err != nil {
		return Leader{}, invalid(err)
	}
	li, err := e.c.Get(ctx, e.name)
	if err != nil {
		return Leader{}, err
	}
	l := leaderOf(LockEvent{Lock: *li})
	if l.Term == 0 {
		return Leader{}, fmt.Errorf("%w: nobody holds %s", ErrNoLeader, e.name)
	}
	return l, nil
}

// Observe follows the election: the first event, before Observe returns,
// is its leader now (Term 0 if it has none), then an event comes for each
// log entry that changes the leader or its value, in log order (Index
// and, across leaders, Term grow), with Term 0 while the election has no
// leader. It is built on Watch and survives what Watch does: when the
// watch resumes on another member, or catches up after its reader fell
// behind, the leaderships that began and ended in between come from the
// election's replicated history, each as of the entry before its end with
// the value it ended with (from log version 13; a value it proclaimed and
// replaced in between is not kept), followed by Term 0 where nobody led.
// An event after a gap the history did not cover has Gap set. The channel
// is closed when ctx ends or the client is closed; read it promptly.
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	events, err := e.c.Watch(ctx, e.name)
	if err != nil {
		return nil, err
	}
	first := leaderOf(<-events)
	ch := make(chan Leader, 1)
	ch <- first
	go func() {
		defer close(ch)
		last := first
		emit := func(l Leader) bool {
			if l.Term == last.Term && l.Value == last.Value && !l.Gap {
				return true // a waiter came or went: the same leader
			}
			select {
			case ch <- l:
				last = l
				return true
			case <-ctx.Done():
				return false
			}
		}
		for ev := range events {
			now := leaderOf(ev)
			ls := append(missedLeaders(ev, last.Term, now.Term), now)
			ls[0].Gap = ev.Gap && !ev.MissedAll
			for _, l := range ls {
				if !emit(l) {
					return
				}
			}
		}
	}()
	return ch, nil
}

// missedLeaders turns the holds that ended in a watch's gap into leader
// events: each leadership as of the entry before its end (a leadership
// that began before the gap only if its value changed), then no leader
// where the next did not begin at that entry. known is the term last
// reported, next the leader's now (0: none).
func missedLeaders(ev LockEvent, known, next uint64) []Leader {
	var out []Leader
	for i, p := range ev.Missed {
		switch {
		case p.Shared || p.Token < known:
			// not an election's hold, or ended before the last leader
			continue
		case p.Token > known || p.Value != "":
			// A leader not seen yet, or the last one's value when it
			// ended (emit skips it if unchanged; an empty one is what a
			// history below log version 13 has, not a value).
			out = append(out, Leader{Value: p.Value, Term: p.Token, SessionID: p.SessionID, Owner: p.Owner, Index: p.EndedIndex - 1})
		}
		following := next
		if i+1 < len(ev.Missed) {
			following = ev.Missed[i+1].Token
		}
		if following != p.EndedIndex {
			out = append(out, Leader{Index: p.EndedIndex})
		}
	}
	return out
}

// leaderOf is the leader of an election as ev shows its lock: its first
// (only) holder.
func leaderOf(ev LockEvent) Leader {
	h := ev.Holder()
	if h == nil {
		return Leader{Index: ev.Index}
	}
	return Leader{Value: h.Value, Term: h.Token, SessionID: h.SessionID, Owner: h.Owner, Index: ev.Index}
}
