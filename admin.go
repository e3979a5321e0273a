package baton

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
)

// errNoSessionID refuses an operator call that names no session.
var errNoSessionID = fmt.Errorf("%w: session id 0: name the session", ErrInvalidArgument)

// Holder is one hold of a lock.
type Holder struct {
	SessionID uint64
	// Owner is the holding session's owner label; OwnerKey the key the
	// hold belongs to within that session.
	Owner    string
	OwnerKey string
	// Token is the hold's fencing token.
	Token uint64
	// Count is the reentrant count.
	Count uint32
	// Since is the granting leader's wall clock, for display only.
	Since time.Time
	// Shared: a semaphore's permit or a read/write lock's reader;
	// otherwise the hold is exclusive (a mutex, a writer).
	Shared bool
	// HoldLimit is the hold's limit (WithHoldLimit); 0 if it has none.
	HoldLimit time.Duration
	// LockDelay is the hold's lock-delay (WithLockDelay, or the member's
	// default); 0 if it has none.
	LockDelay time.Duration
	// RevokeDeadline, if not zero, is when the leader ends the hold
	// unless its holder lets go first (Client.Revoke asked it to), and
	// RevokeGrace the grace the revoke gave. The deadline is by the clock
	// of the leader that applied the revoke, for people.
	RevokeDeadline time.Time
	RevokeGrace    time.Duration
	// Value is the hold's value ("" if none): an election's leader's
	// (Election.Campaign, Election.Proclaim).
	Value string
}

// Waiter is one queued acquire of a lock.
type Waiter struct {
	SessionID uint64
	Owner     string
	OwnerKey  string
	// Since is when it queued (the leader's wall clock, display only).
	Since time.Time
	// WaitTimeout is the wait's bound; 0 means until cancelled.
	WaitTimeout time.Duration
	// Shared: it waits for a shared hold (see Holder.Shared).
	Shared bool
}

// PastHold is a hold that ended, in a lock's History.
type PastHold struct {
	SessionID uint64
	Owner     string
	OwnerKey  string
	Token     uint64
	Shared    bool
	// Since and Ended are the wall clocks of the leaders that granted and
	// ended the hold, for display only.
	Since, Ended time.Time
	// EndedIndex is the log entry that ended it.
	EndedIndex uint64
	// How: "released", "session closed", "session expired" (a
	// blacklisted session too), "hold limit expired", "cas-released" or
	// "abandoned" (granted to a wait whose caller had gone away).
	How string
	// Value is the hold's value when it ended (Holder.Value), recorded
	// from log version 13.
	Value string
}

// holdEnds names the API's HoldEnd values.
var holdEnds = map[batonpb.HoldEnd]string{
	batonpb.HoldEnd_HOLD_END_RELEASED:        "released",
	batonpb.HoldEnd_HOLD_END_SESSION_CLOSED:  "session closed",
	batonpb.HoldEnd_HOLD_END_SESSION_EXPIRED: "session expired",
	batonpb.HoldEnd_HOLD_END_HOLD_EXPIRED:    "hold limit expired",
	batonpb.HoldEnd_HOLD_END_CAS_RELEASED:    "cas-released",
	batonpb.HoldEnd_HOLD_END_ABANDONED:       "abandoned",
	batonpb.HoldEnd_HOLD_END_REVOKED:         "revoked",
}

// LockInfo is a lock's full record: its holders and its FIFO queue, the
// head first.
type LockInfo struct {
	Name    string
	Holders []Holder
	Waiters []Waiter
	// Limit is the number of holders the lock admits: 1 for a mutex, N
	// for a semaphore of N, the most readers for a read/write lock; 0 if
	// nobody holds or waits for the lock.
	Limit int
	// History is the lock's recent ended holds, the most recent first
	// (Get only), as History returns them (see LockHistory.Replicated for
	// whether every member tells the same). For people: decide nothing by
	// it.
	History []PastHold
	// DelayedUntil, if not zero, is when the lock's lock-delay ends (a
	// holder's session or hold limit expired): until then it is granted
	// to no one. The clock of the leader that started it; for people.
	DelayedUntil time.Time
}

// LockSummary is a lock as List shows it.
type LockSummary struct {
	Name string
	// Holder is the first of its holders.
	Holder  *Holder
	Waiters int
	// Holders is how many hold it, Limit how many may (1 for a mutex).
	Holders int
	Limit   int
	// DelayedUntil, if not zero, is when its lock-delay ends (LockInfo).
	DelayedUntil time.Time
}

// SessionInfo is a session as Sessions shows it.
type SessionInfo struct {
	ID          uint64
	Owner       string
	TTL         time.Duration
	Blacklisted bool
	Created     time.Time
	Holds       int
}

// Member is one member of the cluster.
type Member struct {
	Name       string
	ID         uint64
	PeerAddr   string
	ClientAddr string
	// Learner: the member receives the log but does not vote (AddMember
	// with learner, until PromoteMember).
	Learner bool
	// LogVersion is the newest log version the member's release reads,
	// as it told the answering member; 0 if not heard from since that
	// member started. The cluster moves to a newer log version (Status)
	// once every member reads it.
	LogVersion uint32
}

func membersOf(ms []*batonpb.Member) []Member {
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, Member{Name: m.GetName(), ID: m.GetId(), PeerAddr: m.GetPeerAddr(), ClientAddr: m.GetClientAddr(), Learner: m.GetLearner(),
			LogVersion: m.GetLogVersion()})
	}
	return out
}

// Status describes a member and the cluster as that member sees it.
type Status struct {
	// Name, ID and Role ("leader", "follower", ...) are the answering
	// member's.
	Name string
	ID   uint64
	Role string
	// Leader, LeaderID and LeaderAddr name the leader it knows ("" and 0
	// if none).
	Leader     string
	LeaderID   uint64
	LeaderAddr string
	Term       uint64
	// CommitIndex and AppliedIndex are the member's Raft indexes.
	CommitIndex  uint64
	AppliedIndex uint64
	Members      []Member
	Sessions     int
	Locks        int
	Version      string
	// LogVersion is the cluster's log version: the leader writes only what
	// every member reads, so members can be upgraded in any order.
	LogVersion uint32
	// DiskFree is the free space of the answering member's data dir, if
	// DiskFreeKnown (it is not where the member cannot measure it).
	DiskFree      uint64
	DiskFreeKnown bool
	// MinFreeDisk is the free space the member keeps (`baton server
	// --min-free-disk`; 0: none), and LowDisk is true while DiskFree is
	// below it: leading, the member then refuses new sessions and
	// acquires with ErrNoSpace.
	MinFreeDisk uint64
	LowDisk     bool
	// ClusterID identifies the cluster; a cluster restored from a backup
	// has its own (SaveSnapshot).
	ClusterID uint64
}

func holderOf(h *batonpb.Holder) Holder {
	if h == nil {
		return Holder{}
	}
	out := Holder{SessionID: h.GetSessionId(), Owner: h.GetOwner(), OwnerKey: h.GetOwnerKey(), Token: h.GetToken(),
		Count: h.GetCount(), Shared: h.GetShared(), Value: h.GetValue()}
	if h.GetSince() != nil {
		out.Since = h.GetSince().AsTime()
	}
	if h.GetHoldLimit() != nil {
		out.HoldLimit = h.GetHoldLimit().AsDuration()
	}
	out.LockDelay = h.GetLockDelay().AsDuration()
	if h.GetRevokeDeadline() != nil {
		out.RevokeDeadline = h.GetRevokeDeadline().AsTime()
	}
	out.RevokeGrace = h.GetRevokeGrace().AsDuration()
	return out
}

// Check reports, linearizably, whether token is the current hold of the
// lock name: for resources that cannot keep fencing state themselves.
func (c *Client) Check(ctx context.Context, name string, token uint64) (bool, error) {
	if err := rules.CheckLockName(name); err != nil {
		return false, invalid(err)
	}
	var held bool
	err := c.invoke(ctx, retryRead, func(ctx context.Context, bc batonpb.BatonClient) error {
		r, err := bc.Check(ctx, &batonpb.CheckRequest{Name: name, Token: token})
		held = r.GetHeld()
		return err
	})
	return held, err
}

// Get returns the lock's record, linearizably. A lock nobody holds or waits
// for has no holders and no waiters.
func (c *Client) Get(ctx context.Context, name string) (*LockInfo, error) {
	if err := rules.CheckLockName(name); err != nil {
		return nil, invalid(err)
	}
	var r *batonpb.GetResponse
	err := c.invoke(ctx, retryRead, func(ctx context.Context, bc batonpb.BatonClient) error {
		var err error
		r, err = bc.Get(ctx, &batonpb.GetRequest{Name: name})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := lockInfoOf(name, r.GetLock())
	out.History = pastHoldsOf(r.GetHistory())
	return &out, nil
}

// LockHistory is a lock's recent ended holds, as History returns them.
type LockHistory struct {
	Name string
	// Holds are the ended holds, the most recent first: at most 8, kept
	// for the 4096 locks that ended a hold most recently.
	Holds []PastHold
	// AppliedIndex is the answering member's applied index when it
	// answered.
	AppliedIndex uint64
	// Replicated: the history is part of the cluster's replicated state
	// (log version 10 and above), so every member tells the same one at
	// the same applied index, and a restart keeps it. If not (a cluster
	// not yet upgraded), it is the answering member's own, since it
	// started or last installed a snapshot.
	Replicated bool
}

// History returns the recent ended holds of lock name (who held it, from
// when to when, how each hold ended and by which entry), linearizably.
// A lock that ended no hold lately has none. For people: decide nothing
// by it (a fencing token is what Check decides by).
func (c *Client) History(ctx context.Context, name string) (*LockHistory, error) {
	if err := rules.CheckLockName(name); err != nil {
		return nil, invalid(err)
	}
	var r *batonpb.HistoryResponse
	err := c.invoke(ctx, retryRead, func(ctx context.Context, bc batonpb.BatonClient) error {
		var err error
		r, err = bc.History(ctx, &batonpb.HistoryRequest{Name: name})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &LockHistory{Name: name, Holds: pastHoldsOf(r.GetHolds()), AppliedIndex: r.GetAppliedIndex(), Replicated: r.GetReplicated()}, nil
}

// pastHoldsOf converts ended holds from the wire.
func pastHoldsOf(ps []*batonpb.PastHold) []PastHold {
	var out []PastHold
	for _, p := range ps {
		out = append(out, PastHold{
			SessionID: p.GetSessionId(), Owner: p.GetOwner(), OwnerKey: p.GetOwnerKey(), Token: p.GetToken(),
			Shared: p.GetShared(), Since: p.GetSince().AsTime(), Ended: p.GetEnded().AsTime(),
			EndedIndex: p.GetEndedIndex(), How: holdEnds[p.GetHow()], Value: p.GetValue(),
		})
	}
	return out
}

// lockInfoOf converts a lock's record (nil: free).
func lockInfoOf(name string, l *batonpb.Lock) LockInfo {
	out := LockInfo{Name: name, Limit: int(l.GetLimit())}
	if l.GetDelayedUntil() != nil {
		out.DelayedUntil = l.GetDelayedUntil().AsTime()
	}
	for _, h := range l.GetHolders() {
		out.Holders = append(out.Holders, holderOf(h))
	}
	for _, w := range l.GetWaiters() {
		ow := Waiter{SessionID: w.GetSessionId(), Owner: w.GetOwner(), OwnerKey: w.GetOwnerKey(), Shared: w.GetShared()}
		if w.GetSince() != nil {
			ow.Since = w.GetSince().AsTime()
		}
		if w.GetWaitTimeout() != nil {
			ow.WaitTimeout = w.GetWaitTimeout().AsDuration()
		}
		out.Waiters = append(out.Waiters, ow)
	}
	return out
}

// List returns every lock whose name starts with prefix, in name order,
// following the server's pages. Each page is linearizable; the whole list
// is not one snapshot.
func (c *Client) List(ctx context.Context, prefix string) ([]LockSummary, error) {
	if err := rules.CheckPrefix(prefix); err != nil {
		return nil, invalid(err)
	}
	var out []LockSummary
	token := ""
	for {
		var r *batonpb.ListResponse
		err := c.invoke(ctx, retryRead, func(ctx context.Context, bc batonpb.BatonClient) error {
			var err error
			r, err = bc.List(ctx, &batonpb.ListRequest{Prefix: prefix, PageToken: token, PageSize: rules.MaxPageSize})
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, l := range r.GetLocks() {
			s := LockSummary{Name: l.GetName(), Waiters: int(l.GetWaiters()), Holders: int(l.GetHolders()), Limit: int(l.GetLimit())}
			if l.GetDelayedUntil() != nil {
				s.DelayedUntil = l.GetDelayedUntil().AsTime()
			}
			if l.GetHolder() != nil {
				h := holderOf(l.GetHolder())
				s.Holder = &h
			}
			out = append(out, s)
		}
		if token = r.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}

// Sessions returns every live session, by id, following the server's
// pages.
func (c *Client) Sessions(ctx context.Context) ([]SessionInfo, error) {
	var out []SessionInfo
	var after uint64
	for {
		var r *batonpb.ListSessionsResponse
		err := c.invoke(ctx, retryRead, func(ctx context.Context, bc batonpb.BatonClient) error {
			var err error
			r, err = bc.ListSessions(ctx, &batonpb.ListSessionsRequest{AfterId: after, PageSize: rules.MaxPageSize})
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, s := range r.GetSessions() {
			si := SessionInfo{ID: s.GetId(), Owner: s.GetOwner(), TTL: s.GetTtl().AsDuration(), Blacklisted: s.GetBlacklisted(), Holds: int(s.GetHolds())}
			if s.GetCreated() != nil {
				si.Created = s.GetCreated().AsTime()
			}
			out = append(out, si)
		}
		if after = r.GetNextAfterId(); after == 0 {
			return out, nil
		}
	}
}

// Blacklist marks a session: it can no longer acquire, its keepalives are
// refused and it expires in the normal way, releasing its holds. This is
// how an operator evicts a stuck process safely. Blacklisting twice is
// harmless, so the call is retried across leader changes.
func (c *Client) Blacklist(ctx context.Context, sessionID uint64) error {
	if sessionID == 0 {
		return errNoSessionID
	}
	return c.invoke(ctx, retryRead, func(ctx context.Context, bc batonpb.BatonClient) error {
		_, err := bc.Blacklist(ctx, &batonpb.BlacklistRequest{SessionId: sessionID})
		return err
	})
}

// CasRelease ends the hold of lock name only if its holder still is
// session sessionID (and has token, when token is not 0): for supervisors
// freeing the locks of a process they know has died. It is retried only
// when it surely did not apply, or when the connection broke mid-call;
// after a leader change mid-call it returns an error matching
// ErrOutcomeUnknown, and so does the answer of a retry after a broken
// connection (matching ErrNotFound or ErrTokenMismatch too, when the hold
// was gone by then: the lost attempt may have released it). The holding
// session's client, if it still runs, is told when the release applies:
// its Lease is lost with an error matching ErrNotHeld. That push is sent
// once, to the streams connected then; a client that is reconnecting
// misses it and learns when it next touches the lock, so release holds
// of live processes with Blacklist, which ends the whole session safely.
func (c *Client) CasRelease(ctx context.Context, name string, sessionID, token uint64) error {
	if err := rules.CheckLockName(name); err != nil {
		return invalid(err)
	}
	if sessionID == 0 {
		return errNoSessionID
	}
	return c.invoke(ctx, retryNotApplied, func(ctx context.Context, bc batonpb.BatonClient) error {
		_, err := bc.CasRelease(ctx, &batonpb.CasReleaseRequest{Name: name, SessionId: sessionID, Token: token})
		return err
	})
}

// Status describes the cluster as the member the client reaches first sees
// it (the leader, when the client knows it).
func (c *Client) Status(ctx context.Context) (*Status, error) {
	return c.status(ctx, retryRead)
}

// status is Status with the retry policy: Dial's first call fails at once
// when every endpoint refuses the connection (retryDial).
func (c *Client) status(ctx context.Context, policy retryPolicy) (*Status, error) {
	var r *batonpb.StatusResponse
	err := c.invoke(ctx, policy, func(ctx context.Context, bc batonpb.BatonClient) error {
		var err error
		r, err = bc.Status(ctx, &batonpb.StatusRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := &Status{
		Name: r.GetName(), ID: r.GetId(), Role: r.GetRole(), Leader: r.GetLeader(), LeaderID: r.GetLeaderId(),
		LeaderAddr: r.GetLeaderAddr(), Term: r.GetTerm(), CommitIndex: r.GetCommitIndex(), AppliedIndex: r.GetAppliedIndex(),
		Sessions: int(r.GetSessions()), Locks: int(r.GetLocks()), Version: r.GetVersion(),
		LogVersion: r.GetLogVersion(), DiskFree: r.GetDiskFreeBytes(), DiskFreeKnown: r.DiskFreeBytes != nil,
		MinFreeDisk: r.GetMinFreeDiskBytes(), LowDisk: r.GetLowDisk(), ClusterID: r.GetClusterId(),
	}
	out.Members = membersOf(r.GetMembers())
	return out, nil
}

// AddMember adds a member to the cluster: a voter, or with learner a
// member that receives the log without voting until PromoteMember (the
// safer way: a voter that is still catching up counts in the majority
// without helping it). Then start the new member with an empty data dir,
// Join, and the returned initialCluster (`baton server --join
// --initial-cluster ...`). One membership change at a time: while another
// applies it fails with ErrAborted; after a leader change or a broken
// connection mid-call, with an error matching ErrOutcomeUnknown (also
// ErrAlreadyExists when a retry found the member added: Status tells
// whether it applied). PromoteMember and RemoveMember answer the same way.
func (c *Client) AddMember(ctx context.Context, name, peerAddr string, learner bool) (members []Member, initialCluster string, err error) {
	if err := invalid(cmp.Or(rules.CheckMemberName(name), rules.CheckPeerAddr(peerAddr))); err != nil {
		return nil, "", err
	}
	err = c.invoke(ctx, retryNotApplied, func(ctx context.Context, bc batonpb.BatonClient) error {
		r, err := bc.AddMember(ctx, &batonpb.AddMemberRequest{Name: name, PeerAddr: peerAddr, Learner: learner})
		if err == nil {
			members, initialCluster = membersOf(r.GetMembers()), r.GetInitialCluster()
		}
		return err
	})
	return members, initialCluster, err
}

// PromoteMember makes a learner a voter, once its log is within 1000
// entries of the leader's commit index (else FailedPrecondition: retry).
func (c *Client) PromoteMember(ctx context.Context, name string) ([]Member, error) {
	if err := rules.CheckMemberName(name); err != nil {
		return nil, invalid(err)
	}
	var members []Member
	err := c.invoke(ctx, retryNotApplied, func(ctx context.Context, bc batonpb.BatonClient) error {
		r, err := bc.PromoteMember(ctx, &batonpb.PromoteMemberRequest{Name: name})
		if err == nil {
			members = membersOf(r.GetMembers())
		}
		return err
	})
	return members, err
}

// RemoveMember removes a member; it stops once it applies its removal
// (a leader steps down first). The last voter cannot be removed.
func (c *Client) RemoveMember(ctx context.Context, name string) ([]Member, error) {
	if err := rules.CheckMemberName(name); err != nil {
		return nil, invalid(err)
	}
	var members []Member
	err := c.invoke(ctx, retryNotApplied, func(ctx context.Context, bc batonpb.BatonClient) error {
		r, err := bc.RemoveMember(ctx, &batonpb.RemoveMemberRequest{Name: name})
		if err == nil {
			members = membersOf(r.GetMembers())
		}
		return err
	})
	return members, err
}

// TransferLeadership hands the leader's office to member to (empty: the
// voter whose log is furthest along) and returns the member that leads
// once it does: for maintenance of the leader's machine without an
// election timeout (clients see at most a retry). An operator call; with
// authentication on, it needs admin over every name.
func (c *Client) TransferLeadership(ctx context.Context, to string) (leader string, err error) {
	if to != "" {
		if err := rules.CheckMemberName(to); err != nil {
			return "", invalid(err)
		}
	}
	err = c.invoke(ctx, retryNotApplied, func(ctx context.Context, bc batonpb.BatonClient) error {
		r, err := bc.TransferLeadership(ctx, &batonpb.TransferLeadershipRequest{To: to})
		if err == nil {
			leader = r.GetLeader()
			if addr := r.GetLeaderAddr(); addr != "" {
				c.setLeader(addr)
			}
		}
		return err
	})
	return leader, err
}
