package baton

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// slowReader dials c's member with gRPC's flow-control windows at their
// minimum, so that a stream nobody reads stops the member's sends after
// 64 KiB instead of the megabytes gRPC's window may grow to.
func slowReader(t *testing.T, endpoints string) *Client {
	return dial(t, endpoints, WithDialOptions(grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16)))
}

// TestObserveSeesEveryLeaderAfterFallingBehind: an observer and a watcher
// that read nothing while a leader proclaims thousands of values, resigns
// to a queued candidate that resigns in turn, and a third candidate wins,
// fall further behind than the member queues for them. Reading at last,
// the watcher gets a gap whose missed holds are the leaders it never saw
// (with the values they ended with), and the observer sees every leader
// and the vacancy, in order, each with its last value.
func TestObserveSeesEveryLeaderAfterFallingBehind(t *testing.T) {
	c, cl := single(t)
	ctx := testCtx(t)
	const name = "leader/lagging"
	a, b, cs := newSession(t, cl, WithOwner("a")), newSession(t, cl, WithOwner("b")), newSession(t, cl, WithOwner("c"))
	ea, eb, ec := a.Election(name), b.Election(name), cs.Election(name)

	events, err := slowReader(t, c.Endpoints(0)).Watch(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if first := <-events; first.Holder() != nil {
		t.Fatalf("first state of an empty election: %+v", first)
	}
	obs, err := slowReader(t, c.Endpoints(0)).Election(name).Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := nextLeader(t, obs); l.Term != 0 {
		t.Fatalf("first event of an empty election: %+v", l)
	}

	termA, err := ea.Campaign(ctx, "a0")
	if err != nil {
		t.Fatal(err)
	}
	bLeads := campaignQueued(t, ctx, cl, eb, "b0")
	// Far more changes than the member queues for a watcher
	// (server.MaxWatchBacklog, 1,024) and than 64 KiB of them.
	const writers, each = 8, 400
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := ea.Proclaim(ctx, fmt.Sprintf("a-%d-%d", w, i)); err != nil {
					t.Errorf("proclaim: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := ea.Proclaim(ctx, "a-last"); err != nil {
		t.Fatal(err)
	}
	if err := ea.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	termB := <-bLeads
	if err := eb.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	termC, err := ec.Campaign(ctx, "c0")
	if err != nil {
		t.Fatal(err)
	}

	// The watcher: a gap whose missed holds include b's, which it never
	// saw, then c's hold.
	var gapped bool
	for ev := range events {
		if ev.Gap {
			gapped = true
			if !ev.MissedAll {
				t.Errorf("gap at %d: the history has every end since, but MissedAll is false", ev.Index)
			}
			for _, p := range ev.Missed {
				if p.Token == termB.Token() && p.Value != "b0" {
					t.Errorf("b's missed hold has value %q, want b0", p.Value)
				}
			}
		}
		if h := ev.Holder(); h != nil && h.Token == termC.Token() {
			break
		}
	}
	if !gapped {
		t.Fatal("the watcher never fell behind: the test did not reach the catch-up it is about")
	}

	// The observer: a's values in order ending with a-last, then b, no
	// leader, c; Index grows throughout and nothing reports a gap.
	var seen []Leader
	for l := range obs {
		if n := len(seen); n > 0 && l.Index <= seen[n-1].Index {
			t.Fatalf("index went from %d to %d: %+v then %+v", seen[n-1].Index, l.Index, seen[n-1], l)
		}
		if l.Gap {
			t.Errorf("event %+v reports a gap the history covers", l)
		}
		seen = append(seen, l)
		if l.Term == termC.Token() {
			break
		}
	}
	var tail []string
	for _, l := range seen {
		if l.Term == termA.Token() && l.Value != "a-last" {
			continue // one of a's values, reported live before the observer fell behind
		}
		tail = append(tail, fmt.Sprintf("%d=%s", l.Term, l.Value))
	}
	want := []string{
		fmt.Sprintf("%d=a-last", termA.Token()), fmt.Sprintf("%d=b0", termB.Token()), "0=", fmt.Sprintf("%d=c0", termC.Token()),
	}
	if fmt.Sprint(tail) != fmt.Sprint(want) {
		t.Fatalf("observer saw %v (the last events: %+v), want %v after a's earlier values", tail, seen[max(0, len(seen)-5):], want)
	}
}

// campaignQueued campaigns with e in the background, behind the leader,
// and returns once the campaign waits in the election's queue; the
// leadership comes on the channel when it is won.
func campaignQueued(t *testing.T, ctx context.Context, cl *Client, e *Election, value string) <-chan *Lease {
	t.Helper()
	won := make(chan *Lease, 1)
	go func() {
		l, err := e.Campaign(ctx, value)
		if err != nil {
			t.Errorf("campaign with %q: %v", value, err)
		}
		won <- l
	}()
	waitFor(t, func() bool {
		info, err := cl.Get(ctx, e.Name())
		return err == nil && len(info.Waiters) == 1
	})
	return won
}

// waitFor polls cond every 10 ms for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !cond() {
		if sleep(ctx, 10*time.Millisecond) != nil {
			t.Fatal("condition not met within 10s")
		}
	}
}

// cutDialer dials over TCP until cut: then it closes every connection it
// made and refuses new ones, until mended. A client dialling through it is
// cut off from the whole cluster while the cluster goes on.
type cutDialer struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (d *cutDialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		return nil, errors.New("cut off by the test")
	}
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, "tcp", addr)
	if err == nil {
		d.conns = append(d.conns, conn)
	}
	return conn, err
}

func (d *cutDialer) setCut(cut bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = cut
	if cut {
		for _, c := range d.conns {
			c.Close()
		}
		d.conns = nil
	}
}

// TestObserveResumesFromTheHistory: an observer cut off from the cluster
// while leaders come and go resumes, once it reaches a member again, from
// its last index: it sees each of those leaders, in order, with the value
// each ended with, the vacancy, and the leader now.
func TestObserveResumesFromTheHistory(t *testing.T) {
	c := startCluster(t, 3)
	lead := c.WaitLeader()
	ctx := testCtx(t)
	const name = "leader/resumed"
	cl := dial(t, c.Endpoints(lead))
	a, b, cs := newSession(t, cl, WithOwner("a")), newSession(t, cl, WithOwner("b")), newSession(t, cl, WithOwner("c"))

	var d cutDialer
	obs, err := dial(t, c.Endpoints((lead+1)%3), WithDialer(d.dial)).Election(name).Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := nextLeader(t, obs); l.Term != 0 {
		t.Fatalf("first event of an empty election: %+v", l)
	}
	d.setCut(true)

	ea := a.Election(name)
	termA, err := ea.Campaign(ctx, "a0")
	if err != nil {
		t.Fatal(err)
	}
	bLeads := campaignQueued(t, ctx, cl, b.Election(name), "b0")
	if err := ea.Proclaim(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	if err := ea.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	termB := <-bLeads
	if err := termB.Release(ctx); err != nil {
		t.Fatal(err)
	}
	termC, err := cs.Election(name).Campaign(ctx, "c0")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-obs:
		t.Fatalf("the observer saw %+v while cut off", l)
	default:
	}
	d.setCut(false)

	want := []string{
		fmt.Sprintf("%d=a1", termA.Token()), fmt.Sprintf("%d=b0", termB.Token()), "0=", fmt.Sprintf("%d=c0", termC.Token()),
	}
	var got []string
	var last Leader
	for len(got) < len(want) {
		l := nextLeader(t, obs)
		if l.Index <= last.Index || l.Gap {
			t.Fatalf("event %+v after %+v: index not growing, or a gap the history covers", l, last)
		}
		last = l
		got = append(got, fmt.Sprintf("%d=%s", l.Term, l.Value))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("observer saw %v after resuming, want %v", got, want)
	}
}
