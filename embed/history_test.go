package embed_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
	"github.com/batonlock/baton/internal/fsm"
)

// TestHistoryAgreesAcrossMembers: the history of ended holds is
// replicated state (log version 10). Of three members, one restarts from
// its own snapshot and one, down while the others compacted their logs
// past it, catches up by installing the leader's snapshot; then all three
// tell the same history of every lock at the same applied index, over
// gRPC and HTTP/JSON, and a restart of the whole cluster keeps it.
func TestHistoryAgreesAcrossMembers(t *testing.T) {
	c := startCluster(t, 3, snapshotOften)
	lead := c.WaitLeader()
	cl := c.Client(lead)
	lagging, restarted := (lead+1)%3, (lead+2)%3
	a := openSession(t, cl, "worker-a", time.Minute)
	b := openSession(t, cl, "worker-b", time.Minute)
	waitConverged(t, c)
	c.Stop(lagging)
	var applied uint64
	embed.RaftNode(c.Member(lead)).View(func(fm *fsm.Machine) { applied = fm.AppliedIndex() })

	// Every way a hold ends that a client asks for, on three locks, past
	// the 8 ends a lock keeps, and many entries past SnapshotEntries.
	seq := map[uint64]uint64{}
	acquire := func(s uint64, name string) uint64 {
		t.Helper()
		seq[s]++
		r, err := cl.Acquire(context.Background(), &batonpb.AcquireRequest{Header: hdr(s, seq[s]), Name: name, OwnerKey: "key-" + name})
		if err != nil || !r.GetAcquired() {
			t.Fatalf("acquire %s by session %d: %v %v", name, s, r, err)
		}
		return r.GetToken()
	}
	names := []string{"h/0", "h/1", "h/2"}
	for round := range 32 {
		for _, name := range names {
			s := []uint64{a, b}[round%2]
			tok := acquire(s, name)
			if round%5 == 4 {
				if _, err := cl.CasRelease(context.Background(), &batonpb.CasReleaseRequest{Name: name, SessionId: s, Token: tok}); err != nil {
					t.Fatalf("cas-release %s: %v", name, err)
				}
				continue
			}
			seq[s]++
			if _, err := cl.Release(context.Background(), &batonpb.ReleaseRequest{Header: hdr(s, seq[s]), Name: name, Token: tok, OwnerKey: "key-" + name}); err != nil {
				t.Fatalf("release %s: %v", name, err)
			}
		}
	}
	acquire(b, "h/closed")
	seq[b]++
	if _, err := cl.CloseSession(context.Background(), &batonpb.CloseSessionRequest{SessionId: b, Seq: seq[b], Secret: testSecret}); err != nil {
		t.Fatal(err)
	}
	names = append(names, "h/closed")
	embedtest.WaitFor(t, 10*time.Second, "the leader and the member to restart to save snapshots", func() bool {
		return embed.RaftNode(c.Member(lead)).Metrics().Snapshots > 0 && embed.RaftNode(c.Member(restarted)).Metrics().Snapshots > 0
	})

	// One restarts from its snapshot; the lagging one comes back and is
	// sent the leader's snapshot.
	c.Stop(restarted)
	c.Start(restarted)
	installs := &snapshotLog{}
	c.ChangeConfig(lagging, func(cfg *embed.Config) { cfg.Logger = slog.New(installs) })
	c.Start(lagging)
	waitConverged(t, c)
	if idx := installs.restored(); idx <= applied {
		t.Fatalf("the lagging member (at %d when stopped) restored no snapshot of the leader's (restored %d)", applied, idx)
	}

	want := agreedHistory(t, c, names)
	if got := want["h/1"].GetHolds(); len(got) != fsm.PastHoldsPerLock || got[0].GetHow() != batonpb.HoldEnd_HOLD_END_RELEASED ||
		got[0].GetOwner() != "worker-b" || got[0].GetOwnerKey() != "key-h/1" || got[2].GetHow() != batonpb.HoldEnd_HOLD_END_CAS_RELEASED {
		t.Fatalf("history of h/1: %v; want its last 8 ends, the latest a release by worker-b", got)
	}
	if got := want["h/closed"].GetHolds(); len(got) != 1 || got[0].GetHow() != batonpb.HoldEnd_HOLD_END_SESSION_CLOSED {
		t.Fatalf("history of h/closed: %v, want the close of its session", got)
	}

	// The whole cluster restarts: each member from its own disk.
	for i := range 3 {
		c.Stop(i)
	}
	for i := range 3 {
		c.Start(i)
	}
	c.WaitLeader()
	waitConverged(t, c)
	after := agreedHistory(t, c, names)
	for _, name := range names {
		if !proto.Equal(&batonpb.HistoryResponse{Holds: after[name].GetHolds()}, &batonpb.HistoryResponse{Holds: want[name].GetHolds()}) {
			t.Fatalf("history of %s after the restart: %v, before: %v", name, after[name].GetHolds(), want[name].GetHolds())
		}
	}
}

// agreedHistory reads the history of each of names in every running
// member's state machine, and fails unless all tell the same, replicated,
// at one applied index, and the leader answers it over gRPC and
// HTTP/JSON (followers send reads to the leader). It returns the
// leader's answers.
func agreedHistory(t *testing.T, c *embedtest.Cluster, names []string) map[string]*batonpb.HistoryResponse {
	t.Helper()
	lead := c.WaitLeader()
	out := map[string]*batonpb.HistoryResponse{}
	for _, name := range names {
		var first string
		for _, i := range c.Running() {
			var told string
			embed.RaftNode(c.Member(i)).View(func(fm *fsm.Machine) {
				told = fmt.Sprintf("replicated=%v at %d: %+v", fm.HistoryReplicated(), fm.AppliedIndex(), fm.PastHolds(name))
			})
			if first == "" {
				first = told
			} else if told != first {
				t.Fatalf("history of %s: member %d tells %s; another member %s", name, i, told, first)
			}
		}
		got, err := c.Client(lead).History(context.Background(), &batonpb.HistoryRequest{Name: name})
		if err != nil {
			t.Fatalf("leader %d: history of %s: %v", lead, name, err)
		}
		if !got.GetReplicated() || len(got.GetHolds()) == 0 {
			t.Fatalf("leader %d: history of %s: %v, want a replicated one", lead, name, got)
		}
		var wire []string
		for _, h := range got.GetHolds() {
			wire = append(wire, fmt.Sprintf("s%d/%d/%d/%d", h.GetSessionId(), h.GetToken(), h.GetEndedIndex(), h.GetHow()))
		}
		var local []string
		embed.RaftNode(c.Member(lead)).View(func(fm *fsm.Machine) {
			for _, h := range fm.PastHolds(name) {
				local = append(local, fmt.Sprintf("s%d/%d/%d/%d", h.SessionID, h.Token, h.EndedIndex, h.How))
			}
		})
		if !slices.Equal(wire, local) {
			t.Fatalf("leader %d: history of %s over gRPC %v, in its state machine %v", lead, name, wire, local)
		}
		if overHTTP := historyOverHTTP(t, c.ClientAddr(lead), name); !proto.Equal(overHTTP, got) {
			t.Fatalf("leader %d: history of %s over HTTP %v, over gRPC %v", lead, name, overHTTP, got)
		}
		out[name] = got
	}
	return out
}

func historyOverHTTP(t *testing.T, addr, name string) *batonpb.HistoryResponse {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/v1/history?name=%s", addr, url.QueryEscape(name)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/history?name=%s: %v %s: %s", name, err, resp.Status, body)
	}
	var out batonpb.HistoryResponse
	if err := protojson.Unmarshal(body, &out); err != nil {
		t.Fatalf("GET /v1/history: %v: %s", err, body)
	}
	return &out
}

// snapshotLog is a slog.Handler that keeps the index of the last snapshot
// a member said it restored while running (a snapshot another member
// sent it).
type snapshotLog struct {
	mu    sync.Mutex
	index uint64
}

func (l *snapshotLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *snapshotLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *snapshotLog) WithGroup(string) slog.Handler            { return l }

func (l *snapshotLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "restored snapshot" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "index" {
			l.mu.Lock()
			l.index = a.Value.Uint64()
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *snapshotLog) restored() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.index
}
