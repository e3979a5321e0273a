package raftnode

// What a Node is built from: the interfaces it is given (its log store,
// transport and observer), its configuration, and the errors it answers.

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// LogStore is the durable part of the Raft log: entries, hard state and
// snapshots. internal/storage implements it on etcd's WAL.
type LogStore interface {
	// Save appends ents and hs; when sync, both are durable on return.
	Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error
	// SaveSnapshot makes snap durable and lets the log drop what it covers.
	// It must not keep snap.Data: the node may give its memory back to the
	// OS when SaveSnapshot returns.
	SaveSnapshot(snap *raftpb.Snapshot) error
	// Snapshot returns the newest snapshot saved, data included (or
	// raft.ErrSnapshotTemporarilyUnavailable). The node keeps only
	// snapshot metadata in memory and reads the data back when a follower
	// needs it: at a million locks that is tens of MB not held twice.
	Snapshot() (*raftpb.Snapshot, error)
}

// Transport carries Raft messages to peers. Send must not block.
type Transport interface {
	Send(groupID uint64, msgs []*raftpb.Message)
}

// Observer learns, on the Ready loop goroutine, what the node applied and
// when its leadership changed. Its methods must return quickly and must not
// call back into the Node's blocking methods.
type Observer interface {
	// Applied is called for every applied command, in log order.
	Applied(index uint64, cmd *fsmpb.Command, res *fsmpb.Result)
	// LeaderChanged is called after the committed entries of the Ready that
	// changed leadership are applied; m may be read during the call only.
	LeaderChanged(isLeader bool, term uint64, m *fsm.Machine)
	// Flush is called on the Ready loop after each batch of completion
	// callbacks (SubmitFunc) and Applied calls: what they queued for
	// clients can be sent now, together.
	Flush()
	// Restored is called on the Ready loop after the state machine was
	// replaced by a snapshot from the leader, at index: anything in it
	// may have changed without an Applied call.
	Restored(index uint64)
}

// Config configures a Node.
type Config struct {
	// ID is this member's Raft id (non-zero); GroupID names the Raft group
	// on the transport (1 until the namespace is split).
	ID      uint64
	GroupID uint64
	// Peers are the voters of a brand-new cluster, this node included.
	// Ignored when Recovered holds a hard state or snapshot.
	Peers []uint64
	// PeerContexts, by id, go into the bootstrap's membership entries
	// (MemberContext), so that the state machine records every first
	// member's name and address.
	PeerContexts map[uint64][]byte
	// LogVersion is the newest log version this member reads
	// (fsm.LogVersion when 0). Tests of clusters of mixed releases set an
	// older one: such a member stops at an entry above it, as a member of
	// that release would (ErrAboveLogVersion).
	LogVersion uint32
	// LogVersionDue, when set, is the version the cluster may be raised
	// to: the lowest that the members of ms said they read (ok false
	// while one has not been heard from; see MembersLogVersion). A leader
	// that has applied an entry of its term proposes SetLogVersion as soon
	// as that is above the cluster's version; meanwhile a command that
	// needs a version above the cluster's but not above the due one is
	// answered "retry" instead of being changed or refused. A new cluster
	// starts at 1 and is raised right after its first election.
	LogVersionDue func(ms Membership) (v uint32, ok bool)
	// Join starts a node with an empty log as a new member of a running
	// group (added by a membership change) instead of bootstrapping a
	// group of Peers: it waits for the leader to send it the log or a
	// snapshot. Ignored when Recovered holds anything.
	Join bool
	// MembershipChanged, when set, is called on the loop after a
	// membership change or a snapshot changed the membership, and once at
	// start. It must not block.
	MembershipChanged func(Membership)
	// Store persists the log; Recovered is what it held at open.
	Store     LogStore
	Recovered Recovered
	Transport Transport
	Observer  Observer
	// TickInterval is one Raft tick; elections take ElectionTicks ticks
	// (randomised up to twice that by raft), heartbeats HeartbeatTicks.
	TickInterval   time.Duration
	ElectionTicks  int
	HeartbeatTicks int
	// SnapshotEntries is how many applied entries trigger a snapshot:
	// each member snapshots once per SnapshotEntries entries, at points
	// shifted by its place among the voters (snapshotOffset).
	SnapshotEntries uint64
	// CatchUpEntries is how much of the log a snapshot keeps behind it
	// (at most SnapshotEntries), so a briefly slow follower catches up
	// from the log instead of a whole snapshot. etcd keeps 5,000.
	CatchUpEntries uint64
	// CollectAfterSnapshot: once the node has saved, or received from its
	// leader, a snapshot of at least this many bytes, it runs a garbage collection
	// on a goroutine of its own (0: never). See collectAfterSnapshot.
	CollectAfterSnapshot int
	// MaxBatch bounds the commands stepped into raft as one proposal.
	MaxBatch int
	// MaxInFlight bounds proposals and reads queued for the loop; beyond
	// it Propose refuses with ErrOverloaded instead of queueing forever.
	MaxInFlight int
	// MaxInbound bounds the peer messages queued for the loop (Step);
	// beyond it a message is dropped, which raft recovers from as from a
	// lost one.
	MaxInbound int
	Logger     *slog.Logger
	// ProposalIDBase is where this incarnation's proposal ids start. They
	// only need to differ from every earlier incarnation's, so zero means
	// the wall clock's reading at start; a simulation passes its virtual
	// clock's to stay deterministic.
	ProposalIDBase uint64
}

// Recovered is the state a LogStore held when it was opened.
type Recovered struct {
	Snapshot  *raftpb.Snapshot
	HardState *raftpb.HardState
	Entries   []*raftpb.Entry
}

// DefaultConfig returns the defaults: 100 ms ticks, a 1 s election timeout
// (10 ticks, long enough for a loaded 2-core machine's fsync stalls), a
// snapshot every 100,000 entries (etcd's default count): a snapshot
// encodes and writes the whole state (most of a second each at 1M locks,
// off the loop, with applies going on), so it should be rare; the log kept meanwhile is small
// (~150 bytes an entry).
// A snapshot keeps 10,000 entries behind it for slow followers. A
// snapshot of 16 MiB or more is followed by a garbage collection that
// returns the freed memory to the OS.
func DefaultConfig() Config {
	return Config{
		GroupID:         1,
		TickInterval:    100 * time.Millisecond,
		ElectionTicks:   10,
		HeartbeatTicks:  1,
		SnapshotEntries: 100000,
		CatchUpEntries:  10000,
		MaxBatch:        4096,
		MaxInFlight:     65536,
		MaxInbound:      8192,

		CollectAfterSnapshot: 16 << 20,
	}
}

// Validate reports the first invalid field; it does not change c.
func (c Config) Validate() error {
	switch {
	case c.ID == 0:
		return errors.New("raftnode: ID must be non-zero")
	case c.LogVersion > fsm.LogVersion:
		return fmt.Errorf("raftnode: LogVersion %d: this release reads log versions up to %d", c.LogVersion, fsm.LogVersion)
	case c.GroupID == 0:
		return errors.New("raftnode: GroupID must be non-zero")
	case c.Store == nil:
		return errors.New("raftnode: Store is required")
	case c.Transport == nil:
		return errors.New("raftnode: Transport is required")
	case c.TickInterval <= 0:
		return errors.New("raftnode: TickInterval must be positive")
	case c.HeartbeatTicks <= 0 || c.ElectionTicks <= c.HeartbeatTicks:
		return fmt.Errorf("raftnode: ElectionTicks (%d) must exceed HeartbeatTicks (%d) > 0", c.ElectionTicks, c.HeartbeatTicks)
	case c.SnapshotEntries == 0 || c.CatchUpEntries == 0:
		return errors.New("raftnode: SnapshotEntries and CatchUpEntries must be positive")
	case c.MaxBatch <= 0 || c.MaxInFlight <= 0 || c.MaxInbound <= 0:
		return errors.New("raftnode: MaxBatch, MaxInFlight and MaxInbound must be positive")
	case c.CollectAfterSnapshot < 0:
		return errors.New("raftnode: CollectAfterSnapshot must not be negative")
	}
	return nil
}

var (
	// ErrNotLeader is returned (as a *NotLeaderError) when a proposal or a
	// linearizable read is made on a node that is not the leader.
	ErrNotLeader = errors.New("raftnode: not the leader")
	// ErrOutcomeUnknown is returned when leadership was lost after a
	// command was proposed and before it applied: it may or may not apply.
	// Retrying with the same (session, seq) is safe.
	ErrOutcomeUnknown = errors.New("raftnode: outcome unknown: leadership changed before the entry applied")
	// ErrOverloaded is returned when too many proposals or reads are
	// queued; nothing was proposed.
	ErrOverloaded = errors.New("raftnode: overloaded: too many requests in flight")
	// ErrStopped is returned once the node is stopping.
	ErrStopped = errors.New("raftnode: stopped")
	// ErrLogLost is why a node stops (Err) when the leader knows it had
	// log entries that it no longer has: its data dir was lost, wiped or
	// rolled back. Such a member must not rejoin under its old name: the
	// entries it acknowledged may have been counted in a majority, and
	// with them forgotten that majority no longer holds them.
	ErrLogLost = errors.New("raftnode: the leader knows this member had log entries it no longer has (data dir lost, wiped or rolled back); it must not rejoin under its old name")
	// ErrLogVersion is returned (wrapped, with the reason) for a command
	// the cluster's log version does not admit yet: some member may run a
	// release that cannot read it (fsm.ForLogVersion). Nothing was proposed.
	ErrLogVersion = errors.New("raftnode: the cluster's log version is too old for this request")
	// ErrAboveLogVersion is why a node stops (Err) at an entry that needs
	// a newer log version than it reads (Config.LogVersion).
	ErrAboveLogVersion = errors.New("raftnode: stopped rather than apply an entry of a log version this member does not read")
)

// NotLeaderError says who the leader is, when known (Leader 0 if not).
type NotLeaderError struct{ Leader uint64 }

func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return "raftnode: not the leader; no leader known"
	}
	return fmt.Sprintf("raftnode: not the leader; leader is %x", e.Leader)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }
