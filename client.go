package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/batonlock/baton/api/batonpb"
)

// Client is a connection to a Baton cluster. It follows the leader by
// itself: a member that does not lead answers NOT_LEADER with the leader's
// address, which the client tries next; a member it cannot reach makes it
// try the next endpoint, with a bounded, jittered backoff that honours the
// caller's ctx. A Client is safe for concurrent use.
type Client struct {
	cfg       clientConfig
	log       *slog.Logger
	endpoints []string

	runCtx  context.Context // the Sessions streams; ends with Close
	stopRun context.CancelFunc

	mu       sync.Mutex
	conns    map[string]*grpc.ClientConn
	muxes    map[string]*sessionMux // working Sessions streams by member
	grpcOnly map[string]time.Time   // members that do not speak Baton's framing, until when
	leader   string                 // best-known leader address; "" if unknown
	next     int                    // next endpoint to try when the leader is unknown
	closed   bool
	sessions map[*Session]struct{}
}

// Dial connects to the cluster at endpoints, a comma-separated list of
// members' client addresses (host:port), the same syntax as the CLI's
// --endpoints. Any member will do; the client finds the leader. Dial
// returns once a member answered, or ErrUnavailable when none did within
// the attempts and ctx.
func Dial(ctx context.Context, endpoints string, opts ...Option) (*Client, error) {
	cfg := defaultClientConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var eps []string
	for e := range strings.SplitSeq(endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("%w: no endpoints", ErrInvalidArgument)
	}
	lg := cfg.logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	c := &Client{
		runCtx:    runCtx,
		stopRun:   stopRun,
		cfg:       cfg,
		log:       lg.With("component", "baton-client"),
		endpoints: eps,
		conns:     make(map[string]*grpc.ClientConn),
		muxes:     make(map[string]*sessionMux),
		grpcOnly:  make(map[string]time.Time),
		sessions:  make(map[*Session]struct{}),
	}
	st, err := c.Status(ctx)
	if err != nil {
		c.Close()
		return nil, err
	}
	if st.LeaderAddr != "" {
		c.setLeader(st.LeaderAddr)
	}
	return c, nil
}

// Endpoints returns the endpoints the client was dialled with.
func (c *Client) Endpoints() []string { return append([]string(nil), c.endpoints...) }

// Close abandons every session of the client (their goroutines stop; the
// server expires them after their TTL, so Close them first to release at
// once) and closes the connections. It is safe to call twice.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	sessions := make([]*Session, 0, len(c.sessions))
	for s := range c.sessions {
		sessions = append(sessions, s)
	}
	c.mu.Unlock()
	for _, s := range sessions {
		s.shutdown(ErrClientClosed, StateClosed)
		s.wait()
	}
	c.stopRun()
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.muxes)
	var errs []error
	for addr, cc := range c.conns {
		errs = append(errs, cc.Close())
		delete(c.conns, addr)
	}
	return errors.Join(errs...)
}

// flowWindow is the HTTP/2 flow-control window of the client's connections
// and of each of their streams, which members use too. A fixed window turns
// off gRPC's bandwidth estimation, which pinged the peer (and the peer
// answered) after most messages it received, and makes window updates
// rare: without it a client made more than one socket write per request,
// and the leader as many more, each a wake-up on the other side. A lock service's messages are small; 1 MiB in flight per
// connection is far more than its requests need, on any network.
const flowWindow = 1 << 20

// conn returns the (lazily connecting) connection to addr.
func (c *Client) conn(addr string) (batonpb.BatonClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClientClosed
	}
	cc := c.conns[addr]
	if cc == nil {
		opts := append([]grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(flowWindow), grpc.WithInitialConnWindowSize(flowWindow),
		}, c.cfg.dialOpts...)
		var err error
		if cc, err = grpc.NewClient(addr, opts...); err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		c.conns[addr] = cc
	}
	return batonpb.NewBatonClient(cc), nil
}

// target is the member to try next: the leader if known, else the next
// endpoint.
func (c *Client) target() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader != "" {
		return c.leader
	}
	return c.endpoints[c.next%len(c.endpoints)]
}

func (c *Client) setLeader(addr string) {
	c.mu.Lock()
	c.leader = addr
	c.mu.Unlock()
}

// failed forgets addr as the leader and moves to the next endpoint.
func (c *Client) failed(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader == addr {
		c.leader = ""
	}
	if c.endpoints[c.next%len(c.endpoints)] == addr || c.leader == "" {
		c.next++
	}
}

// pause returns the backoff before attempt n (0-based), with jitter.
func (c *Client) pause(n int) time.Duration {
	d := c.cfg.backoff
	for i := 0; i < n && d < c.cfg.maxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.cfg.maxBackoff)
	return d/2 + rand.N(d/2+1)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryPolicy says which failures a unary call may retry.
type retryPolicy int

const (
	// retryRead retries every UNAVAILABLE: the call changes nothing.
	retryRead retryPolicy = iota
	// retryNotApplied retries only what surely did not apply: NOT_LEADER
	// and failures to reach a member.
	retryNotApplied
)

// invoke runs f against members until one answers, following leader
// hints.
//
// An UNAVAILABLE that carries no Reason comes from gRPC, not from a
// member: the member could not be reached, or the connection broke while
// the call was under way, after the member may have applied it. Under
// retryNotApplied the call is tried again (the error cannot tell the two
// apart, and the first is the common one), but what the later attempts
// answer is then marked with ErrOutcomeUnknown: a NotFound from the retry
// of a CasRelease may mean that the lost attempt released the hold.
func (c *Client) invoke(ctx context.Context, policy retryPolicy, f func(ctx context.Context, bc batonpb.BatonClient) error) error {
	var last error
	maybeApplied := false // an earlier attempt may have taken effect
	uncertain := func(err error) error {
		if !maybeApplied {
			return err
		}
		return fmt.Errorf("%w: an earlier attempt may have applied before its connection broke: %w", ErrOutcomeUnknown, err)
	}
	for attempt := 0; attempt < c.cfg.maxAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			if last != nil {
				return uncertain(fmt.Errorf("%w (last: %w)", err, last))
			}
			return err
		}
		addr := c.target()
		bc, err := c.conn(addr)
		if err != nil {
			return err
		}
		err = fromStatus(f(ctx, bc))
		if err == nil {
			return nil
		}
		last = err
		var e *Error
		isServer := errors.As(err, &e)
		switch {
		case !isServer:
			return uncertain(err)
		case errors.Is(err, ErrNotLeader):
			if hint := e.LeaderAddr; hint != "" && hint != addr {
				c.setLeader(hint)
				continue
			}
			c.failed(addr)
		case errors.Is(err, ErrOutcomeUnknown):
			if policy != retryRead {
				return err
			}
		case e.Reason == batonpb.Reason_REASON_UNSPECIFIED && errors.Is(err, ErrUnavailable):
			c.failed(addr) // unreachable, or cut off mid-call
			if policy == retryNotApplied {
				maybeApplied = true
			}
		default:
			return uncertain(err)
		}
		if sleep(ctx, c.pause(attempt)) != nil {
			continue // reported at the top of the loop
		}
	}
	return uncertain(fmt.Errorf("%w: gave up after %d attempts: %w", ErrUnavailable, c.cfg.maxAttempts, last))
}

func (c *Client) addSession(s *Session) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClientClosed
	}
	c.sessions[s] = struct{}{}
	return nil
}

func (c *Client) removeSession(s *Session) {
	c.mu.Lock()
	delete(c.sessions, s)
	c.mu.Unlock()
}
