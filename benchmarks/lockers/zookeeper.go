package lockers

import (
	"context"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton/internal/bench"
)

// ZooKeeperSessionTimeout is each worker's session timeout, a common
// choice in ZooKeeper deployments (the server clamps it to 2..20 ticks).
const ZooKeeperSessionTimeout = 10 * time.Second

// ZooKeeper returns a factory whose workers each have their own connection
// (so their own session) and lock with the client's lock recipe, zk.Lock,
// under the znode /<name>.
func ZooKeeper(servers []string) bench.Factory {
	return func(ctx context.Context, _ int) (bench.Locker, error) {
		conn, events, err := zk.Connect(servers, ZooKeeperSessionTimeout, zk.WithLogger(quiet{}))
		if err != nil {
			return nil, fmt.Errorf("zookeeper connect: %w", err)
		}
		for {
			select {
			case ev := <-events:
				if ev.State == zk.StateHasSession {
					go drain(events)
					return &zkLocker{conn: conn, locks: map[string]*zk.Lock{}}, nil
				}
			case <-ctx.Done():
				conn.Close()
				return nil, ctx.Err()
			case <-time.After(10 * time.Second):
				conn.Close()
				return nil, fmt.Errorf("zookeeper: no session after 10s with %v", servers)
			}
		}
	}
}

// drain consumes session events until the connection closes the channel.
func drain(events <-chan zk.Event) {
	for range events {
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// zkLocker is used by one worker goroutine only.
type zkLocker struct {
	conn  *zk.Conn
	locks map[string]*zk.Lock
}

// Acquire returns 0: the recipe keeps its sequence number private.
//
// zk.Lock takes no context; if ctx ends first, Acquire closes the
// connection, which ends the session (deleting its lock nodes) and makes
// the pending Lock return. The Locker is unusable afterwards, which is
// fine: the engine cancels only at the end of a run.
func (l *zkLocker) Acquire(ctx context.Context, name string) (uint64, error) {
	lk, ok := l.locks[name]
	if !ok {
		lk = zk.NewLock(l.conn, "/"+name, zk.WorldACL(zk.PermAll))
		l.locks[name] = lk
	}
	done := make(chan error, 1)
	go func() { done <- lk.Lock() }()
	select {
	case err := <-done:
		return 0, err
	case <-ctx.Done():
		l.conn.Close()
		<-done
		return 0, ctx.Err()
	}
}

func (l *zkLocker) Release(_ context.Context, name string) error {
	lk, ok := l.locks[name]
	if !ok {
		return fmt.Errorf("zookeeper: %s not held", name)
	}
	return lk.Unlock()
}

func (l *zkLocker) Close() error {
	l.conn.Close()
	return nil
}
