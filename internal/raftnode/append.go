package raftnode

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// mailbox is an unbounded FIFO of raft messages between the Ready loop and
// the append worker. Neither side ever blocks on the other: a bounded
// channel each way could deadlock (the loop full of work to hand over, the
// worker full of responses to hand back), and dropping is not allowed
// (local storage messages must be processed, in order, exactly once).
// Its size is bounded by raft itself: MaxUncommittedEntriesSize and
// MaxInflightMsgs limit what can be outstanding.
type mailbox struct {
	mu     sync.Mutex
	msgs   []*raftpb.Message
	signal chan struct{} // holds a token while msgs is non-empty
}

func newMailbox() *mailbox { return &mailbox{signal: make(chan struct{}, 1)} }

func (b *mailbox) put(msgs ...*raftpb.Message) {
	if len(msgs) == 0 {
		return
	}
	b.mu.Lock()
	b.msgs = append(b.msgs, msgs...)
	b.mu.Unlock()
	select {
	case b.signal <- struct{}{}:
	default:
	}
}

// take returns everything queued, oldest first.
func (b *mailbox) take() []*raftpb.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	msgs := b.msgs
	b.msgs = nil
	return msgs
}

func (b *mailbox) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.msgs)
}

// appendStats are the append worker's counters; it updates them while the
// loop publishes them, hence atomics.
type appendStats struct {
	fsyncs, entries, saveNanos atomic.Uint64
}

// runAppender is the append worker (raft's LocalAppendThread): it makes
// the MsgStorageAppend messages of the Ready loop durable, in order, and
// then delivers their responses. Everything queued while one write runs
// goes into the next write and its one fdatasync (group commit), while the
// loop goes on stepping acknowledgements and proposals and sending MsgApps
// to followers.
func (n *Node) runAppender() {
	defer close(n.appendDone)
	for {
		select {
		case <-n.appends.signal:
		case <-n.stopC:
			return
		case <-n.doneC: // the loop stopped serving: nothing more to write
			return
		}
		if err := n.persist(n.appends.take()); err != nil {
			select {
			case n.appendErr <- err:
			default:
			}
			return
		}
	}
}

// Persist makes everything the loop handed to storage durable and queues
// the responses, as the append worker does. Manual mode only: the caller
// decides when the disk write completes (a simulated disk's latency), and a
// crash before Persist loses the writes, which nobody was told of.
func (n *Node) Persist() error {
	return n.persist(n.appends.take())
}

// PendingWrites reports whether storage work waits for Persist.
func (n *Node) PendingWrites() bool { return n.appends.len() > 0 }

// persist writes a batch of MsgStorageAppend messages as few log writes as
// possible, then delivers their responses: to this node's loop (the
// MsgStorageAppendResp that tells raft what is durable) and to peers (the
// MsgAppResp and votes that promise durable state). Nothing is answered
// before the write is durable.
func (n *Node) persist(batch []*raftpb.Message) error {
	if len(batch) == 0 {
		return nil
	}
	// Consecutive appends merge into one Save: a later message's entries
	// replace the earlier ones from its first index on, as they would on
	// disk, and its hard state supersedes theirs. A snapshot is written on
	// its own, between the merged runs around it.
	var (
		hs   *raftpb.HardState
		ents []*raftpb.Entry
		sync bool
	)
	flush := func() error {
		if hs == nil && len(ents) == 0 {
			return nil
		}
		// Raft's MustSync: entries, or a new term or vote, must be durable
		// before anyone hears of them; a commit index alone need not be.
		if hs != nil && (hs.GetTerm() != n.savedTerm || hs.GetVote() != n.savedVote) {
			sync = true
			n.savedTerm, n.savedVote = hs.GetTerm(), hs.GetVote()
		}
		t0 := time.Now()
		if err := n.cfg.Store.Save(hs, ents, sync); err != nil {
			return fmt.Errorf("save entries: %w", err)
		}
		took := time.Since(t0)
		n.astats.saveNanos.Add(uint64(took))
		if sync {
			n.fsyncLatency.observe(took) // before the count: Metrics reads the count first
			n.astats.fsyncs.Add(1)
		}
		n.astats.entries.Add(uint64(len(ents)))
		if hs != nil {
			n.writtenCommit.Store(hs.GetCommit())
			if err := n.ms.SetHardState(hs); err != nil {
				return err
			}
		}
		if len(ents) > 0 {
			if err := n.ms.Append(ents); err != nil {
				return err
			}
		}
		hs, ents, sync = nil, nil, false
		return nil
	}
	for _, m := range batch {
		snap := m.GetSnapshot()
		hasSnap := snap != nil && !raft.IsEmptySnap(snap)
		if hasSnap {
			if err := flush(); err != nil {
				return err
			}
			if err := n.cfg.Store.SaveSnapshot(snap); err != nil {
				return fmt.Errorf("save snapshot: %w", err)
			}
			// The snapshot's hard state is synced with it, although only
			// the commit index moved: the store recovers only snapshots at
			// or below the durable commit (wal.ValidSnapshotEntries), so a
			// crash that lost this commit would drop a snapshot this node
			// acknowledged, and the leader would later panic with
			// "tocommit(N) is out of range [lastIndex(M)]" (etcd issue
			// 10219; found by internal/sim).
			sync = true
			if err := n.ms.ApplySnapshot(metadataOnly(snap)); err != nil {
				return fmt.Errorf("apply snapshot to raft storage: %w", err)
			}
		}
		if h := hardStateOf(m); !raft.IsEmptyHardState(h) {
			hs = h
		}
		if es := m.GetEntries(); len(es) > 0 {
			first := es[0].GetIndex()
			keep := 0
			for keep < len(ents) && ents[keep].GetIndex() < first {
				keep++
			}
			ents = append(ents[:keep], es...)
			sync = true
		}
		if hasSnap {
			// The hard state that commits the snapshot is durable before
			// any later entry is written: otherwise a crash in the middle
			// of one merged write could keep entries after the snapshot
			// but not that hard state, and recovery, falling back to an
			// older snapshot, would find a hole in the log (found by a
			// long internal/sim soak).
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	var out []*raftpb.Message
	for _, m := range batch {
		for _, r := range m.GetResponses() {
			if r.GetTo() == n.cfg.ID || r.GetTo() == raft.LocalAppendThread || r.GetTo() == raft.LocalApplyThread {
				n.locals.put(r)
			} else {
				out = append(out, r)
			}
		}
	}
	if len(out) > 0 {
		n.cfg.Transport.Send(n.cfg.GroupID, out)
	}
	return nil
}

// hardStateOf is the hard state a MsgStorageAppend carries in its Term,
// Vote and Commit fields; empty when it carries none.
func hardStateOf(m *raftpb.Message) *raftpb.HardState {
	if m.Term == nil && m.Vote == nil && m.Commit == nil {
		return &raftpb.HardState{}
	}
	return &raftpb.HardState{Term: new(m.GetTerm()), Vote: new(m.GetVote()), Commit: new(m.GetCommit())}
}
