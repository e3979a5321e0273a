package fsm

import (
	"slices"

	"github.com/google/btree"

	"github.com/batonlock/baton/api/protofield"
)

// Frozen is the state of a Machine at one applied index, which a goroutine
// encodes (Encode) while the Machine goes on applying. At a million locks
// encoding takes most of a second; a Machine that held still for it kept
// every client waiting as long, every SnapshotEntries entries.
//
// The two share nothing that either changes, so neither waits for the
// other. Freeze clones the Machine's two sorted trees of record states
// (lockState, sessionState), which google/btree does lazily: the clone
// and the Machine's tree share nodes, and whichever changes a shared node
// copies it first. The states are copy-on-write too: from the freeze on,
// Apply changes no state the frozen trees hold. Before its first change
// of one (changeLock, changeSession) it copies it, and puts the copy in
// its tree and in the record's handle (lock, session), through which the
// rest of the Machine reaches it. A state is the frozen state's if it
// was made before the freeze: each handle keeps the epoch of its state,
// and Freeze starts a new epoch (shares). Of a session (the state's own,
// a holder's, a waiter's) the encoder reads only what it was opened with
// (id, owner, TTL, ...), which never changes.
//
// So fsm needs no lock and no scheduler: whatever hands the Frozen to the
// encoding goroutine and its encoding back (raftnode: a goroutine's start
// and a channel) orders the two sides.
//
// The encoding is the one Snapshot gives at the frozen index, byte for
// byte: TestRandomStream freezes at random points and checks it (freezer,
// in frozen_test.go), with entries applied in between and -race watching;
// TestSnapshotBytesArePinned checks it against pinned bytes; raftnode's
// TestSnapshotsWhileApplying checks a member's snapshots against a replay
// of its log.
type Frozen struct {
	applied    uint64
	sessions   *btree.BTreeG[*sessionState]
	locks      *btree.BTreeG[*lockState]
	members    []Member
	clusterID  uint64
	logVersion uint32
	tail       []byte // the auth, audit and signing key fields, encoded at Freeze (small)
	// past is the history in eviction order when it is replicated, else
	// nil (past.go: pastLock says what Apply leaves alone).
	past []*pastLock
	// historyFloor is the history's floor (a number: Apply changes
	// only the Machine's).
	historyFloor uint64
	hint         int

	// Of the encoding, once Encode returned: for Thaw, on the applying
	// goroutine after the caller has the encoding.
	done          bool
	size, records int

	// between, if set, runs after each record the encoder writes: tests
	// apply entries there, at every point of an encoding.
	between func()
}

// encodeRoom is the room a large buffer from Buffers keeps ahead of the
// encoder (or grows to first): a record fits in it unless it is very large.
const encodeRoom = 1 << 20

// Freeze returns the state as of now, to be encoded by Frozen.Encode on any
// goroutine while Apply goes on, and handed back to Thaw by the applying
// goroutine once encoded. One Frozen at a time: Freeze panics while another
// is out. It takes microseconds: the trees are cloned lazily.
func (m *Machine) Freeze() *Frozen {
	if m.frozen != nil {
		panic("fsm: Freeze while a frozen state is being encoded")
	}
	m.epoch++
	f := &Frozen{
		applied:    m.applied,
		sessions:   m.sessionTree.Clone(),
		locks:      m.lockTree.Clone(),
		members:    m.Members(),
		clusterID:  m.clusterID,
		logVersion: m.logVersion,
		tail:       m.encodeTail(),
		hint:       m.encodedSizeHint(),
	}
	if m.historyReplicated() {
		f.past = m.past.inEvictionOrder()
		f.historyFloor = m.past.floor
	}
	m.frozen = f
	return f
}

// Thaw ends f, once Encode has returned (or was never called): Apply stops
// copying the states it changes first. It is called on the applying
// goroutine. f's size sizes the next encoding's buffer. After a Restore, f
// is no longer the Machine's, and Thaw only forgets it.
func (m *Machine) Thaw(f *Frozen) {
	if m.frozen != f {
		return
	}
	m.frozen = nil
	if f.done {
		m.lastSize, m.lastRecords = f.size, f.records
	}
}

// shares reports whether the frozen state, if any, holds a state made in
// epoch: it holds every state made before it was frozen.
func (m *Machine) shares(epoch uint64) bool { return m.frozen != nil && epoch != m.epoch }

// created is called for a record Apply creates: its state is in no frozen
// state, and its changes need no copy.
func (m *Machine) created(r any) {
	switch r := r.(type) {
	case *lock:
		r.epoch = m.epoch
	case *session:
		r.epoch = m.epoch
	}
}

// changeLock is called before any change to l's state (its holders, their
// records included, or its waiters): while a frozen state shares the
// state, l gets a copy of its own, in l and in the lock tree. Pointers
// into the old state's holders and waiters then point at the frozen
// state's: changeHolder gives a holder's new place.
func (m *Machine) changeLock(l *lock) {
	if !m.shares(l.epoch) {
		return
	}
	l.lockState, l.epoch = l.lockState.clone(), m.epoch
	if _, ok := m.lockTree.ReplaceOrInsert(l.lockState); !ok {
		panic("fsm: change of lock " + quote(l.name) + ", which is no longer in the state")
	}
}

// changeHolder is changeLock before a change to the holder record h of l,
// and returns h's place in l's state from then on.
func (m *Machine) changeHolder(l *lock, h *holder) *holder {
	if !m.shares(l.epoch) {
		return h
	}
	i := 0
	for i < len(l.holders) && &l.holders[i] != h {
		i++
	}
	if i == len(l.holders) {
		panic("fsm: a holder record that is not one of lock " + quote(l.name))
	}
	m.changeLock(l)
	return &l.holders[i]
}

// changeSession is changeLock for a session: before any change to its
// state (fields, cached results, holds).
func (m *Machine) changeSession(s *session) {
	if !m.shares(s.epoch) {
		return
	}
	s.sessionState, s.epoch = s.sessionState.clone(), m.epoch
	if _, ok := m.sessionTree.ReplaceOrInsert(s.sessionState); !ok {
		panic("fsm: change of a session that is no longer in the state")
	}
}

// claim marks the cached result of seq, which s keeps, as claimed (the
// client may act on it), and returns it.
func (m *Machine) claim(s *session, seq uint64) *cachedResult {
	m.changeSession(s)
	c := s.cachedEntry(seq)
	c.claimed = true
	return c
}

// clone returns a copy of l that shares nothing Apply changes in place:
// the holders (in the copy's one if they were in l's), the queue (its
// waiters, lock-delay and revocations).
func (l *lockState) clone() *lockState {
	c := &lockState{name: l.name, one: l.one}
	if cap(l.holders) > 0 && &l.holders[:1][0] == &l.one[0] {
		c.holders = c.one[:len(l.holders)]
	} else {
		c.holders = slices.Clone(l.holders)
	}
	if l.queue != nil {
		c.queue = &queue{waiters: slices.Clone(l.queue.waiters), delay: l.queue.delay,
			revokes: slices.Clone(l.queue.revokes), values: slices.Clone(l.queue.values)}
	}
	return c
}

// clone returns a copy of s that shares nothing Apply changes in place:
// the cached results and their outcomes (granted, holdEnded rewrite
// those).
func (s *sessionState) clone() *sessionState {
	c := *s
	c.results = slices.Clone(s.results)
	for i := range c.results {
		r := &c.results[i]
		if r.acquire != nil {
			o := *r.acquire
			r.acquire = &o
		}
		r.many = slices.Clone(r.many)
	}
	return &c
}

// AppliedIndex is the index f was frozen at.
func (f *Frozen) AppliedIndex() uint64 { return f.applied }

// Encode returns f's state encoded as Snapshot would have returned it at
// f's index. It may run on any goroutine, once, while the Machine applies.
func (f *Frozen) Encode() []byte {
	b, _ := f.EncodeWith(nil)
	return b
}

// Buffers provides an encoding's buffer from outside the Go heap. A buffer
// the size of the whole state on the heap counts as live to the
// collection that overlaps its life and sets the next collection's goal
// as much higher; outside the heap it costs the collector nothing.
type Buffers interface {
	// Alloc returns a buffer of length 0 and capacity at least n.
	Alloc(n int) []byte
	// Free takes back a buffer Alloc returned (at its full capacity).
	Free(b []byte)
}

// EncodeWith is Encode with the buffer from bufs (nil: the Go heap).
// free gives it back once the caller is done with the bytes; it is nil
// when they are on the Go heap (bufs nil, or the buffer outgrown by a
// record too large for its room).
func (f *Frozen) EncodeWith(bufs Buffers) (b []byte, free func()) {
	e := &encoding{bufs: bufs}
	if bufs != nil {
		e.owned = bufs.Alloc(f.hint)
		e.buf = e.owned
	} else {
		e.buf = make([]byte, 0, f.hint)
	}
	e.buf = protofield.AppendUint(e.buf, snapshotAppliedIndex, f.applied) // proto3 leaves out a zero
	n := encodeTree(e, f.sessions, appendSession, f.between) +
		encodeTree(e, f.locks, appendLock, f.between)
	e.buf = appendClusterInfo(appendMembers(e.buf, f.members), f.clusterID, f.logVersion)
	e.buf = append(e.buf, f.tail...)
	e.checkOwned()
	for _, pl := range f.past {
		e.grow(min(encodeRoom, cap(e.buf)/8))
		e.buf = appendPastLock(e.buf, pl)
		e.checkOwned()
		n++
		if f.between != nil {
			f.between()
		}
	}
	e.grow(12) // a tag of 2 bytes and a varint
	e.buf = appendHistoryFloor(e.buf, f.logVersion, f.historyFloor)
	e.checkOwned()
	f.done, f.size, f.records = true, len(e.buf), n
	if owned := e.owned; owned != nil {
		free = func() { bufs.Free(owned) }
	}
	return e.buf, free
}

// encodeTree appends every record of tree, in order, with appendRecord
// and returns how many there were; between, if set, runs after each.
func encodeTree[R any](e *encoding, tree *btree.BTreeG[R], appendRecord func([]byte, R) []byte, between func()) int {
	n := 0
	tree.Ascend(func(r R) bool {
		e.grow(min(encodeRoom, cap(e.buf)/8))
		e.buf = appendRecord(e.buf, r)
		e.checkOwned()
		n++
		if between != nil {
			between()
		}
		return true
	})
	return n
}

// encoding is the buffer of one EncodeWith.
type encoding struct {
	buf   []byte
	bufs  Buffers // where buf comes from; nil: the Go heap
	owned []byte  // buf's array at full length, if from bufs
}

// checkOwned notices that append moved the buffer to the Go heap (a record
// larger than the room left), and gives the old one back.
func (e *encoding) checkOwned() {
	if e.owned != nil && cap(e.buf) != cap(e.owned) {
		e.bufs.Free(e.owned)
		e.owned = nil
	}
}

// grow makes room for at least room more bytes, in a buffer from bufs if
// the current one is. The room asked is an eighth of the buffer (at most
// encodeRoom): a small buffer grows as it goes, and reserving encodeRoom
// for every small snapshot would slow whoever takes thousands of them
// (the simulation).
func (e *encoding) grow(room int) {
	if cap(e.buf)-len(e.buf) >= room {
		return
	}
	more := max(room, len(e.buf)/2)
	if e.owned == nil {
		e.buf = slices.Grow(e.buf, more)
		return
	}
	nb := append(e.bufs.Alloc(len(e.buf)+more), e.buf...)
	e.bufs.Free(e.owned)
	e.buf, e.owned = nb, nb
}

// encodedSizeHint sizes the next encoding's buffer: the last encoding's
// (or restored snapshot's) bytes per record times the records now, with a
// little room. Off by much, the buffer grows once more. Without a last
// encoding it counts typical records.
func (m *Machine) encodedSizeHint() int {
	records := m.sessionTree.Len() + m.lockTree.Len()
	if m.historyReplicated() {
		records += len(m.past.locks)
	}
	if m.lastRecords == 0 {
		return 16 + records*64
	}
	per := float64(m.lastSize) / float64(m.lastRecords)
	return int(per*float64(records)*1.05) + 4096
}
