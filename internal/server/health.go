package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Health endpoints in the conventions Kubernetes probes (and load
// balancers) expect: 200 "ok" when the check passes, 503 with one line per
// failed check otherwise; "?verbose" lists every check, passed ("[+]") or
// failed ("[-]").
//
// /healthz: the process serves (a liveness probe: restart it if not).
// /readyz: the member can take part in the cluster's service (a readiness
// probe: send it clients): it knows a leader, and the leader still has a
// quorum (a ReadIndex round, on the leader) or this member has applied what
// it knows committed (on a follower, which hands clients on to the leader);
// and its data dir has the free space it keeps (--min-free-disk).

// readyTimeout bounds the leader's ReadIndex round for /readyz; ?timeout=
// changes it (at most maxReadyTimeout).
const (
	readyTimeout    = time.Second
	maxReadyTimeout = 30 * time.Second
)

// readyLag is how many committed entries a follower may not have applied
// yet and still be ready: the batch in flight.
const readyLag = 1024

// HealthzHandler serves /healthz.
func (s *Server) HealthzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeChecks(w, r, "healthz", []check{{name: "serving"}})
	})
}

// ReadyzHandler serves /readyz.
func (s *Server) ReadyzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		timeout := readyTimeout
		if v := r.URL.Query().Get("timeout"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || d > maxReadyTimeout {
				http.Error(w, fmt.Sprintf("timeout %q: want a duration above 0 and at most %v", v, maxReadyTimeout), http.StatusBadRequest)
				return
			}
			timeout = d
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		writeChecks(w, r, "readyz", s.readyChecks(ctx))
	})
}

// check is one named check and why it failed (nil: passed).
type check struct {
	name string
	err  error
}

func (s *Server) readyChecks(ctx context.Context) []check {
	leader := check{name: "leader"}
	st := s.node.Status()
	switch {
	case st.Leader == 0:
		leader.err = fmt.Errorf("this member knows no leader (term %d): it is cut off from the majority, or an election is under way", st.Term)
	case s.node.IsLeader():
		if err := s.node.ReadBarrier(ctx); err != nil {
			leader.err = fmt.Errorf("this member leads but could not confirm it with a quorum: %v", err)
		}
	case st.Commit > st.Applied+readyLag:
		leader.err = fmt.Errorf("this member has applied index %d of the %d it knows committed", st.Applied, st.Commit)
	}
	disk := check{name: "disk"}
	if free, _, low := s.cfg.Disk.diskState(); low {
		disk.err = fmt.Errorf("the data dir has %s free, under the %s it keeps free (--min-free-disk)", sizeString(free), sizeString(s.cfg.Disk.MinFree))
	}
	return []check{leader, disk}
}

// writeChecks answers a health request with checks.
func writeChecks(w http.ResponseWriter, r *http.Request, what string, checks []check) {
	failed := false
	var b strings.Builder
	for _, c := range checks {
		if c.err != nil {
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: %v\n", c.name, c.err)
		} else if _, verbose := r.URL.Query()["verbose"]; verbose {
			fmt.Fprintf(&b, "[+]%s ok\n", c.name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if failed {
		fmt.Fprintf(&b, "%s check failed\n", what)
		w.WriteHeader(http.StatusServiceUnavailable)
	} else {
		b.WriteString("ok\n")
	}
	_, _ = w.Write([]byte(b.String()))
}
