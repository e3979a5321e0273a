package server

import (
	"fmt"
	"net/http"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"

	"github.com/batonlock/baton/internal/fsm"
)

// MetricsHandler serves the member's metrics in the Prometheus text
// format: Raft position, state-machine size, and the batching counters
// that show group commit at work (proposals per batch, entries per fsync).
func (s *Server) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		for _, g := range []struct {
			name, help, kind string
			v                uint64
		}{
			{"baton_is_leader", "1 if this member leads its Raft group", "gauge", uint64(leader)},
			{"baton_raft_term", "current Raft term", "gauge", st.Term},
			{"baton_raft_commit_index", "highest log index known committed", "gauge", st.Commit},
			{"baton_raft_applied_index", "highest log index applied to the state machine", "gauge", st.Applied},
			{"baton_sessions", "live sessions", "gauge", uint64(sessions)},
			{"baton_sessions_limit", "live sessions the leader admits at most (--max-sessions; 0: no limit)", "gauge", uint64(s.cfg.Limits.MaxSessions)},
			{"baton_sessions_refused_total", "opens this member refused, leading, because the cluster had --max-sessions live sessions", "counter", s.sessionsRefused.Load()},
			{"baton_sessions_per_user_limit", "live sessions of one user the leader admits at most, with authentication on (--max-sessions-per-user; 0: no limit)", "gauge", uint64(s.cfg.Limits.MaxSessionsPerUser)},
			{"baton_user_sessions_refused_total", "opens this member refused, leading, because their user had --max-sessions-per-user live sessions", "counter", s.userSessionsRefused.Load()},
			{"baton_keepalive_rate_limit", "keepalives a second one session may send (--max-keepalive-rate; 0: no limit)", "gauge", uint64(s.cfg.Limits.MaxKeepAliveRate)},
			{"baton_keepalives_refused_total", "keepalives this member refused, leading, because their session sent more than --max-keepalive-rate a second", "counter", s.keepAlivesRefused.Load()},
			{"baton_locks", "locks held or waited for", "gauge", uint64(locks)},
			{"baton_watches", "Watch streams this member serves", "gauge", uint64(s.watches.active.Load())},
			{"baton_client_connections", "connections open on the client port", "gauge", uint64(conns)},
			{"baton_client_connections_limit", "connections the client port keeps open at most (--max-client-conns; 0: no limit)", "gauge", uint64(s.cfg.Limits.MaxClientConns)},
			{"baton_client_connections_refused_total", "connections closed as soon as accepted because --max-client-conns were open", "counter", connsRefused},
			{"baton_client_handshakes_failed_total", "connections closed before they showed Baton's session framing, gRPC or HTTP/1 within --conn-handshake-timeout (silent, a TLS handshake not done, HTTP/2 without a gRPC call)", "counter", s.handshakesFailed.Load()},
			{"baton_raft_readies_total", "Ready structs handled", "counter", m.Readies},
			{"baton_proposals_total", "commands proposed by this member", "counter", m.Proposals},
			{"baton_propose_batches_total", "MsgProp batches: proposals_total/propose_batches_total is the mean batch", "counter", m.ProposeBatches},
			{"baton_fsyncs_total", "synced log writes", "counter", m.Fsyncs},
			{"baton_entries_saved_total", "log entries written: entries_saved_total/fsyncs_total is entries per fsync", "counter", m.EntriesSaved},
			{"baton_applied_commands_total", "commands applied to the state machine", "counter", m.Applied},
			{"baton_snapshots_total", "snapshots taken", "counter", m.Snapshots},
			{"baton_raft_save_nanoseconds_total", "append worker time writing the log (fsync included)", "counter", m.SaveNanos},
			{"baton_snapshot_apply_pause_nanoseconds_total", "time applying waited for snapshots to freeze the state machine (encoding and saving go on beside applying)", "counter", m.SnapshotPauseNanos},
			{"baton_raft_apply_nanoseconds_total", "Ready loop time applying committed entries", "counter", m.ApplyNanos},
			{"baton_raft_ready_nanoseconds_total", "Ready loop time handling Readies in all", "counter", m.ReadyNanos},
			{"baton_sessions_stream_messages_total", "messages sent on Sessions streams", "counter", s.streamMessages.Load()},
			{"baton_sessions_streams_framed_total", "Sessions streams opened on Baton's own framing (the others are gRPC's)", "counter", s.framedStreams.Load()},
			{"baton_sessions_stream_responses_total", "channel responses sent on Sessions streams: responses_total/messages_total is the mean batch", "counter", s.streamResponses.Load()},
		} {
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", g.name, g.help, g.name, g.kind, g.name, g.v)
		}
		s.writeDiskMetrics(w)
		for _, g := range memoryGauges() {
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", g.name, g.help, g.name, g.name, g.v)
		}
	})
}

type gauge struct {
	name, help string
	v          uint64
}

// memoryGauges reads the Go runtime's memory figures (cheap: no stop the
// world) and, on Linux, the process's resident set: what an operator
// sizes a member by.
func memoryGauges() []gauge {
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
	gs := []gauge{
		{"baton_go_heap_objects_bytes", "bytes of heap objects, live and not yet swept", v[0]},
		{"baton_go_heap_goal_bytes", "heap size at which the Go GC's next cycle ends", v[1]},
		{"baton_go_memory_total_bytes", "all memory the Go runtime has mapped", v[2]},
	}
	if rss, ok := residentBytes(); ok {
		gs = append(gs, gauge{"baton_process_resident_bytes", "resident set size of the process", rss})
	}
	return gs
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
