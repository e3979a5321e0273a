// Package embedtest runs a Baton cluster inside a test's process: n
// members (embed.Member) on 127.0.0.1, each with its own data dir under
// t.TempDir, that a test stops, starts again from their disks and adds
// to, as etcd's integration package does. Baton's own tests use it; so
// may a program's, to test its code against real members:
//
//	c := embedtest.New(t, 3)
//	lead := c.WaitLeader()
//	client, err := baton.Dial(ctx, c.Endpoints(lead))
//	...
//	c.Stop(lead) // the client follows the new leader
//
// With InMemory the members listen and reach each other on a Network in
// memory instead of loopback ports; built inside a testing/synctest
// bubble, the cluster runs on the bubble's clock:
//
//	synctest.Test(t, func(t *testing.T) {
//		c := embedtest.New(t, 1, embedtest.InMemory())
//		client, err := baton.Dial(ctx, c.Endpoints(0),
//			baton.WithDialer(c.Dial))
//		...
//	})
//
// Every wait is bounded: a condition that does not come true in time
// fails the test, saying what it waited for.
package embedtest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/testnet"
)

// T is what the harness needs of a test: *testing.T and *testing.B have
// it. embedtest does not import testing (no package outside tests does
// here: a program linking it would get the test flags).
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	TempDir() string
	Cleanup(f func())
}

// Raft timing of every member: elections in a few hundred milliseconds.
const (
	tickInterval  = 20 * time.Millisecond
	electionTicks = 10
)

// Option changes how New builds the cluster.
type Option func(*options)

type options struct {
	configure []func(i int, cfg *embed.Config)
	inMemory  bool
}

// Configure changes member i's configuration before its first start:
// TLS, operators, limits, the disk guard, snapshot frequency, log
// version, any field of embed.Config. It also applies to members added
// by MemberConfig (i is then the new member's index).
func Configure(f func(i int, cfg *embed.Config)) Option {
	return func(o *options) { o.configure = append(o.configure, f) }
}

// InMemory runs the cluster on a Network of its own instead of loopback
// ports: members listen and reach each other in memory, and clients
// reach them through Cluster.Dial. A test that waits on the members' or
// its clients' clocks runs such a cluster inside a testing/synctest
// bubble (New inside the bubble), where those clocks are the bubble's:
// the test checks deadlines exactly, and runs as fast as the work it
// does.
func InMemory() Option {
	return func(o *options) { o.inMemory = true }
}

// Cluster is a running test cluster. It is not safe for concurrent use:
// one goroutine (the test's, for the methods that fail it) starts and
// stops its members.
type Cluster struct {
	t       T
	opts    options
	cfgs    []embed.Config
	members []*embed.Member
	network *Network // nil: loopback ports
}

// New starts an n-member cluster (1, 3 or 5) named n1..nn and stops it at
// the end of the test. It does not wait for a leader (WaitLeader does).
func New(t T, n int, opts ...Option) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	for _, o := range opts {
		o(&c.opts)
	}
	if c.opts.inMemory {
		c.network = NewNetwork()
	}
	c.cfgs = make([]embed.Config, n)
	c.members = make([]*embed.Member, n)
	var parts []string
	for i := range n {
		c.cfgs[i] = c.baseConfig(fmt.Sprintf("n%d", i+1))
		parts = append(parts, c.cfgs[i].Name+"="+c.cfgs[i].PeerAddr)
	}
	for i := range c.cfgs {
		c.cfgs[i].InitialCluster = strings.Join(parts, ",")
		c.configure(i, &c.cfgs[i])
	}
	t.Cleanup(func() {
		for i := range c.members {
			c.Stop(i)
		}
	})
	for i := range n {
		c.Start(i)
	}
	return c
}

// baseConfig is the configuration of a member called name: its own data
// dir, fast Raft ticks and two listeners (loopback, or on the cluster's
// Network) its first start takes over.
func (c *Cluster) baseConfig(name string) embed.Config {
	cfg := embed.DefaultConfig()
	cfg.Name = name
	cfg.DataDir = c.t.TempDir()
	cfg.TickInterval = tickInterval
	cfg.ElectionTicks = electionTicks
	cfg.ClientListener, cfg.PeerListener = c.listen(""), c.listen("")
	cfg.ClientAddr, cfg.PeerAddr = cfg.ClientListener.Addr().String(), cfg.PeerListener.Addr().String()
	if c.network != nil {
		cfg.PeerDial = c.network.Dial
	}
	return cfg
}

// listen listens on addr ("": a new one) of the cluster's Network, or
// binds a new loopback port below the kernel's range for outgoing
// connections (testnet), so that a member restarted on its address can
// bind it again. The member closes it; the cleanup closes one no member
// took.
func (c *Cluster) listen(addr string) net.Listener {
	c.t.Helper()
	var l net.Listener
	var err error
	if c.network != nil {
		l, err = c.network.Listen(addr)
	} else {
		l, err = testnet.Listen()
	}
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { l.Close() })
	return l
}

// configure applies the Configure options to cfg, member i's.
func (c *Cluster) configure(i int, cfg *embed.Config) {
	for _, f := range c.opts.configure {
		f(i, cfg)
	}
}

// MemberConfig is the configuration of a new member called name, with
// its listeners bound (PeerAddr is what AddMember needs) and the
// cluster's Configure options applied. Set InitialCluster (AddMember's
// answer) and Join, then start it with Add.
func (c *Cluster) MemberConfig(name string) embed.Config {
	c.t.Helper()
	cfg := c.baseConfig(name)
	c.configure(len(c.cfgs), &cfg)
	return cfg
}

// Add starts a member configured by MemberConfig and returns its index.
func (c *Cluster) Add(cfg embed.Config) int {
	c.t.Helper()
	c.cfgs = append(c.cfgs, cfg)
	c.members = append(c.members, nil)
	i := len(c.cfgs) - 1
	c.Start(i)
	return i
}

// Len is the number of members, running or stopped.
func (c *Cluster) Len() int { return len(c.members) }

// Member is member i, nil while it is stopped.
func (c *Cluster) Member(i int) *embed.Member { return c.members[i] }

// Config is member i's configuration (for its next start).
func (c *Cluster) Config(i int) embed.Config { return c.cfgs[i] }

// ChangeConfig changes member i's configuration for its next start (a
// stopped member restarted as a newer release, say).
func (c *Cluster) ChangeConfig(i int, f func(cfg *embed.Config)) { f(&c.cfgs[i]) }

// Start starts member i: the first time on the listeners New made, then
// from its disk on the same addresses. It fails the test on an error.
func (c *Cluster) Start(i int) {
	c.t.Helper()
	if err := c.TryStart(i); err != nil {
		c.t.Fatal(err)
	}
}

// TryStart is Start for goroutines other than the test's (which may not
// call t.Fatal): it returns the error.
func (c *Cluster) TryStart(i int) error {
	var err error
	if c.network != nil && c.cfgs[i].ClientListener == nil {
		// A restart: listen on the old addresses again.
		if c.cfgs[i].ClientListener, err = c.network.Listen(c.cfgs[i].ClientAddr); err == nil {
			c.cfgs[i].PeerListener, err = c.network.Listen(c.cfgs[i].PeerAddr)
		}
		if err != nil {
			return err
		}
	}
	// A restart binds the old addresses again, which the closed sockets
	// may hold for a moment.
	poll(time.Second, func() bool {
		c.members[i], err = embed.Start(c.cfgs[i])
		// The listeners serve the first start only; Close closes them.
		c.cfgs[i].ClientListener, c.cfgs[i].PeerListener = nil, nil
		return err == nil || !strings.Contains(err.Error(), "address already in use")
	})
	if err != nil {
		return fmt.Errorf("start %s: %w", c.cfgs[i].Name, err)
	}
	return nil
}

// Stop closes member i; its data dir stays for a later Start. Stopping a
// stopped member does nothing.
func (c *Cluster) Stop(i int) {
	if c.members[i] != nil {
		c.members[i].Close()
		c.members[i] = nil
	}
}

// Running lists the members that run, in index order.
func (c *Cluster) Running() []int {
	var out []int
	for i, m := range c.members {
		if m != nil {
			out = append(out, i)
		}
	}
	return out
}

// ClientAddr is member i's client address (gRPC and HTTP/JSON).
func (c *Cluster) ClientAddr(i int) string { return c.cfgs[i].ClientAddr }

// Endpoints lists the running members' client addresses, comma-separated,
// starting with member first: what baton.Dial takes.
func (c *Cluster) Endpoints(first int) string {
	var out []string
	for k := range c.members {
		i := (first + k) % len(c.members)
		if c.members[i] != nil {
			out = append(out, c.cfgs[i].ClientAddr)
		}
	}
	return strings.Join(out, ",")
}

// Dial connects to addr, a member's client or peer address: on the
// cluster's Network, or over TCP. It has the signature of
// grpc.WithContextDialer's: clients of an InMemory cluster dial with it.
func (c *Cluster) Dial(ctx context.Context, addr string) (net.Conn, error) {
	if c.network != nil {
		return c.network.Dial(ctx, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// Client is a gRPC client of member i's API in plaintext (a cluster
// without ClientTLS), closed at the end of the test.
func (c *Cluster) Client(i int) batonpb.BatonClient {
	c.t.Helper()
	conn, err := grpc.NewClient(c.cfgs[i].ClientAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(c.Dial))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return batonpb.NewBatonClient(conn)
}

// WaitLeader waits until the running members agree on a leader that has
// raised the cluster's log version to the newest all of them read, and
// returns its index. Until that raise a new cluster's leader answers an
// open, which carries a secret's hash, NOT_LEADER naming itself (the Go
// client retries; raw requests in tests do not).
func (c *Cluster) WaitLeader() int {
	c.t.Helper()
	lead := -1
	WaitFor(c.t, 10*time.Second, "the running members to agree on a leader", func() bool {
		lead = c.agreedLeader()
		return lead >= 0
	})
	return lead
}

// agreedLeader is the index of the leader every running member names, if
// its log version is the newest they all read; else -1.
func (c *Cluster) agreedLeader() int {
	var leaderID uint64
	lead := -1
	want := uint32(fsm.LogVersion)
	for _, i := range c.live() {
		m := c.members[i]
		st := m.Status()
		if st.Leader == 0 || (leaderID != 0 && st.Leader != leaderID) {
			return -1
		}
		leaderID = st.Leader
		if st.ID == st.Leader && m.IsLeader() {
			lead = i
		}
		if v := c.cfgs[i].LogVersion; v != 0 {
			want = min(want, v)
		}
	}
	if lead < 0 || c.members[lead].Status().LogVersion < want {
		return -1
	}
	return lead
}

// live lists the running members whose node has not stopped by itself.
func (c *Cluster) live() []int {
	var out []int
	for _, i := range c.Running() {
		select {
		case <-c.members[i].Done():
		default:
			out = append(out, i)
		}
	}
	return out
}

// WaitFor polls cond until it holds, for state no event announces (a
// waiter queued on the server, a member caught up); after within it
// fails t, saying what it waited for.
func WaitFor(t T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(within, cond) {
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// poll calls cond at once and then every few milliseconds until it
// returns true, or within has passed; it returns cond's last answer.
func poll(within time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
		}
	}
	return true
}
