package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// DiskGuard keeps clients from filling the member's data dir: while the
// member leads and its data dir has less than MinFree bytes free, it
// refuses what would add state (an open, an acquire) with NO_SPACE, and
// goes on serving what frees state or writes nothing (releases, cancels,
// closes, keepalives, renewals, reads). A disk that fills all the same
// (the threshold was too low for the writes still admitted) stops the
// member at its next failed log write, as it did before the guard: what
// it acknowledged was synced first, so nothing acknowledged is lost.
type DiskGuard struct {
	// MinFree is the free space, in bytes, under which the leader refuses
	// new work (--min-free-disk); 0 turns the guard off.
	MinFree uint64
	// Free reports the data dir's free bytes, and false when they are
	// unknown (the guard then refuses nothing). It is called for every
	// open and acquire while the member leads, and by Status and /metrics,
	// concurrently: it must be cheap (embed's reads an atomic that a
	// poller fills once a second). nil: unknown.
	Free func() (uint64, bool)
}

// errNoSpace refuses new work while the data dir is nearly full.
var errNoSpace = errors.New("no space")

// diskState is the guard's view now: the free bytes (if known) and
// whether they are below MinFree.
func (g DiskGuard) diskState() (free uint64, known, low bool) {
	if g.Free == nil {
		return 0, false, false
	}
	free, known = g.Free()
	return free, known, known && g.MinFree > 0 && free < g.MinFree
}

// Low reports whether the guard refuses new sessions and acquires now:
// the data dir's free bytes are known and under MinFree. The simulation
// (internal/sim) asks its members' guards through it.
func (g DiskGuard) Low() bool {
	_, _, low := g.diskState()
	return low
}

// AddsNothing reports whether cmd, an OpenSession or an acquire, would
// add nothing if applied to m now, so that a low disk admits it: a retry
// of an open that made a live session, or of a request whose answer the
// session keeps. admitGrowth's exemption; the simulation applies it too.
func AddsNothing(m *fsm.Machine, cmd *fsmpb.Command) bool {
	if cmd.GetOpenSession() != nil {
		_, retry := m.RetriedOpen(cmd)
		return retry
	}
	return m.HasResult(cmd.GetSessionId(), cmd.GetSeq())
}

// admitGrowth refuses cmd, an OpenSession or an acquire about to be
// proposed here, with errNoSpace when this member leads with a data dir
// under DiskGuard.MinFree, unless cmd adds nothing: a retry of an open
// that made a live session, or of a request whose answer the session
// keeps (the Go client resends its unanswered requests on every new
// stream, a queued acquire among them; refusing one would leave a hold or
// a wait that its client was told did not happen). While the disk is low
// it first waits for a ReadIndex round, so that a new leader has applied
// what its predecessors committed before it looks. On a follower it
// refuses nothing: the proposal's NOT_LEADER sends the client on. An
// acquire's refusal waits for its seq fence (raftnode.Node.Refuse).
func (s *Server) admitGrowth(ctx context.Context, cmd *fsmpb.Command) error {
	free, _, low := s.cfg.Disk.diskState()
	if !low || !s.node.IsLeader() {
		return nil
	}
	if err := s.node.ReadBarrier(ctx); err != nil {
		return err
	}
	retry := false
	s.node.View(func(m *fsm.Machine) { retry = AddsNothing(m, cmd) })
	if retry {
		return nil
	}
	s.noSpaceRefused.Add(1)
	what := "acquires"
	if cmd.GetOpenSession() != nil {
		what = "sessions"
	}
	refusal := fmt.Errorf("%w: the leader's data dir has %s free, under the %s it keeps free (--min-free-disk): it takes no new %s until space is freed; keepalives, releases and closes go on",
		errNoSpace, sizeString(free), sizeString(s.cfg.Disk.MinFree), what)
	// An earlier attempt of an acquire may still be on its way: the
	// refusal is final only once the log has settled its seq.
	return s.node.Refuse(ctx, cmd, refusal)
}

// diskStatus adds this member's disk to its Status: every member reports
// its own, leading or not.
func (s *Server) diskStatus(out *batonpb.StatusResponse) {
	free, known, low := s.cfg.Disk.diskState()
	if known {
		out.DiskFreeBytes = &free
	}
	out.MinFreeDiskBytes, out.LowDisk = s.cfg.Disk.MinFree, low
}

// diskSeries are the disk guard's metrics: the free space (when known),
// the threshold, whether it is under it, and the refusals.
func (s *Server) diskSeries() []series {
	free, known, low := s.cfg.Disk.diskState()
	lowV := uint64(0)
	if low {
		lowV = 1
	}
	const gauge = prometheus.GaugeValue
	var out []series
	if known {
		out = append(out, series{"baton_disk_free_bytes", "free space of the data dir's file system, measured once a second", gauge, free})
	}
	return append(out,
		series{"baton_disk_free_bytes_limit", "free space under which this member, leading, refuses new sessions and acquires (--min-free-disk; 0: no limit)", gauge, s.cfg.Disk.MinFree},
		series{"baton_disk_low", "1 while the data dir has less free space than --min-free-disk", gauge, lowV},
		series{"baton_no_space_refused_total", "opens and acquires this member refused, leading, with NO_SPACE because its data dir had less free space than --min-free-disk", prometheus.CounterValue, s.noSpaceRefused.Load()},
	)
}

// sizeString is n bytes for people: "200.0 MiB (209715200 bytes)".
func sizeString(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	v, i := float64(n), 0
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", v, "KMGT"[i-1], n)
}
