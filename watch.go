package baton

import (
	"context"
	"errors"
	"reflect"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
)

// LockEvent is a lock's state as of a log index.
type LockEvent struct {
	// Index is the log index the state is as of; it grows from event to
	// event.
	Index uint64
	// Lock is the lock's record: no holders and no waiters while it is
	// free.
	Lock LockInfo
	// Missed, on an event that follows a gap (the watch moved to another
	// member, or its reader fell more than a member keeps behind), lists
	// the holds of the lock that ended after the previous event's Index,
	// oldest first, from the lock's replicated history: holders this
	// watch never showed, or showed before they ended. Gap is set on
	// such an event, and MissedAll when Missed is every hold that ended
	// in the gap (false when the history, 8 ends per lock, no longer
	// reaches back to the previous event, or the cluster's log version
	// is below 13).
	Missed    []PastHold
	Gap       bool
	MissedAll bool
}

// Holder returns the lock's first holder, or nil while nobody holds it:
// for a mutex used for leader election, the leader.
func (e LockEvent) Holder() *Holder {
	if len(e.Lock.Holders) == 0 {
		return nil
	}
	h := e.Lock.Holders[0]
	return &h
}

// Watch follows the lock name. The first event, before Watch returns, is
// the lock's state now (a linearizable read); then an event comes for each
// log entry that changed the lock (a new holder or count, a waiter queued
// or gone, a value proclaimed), in log order, each as of its entry. When
// the watch moves to another member (one that fails, goes away or loses
// the leader, so that it would show an old state as current), it resumes
// there from the last event's Index; when its reader falls far behind
// (more than server.MaxWatchBacklog changes), the member drops what was
// queued. Either way the next event is the lock's state then, marked Gap,
// with the holds that ended in between in Missed (see LockEvent). The
// channel is closed when ctx ends or the client is closed, and when the
// client's user may no longer read the lock (its read permission
// revoked, its user or token gone, with authentication on): the member
// ends the watch then, before it shows any state newer than the change.
//
// It is the base of Election.Observe, which follows an election's leader
// and its value.
func (c *Client) Watch(ctx context.Context, name string) (<-chan LockEvent, error) {
	if err := rules.CheckLockName(name); err != nil {
		return nil, invalid(err)
	}
	first, stream, err := c.openWatch(ctx, name, 0)
	if err != nil {
		return nil, err
	}
	ch := make(chan LockEvent, 1)
	ch <- first
	go c.followWatch(ctx, name, first, stream, ch)
	return ch, nil
}

// openWatch opens a Watch stream on a member and reads its first state,
// retrying as unary reads do; after, when set, resumes from that index.
func (c *Client) openWatch(ctx context.Context, name string, after uint64) (LockEvent, batonpb.Baton_WatchClient, error) {
	var (
		first  LockEvent
		stream batonpb.Baton_WatchClient
	)
	err := c.invoke(ctx, retryRead, func(ctx context.Context, bc batonpb.BatonClient) error {
		st, err := bc.Watch(ctx, &batonpb.WatchRequest{Name: name, AfterIndex: after})
		if err != nil {
			return err
		}
		r, err := st.Recv()
		if err != nil {
			return err
		}
		first, stream = lockEventOf(name, r), st
		return nil
	})
	return first, stream, err
}

// followWatch reads stream into ch, resuming it on another member from the
// last event's index when it fails, until ctx ends.
func (c *Client) followWatch(ctx context.Context, name string, last LockEvent, stream batonpb.Baton_WatchClient, ch chan<- LockEvent) {
	defer close(ch)
	for {
		r, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil || watchEnded(fromStatus(err)) {
				return
			}
			// The member failed, stopped or ended the stream: resume
			// through any member (each first state is linearizable, so
			// it is not behind what was already seen).
			for attempt := 0; ; attempt++ {
				if sleep(ctx, c.pause(attempt)) != nil {
					return
				}
				var ev LockEvent
				ev, stream, err = c.openWatch(ctx, name, last.Index)
				if err == nil {
					if ev.Index > last.Index && (len(ev.Missed) > 0 || !ev.MissedAll || !reflect.DeepEqual(ev.Lock, last.Lock)) {
						if !deliver(ctx, ch, ev) {
							return
						}
						last = ev
					} else if ev.Index > last.Index {
						last.Index = ev.Index
					}
					break
				}
				if watchEnded(err) || errors.Is(err, ErrInvalidArgument) {
					return
				}
			}
			continue
		}
		ev := lockEventOf(name, r)
		if ev.Index <= last.Index {
			continue
		}
		if !deliver(ctx, ch, ev) {
			return
		}
		last = ev
	}
}

// watchEnded tells whether a watch that failed with err is over rather
// than to be resumed: the client closed, or its user may not read the
// lock (any more).
func watchEnded(err error) bool {
	return errors.Is(err, ErrClientClosed) || errors.Is(err, ErrPermissionDenied) || errors.Is(err, ErrUnauthenticated)
}

func deliver(ctx context.Context, ch chan<- LockEvent, ev LockEvent) bool {
	select {
	case ch <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// lockEventOf converts a state from the wire.
func lockEventOf(name string, r *batonpb.WatchResponse) LockEvent {
	ev := LockEvent{Index: r.GetIndex(), Lock: lockInfoOf(name, r.GetLock())}
	if r.GetGap() {
		ev.Gap, ev.Missed, ev.MissedAll = true, pastHoldsOf(r.GetMissed()), r.GetMissedAll()
	}
	return ev
}
