package lockers

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/batonlock/baton/internal/bench"
)

// EtcdSessionTTL is the lease TTL of each worker's session, in seconds:
// concurrency.NewSession's default, so etcd runs as its users run it.
const EtcdSessionTTL = 60

// Etcd returns a factory whose workers each have their own client and one
// concurrency.Session, and lock with concurrency.Mutex under /<name>.
func Etcd(endpoints []string) bench.Factory {
	return func(ctx context.Context, _ int) (bench.Locker, error) {
		cli, err := dialEtcd(ctx, endpoints)
		if err != nil {
			return nil, err
		}
		return newEtcdLocker(cli, cli.Close)
	}
}

// EtcdShared returns a factory for the shared-connection variant: every
// worker's concurrency.Session (its own lease) on one client, so on one
// gRPC connection to each member, as Baton's `baton bench --conns 1` puts
// every worker's session on one client.
func EtcdShared(endpoints []string) bench.Factory {
	shared := &sharedClient[*clientv3.Client]{
		dial:  func(ctx context.Context) (*clientv3.Client, error) { return dialEtcd(ctx, endpoints) },
		close: (*clientv3.Client).Close,
	}
	return func(ctx context.Context, _ int) (bench.Locker, error) {
		cli, err := shared.acquire(ctx)
		if err != nil {
			return nil, err
		}
		return newEtcdLocker(cli, shared.release)
	}
}

func dialEtcd(ctx context.Context, endpoints []string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Context:     ctx,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cli, nil
}

// newEtcdLocker opens a session on cli; closeClient is how the Locker lets
// go of cli when it closes (or here, when the session cannot open).
func newEtcdLocker(cli *clientv3.Client, closeClient func() error) (bench.Locker, error) {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(EtcdSessionTTL))
	if err != nil {
		closeClient()
		return nil, fmt.Errorf("etcd session: %w", err)
	}
	return &etcdLocker{s: s, closeClient: closeClient, held: map[string]*concurrency.Mutex{}}, nil
}

// etcdLocker is used by one worker goroutine only.
type etcdLocker struct {
	s           *concurrency.Session
	closeClient func() error
	held        map[string]*concurrency.Mutex
}

// Acquire returns the revision at which the lock was granted, which is
// what etcd users take as a fencing token.
func (l *etcdLocker) Acquire(ctx context.Context, name string) (uint64, error) {
	m := concurrency.NewMutex(l.s, "/"+name)
	if err := m.Lock(ctx); err != nil {
		return 0, err
	}
	l.held[name] = m
	return uint64(m.Header().Revision), nil
}

func (l *etcdLocker) Release(ctx context.Context, name string) error {
	m, ok := l.held[name]
	if !ok {
		return fmt.Errorf("etcd: %s not held", name)
	}
	delete(l.held, name)
	return m.Unlock(ctx)
}

func (l *etcdLocker) Close() error {
	l.s.Close()
	return l.closeClient()
}
