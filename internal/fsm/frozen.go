package fsm

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/btree"
	"google.golang.org/protobuf/encoding/protowire"
)

// Frozen is the state of a Machine at one applied index, which a goroutine
// encodes (Encode) while the Machine goes on applying. At a million locks
// encoding takes most of a second; a Machine that held still for it kept
// every client waiting as long, every SnapshotEntries entries.
//
// Freeze clones the Machine's two sorted trees of records, which google/btree
// does lazily: the clone and the Machine share nodes until one of them
// changes, and either may then be used on its own goroutine. The records
// themselves are shared and changed in place by Apply, so each first change
// of a record while it is frozen goes through Frozen (Machine.changeLock,
// Machine.changeSession) before it is made: under mu, unless the encoder has
// already passed the record, its bytes as frozen are kept as a pre-image,
// and the encoder writes those instead of the record. The encoder walks
// the records in order, a batch at a time under mu, and moves its cursor
// past each batch; it reads a record itself only while no change of it can
// have been made. What it reads of other records through a record, the id
// and owner of the sessions of its holders and waiters, never changes.
//
// The encoding is the one Snapshot gives at the frozen index, byte for byte:
// TestRandomStream freezes at random points and checks it (freezer, in
// frozen_test.go), with entries applied in between; raftnode's
// TestSnapshotsWhileApplying checks a member's snapshots against a replay
// of its log.
type Frozen struct {
	applied    uint64
	sessions   *btree.BTreeG[*session]
	locks      *btree.BTreeG[*lock]
	members    []Member
	clusterID  uint64
	logVersion uint32
	auth       []byte // the auth and audit fields, encoded at Freeze (small)
	hint       int

	// seen is Apply's alone: the records it changed or created while
	// frozen, which need nothing more.
	seen map[any]struct{}

	mu sync.Mutex
	// want counts Apply's waits for mu; the encoder lets it in first.
	want atomic.Int32
	// Under mu: the pre-images of the records Apply changed before the
	// encoder reached them.
	preSessions map[*session][]byte
	preLocks    map[*lock][]byte
	// The encoder's cursor, under mu: it has written every session with an
	// id up to sessionsTo, and once inLocks, every lock with a name up to
	// locksTo; done, everything.
	sessionsTo uint64
	inLocks    bool
	locksTo    string
	done       bool

	buf           []byte  // the encoding so far, the encoder's
	bufs          Buffers // where buf comes from; nil: the Go heap
	owned         []byte  // buf's array at full length, if from bufs
	size, records int     // of the encoding, once Encode returned

	// batch is encodeBatch; between, if set, runs between batches with mu
	// released. Tests use both to apply entries at every point of an
	// encoding.
	batch   int
	between func()
}

// encodeBatch is how many records the encoder writes per hold of mu: an
// Apply that changes a record the encoder has yet to reach waits at most
// that long (a few µs), and the encoder takes mu rarely enough that doing
// so costs it little.
const encodeBatch = 16

// encodeRoom is the room a large buffer has before each batch (or grows
// to first): a batch fits in it unless a record is very large.
const encodeRoom = 1 << 20

// Freeze returns the state as of now, to be encoded by Frozen.Encode on any
// goroutine while Apply goes on, and handed back to Thaw by the applying
// goroutine once encoded. One Frozen at a time: Freeze panics while another
// is out. It takes microseconds: the trees are cloned lazily.
func (m *Machine) Freeze() *Frozen {
	if m.frozen != nil {
		panic("fsm: Freeze while a frozen state is being encoded")
	}
	f := &Frozen{
		applied:     m.applied,
		sessions:    m.sessionTree.Clone(),
		locks:       m.lockTree.Clone(),
		members:     m.Members(),
		clusterID:   m.clusterID,
		logVersion:  m.logVersion,
		auth:        m.encodeAuth(),
		hint:        m.encodedSizeHint(),
		seen:        make(map[any]struct{}),
		preSessions: make(map[*session][]byte),
		preLocks:    make(map[*lock][]byte),
		batch:       encodeBatch,
	}
	m.frozen = f
	return f
}

// Thaw ends f, once Encode has returned (or was never called): Apply stops
// keeping pre-images. It is called on the applying goroutine. f's size
// sizes the next encoding's buffer. After a Restore, f is no longer the
// Machine's, and Thaw only forgets it.
func (m *Machine) Thaw(f *Frozen) {
	if m.frozen != f {
		return
	}
	m.frozen = nil
	if f.done {
		m.lastSize, m.lastRecords = f.size, f.records
	}
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
// of 100 MB on the heap counts as live to the collection that overlaps its
// life and sets the next collection's goal as much higher; the member
// collected at once after each large snapshot to undo that, a full
// collection each time.
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
	f.bufs = bufs
	if bufs != nil {
		f.owned = bufs.Alloc(f.hint)
		f.buf = f.owned
	} else {
		f.buf = make([]byte, 0, f.hint)
	}
	if f.applied != 0 { // proto3 leaves out a zero
		f.buf = protowire.AppendTag(f.buf, snapshotAppliedIndex, protowire.VarintType)
		f.buf = protowire.AppendVarint(f.buf, f.applied)
	}
	n := 0
	f.mu.Lock()
	f.sessions.Ascend(func(s *session) bool {
		if pre, ok := f.preSessions[s]; ok {
			f.buf = append(f.buf, pre...)
		} else {
			f.buf = appendSession(f.buf, s)
		}
		f.checkOwned()
		if n++; n%f.batch == 0 {
			f.sessionsTo = s.id
			f.pause()
		}
		return true
	})
	f.inLocks = true
	f.pause()
	f.locks.Ascend(func(l *lock) bool {
		if pre, ok := f.preLocks[l]; ok {
			f.buf = append(f.buf, pre...)
		} else {
			f.buf = appendLock(f.buf, l)
		}
		f.checkOwned()
		if n++; n%f.batch == 0 {
			f.locksTo = l.name
			f.pause()
		}
		return true
	})
	f.buf = appendClusterInfo(appendMembers(f.buf, f.members), f.clusterID, f.logVersion)
	f.buf = append(f.buf, f.auth...)
	f.checkOwned()
	f.done = true
	b, owned := f.buf, f.owned
	f.buf, f.owned = nil, nil
	f.size, f.records = len(b), n
	f.mu.Unlock()
	if owned != nil {
		free = func() { bufs.Free(owned) }
	}
	return b, free
}

// checkOwned notices that append moved the buffer to the Go heap (a record
// larger than the room left), and gives the old one back.
func (f *Frozen) checkOwned() {
	if f.owned != nil && cap(f.buf) != cap(f.owned) {
		f.bufs.Free(f.owned)
		f.owned = nil
	}
}

// grow makes room for at least room more bytes, in a buffer from bufs if
// the current one is.
func (f *Frozen) grow(room int) {
	if cap(f.buf)-len(f.buf) >= room {
		return
	}
	more := max(room, len(f.buf)/2)
	if f.owned == nil {
		f.buf = slices.Grow(f.buf, more)
		return
	}
	nb := append(f.bufs.Alloc(len(f.buf)+more), f.buf...)
	f.bufs.Free(f.owned)
	f.buf, f.owned = nb, nb
}

// pause lets Apply in between two batches. A mutex does not hand itself
// over: unlocking and locking again at once, the encoder would keep it
// for up to a millisecond (when sync.Mutex turns fair) while Apply waits.
// So the encoder waits while Apply wants it.
func (f *Frozen) pause() {
	f.mu.Unlock()
	if f.between != nil {
		f.between()
	}
	// Grow the buffer here, not under mu: copying tens of MB under mu
	// would hold Apply up for as long (BenchmarkScaleAcquireMany). A
	// small buffer is left to grow as it goes: a copy of it costs
	// nothing, and reserving encodeRoom for every small snapshot would
	// slow whoever takes thousands of them (the simulation).
	f.grow(min(encodeRoom, cap(f.buf)/8))
	for f.want.Load() > 0 {
		runtime.Gosched()
	}
	f.mu.Lock()
}

// lock takes mu for Apply.
func (f *Frozen) lock() {
	f.want.Add(1)
	f.mu.Lock()
	f.want.Add(-1)
}

// changeSession is called before any change to s that its encoding shows
// (fields, cached results, number of holds). While frozen, the first
// change keeps s's bytes as frozen unless the encoder has written s.
func (m *Machine) changeSession(s *session) {
	f := m.frozen
	if f == nil {
		return
	}
	if _, seen := f.seen[s]; seen {
		return
	}
	f.seen[s] = struct{}{}
	f.lock()
	if !f.inLocks && s.id > f.sessionsTo {
		f.preSessions[s] = appendSession(nil, s)
	}
	f.mu.Unlock()
}

// changeLock is changeSession for a lock: before any change to its holders
// (their records included) or waiters.
func (m *Machine) changeLock(l *lock) {
	f := m.frozen
	if f == nil {
		return
	}
	if _, seen := f.seen[l]; seen {
		return
	}
	f.seen[l] = struct{}{}
	f.lock()
	if !f.done && (!f.inLocks || l.name > f.locksTo) {
		f.preLocks[l] = appendLock(nil, l)
	}
	f.mu.Unlock()
}

// created is called for a record Apply creates: it is not in the frozen
// trees, and its changes need no pre-image.
func (m *Machine) created(r any) {
	if f := m.frozen; f != nil {
		f.seen[r] = struct{}{}
	}
}

// encodedSizeHint sizes the next encoding's buffer: the last encoding's
// (or restored snapshot's) bytes per record times the records now, with a
// little room. Off by much, the buffer grows once more. Without a last
// encoding it counts typical records.
func (m *Machine) encodedSizeHint() int {
	records := m.sessionTree.Len() + m.lockTree.Len()
	if m.lastRecords == 0 {
		return 16 + records*64
	}
	per := float64(m.lastSize) / float64(m.lastRecords)
	return int(per*float64(records)*1.05) + 4096
}
