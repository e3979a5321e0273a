// Package sim is Baton's deterministic cluster simulation (issue 4,
// TigerBeetle / FoundationDB style). It runs the real raftnode Ready loop
// (in its manual mode), the real fsm and the real liveness tracker of 3 or
// 5 members in one goroutine, over a simulated network (delay, drop,
// duplicate, reorder, partition, heal), simulated disks (a write completes
// after a random latency while the node runs on, a crash loses what was
// not fsynced and may tear the last write, and a snapshot purges the log as
// eagerly as the store may), a virtual clock (raft
// ticks, session deadlines, heartbeats), and simulated clients that open
// sessions, try and wait for locks, try several in one acquire_many (each
// on its own or all or none), take again mutexes they hold (reentrant
// counts, Config.Reentrant), cancel waits, release, check, stop
// heartbeating and write to a fenced resource with their tokens, with
// lock-delays on some locks (Config.LockDelays), and an operator that
// revokes holds (Config.Revokes). With Config.Keys each client is two
// workers sharing its session: each acquire is under one of two owner
// keys, and a queued wait may be left waiting while the client goes on
// (keys.go), so a (session, key) may wait for two locks at once. Each
// session has a secret whose hash every request for it shows; with
// Config.Strangers a stranger acts for clients' sessions without it
// (releases, acquires with a high seq, closes, keepalives, renewals).
//
// Everything random comes from one seed: the scenario's math/rand/v2
// generator and, in tests, crypto/rand (which raft uses for election
// jitter) made deterministic with testing/cryptotest.SetGlobalRandom. A
// seed therefore replays bit for bit; Result.TraceHash fingerprints a run.
//
// The request handling of internal/server (propose and wait, the hub that
// pushes grants, keepalive's Check → ReadIndex → Heartbeat) cannot run here
// as is, since it blocks; server.go in this package mirrors it step for
// step on the non-blocking raftnode API (Submit, StartRead, futures),
// including abandonWait for a queued acquire whose caller went away, and
// (Config.DiskGuard, space.go) admitGrowth: a leader whose data dir is
// low refuses opens and acquires NO_SPACE by internal/server's own rule
// (DiskGuard.Low, AddsNothing), after a read barrier, and an acquire
// only once its seq fence settled the seq (SubmitRefusal). A leader holds
// a waiting acquire that would queue until its next proposal, or in
// manual mode the next tick (raftnode's defer.go), so the faults meet held
// proposals too (Stats.ProposalsDeferred).
//
// Faults: member crashes (often the leader) with restart from what the
// disk kept, crashes in the middle of a write (torn tail), isolation of a
// member (both ways or one way) and random splits, message loss,
// duplication and delay (hence reordering), member process pauses, slow
// raft clocks on one member, slow client links, clients that stop
// heartbeating, clients that pause between their validity check and their
// write, dropped connections of waiting clients, (Config.DiskGuard) data
// dirs low on space for a while, on one member or all, and (Config.Members)
// membership changes on the leader: members added with an empty disk as
// learners or voters, learners promoted, members removed (the leader
// too), each stopping for good once told. After Config.Chaos
// the network heals, every member restarts, clients stop, and the run goes
// on until it is quiet (every request answered, every session expired,
// every member caught up: calm.go), or for Config.Calm at most, before
// the final checks. In the calm, while the cluster is idle (caught up,
// nothing in flight) until its leader's next deadline, every member's
// raft clock stands still to that time instead of ticking out the
// heartbeats in between (idle.go).
//
// Checkers (check.go, model.go; space.go for k/orphan):
//
//	a. at most one holder per lock: on every member after every Ready that
//	   applied something, and after every entry of the committed log
//	   replayed into a fresh fsm.Machine; and in that replay, each
//	   acquire_many answers each of its locks, holds the ones it answers
//	   granted, leaves the others as they were, and with all grants every
//	   lock or none (a/many);
//	b. per lock, each new holder's token is above every earlier one (log
//	   replay), and every token a client is told exceeds the last (model);
//	c. the fenced resource of each lock accepts a write only with a token
//	   >= the highest it has seen; every accepted write must have been
//	   issued (client time) after its token's grant was committed, by the
//	   session (and owner key) the log says holds that token, and before
//	   the entry that ended that hold was committed anywhere;
//	d. every member applies the same command with the same result at an
//	   index (or the same membership change), including after restarts; every acknowledged result is the
//	   log's entry at its index and its replayed result, and lies within
//	   every member's applied index after heal;
//	e. client histories (try, wait, cancel, release, check, close, and the
//	   leaders' expiries and the members' abandons of waits as operations) are
//	   linearizable against a per-lock sequential model (porcupine):
//	   a mutex's holder, a (session, owner key), and its reentrant count
//	   (each acquire adds one count however often retried; a release's
//	   remaining count must be the model's), or a semaphore's set of
//	   holds (at most its limit, an exclusive hold alone, one per
//	   (session, key)); unknown outcomes may take effect at any time
//	   after their call (an acquire the log never granted is left out:
//	   unknown.go). The model does not follow waiters, so a semaphore's
//	   BUSY is only held to some other owner holding it (a free permit
//	   behind a queued writer is BUSY by FIFO);
//	f. after heal every member of the group the leader ends with is up,
//	   has the same voters and learners, the same applied index and
//	   fsm.Hash, equal to the replayed log's (membership changes
//	   replayed with raftnode.ApplyMembership); no member that stopped
//	   as removed is in the group.
//	g. no request of a stranger succeeds: each is refused for its secret,
//	   by the state machine or the leader's tracker, or finds nothing to
//	   act on; and no client is told that its own request lacked its
//	   secret, or that its seq is below its session's window (which
//	   only its own requests move).
//	h. (Config.LockDelays) in the replayed log no entry grants a lock in
//	   its lock-delay, every EndLockDelay ends the delay that runs, and
//	   none was proposed before the delay's length had passed since the
//	   entry that started it.
//	i. every acquire the replayed log refused with DEADLOCK was one: the
//	   cycle it names holds in the state before the entry, and the
//	   sessions it names could never go on, even if every other session
//	   let go of everything (checkDeadlock); and every wait it ended as
//	   deadlocked at a grant or cancel (log version 14) was queued, its
//	   node waits for nothing after the entry, and its cycle holds
//	   (checkDeadlockEnd). Nodes are (session, owner key). In e, such a
//	   refusal needs the lock held by another owner, as BUSY does (or,
//	   for a wait ended behind its own owner's hold, by that owner).
//	j. (Config.Revokes) in the replayed log a hold asked again keeps its
//	   first revocation, every EndRevokedHold that applies ends the one
//	   hold being revoked that it names, and none was proposed before
//	   the grace had passed since the RevokeHold entry. The holders told
//	   stop using their holds (c holds them to it), and the model (e)
//	   takes the end of a revoked hold as a hold limit's expiry.
//	k. in the replayed log a seq fence (a session's CancelWait of its own
//	   seq, which a leader proposes before it refuses a request outside
//	   the log: fsm.SeqFence) changes no lock, and once one settled its
//	   seq no request of that seq applies: each is refused (REFUSED, or
//	   stale) and changes no lock. In e, a retry answered REFUSED had no
//	   effect, and so had an acquire answered NO_SPACE, whatever its
//	   earlier attempts. An open has no seq to fence: a delayed earlier
//	   attempt of an open answered NO_SPACE may still open a session its
//	   client never learns of, which expires at its TTL; no command of
//	   such a session may be in the log (k/orphan: it never holds or
//	   waits for anything).
//
// Only _test.go files import this package.
package sim
