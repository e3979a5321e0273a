package server

import (
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Lock metrics: what the state machine decided about locks (grants,
// expiries, conditional releases, refusals, and how long each hold
// lasted), learnt from the results Deliver hands the server, so that
// every member counts the same entries alike; how long acquires waited,
// timed by the leader that received them; and the oldest hold and the
// longest queue, read from the state at each scrape. Each series is
// labelled by a prefix of the lock's name (prefixOf), so that their
// number stays bounded whatever the names.

const (
	// MaxMetricPrefixes bounds the prefixes that label lock metrics: the
	// first this many a member meets have series of their own, the rest
	// count under OtherPrefix. A prefix has about 60 series (histogram
	// buckets included), so a scrape has at most about 6,000 lines of
	// lock metrics.
	MaxMetricPrefixes = 100
	// OtherPrefix labels the locks of the prefixes past MaxMetricPrefixes.
	OtherPrefix = "other"
	// NoPrefix labels the locks whose names have no '/'. Neither it nor
	// OtherPrefix ends in '/', as every real prefix does.
	NoPrefix = "none"
)

// prefixOf is the label of lock name at depth segments: name up to and
// including its depth-th '/', or its last '/' if it has fewer, or
// NoPrefix if it has none. Depth 1: "jobs/42" and "jobs/a/b" are "jobs/";
// depth 2: "jobs/a/b" is "jobs/a/", "jobs/42" still "jobs/".
func prefixOf(name string, depth int) string {
	end := -1
	for range depth {
		i := strings.IndexByte(name[end+1:], '/')
		if i < 0 {
			break
		}
		end += i + 1
	}
	if end < 0 {
		return NoPrefix
	}
	return name[:end+1]
}

// lockBuckets are the bounds, in seconds, of the wait and hold
// histograms: from a grant on an idle lock to a batch job's hour.
var lockBuckets = []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600}

// expiryReason is why the leader's clock or an operator ended a hold.
type expiryReason int

const (
	expirySession     expiryReason = iota // its session expired
	expiryHoldLimit                       // its hold limit passed unrenewed
	expiryBlacklisted                     // its session expired after an operator blacklisted it
	expiryRevoked                         // a Revoke's grace passed before its holder let go
	numExpiryReasons
)

var expiryReasonNames = [numExpiryReasons]string{"session_expired", "hold_limit", "blacklisted", "revoked"}

// prefixSeries are the series of one prefix label, resolved once.
type prefixSeries struct {
	prefix              string
	grants, casReleases prometheus.Counter
	expiries            [numExpiryReasons]prometheus.Counter
	waitGranted         prometheus.Observer
	waitNotGranted      prometheus.Observer
	holdTime            prometheus.Observer
	recent              *recentRates // the member's, shared by every prefix
}

// lockMetrics are the lock metrics of a member: a prometheus.Collector.
type lockMetrics struct {
	depth int
	view  func(func(*fsm.Machine))

	grants, casReleases, expiries, refusals *prometheus.CounterVec
	waitTime, holdTime                      *prometheus.HistogramVec
	oldestHold, longestQueue                *prometheus.Desc

	// prefixes maps each prefix met so far to its series; it is replaced,
	// never changed, when one is added (under mu), so that looking one up
	// takes no lock. other is OtherPrefix's series, made when the first
	// prefix past MaxMetricPrefixes comes, or, at depth 0, the only ones.
	prefixes  atomic.Pointer[map[string]*prefixSeries]
	mu        sync.Mutex
	other     *prefixSeries
	otherOnce sync.Once

	// Owned by the Ready loop (Deliver, Flush, call.Complete,
	// StoppedLeading). table is refilled from the state at the next
	// Flush when reseed is set (at start, and after a snapshot replaced
	// the state); waitStarts has, while leading, when each queued acquire
	// of a Sessions stream arrived.
	table      holdTable
	reseed     bool
	waitStarts map[waitID]time.Time

	// recent are the last minutes' grants and waits, second by second,
	// for the dashboard (rates.go).
	recent recentRates
}

// newLockMetrics returns the lock metrics labelled at depth (0: no
// label), reading the state through view.
func newLockMetrics(depth int, view func(func(*fsm.Machine))) *lockMetrics {
	var prefix []string
	if depth > 0 {
		prefix = []string{"prefix"}
	}
	labels := func(more ...string) []string { return append(append([]string(nil), prefix...), more...) }
	lm := &lockMetrics{
		depth: depth,
		view:  view,
		grants: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_lock_grants_total",
			Help: "holds granted, at once or to a waiter"}, labels()),
		casReleases: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_lock_cas_releases_total",
			Help: "holds an operator's conditional release (CasRelease) ended"}, labels()),
		expiries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_lock_expiries_total",
			Help: "holds ended by the leader's clock: their session expired (reason session_expired, or blacklisted when an operator had blacklisted it) or their hold limit passed unrenewed (hold_limit) or a revoke's grace passed (revoked)"}, labels("reason")),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_lock_refusals_total",
			Help: "lock requests (acquire, acquire-many, release, cancel, conditional release) the state machine refused, by the API's Reason"}, labels("reason")),
		waitTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "baton_lock_wait_seconds",
			Help:    "while this member leads: time from an acquire's arrival to its grant (outcome granted) or its end without one (not_granted: busy, refused, timed out, cancelled)",
			Buckets: lockBuckets}, labels("outcome")),
		holdTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "baton_lock_hold_seconds",
			Help:    "time from a hold's grant to its end, by the wall clocks of the leaders that proposed them",
			Buckets: lockBuckets}, labels()),
		oldestHold: prometheus.NewDesc("baton_lock_oldest_hold_seconds",
			"age of the oldest hold, by the wall clock of the leader that granted it (0: none)", prefix, nil),
		longestQueue: prometheus.NewDesc("baton_lock_longest_queue",
			"waiters of the lock with the most", prefix, nil),
		reseed: true,
	}
	lm.prefixes.Store(&map[string]*prefixSeries{})
	if depth == 0 {
		lm.otherOnce.Do(func() { lm.other = lm.newSeries("") })
	}
	return lm
}

// otherSeries is OtherPrefix's series, made on first use.
func (lm *lockMetrics) otherSeries() *prefixSeries {
	lm.otherOnce.Do(func() { lm.other = lm.newSeries(OtherPrefix) })
	return lm.other
}

// labels are the label values of prefix and then more.
func (lm *lockMetrics) labels(prefix string, more ...string) []string {
	if lm.depth == 0 {
		return more
	}
	return append([]string{prefix}, more...)
}

func (lm *lockMetrics) newSeries(prefix string) *prefixSeries {
	ps := &prefixSeries{
		prefix:         prefix,
		grants:         lm.grants.WithLabelValues(lm.labels(prefix)...),
		casReleases:    lm.casReleases.WithLabelValues(lm.labels(prefix)...),
		waitGranted:    lm.waitTime.WithLabelValues(lm.labels(prefix, "granted")...),
		waitNotGranted: lm.waitTime.WithLabelValues(lm.labels(prefix, "not_granted")...),
		holdTime:       lm.holdTime.WithLabelValues(lm.labels(prefix)...),
		recent:         &lm.recent,
	}
	for r := range numExpiryReasons {
		ps.expiries[r] = lm.expiries.WithLabelValues(lm.labels(prefix, expiryReasonNames[r])...)
	}
	return ps
}

// series returns the series of lock name, adding its prefix's if there
// is room.
func (lm *lockMetrics) series(name string) *prefixSeries {
	if lm.depth == 0 {
		return lm.other
	}
	p := prefixOf(name, lm.depth)
	m := *lm.prefixes.Load()
	if ps, ok := m[p]; ok {
		return ps
	}
	if len(m) >= MaxMetricPrefixes {
		return lm.otherSeries()
	}
	lm.mu.Lock()
	defer lm.mu.Unlock()
	m = *lm.prefixes.Load()
	if ps, ok := m[p]; ok {
		return ps
	}
	if len(m) >= MaxMetricPrefixes {
		return lm.otherSeries()
	}
	ps := lm.newSeries(strings.Clone(p)) // not the lock name's memory
	next := maps.Clone(m)
	next[ps.prefix] = ps
	lm.prefixes.Store(&next)
	return ps
}

// applied counts what the entry at index, cmd, did to locks (res): on
// the Ready loop, for each applied command, in log order. A grant is the
// entry's own when its token is the entry's index (a reentrant acquire,
// or an answer from the exactly-once cache, shows an older token); a
// queued wait granted as a re-entry of a hold the same entry granted its
// node is marked so (Grant.reentry), and is no new hold either.
func (lm *lockMetrics) applied(index uint64, cmd *fsmpb.Command, res *fsmpb.Result) {
	wall := cmd.GetWallTimeUnixNano()
	refused := res.GetError() != fsmpb.Error_ERROR_NONE
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_Acquire:
		if refused {
			lm.refused(op.Acquire.GetLock(), res.GetError())
		} else if o := res.GetAcquire(); o.GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED && o.GetToken() == index {
			lm.granted(cmd.GetSessionId(), o.GetLock(), index, wall)
		}
	case *fsmpb.Command_AcquireMany:
		if locks := op.AcquireMany.GetLocks(); refused && len(locks) > 0 {
			lm.refused(locks[0], res.GetError())
		}
		for _, o := range res.GetAcquireMany() {
			if o.GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED && o.GetToken() == index {
				lm.granted(cmd.GetSessionId(), o.GetLock(), index, wall)
			}
		}
	case *fsmpb.Command_Release:
		if refused {
			lm.refused(op.Release.GetLock(), res.GetError())
		} else if res.GetRemainingCount() == 0 {
			lm.ended(cmd.GetSessionId(), op.Release.GetLock(), op.Release.GetToken(), wall)
		}
	case *fsmpb.Command_CancelWait:
		c := op.CancelWait
		switch {
		case refused && cmd.GetSessionId() != 0: // the client's own cancel, not a leader's or server's
			lm.refused(c.GetLock(), res.GetError())
		case !refused && c.GetAbandoned() && res.GetAcquire() != nil && res.GetRemainingCount() == 0:
			lm.ended(c.GetSessionId(), c.GetLock(), res.GetAcquire().GetToken(), wall)
		}
	case *fsmpb.Command_CasRelease:
		if refused {
			lm.refused(op.CasRelease.GetLock(), res.GetError())
		}
		for _, e := range res.GetHoldsEnded() {
			lm.ended(e.GetSessionId(), e.GetLock(), e.GetToken(), wall).casReleases.Inc()
		}
	case *fsmpb.Command_ExpireHold:
		for _, e := range res.GetHoldsEnded() {
			lm.ended(e.GetSessionId(), e.GetLock(), e.GetToken(), wall).expiries[expiryHoldLimit].Inc()
		}
	case *fsmpb.Command_EndRevokedHold:
		for _, e := range res.GetHoldsEnded() {
			lm.ended(e.GetSessionId(), e.GetLock(), e.GetToken(), wall).expiries[expiryRevoked].Inc()
		}
	case *fsmpb.Command_BlacklistSession:
		if !refused {
			lm.table.blacklist(op.BlacklistSession.GetSessionId())
		}
	}
	for _, g := range res.GetGrants() {
		var ps *prefixSeries
		if g.GetReentry() {
			ps = lm.series(g.GetLock()) // a count more of a hold the entry granted
		} else {
			ps = lm.granted(g.GetSessionId(), g.GetLock(), g.GetToken(), wall)
		}
		lm.waitEnded(waitID{g.GetSessionId(), g.GetAcquireSeq()}, ps, true)
	}
	if len(lm.waitStarts) > 0 {
		for _, e := range res.GetWaitsEnded() {
			lm.waitEnded(waitID{e.GetSessionId(), e.GetAcquireSeq()}, lm.series(e.GetLock()), false)
		}
	}
	for _, id := range res.GetSessionsEnded() {
		holds, blacklisted := lm.table.endSession(id)
		reason := expirySession
		if blacklisted {
			reason = expiryBlacklisted
		}
		for _, h := range holds {
			h.series.holdTime.Observe(nanosToSeconds(wall - h.since))
			if cmd.GetExpireSession() != nil {
				h.series.expiries[reason].Inc()
			}
		}
	}
}

func (lm *lockMetrics) granted(session uint64, lock string, token uint64, since int64) *prefixSeries {
	ps := lm.series(lock)
	ps.grants.Inc()
	lm.recent.granted(since)
	lm.table.add(session, token, since, ps)
	return ps
}

// ended observes the end of the hold of session on lock with token, at
// wall, and returns its series.
func (lm *lockMetrics) ended(session uint64, lock string, token uint64, wall int64) *prefixSeries {
	ps := lm.series(lock)
	if since, ok := lm.table.end(session, token, ps); ok {
		ps.holdTime.Observe(nanosToSeconds(wall - since))
	}
	return ps
}

func (lm *lockMetrics) refused(lock string, code fsmpb.Error) {
	lm.refusals.WithLabelValues(lm.labels(lm.series(lock).prefix, reasonOfFSM(code).String())...).Inc()
}

// waitStarted notes, on the leader's loop, that the queued acquire id of
// a Sessions stream arrived at arrived (unless a retry of it did before).
func (lm *lockMetrics) waitStarted(id waitID, arrived time.Time) {
	if lm.waitStarts == nil {
		lm.waitStarts = make(map[waitID]time.Time)
	}
	if _, ok := lm.waitStarts[id]; !ok {
		lm.waitStarts[id] = arrived
	}
}

// waitEnded observes the wait of the queued acquire id, if noted.
func (lm *lockMetrics) waitEnded(id waitID, ps *prefixSeries, granted bool) {
	arrived, ok := lm.waitStarts[id]
	if !ok {
		return
	}
	delete(lm.waitStarts, id)
	ps.observeWait(time.Since(arrived), granted)
}

func (ps *prefixSeries) observeWait(d time.Duration, granted bool) {
	if granted {
		ps.waitGranted.Observe(d.Seconds())
		ps.recent.waited(time.Now(), d)
	} else {
		ps.waitNotGranted.Observe(d.Seconds())
	}
}

// acquireAnswered observes, on the leader, an acquire that arrived at
// arrived and was answered with res (its outcome, or the state machine's
// refusal): a grant or an end ends its wait, a queued one starts it.
func (lm *lockMetrics) acquireAnswered(lock string, id waitID, arrived time.Time, res *fsmpb.Result) {
	switch res.GetAcquire().GetStatus() {
	case fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED:
		lm.waitStarted(id, arrived)
	case fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED:
		lm.series(lock).observeWait(time.Since(arrived), true)
	default:
		lm.series(lock).observeWait(time.Since(arrived), false)
	}
}

// stoppedLeading forgets the waits noted: the next leader answers them.
func (lm *lockMetrics) stoppedLeading() { lm.waitStarts = nil }

// flushed refills the hold table from the state if due: at the end of a
// batch, when the state is what every result delivered so far made it.
// It costs a walk of every hold, once at start and once per snapshot
// received.
func (lm *lockMetrics) flushed() {
	if !lm.reseed {
		return
	}
	lm.reseed = false
	lm.view(func(m *fsm.Machine) {
		lm.table.reset()
		m.EachHold(func(lock string, session, token uint64, since int64) {
			lm.table.add(session, token, since, lm.series(lock))
		})
		for _, s := range m.SessionIDs() {
			if s.Blacklisted {
				lm.table.blacklist(s.ID)
			}
		}
	})
	lm.table.sortAll()
}

func nanosToSeconds(d int64) float64 { return max(float64(d)/float64(time.Second), 0) }

// Describe implements prometheus.Collector.
func (lm *lockMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range lm.collectors() {
		c.Describe(ch)
	}
	ch <- lm.oldestHold
	ch <- lm.longestQueue
}

// Collect implements prometheus.Collector.
func (lm *lockMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range lm.collectors() {
		c.Collect(ch)
	}
	lm.collectLoads(ch)
}

func (lm *lockMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{lm.grants, lm.casReleases, lm.expiries, lm.refusals, lm.waitTime, lm.holdTime}
}

// scanChunk is how many locks a scrape reads under one hold of the
// state's read lock: applying waits for at most one chunk.
const scanChunk = 4096

// prefixLoad is what a scrape finds of one prefix's locks.
type prefixLoad struct {
	held    bool
	oldest  int64 // the oldest hold's since, if held
	longest int
}

// collectLoads walks every lock, scanChunk at a time, for the oldest
// hold and the longest queue of each prefix. Locks come in name order,
// so consecutive ones mostly share a prefix, and a lock costs a prefix
// cut and a comparison besides the walk: about 150 ms of one core a
// scrape at a million locks, in chunks of under a millisecond between
// which applying goes on (BenchmarkCollectLoads). Nothing is kept
// between scrapes.
func (lm *lockMetrics) collectLoads(ch chan<- prometheus.Metric) {
	loads := map[*prefixSeries]*prefixLoad{}
	var cur *prefixSeries
	var load *prefixLoad
	visit := func(name string, holders int, oldest int64, waiters int) {
		if cur == nil || lm.depth > 0 && prefixOf(name, lm.depth) != cur.prefix {
			cur = lm.series(name)
			if load = loads[cur]; load == nil {
				load = &prefixLoad{}
				loads[cur] = load
			}
		}
		if holders > 0 && (!load.held || oldest < load.oldest) {
			load.held, load.oldest = true, oldest
		}
		load.longest = max(load.longest, waiters)
	}
	for after := ""; ; {
		var last string
		lm.view(func(m *fsm.Machine) { last = m.ScanLocks(after, scanChunk, visit) })
		if last == "" {
			break
		}
		after = last
	}
	now := time.Now()
	emit := func(ps *prefixSeries) {
		var age float64
		var longest int
		if l := loads[ps]; l != nil {
			if l.held {
				age = nanosToSeconds(now.UnixNano() - l.oldest)
			}
			longest = l.longest
		}
		labels := lm.labels(ps.prefix)
		ch <- prometheus.MustNewConstMetric(lm.oldestHold, prometheus.GaugeValue, age, labels...)
		ch <- prometheus.MustNewConstMetric(lm.longestQueue, prometheus.GaugeValue, float64(longest), labels...)
	}
	if lm.depth == 0 {
		emit(lm.other)
		return
	}
	m := *lm.prefixes.Load()
	for _, ps := range m {
		emit(ps)
	}
	for ps := range loads {
		if m[ps.prefix] != ps { // OtherPrefix's
			emit(ps)
		}
	}
}
