package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/batonlock/baton" // moved from the baton package: its names as they were there
	"github.com/batonlock/baton/embed/embedtest"
)

var (
	flagLibChaos     = flag.Duration("lib.chaos-duration", 0, "run TestLibraryChaos this long (a soak) instead of its CI length")
	flagLibChaosSeed = flag.Uint64("lib.chaos-seed", 1, "seed of TestLibraryChaos's choices (the schedule stays the machine's)")
)

// TestLibraryChaos runs this package, the client library a user links,
// against a 3-member cluster whose members are stopped and started again
// from their disks (the leader three times in four) while workers lock,
// wait and give up waiting, try, re-enter, take sets all or none, release
// and close sessions, each with a TTL of a few seconds; one hold of a
// mutex in four has a hold limit, which the library renews or (half of
// them) lets run out, and one lock is a read/write lock. It checks what
// the library promises:
//
//   - no Lease is granted on a lock while another session's Lease on it is
//     still valid in its client's view (Remaining > 0; both readers is
//     allowed): the client's deadline (the session's, or the hold's with a
//     hold limit) passes before the server may hand the lock on, across
//     leader changes, retries, resumed streams and renewals;
//   - a new exclusive hold's token exceeds every earlier hold's of the
//     lock, a reader's every earlier writer's, and a reentrant Lease has
//     its hold's token;
//   - a fenced resource written under valid Leases only never refuses one
//     of those writes (a stale token would mean two holders);
//   - at the end, each live session's holds on the server are its
//     worker's Leases, count for count (abandoned acquires released, no
//     retry applied twice, no release lost), and once every session is
//     closed no lock has a holder or a waiter.
//
// The choices come from a seed; the schedule is the machine's, so a
// failure is not replayed bit for bit (internal/sim is the deterministic
// one, on a mirror of the server). -lib.chaos-duration makes it a soak.
func TestLibraryChaos(t *testing.T) {
	d := 10 * time.Second
	if *flagLibChaos > 0 {
		d = *flagLibChaos
	}
	skipShort(t)
	c := embedtest.New(t, 3)
	cl := dial(t, c.Endpoints(0), WithBackoff(10*time.Millisecond, 200*time.Millisecond))
	locks := []string{"chaos/a", "chaos/b", "chaos/c", chaosRW}
	g := &chaosLedger{leases: map[string][]*Lease{}, shared: map[*Lease]bool{}, holdToken: map[string]map[*Session]uint64{},
		maxToken: map[string]uint64{}, maxExclusive: map[string]uint64{}, resource: map[string]uint64{}}
	rng := rand.New(rand.NewPCG(*flagLibChaosSeed, 0xc4a05))

	ctx, cancel := context.WithTimeout(context.Background(), d+2*time.Minute)
	defer cancel()
	until := time.Now().Add(d)
	var wg sync.WaitGroup
	workers := make([]*chaosWorker, 6)
	for i := range workers {
		w := &chaosWorker{id: i, cl: cl, g: g, locks: locks, rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(i))),
			held: map[string][]*Lease{}, holdLimit: map[string]time.Duration{}, manual: map[string]bool{}}
		workers[i] = w
		wg.Go(func() { w.run(ctx, until) })
	}
	chaosRng := rand.New(rand.NewPCG(rng.Uint64(), 0xdead))
	kills, chaosErr := chaosMembers(ctx, c, chaosRng, until)
	wg.Wait()
	if chaosErr != nil {
		t.Fatal(chaosErr)
	}
	for _, w := range workers {
		if w.err != nil {
			t.Error(w.err)
		}
	}
	g.mu.Lock()
	for _, v := range g.violations {
		t.Error(v)
	}
	t.Logf("%v: %d members stopped and restarted; %d grants (%d reentrant), %d sessions, %d fenced writes; outcomes %v",
		d, kills, g.grants, g.reentrant, g.sessions, g.writes, g.outcomes)
	// A run that did too little proves nothing: every check above passes
	// when nothing is granted, written or stopped. The floors are far
	// below what a loaded 2-core machine does; the rarer outcomes (a
	// writer of the read/write lock, a hold limit running out) are
	// required of soaks only.
	perSecond := func(rate float64) int { return int(rate * d.Seconds()) }
	for _, f := range []struct {
		what      string
		got, want int
	}{
		{"members stopped", kills, max(2, int(d/(6*time.Second)))},
		{"grants", g.grants, max(50, perSecond(2))},
		{"reentrant grants", g.reentrant, perSecond(0.5)},
		{"fenced writes", g.writes, max(50, perSecond(2))},
		{"sessions opened", g.sessions, len(workers)},
		{"readers granted the read/write lock", g.outcomes["rlock:ok"], perSecond(0.5)},
		{"writers granted the read/write lock", g.outcomes["wlock:ok"], int(d / time.Minute)},
		{"holds given up when their limit ran out", g.outcomes["release-expired:ok"], int(d / time.Minute)},
	} {
		if f.got < f.want {
			t.Errorf("%s: %d in %v, want at least %d: the run did too little to prove anything", f.what, f.got, d, f.want)
		}
	}
	g.mu.Unlock()

	// Each live session holds on the server what its worker has Leases
	// for: an abandoned acquire's grant is released in the background
	// (within CleanupTimeout), so wait for that.
	check := testCtx(t)
	for _, w := range workers {
		if w.s == nil || w.s.Err() != nil {
			continue
		}
		if diff := settles(10*time.Second, func() string { return w.compare(check) }); diff != "" {
			t.Errorf("worker %d, 10 s after the run: %s", w.id, diff)
		}
	}
	for _, w := range workers {
		w.closeSession(check)
	}

	// Every session is closed: every lock must be free, with nobody waiting.
	for _, name := range locks {
		diff := settles(10*time.Second, func() string {
			info, err := cl.Get(check, name)
			switch {
			case err != nil:
				return err.Error()
			case len(info.Holders) != 0 || len(info.Waiters) != 0:
				return fmt.Sprintf("holders %+v, waiters %+v", info.Holders, info.Waiters)
			}
			return ""
		})
		if diff != "" {
			t.Errorf("lock %s, 10 s after every session closed: %s", name, diff)
		}
	}
}

// settles calls f until it returns "" or within passes, and returns what
// it returned last.
func settles(within time.Duration, f func() string) string {
	deadline := time.Now().Add(within)
	for {
		diff := f()
		if diff == "" || time.Now().After(deadline) {
			return diff
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// chaosMembers stops a member (the leader three times in four) every 0.5-2
// s and starts it again from its disk 0.2-1.5 s later, until until; then
// every member runs. One time in six it stops a second one too, for up to
// 4 s: without a majority keepalives fail, sessions fall into jeopardy
// (their TTL is 3 s) and their Leases are lost, while the server keeps
// the sessions (a new leader gives each a full TTL). It returns how many
// members it stopped.
func chaosMembers(ctx context.Context, c *embedtest.Cluster, rng *rand.Rand, until time.Time) (int, error) {
	kills := 0
	for time.Now().Before(until) {
		if !sleepUntil(ctx, time.Now().Add(time.Duration(500+rng.IntN(1500))*time.Millisecond)) {
			break
		}
		victim := rng.IntN(c.Len())
		if rng.IntN(4) > 0 {
			for _, i := range c.Running() {
				if c.Member(i).IsLeader() {
					victim = i
				}
			}
		}
		if c.Member(victim) == nil {
			continue
		}
		c.Stop(victim)
		kills++
		down := []int{victim}
		pause := time.Duration(200+rng.IntN(1300)) * time.Millisecond
		if rng.IntN(6) == 0 {
			second := (victim + 1 + rng.IntN(c.Len()-1)) % c.Len()
			c.Stop(second)
			kills++
			down = append(down, second)
			pause = time.Duration(500+rng.IntN(3500)) * time.Millisecond
		}
		sleepUntil(ctx, time.Now().Add(pause))
		for _, i := range down {
			if err := c.TryStart(i); err != nil {
				return kills, err
			}
		}
	}
	return kills, nil
}

func sleepUntil(ctx context.Context, at time.Time) bool {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// chaosRW is the read/write lock of TestLibraryChaos.
const chaosRW = "chaos/rw"

// chaosLedger is what the workers tell each other, under one mutex.
type chaosLedger struct {
	mu        sync.Mutex
	leases    map[string][]*Lease            // lock -> Leases granted and not given up
	shared    map[*Lease]bool                // a reader's Lease
	holdToken map[string]map[*Session]uint64 // lock -> session -> its hold's token
	maxToken  map[string]uint64              // lock -> highest token granted
	// lock -> highest token granted to an exclusive hold
	maxExclusive map[string]uint64
	resource     map[string]uint64 // lock -> highest token the fenced resource accepted
	violations   []string

	grants, reentrant, sessions, writes int
	outcomes                            map[string]int
}

func (g *chaosLedger) violate(format string, args ...any) {
	g.violations = append(g.violations, fmt.Sprintf(format, args...))
}

// granted registers l, just granted (a reader's if shared), after
// checking it against every other session's Lease on the lock and the
// lock's tokens.
func (g *chaosLedger) granted(l *Lease, shared bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.grants++
	name, s := l.Name(), l.Session()
	for _, o := range g.leases[name] {
		if o.Session() != s && (!shared || !g.shared[o]) {
			if r := o.Remaining(); r > 0 {
				g.violate("lock %s granted to session %d (token %d) while session %d's Lease (token %d) is valid for %v more",
					name, s.ID(), l.Token(), o.Session().ID(), o.Token(), r)
			}
		}
	}
	if g.holdToken[name] == nil {
		g.holdToken[name] = map[*Session]uint64{}
	}
	if tok, ok := g.holdToken[name][s]; ok {
		g.reentrant++
		if tok != l.Token() {
			g.violate("session %d re-entered lock %s, which it holds with token %d, and got token %d", s.ID(), name, tok, l.Token())
		}
	} else {
		// Holds are registered in the order their clients learn of them:
		// a writer's after every earlier hold's release, which follows its
		// grant, but two readers' in either order.
		if shared && l.Token() <= g.maxExclusive[name] {
			g.violate("lock %s: a reader's new hold (session %d) has token %d, not above the writer's %d granted earlier", name, s.ID(), l.Token(), g.maxExclusive[name])
		}
		if !shared && l.Token() <= g.maxToken[name] {
			g.violate("lock %s: a new exclusive hold of session %d has token %d, not above %d granted earlier", name, s.ID(), l.Token(), g.maxToken[name])
		}
		g.maxToken[name] = max(g.maxToken[name], l.Token())
		if !shared {
			g.maxExclusive[name] = max(g.maxExclusive[name], l.Token())
		}
		g.holdToken[name][s] = l.Token()
	}
	g.leases[name] = append(slices.DeleteFunc(g.leases[name], func(o *Lease) bool {
		if o.Err() != nil && o.Session() != s {
			delete(g.shared, o)
			return true
		}
		return false
	}), l)
	if shared {
		g.shared[l] = true
	}
}

// givenUp unregisters l before its release: its worker stops using it
// first. last says whether it was the hold's last Lease.
func (g *chaosLedger) givenUp(l *Lease, last bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leases[l.Name()] = slices.DeleteFunc(g.leases[l.Name()], func(o *Lease) bool { return o == l })
	delete(g.shared, l)
	if last {
		delete(g.holdToken[l.Name()], l.Session())
	}
}

// sessionEnded unregisters every Lease of s (closed or lost).
func (g *chaosLedger) sessionEnded(s *Session) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for name := range g.leases {
		g.leases[name] = slices.DeleteFunc(g.leases[name], func(o *Lease) bool {
			if o.Session() == s {
				delete(g.shared, o)
				return true
			}
			return false
		})
		delete(g.holdToken[name], s)
	}
}

// write writes to the lock's fenced resource with l's token, if l is
// valid and exclusive: the resource refuses a token below one it
// accepted.
func (g *chaosLedger) write(l *Lease) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !l.Valid() || g.shared[l] {
		return
	}
	g.writes++
	if l.Token() < g.resource[l.Name()] {
		g.violate("fenced resource of lock %s refused token %d of a valid Lease of session %d: it accepted %d",
			l.Name(), l.Token(), l.Session().ID(), g.resource[l.Name()])
		return
	}
	g.resource[l.Name()] = l.Token()
}

func (g *chaosLedger) outcome(what string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.outcomes == nil {
		g.outcomes = map[string]int{}
	}
	k := what + ":ok"
	if err != nil {
		k = what + ":" + errorKind(err)
	}
	g.outcomes[k]++
}

// errorKind names err by the library's sentinel it matches.
func errorKind(err error) string {
	for _, e := range []error{ErrLockBusy, ErrWaitTimedOut, ErrSessionLost, ErrSessionClosed, ErrJeopardy, ErrNotHeld,
		ErrOutcomeUnknown, ErrUnavailable, ErrOverloaded, ErrTooManyPending, context.DeadlineExceeded, context.Canceled} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "other"
}

// chaosWorker is one process of the user's: one session at a time.
type chaosWorker struct {
	id    int
	cl    *Client
	g     *chaosLedger
	rng   *rand.Rand
	locks []string
	s     *Session
	held  map[string][]*Lease // lock -> its Leases (counts of one hold)
	// Of the holds in held: a mutex's hold limit (a reentrant acquire
	// must say the same), and whether the read/write lock's is a reader's.
	holdLimit map[string]time.Duration
	manual    map[string]bool // the hold is not renewed
	reader    bool
	err       error // an outcome the library must never give
}

func (w *chaosWorker) run(ctx context.Context, until time.Time) {
	for time.Now().Before(until) && ctx.Err() == nil && w.err == nil {
		w.step(ctx)
	}
}

// compare returns how the server's holds of w's session differ from its
// Leases, "" if they do not.
func (w *chaosWorker) compare(ctx context.Context) string {
	for _, name := range w.locks {
		info, err := w.cl.Get(ctx, name)
		if err != nil {
			return fmt.Sprintf("get %s: %v", name, err)
		}
		var count uint32
		for _, h := range info.Holders {
			if h.SessionID == w.s.ID() {
				count = h.Count
			}
		}
		ls := w.held[name]
		if int(count) == len(ls) {
			continue
		}
		// A hold whose limit passed as the client counts ends on the
		// server a little later (its own count).
		if count == 0 && len(ls) > 0 && errors.Is(ls[0].Err(), ErrHoldExpired) {
			continue
		}
		return fmt.Sprintf("session %d holds lock %s %d times on the server, with %d Leases", w.s.ID(), name, count, len(ls))
	}
	return ""
}

func (w *chaosWorker) step(ctx context.Context) {
	if w.s == nil {
		octx, cancel := context.WithTimeout(ctx, 3*time.Second)
		s, err := w.cl.NewSession(octx, WithTTL(3*time.Second), WithOwner(fmt.Sprintf("chaos-%d", w.id)))
		cancel()
		w.g.outcome("open", err)
		if err != nil {
			sleepUntil(ctx, time.Now().Add(20*time.Millisecond))
			return
		}
		w.s = s
		w.g.mu.Lock()
		w.g.sessions++
		w.g.mu.Unlock()
		return
	}
	// A hold whose limit passed as the client counts (one not renewed,
	// or whose renewal was refused) is released: the server may still
	// have it, until its own count of the limit ends it (ErrNotHeld
	// then). Any other Lease lost (jeopardy, session end): the process
	// gives the session up, which releases what the server still holds
	// for it.
	for _, name := range w.heldNames() {
		ls := w.held[name]
		expired := false
		for _, l := range ls {
			switch err := l.Err(); {
			case errors.Is(err, ErrHoldExpired):
				expired = true
			case err != nil:
				w.closeSession(ctx)
				return
			}
		}
		if !expired {
			continue
		}
		delete(w.held, name)
		delete(w.holdLimit, name)
		delete(w.manual, name)
		for i, l := range ls {
			w.g.givenUp(l, i == len(ls)-1)
			octx, cancel := context.WithTimeout(ctx, 3*time.Second)
			err := l.Release(octx)
			cancel()
			w.g.outcome("release-expired", err)
			if err != nil && !errors.Is(err, ErrNotHeld) {
				w.closeSession(ctx)
				return
			}
		}
	}
	for _, name := range w.heldNames() {
		w.g.write(w.held[name][0])
	}
	name := w.locks[w.rng.IntN(len(w.locks))]
	if name == chaosRW && w.rng.IntN(2) == 0 {
		w.rwStep(ctx)
		return
	}
	if name == chaosRW {
		name = w.locks[w.rng.IntN(len(w.locks)-1)]
	}
	limit, ok := w.holdLimit[name]
	manual := w.manual[name]
	if !ok && w.rng.IntN(4) == 0 {
		limit = time.Duration(1000+w.rng.IntN(1000)) * time.Millisecond
		manual = w.rng.IntN(2) == 0
	}
	var opts []HoldOption
	if limit > 0 {
		opts = append(opts, WithHoldLimit(limit))
	}
	if manual {
		opts = append(opts, WithManualRenewal()) // never renewed: runs out
	}
	m := w.s.Mutex(name, opts...)
	switch k := w.rng.IntN(100); {
	case k < 25: // wait, giving up after a while (often before the grant)
		octx, cancel := context.WithTimeout(ctx, time.Duration(20+w.rng.IntN(1500))*time.Millisecond)
		l, err := m.Lock(octx)
		cancel()
		w.got("lock", l, false, limit, err)
		w.noteManual(l, manual)
	case k < 40: // try: re-enters a lock it holds
		octx, cancel := context.WithTimeout(ctx, 3*time.Second)
		l, err := m.TryLock(octx)
		cancel()
		w.got("trylock", l, false, limit, err)
		w.noteManual(l, manual)
	case k < 50: // wait a bounded time on the server
		octx, cancel := context.WithTimeout(ctx, 3*time.Second)
		l, err := m.LockWithin(octx, time.Duration(10+w.rng.IntN(500))*time.Millisecond)
		cancel()
		w.got("lockwithin", l, false, limit, err)
		w.noteManual(l, manual)
	case k < 60: // all or none of two mutexes
		mutexes := w.locks[:len(w.locks)-1]
		other := mutexes[(slices.Index(mutexes, name)+1+w.rng.IntN(len(mutexes)-1))%len(mutexes)]
		if len(w.held[name]) > 0 || len(w.held[other]) > 0 {
			return // a set the session partly holds would re-enter those
		}
		octx, cancel := context.WithTimeout(ctx, 3*time.Second)
		ls, err := w.s.TryLockAll(octx, name, other)
		cancel()
		w.g.outcome("trylockall", err)
		if err == nil && len(ls) != 2 {
			w.err = fmt.Errorf("TryLockAll(%s, %s) gave %d leases and no error", name, other, len(ls))
		}
		for _, l := range ls {
			w.keep(l, false, 0)
		}
		w.checkErr("trylockall", err)
	case k < 92: // release one count of a hold (one not renewed runs out)
		names := slices.DeleteFunc(w.heldNames(), func(n string) bool { return w.manual[n] })
		if len(names) == 0 {
			return
		}
		name = names[w.rng.IntN(len(names))]
		ls := w.held[name]
		l := ls[len(ls)-1]
		w.held[name] = ls[:len(ls)-1]
		if len(w.held[name]) == 0 {
			delete(w.held, name)
			delete(w.holdLimit, name)
			delete(w.manual, name)
		}
		w.g.givenUp(l, len(ls) == 1)
		octx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := l.Release(octx)
		cancel()
		w.g.outcome("release", err)
		if err != nil {
			// Not released for sure: the hold may stay; give the
			// session up, which ends it.
			w.closeSession(ctx)
		}
	case k < 95:
		w.closeSession(ctx)
	default: // hold a little longer
		sleepUntil(ctx, time.Now().Add(time.Duration(1+w.rng.IntN(20))*time.Millisecond))
	}
}

// rwStep takes the read/write lock, as a reader or a writer (in the mode
// it holds it in, if it does: a hold's mode never changes).
func (w *chaosWorker) rwStep(ctx context.Context) {
	reader := w.rng.IntN(3) > 0
	if len(w.held[chaosRW]) > 0 {
		reader = w.reader
	}
	rw := w.s.RWMutex(chaosRW)
	octx, cancel := context.WithTimeout(ctx, time.Duration(20+w.rng.IntN(1500))*time.Millisecond)
	defer cancel()
	var l *Lease
	var err error
	switch try := w.rng.IntN(2) == 0; {
	case reader && try:
		l, err = rw.TryRLock(octx)
	case reader:
		l, err = rw.RLock(octx)
	case try:
		l, err = rw.TryLock(octx)
	default:
		l, err = rw.Lock(octx)
	}
	w.got(map[bool]string{true: "rlock", false: "wlock"}[reader], l, reader, 0, err)
}

// noteManual records that the hold of l, if granted, is not renewed.
func (w *chaosWorker) noteManual(l *Lease, manual bool) {
	if l != nil && w.held[l.Name()] != nil {
		w.manual[l.Name()] = manual
	}
}

// got takes an acquire's outcome.
func (w *chaosWorker) got(what string, l *Lease, shared bool, limit time.Duration, err error) {
	w.g.outcome(what, err)
	if err == nil {
		w.keep(l, shared, limit)
	}
	w.checkErr(what, err)
}

func (w *chaosWorker) keep(l *Lease, shared bool, limit time.Duration) {
	w.g.granted(l, shared)
	w.held[l.Name()] = append(w.held[l.Name()], l)
	if l.Name() == chaosRW {
		w.reader = shared
	} else {
		w.holdLimit[l.Name()] = limit
	}
}

// checkErr ends the session on errors that may leave it unusable, and
// records those the library must never return here.
func (w *chaosWorker) checkErr(what string, err error) {
	switch {
	case err == nil, errors.Is(err, ErrLockBusy), errors.Is(err, ErrWaitTimedOut),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
	case errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrLimitMismatch), errors.Is(err, ErrTooManyHolds),
		errors.Is(err, ErrStaleSequence), errors.Is(err, ErrNotWaiting):
		w.err = fmt.Errorf("worker %d: %s: %w", w.id, what, err)
	default: // the session lost, or a call that gave up: start again
		w.closeSession(context.Background())
	}
}

func (w *chaosWorker) heldNames() []string {
	var out []string
	for _, name := range w.locks {
		if len(w.held[name]) > 0 {
			out = append(out, name)
		}
	}
	return out
}

// closeSession gives up every Lease and closes the session, which ends
// its holds and waits on the server; if the close does not get through,
// the session expires by its TTL.
func (w *chaosWorker) closeSession(ctx context.Context) {
	if w.s == nil {
		return
	}
	w.g.sessionEnded(w.s)
	clear(w.held)
	clear(w.holdLimit)
	clear(w.manual)
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	err := w.s.Close(octx)
	cancel()
	w.g.outcome("close", err)
	w.s = nil
}
