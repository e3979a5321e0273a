package e2e

import (
	"bytes"
	"fmt"
	"path/filepath"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
	"github.com/batonlock/baton/internal/storage"
)

// committedLog is the committed part of one stopped member's Raft log.
type committedLog struct {
	name     string
	snap     *raftpb.Snapshot // nil if none
	snapIdx  uint64
	commit   uint64
	entries  []*raftpb.Entry // from snapIdx+1 to commit
	firstIdx uint64
}

// readCommittedLog opens a stopped member's store (DataDir/group-1, as
// embed lays it out) and returns what it had committed.
func readCommittedLog(name, dataDir string) (*committedLog, error) {
	st, err := storage.Open(filepath.Join(dataDir, "group-1"), nil)
	if err != nil {
		return nil, fmt.Errorf("open store of %s: %w", name, err)
	}
	defer st.Close()
	snap, hs, ents := st.State()
	l := &committedLog{name: name, snap: snap, commit: hs.GetCommit()}
	if snap != nil {
		l.snapIdx = snap.GetMetadata().GetIndex()
	}
	l.firstIdx = l.snapIdx + 1
	for _, e := range ents {
		if e.GetIndex() > l.commit {
			break
		}
		if e.GetIndex() < l.firstIdx {
			continue
		}
		l.entries = append(l.entries, e)
	}
	return l, nil
}

// entry returns the entry at index, if the log holds it.
func (l *committedLog) entry(index uint64) *raftpb.Entry {
	if index < l.firstIdx || index > l.commit {
		return nil
	}
	i := int(index - l.firstIdx)
	if i >= len(l.entries) || l.entries[i].GetIndex() != index {
		return nil
	}
	return l.entries[i]
}

// compareLogs checks Raft's log matching on what the members committed:
// wherever two members both hold a committed entry it is the same entry.
func compareLogs(logs []*committedLog) []string {
	var bad []string
	for i := range logs {
		for j := i + 1; j < len(logs); j++ {
			a, b := logs[i], logs[j]
			lo, hi := max(a.firstIdx, b.firstIdx), min(a.commit, b.commit)
			for idx := lo; idx <= hi; idx++ {
				ea, eb := a.entry(idx), b.entry(idx)
				if ea == nil || eb == nil {
					bad = append(bad, fmt.Sprintf("%s or %s lacks committed entry %d", a.name, b.name, idx))
					break
				}
				if ea.GetTerm() != eb.GetTerm() || ea.GetType() != eb.GetType() || !bytes.Equal(ea.GetData(), eb.GetData()) {
					bad = append(bad, fmt.Sprintf("committed entry %d differs: %s has term %d, %s has term %d", idx, a.name, ea.GetTerm(), b.name, eb.GetTerm()))
					break
				}
			}
		}
	}
	return bad
}

// hold is one hold of a lock as the log tells it.
type hold struct {
	lock    string
	token   uint64
	session uint64
	start   uint64 // index of the granting entry (== token)
	end     uint64 // index of the entry that ended it; 0 if still held
}

// replay is the outcome of applying a committed log to a fresh Machine.
type replay struct {
	from, to uint64 // first and last index applied
	holds    map[string][]*hold
	cmdAt    map[[2]uint64]uint64 // (session, seq) -> index of its first entry
	opens    map[uint64]bool      // indices of OpenSession entries
	hash     string
	bad      []string
	entries  int
}

// replayLog applies l to a fresh fsm.Machine (restored from l's snapshot
// if it has one) and checks, after every entry, that each of locks has at
// most one holder and that a new hold's token is the index of the entry
// that granted it (so tokens strictly increase per lock).
func replayLog(l *committedLog, locks []string) *replay {
	m := fsm.New()
	r := &replay{holds: map[string][]*hold{}, cmdAt: map[[2]uint64]uint64{}, opens: map[uint64]bool{}}
	if l.snap != nil {
		if err := m.Restore(l.snap.GetData()); err != nil {
			r.bad = append(r.bad, fmt.Sprintf("%s: restore snapshot at %d: %v", l.name, l.snapIdx, err))
			return r
		}
	}
	r.from = l.firstIdx
	cur := map[string]*hold{}
	for _, name := range locks {
		if lk, ok := m.Lock(name); ok && len(lk.GetHolders()) > 0 {
			h := lk.GetHolders()[0]
			cur[name] = &hold{lock: name, token: h.GetToken(), session: h.GetSessionId(), start: h.GetToken()}
			r.holds[name] = append(r.holds[name], cur[name])
		}
	}
	for _, e := range l.entries {
		idx := e.GetIndex()
		r.to = idx
		if e.GetType() != raftpb.EntryNormal || len(e.GetData()) == 0 {
			m.SetApplied(idx)
			continue
		}
		cmd := &fsmpb.Command{}
		if err := proto.Unmarshal(e.GetData(), cmd); err != nil {
			r.bad = append(r.bad, fmt.Sprintf("%s: entry %d does not decode: %v", l.name, idx, err))
			return r
		}
		r.entries++
		m.Apply(idx, cmd)
		if _, ok := cmd.GetOp().(*fsmpb.Command_OpenSession); ok {
			r.opens[idx] = true
		}
		if k := [2]uint64{cmd.GetSessionId(), cmd.GetSeq()}; k[0] != 0 && k[1] != 0 {
			if _, seen := r.cmdAt[k]; !seen {
				r.cmdAt[k] = idx
			}
		}
		for _, name := range locks {
			lk, _ := m.Lock(name)
			hs := lk.GetHolders()
			if len(hs) > 1 {
				r.bad = append(r.bad, fmt.Sprintf("entry %d: lock %s has %d holders", idx, name, len(hs)))
			}
			var now *fsmpb.Holder
			if len(hs) > 0 {
				now = hs[0]
			}
			prev := cur[name]
			if prev != nil && (now == nil || now.GetToken() != prev.token) {
				prev.end = idx
				cur[name] = nil
			}
			if now != nil && cur[name] == nil {
				if now.GetToken() != idx {
					r.bad = append(r.bad, fmt.Sprintf("entry %d: new hold of %s has token %d, not the granting index", idx, name, now.GetToken()))
				}
				if prev != nil && now.GetToken() <= prev.token {
					r.bad = append(r.bad, fmt.Sprintf("entry %d: token of %s went from %d to %d", idx, name, prev.token, now.GetToken()))
				}
				h := &hold{lock: name, token: now.GetToken(), session: now.GetSessionId(), start: idx}
				cur[name] = h
				r.holds[name] = append(r.holds[name], h)
			}
		}
	}
	r.hash = m.Hash()
	return r
}

// holdOf finds the hold of lock with token.
func (r *replay) holdOf(lock string, token uint64) *hold {
	for _, h := range r.holds[lock] {
		if h.token == token {
			return h
		}
	}
	return nil
}
