package transport

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// logRecorder is a slog.Handler that keeps every record's level and
// message.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// at lists the messages logged at level.
func (r *logRecorder) at(level slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.recs {
		if rec.Level == level {
			out = append(out, rec.Message)
		}
	}
	return out
}

// TestRepeatsLogOncePerInterval: a line repeated ten times a second is
// logged at once, then once each RepeatInterval with the count left out
// since the last; another key is logged on its own.
func TestRepeatsLogOncePerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &logRecorder{}
		lg := slog.New(rec)
		var r repeats
		start := time.Now()
		for i := range 10 * int(2*RepeatInterval/time.Second) {
			r.log(lg, slog.LevelError, "a", "refused")
			if i == 5 {
				r.log(lg, slog.LevelError, "b", "other")
			}
			time.Sleep(100 * time.Millisecond)
		}
		r.log(lg, slog.LevelError, "a", "refused")
		since := func(d time.Duration) string { return start.Add(d).Format(time.TimeOnly) }
		want := []string{
			"refused",
			"other",
			"refused (and 299 more since " + since(0) + ")",
			"refused (and 299 more since " + since(RepeatInterval) + ")",
		}
		if got := rec.at(slog.LevelError); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// TestOtherClusterLogsOnce: two members of different clusters that keep
// reconnecting log each refusal once (within RepeatInterval), and the
// line names the usual cause, two clusters on the same peer addresses.
func TestOtherClusterLogsOnce(t *testing.T) {
	la, lb := listen(t), listen(t)
	ca := config(t, 1, map[uint64]string{2: lb.Addr().String()})
	ca.ClusterID = func() uint64 { return 111 }
	cb := config(t, 2, map[uint64]string{1: la.Addr().String()})
	cb.ClusterID = func() uint64 { return 222 }
	loga, logb := &logRecorder{}, &logRecorder{}
	ca.Logger, cb.Logger = slog.New(loga), slog.New(logb)
	ra, rb := newRecorder(t), newRecorder(t)
	b, err := StartListener(lb, cb, rb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	a, err := StartListener(la, ca, ra)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	// Each refused connection reports the peer unreachable: wait for
	// three, sending again after each.
	for i := range 3 {
		a.Send(1, []*raftpb.Message{msgApp(1, 2, uint64(5+i))})
		if u := ra.nextUnreachable(t); u != (unreachable{1, 2}) {
			t.Fatalf("ReportUnreachable%+v, want {1 2}", u)
		}
	}
	// Each side refuses the other's connections and is refused on its
	// own: one line of each, however often they reconnect.
	for side, lr := range map[string]*logRecorder{"a": loga, "b": logb} {
		got := lr.at(slog.LevelError)
		kinds := map[string]int{}
		for _, msg := range got {
			if !strings.Contains(msg, "two clusters use the same peer addresses") {
				t.Errorf("member %s logged %q; want it to name two clusters on the same peer addresses", side, msg)
			}
			kinds[strings.SplitN(msg, ".", 2)[0]]++
		}
		if kinds["refused a peer of another cluster"] != 1 || len(got) > 2 || kinds["peer refused this member: it belongs to another cluster"] > 1 {
			t.Errorf("member %s logged these errors over three refusals:\n%s\nwant one of each kind", side, strings.Join(got, "\n"))
		}
	}
}
