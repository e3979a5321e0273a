package embed

import (
	"time"

	"github.com/batonlock/baton/internal/server"
)

// Defaults of the limits that protect a member from its clients
// (Config.MaxClientConns and the fields after it; docs/CLUSTER.md "Limits").
const (
	// MaxClientConnsCeiling caps the default of MaxClientConns: far more
	// connections than a cluster's clients need (each client keeps one
	// per member), few enough that their buffers stay small beside the
	// state machine.
	MaxClientConnsCeiling = 10000
	// ReservedFiles is how many of the process's file descriptors the
	// default of MaxClientConns leaves to everything but clients: the
	// log's segments, snapshots being written and read, two connections
	// per peer, the Go runtime's own. A member that runs out of them
	// cannot write its log and stops.
	ReservedFiles = 1024
	// DefaultConnHandshakeTimeout is the default of
	// Config.ConnHandshakeTimeout: a client on another continent
	// finishes TCP, TLS and its first request in well under a second.
	DefaultConnHandshakeTimeout = 10 * time.Second
	// DefaultConnIdleTimeout is the default of Config.ConnIdleTimeout:
	// longer than HTTP clients keep idle connections (Go's 90 s, browsers'
	// minutes), so that the client, not the member, closes them, which
	// spares a request sent as the member closes.
	DefaultConnIdleTimeout = 5 * time.Minute
	// DefaultMaxSessions is the default of Config.MaxSessions: the scale
	// measured (TestScale in package e2e: 100,000 sessions holding
	// 1,000,000 locks, every member under 1 GiB resident).
	DefaultMaxSessions = 100000
	// DefaultMaxSessionsPerUser is the default of
	// Config.MaxSessionsPerUser: a tenth of DefaultMaxSessions, so that
	// it takes ten users at least to fill the cluster's places, and still
	// far more than one application needs (a process keeps a session or
	// a few). A fixed number rather than a share of MaxSessions, so that
	// the default means the same whatever else is set; with MaxSessions
	// lowered below it, only the total bounds a user.
	DefaultMaxSessionsPerUser = DefaultMaxSessions / 10
	// DefaultMaxKeepAliveRate is the default of Config.MaxKeepAliveRate:
	// the Go client sends three keepalives per TTL (at most three a
	// second, TTLs being at least a second), and a resume is one more; 50
	// leaves room for other clients' habits while a session's flood of
	// keepalives, each a ReadIndex round on the leader, is cut short.
	DefaultMaxKeepAliveRate = 50
)

// DefaultMaxClientConns is the default of Config.MaxClientConns for a
// process allowed nofile open files: min(MaxClientConnsCeiling, nofile -
// ReservedFiles), or half of nofile when that leaves fewer than
// ReservedFiles for clients.
func DefaultMaxClientConns(nofile uint64) int {
	spare := nofile / 2
	if nofile > 2*ReservedFiles {
		spare = nofile - ReservedFiles
	}
	return int(max(min(spare, MaxClientConnsCeiling), 1))
}

// limits is what the server needs of c's limits.
func (c Config) limits() server.Limits {
	return server.Limits{
		MaxClientConns:     c.MaxClientConns,
		HandshakeTimeout:   c.ConnHandshakeTimeout,
		IdleTimeout:        c.ConnIdleTimeout,
		MaxSessions:        c.MaxSessions,
		MaxSessionsPerUser: c.MaxSessionsPerUser,
		MaxKeepAliveRate:   c.MaxKeepAliveRate,
	}
}
