package baton

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton/embed/embedtest"
)

// dial connects a client to the cluster and closes it at the end.
func dial(t testing.TB, endpoints string, opts ...Option) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := Dial(ctx, endpoints, opts...)
	if err != nil {
		t.Fatalf("dial %s: %v", endpoints, err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// newSession opens a session and closes it at the end.
func newSession(t testing.TB, cl *Client, opts ...SessionOption) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := cl.NewSession(ctx, opts...)
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

// startCluster starts n members in the test's process (embedtest). They
// listen on real ports, so the test skips under -short: `go test -short`
// runs the client's unit tests alone.
func startCluster(t *testing.T, n int, opts ...embedtest.Option) *embedtest.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts members on real ports; runs without -short")
	}
	return embedtest.New(t, n, opts...)
}

// single starts one member, configured by opts, and a client of it.
func single(t *testing.T, opts ...embedtest.Option) (*embedtest.Cluster, *Client) {
	t.Helper()
	c := startCluster(t, 1, opts...)
	return c, dial(t, c.Endpoints(0))
}

// startInMemory starts n members on a network in memory
// (embedtest.InMemory). Inside a testing/synctest bubble they, and the
// clients of dialCluster, run on the bubble's clock, so a test checks
// their deadlines exactly. It takes no port and runs under -short.
func startInMemory(t *testing.T, n int, opts ...embedtest.Option) *embedtest.Cluster {
	t.Helper()
	return embedtest.New(t, n, append(opts, embedtest.InMemory())...)
}

// dialCluster connects a client to c's running members, member first
// first, through c's dialer.
func dialCluster(t *testing.T, c *embedtest.Cluster, first int) *Client {
	t.Helper()
	return dial(t, c.Endpoints(first), WithDialer(c.Dial))
}

// singleInMemory is single on a network in memory (startInMemory).
func singleInMemory(t *testing.T, opts ...embedtest.Option) (*embedtest.Cluster, *Client) {
	t.Helper()
	c := startInMemory(t, 1, opts...)
	return c, dialCluster(t, c, 0)
}

// whenLost reports when l is lost: on synctest's clock, the instant the
// client ended it.
func whenLost(l *Lease) <-chan time.Time {
	at := make(chan time.Time, 1)
	go func() {
		<-l.Lost()
		at <- time.Now()
	}()
	return at
}

// cutStream breaks s's session stream and holds its reconnect until
// proceed is called (at the test's end, if not before): nothing the
// member pushes reaches s meanwhile.
func cutStream(t *testing.T, s *Session) (proceed func()) {
	t.Helper()
	entered, proceed := pauseReconnect(t)
	s.mu.Lock()
	sc := s.stream
	s.mu.Unlock()
	sc.cancel()
	<-entered
	return proceed
}

// pauseReconnect holds the next reconnect of any session: entered is
// closed once it started, and it goes on when proceed is called (at the
// test's end, if not before).
func pauseReconnect(t *testing.T) (entered <-chan struct{}, proceed func()) {
	in, resume := make(chan struct{}), make(chan struct{})
	var first, resumed sync.Once
	hook := func() {
		first.Do(func() {
			close(in)
			<-resume
		})
	}
	testHookReconnect.Store(&hook)
	proceed = func() { resumed.Do(func() { close(resume) }) }
	t.Cleanup(func() {
		proceed()
		testHookReconnect.Store(nil)
	})
	return in, proceed
}

// waiters returns the session ids queued for name.
func waiters(t *testing.T, cl *Client, name string) []uint64 {
	t.Helper()
	info, err := cl.Get(testCtx(t), name)
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	var out []uint64
	for _, w := range info.Waiters {
		out = append(out, w.SessionID)
	}
	return out
}

// testCtx is a ctx that bounds one step of a test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type lockResult struct {
	lease *Lease
	err   error
	at    time.Time
}

// lockAsync runs m.Lock(ctx) on a goroutine.
func lockAsync(ctx context.Context, m *Mutex) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		l, err := m.Lock(ctx)
		ch <- lockResult{l, err, time.Now()}
	}()
	return ch
}

func recv(t *testing.T, ch <-chan lockResult) lockResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(15 * time.Second):
		t.Fatal("Lock did not return within 15s")
		return lockResult{}
	}
}
