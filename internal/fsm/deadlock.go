package fsm

import (
	"cmp"
	"slices"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Deadlock detection. From log version 11 (DeadlockVersion) an Acquire
// whose wait would close a deadlock is refused at once with
// ERROR_DEADLOCK, naming the cycle (Result.deadlock), instead of
// being queued to hang until its waiter's context ends.
//
// The model (docs/ARCHITECTURE.md, "Deadlock detection"):
//
//   - A node is a holder: a (session, owner key). Another owner key of
//     the same session is another node.
//   - A node that waits does nothing else until one of its waits is
//     granted: it ends none of its holds and cancels no wait. A node
//     with no queued waiter may do anything: end every hold, cancel
//     every wait. Hold limits, wait timeouts and lock-delays count for
//     nothing: the client renews a limit, a timeout is the hang to end,
//     a lock-delay ends by itself.
//   - A node is free if it does not wait, or if, with every free node's
//     holds and waits gone, one of its waits would be granted as the
//     machine grants (grantWaiters: the head of the FIFO queue, when
//     its hold fits beside the holders left and its node holds the lock
//     under no other acquire). Free nodes are the least set closed
//     under that rule; every other node is deadlocked: none of its waits
//     can be granted whatever the free nodes do.
//   - An acquire that would wait is refused if its node would be
//     deadlocked with the wait queued; from log version 14 a grant or a
//     cancel that leaves a node that still waits deadlocked ends its
//     waits (deadlock_grant.go).
//
// So a semaphore permit or a reader that any one of several holds
// ending would let in is deadlocked only if every one of those holders
// is; a waiter behind another waits for that one to be granted first;
// a node waiting on several locks (goroutines sharing an owner key) is
// free if any one of its waits is.
//
// The search looks only at what the new wait depends on: the holders of
// its lock and the waiters queued ahead of it, their nodes' waits, and
// so on (deadlockSearch). It looks at no more than MaxDeadlockSearch
// holds and waits; a wait that needs more is queued, as below version 11.
// Below log version 15 (OwnWaitsVersion) a node counted every wait of its
// session, its other owner keys' too, so that a session whose many keys
// wait (a pool of goroutines, each with a key of its own, on one
// session) made a search give up at about 64 of them; from 15 a node
// counts its own waits.

// DeadlockVersion is the log version from which an acquire whose wait
// would close a deadlock is refused: below it the machine queues it, so
// an older log replays the same.
const DeadlockVersion = 11

// OwnWaitsVersion is the log version from which a node's waits are
// read, and counted toward MaxDeadlockSearch, without its session's
// other owner keys' (readWaits).
const OwnWaitsVersion = 15

// MaxDeadlockSearch is the number of holds and waits one deadlock
// search may look at. A search that would need more finds no deadlock
// and the acquire is queued: the check bounds the cost of an apply
// rather than promising to find every cycle, however large.
const MaxDeadlockSearch = 4096

// deadlockEdge is a cached fsmpb.DeadlockEdge (cachedResult.deadlock).
type deadlockEdge struct {
	sessionID, blockerSessionID uint64
	ownerKey, blockerOwnerKey   string
	lock                        string
	queuedAhead                 bool
}

// dlNode is a node of the wait-for graph: a holder.
type dlNode struct {
	s   *session
	key string
}

// dlNodeState is what the search knows of one node.
type dlNodeState struct {
	node  dlNode
	waits []dlWait // in acquire seq order; the new wait last
	held  []int32  // the search's locks it holds
	free  bool
	// met is where need first met one of the node's queued waiters (lock
	// -1: nowhere), so that readWaits finds that waiter's place without
	// scanning the queue for it: a scan for each waiter of a long queue
	// made a search quadratic in the queue's length.
	met dlWait
	// next is the node found before it of the same session (another
	// owner key), -1 if none: nodes are found by session (ids), a
	// pointer's hash being cheaper than one over the owner key too.
	next int32
}

// dlWait is a node's wait: its lock and its position in the lock's
// queue (the new wait's: the queue's length, its place at the tail).
type dlWait struct {
	lock int32
	pos  int32
}

// dlLock is one lock the search looked at: its holders and the prefix
// of its queue that the searched waits need.
type dlLock struct {
	l       *lock
	holders []int32    // nodes, in holder order
	queue   []dlWaiter // the queue's first waiters, and the new wait
	live    int        // holders whose node is not free
	head    int        // queue[:head] are granted or gone
	shared  bool       // the holders' mode (all shared, or one exclusive)
	limit   int
	// firstDead is the first waiter from head whose node is deadlocked
	// (len(queue): none), and read how far cycle's walk has read the
	// queue (readDead).
	firstDead, read int
	placed          int32 // queue[:placed] have their places in deadlockSearch.places (placeOwn)
}

type dlWaiter struct {
	node   int32
	shared bool
}

// deadlockSearch is one search: the nodes and locks a new wait depends
// on, found from it, then the least fixpoint of the free nodes. The
// Machine keeps one and reuses its memory from search to search (reset,
// done): a wait is applied on every member, and most searches are small.
type deadlockSearch struct {
	m     *Machine
	nodes []dlNodeState
	ids   map[*session]int32 // a session's last node found; dlNodeState.next the one before
	// byNode finds the nodes of the sessions in keyed, whose chains grew
	// past manyWaits: a walk of the chain for each of a session's many
	// keys made a search quadratic in them.
	byNode map[dlNode]int32
	keyed  map[*session]bool
	locks  []dlLock
	lockID map[*lock]int32
	looked int         // holds and waits looked at
	freed  []int32     // nodes freed and not yet propagated
	dirty  []int32     // locks whose queue head may now be granted
	keys   []waitKey   // readWaits' scratch
	found  []foundWait // readWaits' scratch
	// sessionWaits has the waits, in seq order and found in their
	// queues, of each session with many (manyWaits) that the search
	// read: every node of the session reads them all (each skips the
	// other keys' waits), so they are sorted and found once.
	sessionWaits map[*session][]foundWait
	// places has the place of every waiter of each long queue
	// (longQueue) whose waiters the search looked up, by indexed: one
	// pass over the queue, not a scan of it for each waiter.
	places  map[waiterRef]int32
	indexed map[*lock]bool
	// ownOnly: a node reads its own waits only (OwnWaitsVersion), picked
	// out by the owner key the session's index of waits keeps, so that
	// only their places are looked up.
	ownOnly bool
	// deadKnown: the locks' firstDead are set (readDead).
	deadKnown bool
	cycleRead int // waiters cycle read, for tests (Machine.searched)
}

// foundWait is a wait of a session: its lock, its place in the lock's
// queue (-1 if not there) and that waiter's owner key.
type foundWait struct {
	l   *lock
	i   int
	key string
}

// waiterRef names a waiter of a lock: its session and acquire seq.
type waiterRef struct {
	l   *lock
	s   *session
	seq uint64
}

// A session's waits are found once per search from manyWaits; a queue
// is indexed once per search from longQueue waiters. (Below, sorting and
// scanning again cost less than the maps.)
const (
	manyWaits = 8
	longQueue = 32
)

// reset readies d for a search of m.
func (d *deadlockSearch) reset(m *Machine) {
	d.m, d.looked = m, 0
	d.ownOnly = m.LogVersion() >= OwnWaitsVersion
	d.deadKnown, d.cycleRead = false, 0
	if d.ids == nil {
		d.ids, d.lockID = make(map[*session]int32), make(map[*lock]int32)
	}
}

// done forgets the search's nodes and locks, keeping the memory, so that
// the scratch holds no session or lock alive.
func (d *deadlockSearch) done() {
	if d.m.searched != nil {
		d.m.searched(d.looked, len(d.places), d.cycleRead)
	}
	for i := range d.nodes {
		d.nodes[i].node = dlNode{}
	}
	for i := range d.locks {
		d.locks[i].l = nil
	}
	d.nodes, d.locks, d.freed, d.dirty = d.nodes[:0], d.locks[:0], d.freed[:0], d.dirty[:0]
	clear(d.ids)
	clear(d.lockID)
	clear(d.sessionWaits)
	clear(d.byNode)
	clear(d.keyed)
	clear(d.places)
	clear(d.indexed)
	d.m = nil
}

// refuseDeadlock refuses the acquire of l by (s, ownerKey), about to be
// queued, if its wait would close a deadlock, and reports whether it
// did. Below DeadlockVersion it never does.
func (m *Machine) refuseDeadlock(a *apply, l *lock, s *session, ownerKey string, shared bool) bool {
	if m.LogVersion() < DeadlockVersion {
		return false
	}
	cycle := findDeadlock(m, l, s, ownerKey, shared)
	if cycle == nil {
		return false
	}
	a.refuse(errorf(fsmpb.Error_ERROR_DEADLOCK, "%s", describeCycle(cycle)))
	a.res.Deadlock = &fsmpb.DeadlockCycle{Edges: cycle}
	return true
}

// findDeadlock returns the cycle that a wait of (s, ownerKey) for l,
// shared or not, queued at l's tail, would close, or nil if the wait
// would not be deadlocked (or the search hit MaxDeadlockSearch).
func findDeadlock(m *Machine, l *lock, s *session, ownerKey string, shared bool) []*fsmpb.DeadlockEdge {
	if l.holdersWaitForNothing() {
		// No holder's session waits, the common queue of a contended
		// lock: every holder is free, then every waiter in turn (none
		// holds the lock: it would be a holder whose session waits), and
		// the new wait last (its node holds the lock under no other
		// acquire: acquireWithValue re-enters or refuses such a node
		// before it asks). So the search, linear in the queue on every
		// member, would find nothing.
		return nil
	}
	d := &m.deadlocks
	d.reset(m)
	defer d.done()
	self := d.node(dlNode{s, ownerKey})
	if !d.readWaits(self) {
		return nil
	}
	li := d.lock(l)
	pos := int32(len(l.waiters()))
	if li < 0 || !d.need(li, pos, self, shared) {
		return nil
	}
	d.nodes[self].waits = append(d.nodes[self].waits, dlWait{li, pos})
	// Each node found is read once, in the order found.
	for n := self + 1; int(n) < len(d.nodes); n++ {
		if !d.readWaits(n) {
			return nil
		}
	}
	d.settle()
	if d.nodes[self].free {
		return nil
	}
	return d.cycle(self, d.nodes[self].waits[len(d.nodes[self].waits)-1])
}

// node returns the search's id of n, adding it (its waits unread).
func (d *deadlockSearch) node(n dlNode) int32 {
	last, ok := d.ids[n.s]
	next := int32(-1)
	switch {
	case ok && d.keyed[n.s]:
		if id, found := d.byNode[n]; found {
			return id
		}
		next = last
	case ok:
		walked := 0
		for id := last; id >= 0; id = d.nodes[id].next {
			if d.nodes[id].node.key == n.key {
				return id
			}
			walked++
		}
		next = last
		if walked >= manyWaits {
			d.keySession(n.s, last)
		}
	}
	id := int32(len(d.nodes))
	d.ids[n.s] = id
	if d.keyed[n.s] {
		d.byNode[n] = id
	}
	if len(d.nodes) < cap(d.nodes) {
		// Keep the slices of the node that had this place before.
		d.nodes = d.nodes[:id+1]
		ns := &d.nodes[id]
		ns.node, ns.waits, ns.held, ns.free, ns.met, ns.next = n, ns.waits[:0], ns.held[:0], false, dlWait{lock: -1}, next
	} else {
		d.nodes = append(d.nodes, dlNodeState{node: n, met: dlWait{lock: -1}, next: next})
	}
	return id
}

// keySession puts the nodes of s's chain, from last, in byNode, and s in
// keyed: its next nodes are found and added there.
func (d *deadlockSearch) keySession(s *session, last int32) {
	if d.keyed == nil {
		d.keyed, d.byNode = make(map[*session]bool), make(map[dlNode]int32)
	}
	d.keyed[s] = true
	for id := last; id >= 0; id = d.nodes[id].next {
		d.byNode[d.nodes[id].node] = id
	}
}

// lock returns the search's id of l, adding it with its holders, or -1
// once the search has looked at too much.
func (d *deadlockSearch) lock(l *lock) int32 {
	if id, ok := d.lockID[l]; ok {
		return id
	}
	d.looked += len(l.holders)
	if d.looked > MaxDeadlockSearch {
		return -1
	}
	id := int32(len(d.locks))
	d.lockID[l] = id
	if len(d.locks) == cap(d.locks) {
		d.locks = append(d.locks, dlLock{})
	} else {
		d.locks = d.locks[:id+1]
	}
	dl := &d.locks[id]
	*dl = dlLock{l: l, holders: dl.holders[:0], queue: dl.queue[:0], live: len(l.holders), limit: int(l.limit())}
	for i := range l.holders {
		h := &l.holders[i]
		n := d.node(dlNode{h.s, h.ownerKey})
		d.locks[id].holders = append(d.locks[id].holders, n)
		d.nodes[n].held = append(d.nodes[n].held, id)
		d.locks[id].shared = h.shared
	}
	return id
}

// need extends lock li's queue copy to position pos, which is the wait
// of node (by a new wait: shared tells its mode), and reports false once
// the search has looked at too much.
func (d *deadlockSearch) need(li, pos, node int32, shared bool) bool {
	dl := &d.locks[li]
	ws := dl.l.waiters()
	for i := int32(len(dl.queue)); i <= pos; i++ {
		d.looked++
		if d.looked > MaxDeadlockSearch {
			return false
		}
		if int(i) == len(ws) { // the new wait
			dl.queue = append(dl.queue, dlWaiter{node, shared})
			continue
		}
		w := &ws[i]
		n := d.node(dlNode{w.s, w.ownerKey})
		if d.nodes[n].met.lock < 0 {
			d.nodes[n].met = dlWait{li, i}
		}
		dl.queue = append(dl.queue, dlWaiter{n, w.shared})
	}
	return true
}

// readWaits reads the queued waits of node n, in acquire seq order, and
// adds what each depends on; false once the search looked at too much.
func (d *deadlockSearch) readWaits(n int32) bool {
	nd := d.nodes[n].node
	if at := d.nodes[n].met; at.lock >= 0 && len(nd.s.waits) == 1 {
		// The session's one wait is the waiter need met, whose place
		// and dependencies the search has: the loop below would find
		// just that (a waiter of a long queue is most often this).
		d.looked++
		d.nodes[n].waits = append(d.nodes[n].waits[:0], at)
		return true
	}
	if d.ownOnly {
		return d.readOwnWaits(n)
	}
	waits := d.nodes[n].waits[:0]
	for _, w := range d.foundWaits(n) {
		l, i := w.l, w.i
		d.looked++
		if i < 0 || w.key != nd.key {
			continue
		}
		li := d.lock(l)
		if li < 0 || !d.need(li, int32(i), n, false) {
			return false
		}
		waits = append(waits, dlWait{li, int32(i)})
	}
	d.nodes[n].waits = waits
	return true
}

// readOwnWaits is readWaits from OwnWaitsVersion: node n's own waits,
// picked out of its session's by their owner key, in acquire seq order,
// each counted and then found in its queue.
func (d *deadlockSearch) readOwnWaits(n int32) bool {
	nd := d.nodes[n].node
	keys := d.ownWaits(nd)
	waits := d.nodes[n].waits[:0]
	for _, k := range keys {
		d.looked++
		li := d.lock(d.m.locks[k.lock])
		if li < 0 {
			return false
		}
		i, ok := d.placeOwn(li, n, k.seq)
		if !ok {
			return false
		}
		if i >= 0 {
			waits = append(waits, dlWait{li, i})
		}
	}
	d.nodes[n].waits = waits
	return true
}

// placeOwn finds node n's waiter of acquire seq in lock li's queue and
// extends the queue's copy to it (need), as readWaits did with the place
// waiterIndex found: the same waiters copied and counted, in the same
// order. In a long queue the place is looked up among the waiters the
// copy has (indexed once each), else found by extending the copy one
// waiter at a time, each counted: indexing the whole queue for a wait
// near its head cost up to MaxWaitersPerLock uncounted for each of a
// node's waits, on every member. It reports false once the search has
// looked at too much; the place is -1 if the waiter is not queued, which
// checkInvariants rules out.
func (d *deadlockSearch) placeOwn(li, n int32, seq uint64) (int32, bool) {
	l, s := d.locks[li].l, d.nodes[n].node.s
	ws := l.waiters()
	if at := d.nodes[n].met; at.lock == li && ws[at.pos].s == s && ws[at.pos].acquireSeq == seq {
		return at.pos, true // need copied the queue to it
	}
	if len(ws) < longQueue {
		i := l.waiterIndex(s, seq)
		if i < 0 {
			return -1, true
		}
		return int32(i), d.need(li, int32(i), n, false)
	}
	if d.places == nil {
		d.places = make(map[waiterRef]int32)
	}
	// The first of equal ones, as lock.waiterIndex finds.
	place := func(p int32) {
		if r := (waiterRef{l, ws[p].s, ws[p].acquireSeq}); !hasPlace(d.places, r) {
			d.places[r] = p
		}
	}
	copied := min(int32(len(d.locks[li].queue)), int32(len(ws))) // the new wait is not in ws
	for p := d.locks[li].placed; p < copied; p++ {
		place(p)
	}
	d.locks[li].placed = copied
	if i, ok := d.places[waiterRef{l, s, seq}]; ok {
		return i, true
	}
	for p := copied; int(p) < len(ws); p++ {
		if !d.need(li, p, n, false) {
			return 0, false
		}
		place(p)
		d.locks[li].placed = p + 1
		if ws[p].s == s && ws[p].acquireSeq == seq {
			return p, true
		}
	}
	return -1, true
}

// ownWaits returns node nd's waits in acquire seq order: picked out of
// its session's, or for a session with many, from its index by owner key
// (session.keyWaits), sorted.
func (d *deadlockSearch) ownWaits(nd dlNode) []waitKey {
	keys := d.keys[:0]
	if nd.s.keyWaits != nil {
		keys = append(keys, nd.s.keyWaits[nd.key]...)
	} else {
		for k, e := range nd.s.waits {
			if e.key == nd.key {
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, func(a, b waitKey) int { return cmp.Compare(a.seq, b.seq) })
	d.keys = keys
	return keys
}

// foundWaits returns the waits of node n's session in acquire seq order,
// each found in its queue: in d.found, or, for a session with many, in
// d.sessionWaits, kept for its other nodes.
func (d *deadlockSearch) foundWaits(n int32) []foundWait {
	s := d.nodes[n].node.s
	if ws, ok := d.sessionWaits[s]; ok {
		return ws
	}
	keys := d.keys[:0]
	for k := range s.waits {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b waitKey) int { return cmp.Compare(a.seq, b.seq) })
	d.keys = keys
	many := len(keys) >= manyWaits
	found := d.found[:0]
	if many {
		found = make([]foundWait, 0, len(keys))
	}
	for _, k := range keys {
		l := d.m.locks[k.lock]
		w := foundWait{l: l, i: d.waiterIndex(n, l, k.seq)}
		if w.i >= 0 {
			w.key = l.waiters()[w.i].ownerKey
		}
		found = append(found, w)
	}
	if !many {
		d.found = found
		return found
	}
	if d.sessionWaits == nil {
		d.sessionWaits = make(map[*session][]foundWait)
	}
	d.sessionWaits[s] = found
	return found
}

// waiterIndex is l.waiterIndex for node n's waiter of acquire seq: at
// once if need met that waiter, from the queue's index if it is long,
// else by a scan of l's queue.
func (d *deadlockSearch) waiterIndex(n int32, l *lock, seq uint64) int {
	nd := &d.nodes[n]
	if at := nd.met; at.lock >= 0 && d.locks[at.lock].l == l {
		if w := &l.waiters()[at.pos]; w.s == nd.node.s && w.acquireSeq == seq {
			return int(at.pos)
		}
	}
	ws := l.waiters()
	if len(ws) < longQueue {
		return l.waiterIndex(nd.node.s, seq)
	}
	if !d.indexed[l] {
		if d.indexed == nil {
			d.indexed, d.places = make(map[*lock]bool), make(map[waiterRef]int32)
		}
		d.indexed[l] = true
		for i := range ws {
			// The first of equal ones, as lock.waiterIndex finds.
			if r := (waiterRef{l, ws[i].s, ws[i].acquireSeq}); !hasPlace(d.places, r) {
				d.places[r] = int32(i)
			}
		}
	}
	if i, ok := d.places[waiterRef{l, nd.node.s, seq}]; ok {
		return int(i)
	}
	return -1
}

func hasPlace(places map[waiterRef]int32, r waiterRef) bool {
	_, ok := places[r]
	return ok
}

// settle computes the free nodes: first those that do not wait, then,
// lock by lock, those whose wait reaches the head of its queue and fits
// once the free nodes' holds are gone, until no more are freed.
func (d *deadlockSearch) settle() {
	for li := range d.locks {
		// A head may be grantable already: the new wait at the head of
		// a lock in its lock-delay, say.
		d.dirty = append(d.dirty, int32(li))
	}
	for n := range d.nodes {
		if len(d.nodes[n].waits) == 0 {
			d.setFree(int32(n))
		}
	}
	for len(d.freed) > 0 || len(d.dirty) > 0 {
		for len(d.freed) > 0 {
			n := d.freed[len(d.freed)-1]
			d.freed = d.freed[:len(d.freed)-1]
			for _, li := range d.nodes[n].held {
				d.locks[li].live--
				d.dirty = append(d.dirty, li)
			}
			for _, w := range d.nodes[n].waits {
				d.dirty = append(d.dirty, w.lock)
			}
		}
		if len(d.dirty) > 0 {
			li := d.dirty[len(d.dirty)-1]
			d.dirty = d.dirty[:len(d.dirty)-1]
			d.grant(li)
		}
	}
}

func (d *deadlockSearch) setFree(n int32) {
	if !d.nodes[n].free {
		d.nodes[n].free = true
		d.freed = append(d.freed, n)
	}
}

// grant frees the nodes of the waiters at the head of lock li's queue
// that the machine would grant, once the free nodes' holds are gone: a
// node granted one of its waits is free, and so ends its holds at once.
func (d *deadlockSearch) grant(li int32) {
	dl := &d.locks[li]
	for dl.head < len(dl.queue) {
		w := dl.queue[dl.head]
		if !d.nodes[w.node].free {
			if !dl.admits(w.shared) || slices.Contains(d.nodes[w.node].held, li) {
				return
			}
			d.setFree(w.node)
		}
		dl.head++
	}
}

// admits is lock.admits for the holders whose node is not free.
func (dl *dlLock) admits(shared bool) bool {
	return dl.live == 0 || shared && dl.shared && dl.live < dl.limit
}
