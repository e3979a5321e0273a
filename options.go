package baton

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/rules"
)

// Defaults of the client's options, each with its reason.
const (
	// DefaultTTL is a session's TTL unless WithTTL says otherwise: the
	// server's default, long enough to ride out a leader election and a GC
	// pause, short enough that a dead client's locks come back quickly.
	DefaultTTL = rules.DefaultTTL
	// MinTTL and MaxTTL are the TTLs the server accepts.
	MinTTL = rules.MinTTL
	MaxTTL = rules.MaxTTL
	// DefaultMaxAttempts bounds how many members a unary call or a session
	// open tries (following leader hints and rotating over the endpoints)
	// before it gives up with ErrUnavailable; with the backoff below that
	// spans a few seconds, more than a leader election takes.
	DefaultMaxAttempts = 20
	// DefaultBackoff and DefaultMaxBackoff are the first and the largest
	// pause between attempts; pauses double and carry up to 50% jitter.
	DefaultBackoff    = 20 * time.Millisecond
	DefaultMaxBackoff = time.Second
	// CleanupTimeout bounds how long Lock waits, after its ctx ended, for
	// its abandoned wait to leave the server's queue (and for a grant that
	// won the race to be released) before it returns. The session keeps
	// retrying in the background after that.
	CleanupTimeout = 5 * time.Second
	// DefaultSyncInterval is how often a client asks the cluster for its
	// members (WithSyncInterval): membership changes are an operator's
	// work of minutes, so a client learns a replaced member well before
	// it could need it, for one cheap Status call (answered locally by
	// the member) a minute.
	DefaultSyncInterval = time.Minute
)

// Option configures Dial.
type Option func(*clientConfig)

type clientConfig struct {
	dialOpts    []grpc.DialOption
	tls         *tls.Config                                     // WithTLS's
	token       string                                          // WithToken's
	dialer      func(context.Context, string) (net.Conn, error) // WithDialer's
	opaqueDial  bool                                            // WithDialOptions was used
	grpcStreams bool                                            // WithGRPCSessionStreams
	maxAttempts int
	backoff     time.Duration
	maxBackoff  time.Duration
	logger      *slog.Logger
	// syncInterval is WithSyncInterval's; 0: no periodic sync.
	syncInterval time.Duration
}

func defaultClientConfig() clientConfig {
	return clientConfig{maxAttempts: DefaultMaxAttempts, backoff: DefaultBackoff, maxBackoff: DefaultMaxBackoff,
		syncInterval: DefaultSyncInterval}
}

func (c clientConfig) validate() error {
	switch {
	case c.maxAttempts < 1:
		return fmt.Errorf("%w: max attempts %d; want >= 1", ErrInvalidArgument, c.maxAttempts)
	case c.backoff <= 0 || c.maxBackoff < c.backoff:
		return fmt.Errorf("%w: backoff %v..%v; want 0 < first <= max", ErrInvalidArgument, c.backoff, c.maxBackoff)
	case c.syncInterval < 0:
		return fmt.Errorf("%w: sync interval %v; want > 0, or 0 for none", ErrInvalidArgument, c.syncInterval)
	}
	return nil
}

// WithDialOptions adds gRPC dial options (TLS credentials, interceptors).
// Without transport credentials among them the client dials in plaintext.
// The client cannot tell what they do, so its Sessions streams go over
// gRPC too (see WithGRPCSessionStreams): for TLS, a bearer token or a
// custom dialer, WithTLS, WithToken and WithDialer keep Baton's framing.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *clientConfig) {
		c.dialOpts = append(c.dialOpts, opts...)
		c.opaqueDial = true
	}
}

// WithDialer makes the client open its connections to members with dial
// (as grpc.WithContextDialer), for gRPC and for Baton's framing alike.
func WithDialer(dial func(ctx context.Context, addr string) (net.Conn, error)) Option {
	return func(c *clientConfig) {
		c.dialOpts = append(c.dialOpts, grpc.WithContextDialer(dial))
		c.dialer = dial
	}
}

// WithGRPCSessionStreams carries the sessions' streams over gRPC, as unary
// calls are, instead of Baton's own framing on a connection of their own
// (the default; package api/streamconn). The requests, answers and
// guarantees are the same; the framing costs a member less per request.
func WithGRPCSessionStreams() Option {
	return func(c *clientConfig) { c.grpcStreams = true }
}

// WithTLS dials every member over TLS with cfg: RootCAs to trust the
// members' certificates (nil: the system's roots), Certificates to show
// one when the members require client certificates. The server name is
// each endpoint's host unless cfg sets it.
func WithTLS(cfg *tls.Config) Option {
	return func(c *clientConfig) {
		c.dialOpts = append(c.dialOpts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		c.tls = &tls.Config{}
		if cfg != nil {
			c.tls = cfg.Clone()
		}
	}
}

// WithMaxAttempts sets how many members a unary call or a session open
// tries before it gives up (default DefaultMaxAttempts). The ctx bounds the
// attempts too.
func WithMaxAttempts(n int) Option {
	return func(c *clientConfig) { c.maxAttempts = n }
}

// WithBackoff sets the first and the largest pause between attempts.
func WithBackoff(first, max time.Duration) Option {
	return func(c *clientConfig) { c.backoff, c.maxBackoff = first, max }
}

// WithSyncInterval sets how often the client asks the cluster for its
// members to keep Endpoints current (default DefaultSyncInterval); 0
// turns the periodic sync off, leaving the members learned at Dial and
// by Client.Sync.
func WithSyncInterval(d time.Duration) Option {
	return func(c *clientConfig) { c.syncInterval = d }
}

// WithLogger sets the logger of reconnects and session state changes; nil
// (the default) discards them.
func WithLogger(l *slog.Logger) Option {
	return func(c *clientConfig) { c.logger = l }
}

// SessionOption configures NewSession.
type SessionOption func(*sessionConfig)

type sessionConfig struct {
	ttl     time.Duration
	owner   string
	onEvent func(Event)
}

func defaultSessionConfig() sessionConfig {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return sessionConfig{ttl: DefaultTTL, owner: host + "/" + strconv.Itoa(os.Getpid())}
}

func (c sessionConfig) validate() error {
	return invalid(cmp.Or(rules.CheckTTL(c.ttl), rules.CheckOwner(c.owner)))
}

// WithTTL sets the session's TTL (default DefaultTTL; MinTTL..MaxTTL). The
// client sends a keepalive every TTL/3.
func WithTTL(d time.Duration) SessionOption {
	return func(c *sessionConfig) { c.ttl = d }
}

// WithOwner sets the session's owner label, shown to operators beside
// every hold and wait (default "host/pid"); "host/pid/purpose" is a good
// shape. It is up to 256 bytes of UTF-8 (rules.CheckOwner).
func WithOwner(label string) SessionOption {
	return func(c *sessionConfig) { c.owner = label }
}

// WithEvents registers f to receive the session's state changes (see
// State). f is called in order, one call at a time, from a goroutine of the
// session, never with the session's lock held; a slow f delays later
// events but never the session's own deadline handling (the Lease contexts
// are cancelled before the event is delivered). The last event is
// StateExpired or StateClosed.
func WithEvents(f func(Event)) SessionOption {
	return func(c *sessionConfig) { c.onEvent = f }
}

// HoldOption configures the holds taken through a lock handle: a Mutex,
// an RWMutex, a Semaphore or a LockSet. Every option applies to every
// kind of handle except WithMaxReaders, which only an RWMutex takes.
// An option that is out of range, or given to a kind that does not take
// it, makes every acquire through the handle fail at once with an error
// matching ErrInvalidArgument that names it, sending nothing.
type HoldOption func(*holdConfig)

type holdConfig struct {
	ownerKey    string
	holdLimit   time.Duration
	manualRenew bool
	// lockDelay is WithLockDelay's value, when lockDelaySet.
	lockDelay    time.Duration
	lockDelaySet bool
	// maxReaders is WithMaxReaders' value, when readersSet.
	maxReaders int
	readersSet bool
}

// newHoldConfig applies opts in order.
func newHoldConfig(opts []HoldOption) holdConfig {
	var c holdConfig
	for _, o := range opts {
		o(&c)
	}
	return c
}

// check returns why no member would take c (its owner key or hold
// limit), or why a handle of kind ("Mutex", "RWMutex", "Semaphore" or
// "LockSet") cannot: only an RWMutex takes WithMaxReaders.
func (c holdConfig) check(kind string) error {
	if c.readersSet && kind != "RWMutex" {
		return fmt.Errorf("%w: WithMaxReaders applies to an RWMutex only, not to a %s", ErrInvalidArgument, kind)
	}
	return invalid(cmp.Or(rules.CheckOwnerKey(c.ownerKey), rules.CheckHoldLimit(c.holdLimit), rules.CheckLockDelay(c.lockDelay)))
}

// sameHold reports whether c and o give a hold the same owner key, hold
// limit, renewal and lock-delay (WithMaxReaders aside): whether one
// request may take holds of both.
func (c holdConfig) sameHold(o holdConfig) bool {
	return c.ownerKey == o.ownerKey && c.holdLimit == o.holdLimit && c.manualRenew == o.manualRenew &&
		c.lockDelaySet == o.lockDelaySet && c.lockDelay == o.lockDelay
}

// lockDelayField is the acquire's lock_delay: unset for the member's
// default, unless WithLockDelay said.
func (c holdConfig) lockDelayField() *durationpb.Duration {
	if !c.lockDelaySet {
		return nil
	}
	return durationpb.New(c.lockDelay)
}

// WithOwnerKey sets the owner key of the handle's holds (default ""). A
// hold belongs to (session, owner key): an acquire through any handle of
// the same session, lock name and key re-enters the hold (the count goes
// up, the token stays), while a different key of the same session queues
// like any other holder. So a Semaphore holds at most one permit per key,
// and an RWMutex reads and writes under one key in one mode at a time.
// Go has no thread identity, so the caller chooses what a key stands for:
// a worker, a request, a goroutine it manages. A key is up to 256 bytes
// of UTF-8 (rules.CheckOwnerKey). Given to a LockSet, the key is that of
// every lock in the set.
func WithOwnerKey(key string) HoldOption {
	return func(c *holdConfig) { c.ownerKey = key }
}

// WithHoldLimit gives every hold taken through the handle (every lock of
// a LockSet, each on its own) a hold limit: the server ends the hold d
// after its grant or its last renewal, whatever the session does. The
// library renews it by itself, like a watchdog, every d/3 while the
// session is healthy, so the hold lasts while the process does, and
// comes back at most d after the client dies or is cut off from the
// cluster even when the session's TTL is much longer (a long TTL to ride
// out pauses, a short limit for the locks that must move on fast). With
// WithManualRenewal the caller renews instead.
//
// The Lease is lost first, at the client's conservative view of the
// deadline (ErrHoldExpired). d is 1 s .. 24 h in whole milliseconds; 0,
// the default, leaves the hold to the session. A reentrant acquire must
// use the same limit.
func WithHoldLimit(d time.Duration) HoldOption {
	return func(c *holdConfig) { c.holdLimit = d }
}

// WithLockDelay gives every hold taken through the handle a lock-delay
// of d: when the hold ends by the session's expiry (a blacklisted
// session's too) or by its hold limit, not by a release or a close, the
// server grants the lock to no one for d, so that writes the holder sent
// before it lost the lock drain before the next holder starts (Chubby's
// and Consul's lock-delay). Waiters stay queued in order; a TryLock in
// the meantime gets a *BusyError whose DelayedUntil says until when.
// Use it for resources that cannot check a fencing token; those that can
// need no delay. d is 0 .. 60 s in whole seconds; 0 asks for none even
// where the member has a default. Without this option the hold gets the
// member's default for the name (`baton server --lock-delay`; none
// unless set), which Lease.LockDelay reports. A reentrant acquire must
// use the hold's lock-delay.
func WithLockDelay(d time.Duration) HoldOption {
	return func(c *holdConfig) { c.lockDelay, c.lockDelaySet = d, true }
}

// WithManualRenewal leaves the renewal of the hold limit to the caller
// (Lease.Renew): a hold not renewed ends d after its grant even while the
// process lives and heartbeats, so work that hung cannot keep the lock
// forever. Renew from the work's own progress, not from a timer. Without
// WithHoldLimit it changes nothing.
func WithManualRenewal() HoldOption {
	return func(c *holdConfig) { c.manualRenew = true }
}

// WithMaxReaders bounds how many readers hold an RWMutex at once: 1 ..
// MaxHolders, default DefaultMaxReaders. Every handle on one lock must
// state the same limit while anyone holds or waits for it. Only an
// RWMutex takes this option (a Semaphore's permits are an argument of
// Session.Semaphore).
func WithMaxReaders(n int) HoldOption {
	return func(c *holdConfig) { c.maxReaders, c.readersSet = n, true }
}
