package embed

// Defaults of the limits that protect a member from its clients
// (Config.MaxClientConns and the fields after it; README.md "Limits").
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
