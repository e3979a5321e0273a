package baton

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/testnet"
)

// testCluster is n real members on loopback, each in its own temp dir,
// which can be stopped and started again from their disks.
type testCluster struct {
	t       testing.TB
	cfgs    []embed.Config
	members []*embed.Member
}

// startCluster starts n members with fast Raft ticks (elections in a few
// hundred milliseconds).
func startCluster(t testing.TB, n int, opts ...func(*embed.Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, members: make([]*embed.Member, n)}
	cfgs := make([]embed.Config, n)
	c.cfgs = cfgs
	var parts []string
	for i := range n {
		cfg := embed.DefaultConfig()
		cfg.Name = fmt.Sprintf("n%d", i+1)
		cfg.DataDir = t.TempDir()
		cfg.TickInterval = 20 * time.Millisecond
		cfg.ElectionTicks = 10
		// Out of the kernel's range for outgoing connections, so that a
		// restart can bind the address again (testnet).
		cl, err := testnet.Listen()
		if err != nil {
			t.Fatal(err)
		}
		pl, err := testnet.Listen()
		if err != nil {
			t.Fatal(err)
		}
		cfg.ClientListener, cfg.PeerListener = cl, pl
		cfg.ClientAddr, cfg.PeerAddr = cl.Addr().String(), pl.Addr().String()
		for _, o := range opts {
			o(&cfg)
		}
		parts = append(parts, cfg.Name+"="+cfg.PeerAddr)
		cfgs[i] = cfg
	}
	for i := range cfgs {
		if n > 1 {
			cfgs[i].InitialCluster = strings.Join(parts, ",")
		}
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range c.members {
			c.stop(i)
		}
	})
	return c
}

// start starts member i: the first time on the listeners startCluster
// made, then from its disk on its addresses.
func (c *testCluster) start(i int) {
	c.t.Helper()
	if err := c.restart(i); err != nil {
		c.t.Fatal(err)
	}
}

// restart is start for goroutines other than the test's: it returns the
// error.
func (c *testCluster) restart(i int) error {
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		c.members[i], err = embed.Start(c.cfgs[i])
		// The listeners serve the first start only; Close closes them.
		c.cfgs[i].ClientListener, c.cfgs[i].PeerListener = nil, nil
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		time.Sleep(20 * time.Millisecond) // the old sockets are closing
	}
	if err != nil {
		return fmt.Errorf("start %s: %v", c.cfgs[i].Name, err)
	}
	return nil
}

func (c *testCluster) stop(i int) {
	if c.members[i] != nil {
		c.members[i].Close()
		c.members[i] = nil
	}
}

// addrs lists the running members' client addresses, starting with
// member first.
func (c *testCluster) addrs(first int) string {
	var out []string
	for k := range c.members {
		i := (first + k) % len(c.members)
		if c.members[i] != nil {
			out = append(out, c.members[i].ClientAddr())
		}
	}
	return strings.Join(out, ",")
}

// leader returns the index of the member that leads, waiting for one
// that has raised a new cluster's log version to this release's: until
// then it answers an open, which carries a secret's hash, NOT_LEADER
// naming itself (the Go client retries; raw requests in tests do not).
func (c *testCluster) leader() int {
	c.t.Helper()
	var lead int
	waitFor(c.t, 10*time.Second, "a leader", func() bool {
		lead = -1
		for i, m := range c.members {
			if m != nil && m.Node().IsLeader() && m.Node().LogVersion() >= fsm.LogVersion {
				lead = i
			}
		}
		return lead >= 0
	})
	return lead
}

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

// single starts one member, its config adjusted by opts, and a client
// of it.
func single(t *testing.T, opts ...func(*embed.Config)) (*testCluster, *Client) {
	t.Helper()
	c := startCluster(t, 1, opts...)
	return c, dial(t, c.addrs(0))
}

// waitFor polls cond until it holds (state on the server that no event
// announces, such as a waiter having queued).
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
