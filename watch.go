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
// the lock's state now (a linearizable read); then an event comes each time
// the lock changes: a new holder or count, a waiter queued or gone. Changes
// that follow each other quickly may come as their last state only, never
// out of order and never going back in Index. A member that fails, goes
// away or loses the leader (cut off from the majority, it would show an
// old state as current) is replaced by another, transparently. The channel is closed when
// ctx ends or the client is closed; read it promptly, since the watch
// waits for the reader (the server keeps the latest state only).
//
// It is the base of Election.Observe, which follows an election's leader
// and its value.
func (c *Client) Watch(ctx context.Context, name string) (<-chan LockEvent, error) {
	if err := rules.CheckLockName(name); err != nil {
		return nil, invalid(err)
	}
	first, stream, err := c.openWatch(ctx, name)
	if err != nil {
		return nil, err
	}
	ch := make(chan LockEvent, 1)
	ch <- first
	go c.followWatch(ctx, name, first, stream, ch)
	return ch, nil
}

// openWatch opens a Watch stream on a member and reads its first state,
// retrying as unary reads do.
func (c *Client) openWatch(ctx context.Context, name string) (LockEvent, batonpb.Baton_WatchClient, error) {
	var (
		first  LockEvent
		stream batonpb.Baton_WatchClient
	)
	err := c.invoke(ctx, retryRead, func(ctx context.Context, bc batonpb.BatonClient) error {
		st, err := bc.Watch(ctx, &batonpb.WatchRequest{Name: name})
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

// followWatch reads stream into ch, reopening it on another member when it
// fails, until ctx ends.
func (c *Client) followWatch(ctx context.Context, name string, last LockEvent, stream batonpb.Baton_WatchClient, ch chan<- LockEvent) {
	defer close(ch)
	for {
		r, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil || errors.Is(fromStatus(err), ErrClientClosed) {
				return
			}
			// The member failed, stopped or ended the stream: follow the
			// lock through any member (each first state is linearizable,
			// so it is not behind what was already seen).
			for attempt := 0; ; attempt++ {
				if sleep(ctx, c.pause(attempt)) != nil {
					return
				}
				var ev LockEvent
				ev, stream, err = c.openWatch(ctx, name)
				if err == nil {
					if ev.Index > last.Index && !reflect.DeepEqual(ev.Lock, last.Lock) {
						if !deliver(ctx, ch, ev) {
							return
						}
						last = ev
					} else if ev.Index > last.Index {
						last.Index = ev.Index
					}
					break
				}
				if errors.Is(err, ErrClientClosed) || errors.Is(err, ErrInvalidArgument) {
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

func deliver(ctx context.Context, ch chan<- LockEvent, ev LockEvent) bool {
	select {
	case ch <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

func lockEventOf(name string, r *batonpb.WatchResponse) LockEvent {
	return LockEvent{Index: r.GetIndex(), Lock: lockInfoOf(name, r.GetLock())}
}
