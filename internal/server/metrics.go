package server

import (
	"net/http"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/raftnode"
)

// MetricsHandler serves the member's metrics in the Prometheus text
// format: Raft position and latencies, state-machine size, the batching
// counters that show group commit at work (proposals per batch, entries
// per fsync), the limits and what they refused, and the locks' own
// metrics by name prefix (lockmetrics.go).
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// newRegistry returns the registry /metrics serves: the member's series,
// read from their sources at each scrape, and the lock metrics.
func (s *Server) newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(memberCollector{s}, s.locks)
	return reg
}

// memberCollector reads the member's series at each scrape from where
// they are kept (the node, the limits, the disk guard, the runtime). It
// is an unchecked collector: it describes nothing in advance, since which
// series it yields depends on the platform (the resident set) and the
// disk (its free space, once known).
type memberCollector struct{ s *Server }

func (memberCollector) Describe(chan<- *prometheus.Desc) {}

// series is one series of memberCollector, with no labels.
type series struct {
	name, help string
	kind       prometheus.ValueType
	v          uint64
}

func (c memberCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	st := s.node.Status()
	m := s.node.Metrics()
	var sessions, locks int
	s.node.View(func(fm *fsm.Machine) { sessions, locks = fm.NumSessions(), fm.NumLocks() })
	leader := 0
	if s.node.IsLeader() {
		leader = 1
	}
	var conns int
	var connsRefused uint64
	if tl := s.clientConns.Load(); tl != nil {
		conns, connsRefused = tl.open(), tl.refused.Load()
	}
	const gauge, counter = prometheus.GaugeValue, prometheus.CounterValue
	all := []series{
		{"baton_is_leader", "1 if this member leads its Raft group", gauge, uint64(leader)},
		{"baton_leader_changes_total", "times this member learnt of a new leader (the first it knew included)", counter, m.LeaderChanges},
		{"baton_raft_term", "current Raft term", gauge, st.Term},
		{"baton_raft_commit_index", "highest log index known committed", gauge, st.Commit},
		{"baton_raft_applied_index", "highest log index applied to the state machine", gauge, st.Applied},
		{"baton_sessions", "live sessions", gauge, uint64(sessions)},
		{"baton_sessions_limit", "live sessions the leader admits at most (--max-sessions; 0: no limit)", gauge, uint64(s.cfg.Limits.MaxSessions)},
		{"baton_sessions_refused_total", "opens this member refused, leading, because the cluster had --max-sessions live sessions", counter, s.sessionsRefused.Load()},
		{"baton_sessions_per_user_limit", "live sessions of one user the leader admits at most, with authentication on (--max-sessions-per-user; 0: no limit)", gauge, uint64(s.cfg.Limits.MaxSessionsPerUser)},
		{"baton_user_sessions_refused_total", "opens this member refused, leading, because their user had --max-sessions-per-user live sessions", counter, s.userSessionsRefused.Load()},
		{"baton_keepalive_rate_limit", "keepalives a second one session may send (--max-keepalive-rate; 0: no limit)", gauge, uint64(s.cfg.Limits.MaxKeepAliveRate)},
		{"baton_keepalives_refused_total", "keepalives this member refused, leading, because their session sent more than --max-keepalive-rate a second", counter, s.keepAlivesRefused.Load()},
		{"baton_locks", "locks held or waited for", gauge, uint64(locks)},
		{"baton_watches", "Watch streams this member serves", gauge, uint64(s.watches.active.Load())},
		{"baton_watch_queued_bytes", "bytes of states queued for this member's Watch streams and not yet sent (at most MaxWatchQueueBytes)", gauge, uint64(max(s.watches.queued.Load(), 0))},
		{"baton_watch_catchups_total", "times a Watch stream's reader fell more than MaxWatchBacklog states behind (or a snapshot came) and the stream sent the lock's state now with the holds it missed", counter, s.watches.catchUps.Load()},
		{"baton_dashboard_feeds", "dashboard feeds (/v1/feed) this member serves", gauge, uint64(max(s.applied.feeds.Load(), 0))},
		{"baton_client_connections", "connections open on the client port", gauge, uint64(conns)},
		{"baton_client_connections_limit", "connections the client port keeps open at most (--max-client-conns; 0: no limit)", gauge, uint64(s.cfg.Limits.MaxClientConns)},
		{"baton_client_connections_refused_total", "connections closed as soon as accepted because --max-client-conns were open", counter, connsRefused},
		{"baton_client_handshakes_failed_total", "connections closed before they showed Baton's session framing, gRPC or HTTP/1 within --conn-handshake-timeout (silent, a TLS handshake not done, HTTP/2 without a gRPC call)", counter, s.handshakesFailed.Load()},
		{"baton_raft_readies_total", "Ready structs handled", counter, m.Readies},
		{"baton_proposals_total", "commands proposed by this member", counter, m.Proposals},
		{"baton_propose_batches_total", "MsgProp batches: proposals_total/propose_batches_total is the mean batch", counter, m.ProposeBatches},
		{"baton_proposals_deferred_total", "waiting acquires that would queue, held back (at most 1 ms) to share the next proposal's log write", counter, m.Deferred},
		{"baton_fsyncs_total", "synced log writes", counter, m.Fsyncs},
		{"baton_entries_saved_total", "log entries written: entries_saved_total/fsyncs_total is entries per fsync", counter, m.EntriesSaved},
		{"baton_applied_commands_total", "commands applied to the state machine", counter, m.Applied},
		{"baton_snapshots_total", "snapshots taken", counter, m.Snapshots},
		{"baton_raft_save_nanoseconds_total", "append worker time writing the log (fsync included)", counter, m.SaveNanos},
		{"baton_snapshot_apply_pause_nanoseconds_total", "time applying waited for snapshots to freeze the state machine (encoding and saving go on beside applying)", counter, m.SnapshotPauseNanos},
		{"baton_raft_apply_nanoseconds_total", "Ready loop time applying committed entries", counter, m.ApplyNanos},
		{"baton_raft_ready_nanoseconds_total", "Ready loop time handling Readies in all", counter, m.ReadyNanos},
		{"baton_sessions_stream_messages_total", "messages sent on Sessions streams", counter, s.streamMessages.Load()},
		{"baton_sessions_streams_framed_total", "Sessions streams opened on Baton's own framing (the others are gRPC's)", counter, s.framedStreams.Load()},
		{"baton_sessions_stream_responses_total", "channel responses sent on Sessions streams: responses_total/messages_total is the mean batch", counter, s.streamResponses.Load()},
	}
	all = append(all, s.diskSeries()...)
	all = append(all, memorySeries()...)
	for _, x := range all {
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(x.name, x.help, nil, nil), x.kind, float64(x.v))
	}
	for _, h := range []struct {
		name, help string
		l          raftnode.Latency
	}{
		{"baton_raft_fsync_duration_seconds", "time of each synced log write, the write and its fdatasync (the append worker's)", m.FsyncLatency},
		{"baton_raft_apply_duration_seconds", "time of applying each batch of committed entries to the state machine, handing their results to the API included", m.ApplyLatency},
		{"baton_raft_commit_duration_seconds", "while this member leads: time from handing each batch of its new entries to the log writer to their commit (a quorum has them on disk)", m.CommitLatency},
	} {
		ch <- latencyHistogram(h.name, h.help, h.l)
	}
}

// latencyHistogram is l as a Prometheus histogram in seconds.
func latencyHistogram(name, help string, l raftnode.Latency) prometheus.Metric {
	buckets := make(map[float64]uint64, len(raftnode.LatencyBounds))
	var cum uint64
	for i, b := range raftnode.LatencyBounds {
		cum += l.Counts[i]
		buckets[b.Seconds()] = cum
	}
	return prometheus.MustNewConstHistogram(prometheus.NewDesc(name, help, nil, nil),
		cum+l.Counts[len(raftnode.LatencyBounds)], l.Sum.Seconds(), buckets)
}

// memorySeries reads the Go runtime's memory figures (cheap: no stop the
// world) and, on Linux, the process's resident set: what an operator
// sizes a member by.
func memorySeries() []series {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/goal:bytes"},
		{Name: "/memory/classes/total:bytes"},
	}
	metrics.Read(samples)
	var v [3]uint64
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	const gauge = prometheus.GaugeValue
	out := []series{
		{"baton_go_heap_objects_bytes", "bytes of heap objects, live and not yet swept", gauge, v[0]},
		{"baton_go_heap_goal_bytes", "heap size at which the Go GC's next cycle ends", gauge, v[1]},
		{"baton_go_memory_total_bytes", "all memory the Go runtime has mapped", gauge, v[2]},
	}
	if rss, ok := residentBytes(); ok {
		out = append(out, series{"baton_process_resident_bytes", "resident set size of the process", gauge, rss})
	}
	return out
}

// residentBytes is the process's resident set size from /proc/self/statm
// (its second field, in pages); false where there is no such file.
func residentBytes() (uint64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * uint64(os.Getpagesize()), true
}
