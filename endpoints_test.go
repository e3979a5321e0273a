package baton

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestOneEndpointSurvivesItsMember is issue 28's acceptance test: a client
// given ONE endpoint of a 3-member cluster holds a lock; that member, the
// leader, is stopped abruptly (no hand-off, no session closed); the
// client learned the others at Dial, so its session resumes on the new
// leader: the lease stays valid for many TTLs, nobody else gets the lock,
// and the release works afterwards.
func TestOneEndpointSurvivesItsMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startInMemory(t, 3)
		lead := c.WaitLeader()
		cl := dial(t, c.ClientAddr(lead), WithDialer(c.Dial))
		want := []string{c.ClientAddr(lead)}
		for i := range 3 {
			if i != lead {
				want = append(want, c.ClientAddr(i))
			}
		}
		if got := cl.Endpoints(); !sameSet(got, want) || got[0] != c.ClientAddr(lead) {
			t.Fatalf("Endpoints after Dial = %v; want the given %s first, then every member %v", got, c.ClientAddr(lead), want)
		}

		const ttl = 3 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := cl.NewSession(ctx, WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		lease, err := s.Mutex("jobs/one-endpoint").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lost := whenLost(lease)

		stopped := time.Now()
		c.Stop(lead)
		time.Sleep(5 * ttl)
		synctest.Wait()
		select {
		case at := <-lost:
			t.Fatalf("the lease was lost %v after its member stopped: %v", at.Sub(stopped), lease.Err())
		default:
		}
		if !lease.Valid() || s.State() != StateHealthy {
			t.Fatalf("after the member stopped: lease valid %v, session %v; want valid and healthy", lease.Valid(), s.State())
		}
		info, err := cl.Get(ctx, "jobs/one-endpoint")
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Holders) != 1 || info.Holders[0].SessionID != s.ID() || info.Holders[0].Token != lease.Token() {
			t.Fatalf("holders after the member stopped: %+v; want session %d with token %d", info.Holders, s.ID(), lease.Token())
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("release after the member stopped: %v", err)
		}
		if info, err := cl.Get(ctx, "jobs/one-endpoint"); err != nil || len(info.Holders) != 0 {
			t.Fatalf("after the release: %+v, %v; want free", info, err)
		}
		if got := cl.Endpoints(); !slices.Contains(got, c.ClientAddr(lead)) {
			t.Errorf("Endpoints %v dropped the endpoint given to Dial", got)
		}
	})
}

// TestEndpointsFollowMembership: the periodic sync drops a member that
// was removed and adds one that was added, and keeps the endpoint given
// to Dial even when that member leaves; with the sync turned off only
// Sync changes the list.
func TestEndpointsFollowMembership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 10 * time.Second
		c := startInMemory(t, 3)
		lead := c.WaitLeader()
		given := (lead + 1) % 3
		cl := dial(t, c.ClientAddr(given), WithDialer(c.Dial), WithSyncInterval(every))
		still := dial(t, c.ClientAddr(given), WithDialer(c.Dial), WithSyncInterval(0))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()

		// Remove the given member, and add n4.
		if _, err := cl.RemoveMember(ctx, c.Config(given).Name); err != nil {
			t.Fatal(err)
		}
		cfg := c.MemberConfig("n4")
		_, initial, err := cl.AddMember(ctx, "n4", cfg.PeerAddr, false)
		if err != nil {
			t.Fatal(err)
		}
		cfg.InitialCluster, cfg.Join = initial, true
		n4 := c.Add(cfg)
		c.WaitLeader()
		// n4's address reaches the leader with its first connection.
		time.Sleep(2 * every)
		synctest.Wait()

		want := []string{c.ClientAddr(given)}
		for _, i := range []int{0, 1, 2, n4} {
			if i != given {
				want = append(want, c.ClientAddr(i))
			}
		}
		if got := cl.Endpoints(); !sameSet(got, want) || got[0] != c.ClientAddr(given) {
			t.Errorf("Endpoints after the sync = %v; want %v (the given one first, n4 added)", got, want)
		}
		before := []string{c.ClientAddr(0), c.ClientAddr(1), c.ClientAddr(2)}
		if got := still.Endpoints(); !sameSet(got, before) {
			t.Errorf("Endpoints without periodic sync = %v; want those learned at Dial, %v", got, before)
		}
		if err := still.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := still.Endpoints(); !sameSet(got, want) {
			t.Errorf("Endpoints after Sync = %v; want %v", got, want)
		}
	})
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestUsableAddr(t *testing.T) {
	for _, tt := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:7700", true},
		{"10.0.0.4:7700", true},
		{"[2001:db8::1]:7700", true},
		{"baton-1.example:7700", true},
		{"0.0.0.0:7700", false},
		{"[::]:7700", false},
		{":7700", false},
		{"127.0.0.1:0", false},
		{"127.0.0.1", false},
		{"127.0.0.1:http", false},
		{"", false},
	} {
		if got := usableAddr(tt.addr); got != tt.want {
			t.Errorf("usableAddr(%q) = %v; want %v", tt.addr, got, tt.want)
		}
	}
}

// TestSetMembers: the given endpoints come first and stay; a member that
// left is dropped; a member named without a usable address keeps the one
// learned before, and is skipped if there was none; an answer without
// members changes nothing.
func TestSetMembers(t *testing.T) {
	l := endpointList{given: []string{"a:1"}, all: []string{"a:1"}}
	step := func(members []Member, want []string, changed bool) {
		t.Helper()
		if got := l.setMembers(members); got != changed {
			t.Errorf("setMembers(%+v) reported changed %v; want %v", members, got, changed)
		}
		if !slices.Equal(l.all, want) {
			t.Errorf("setMembers(%+v): endpoints %v; want %v", members, l.all, want)
		}
	}
	step([]Member{{ID: 1, ClientAddr: "a:1"}, {ID: 2, ClientAddr: "b:1"}, {ID: 3, ClientAddr: "0.0.0.0:1"}},
		[]string{"a:1", "b:1"}, true)
	step([]Member{{ID: 1, ClientAddr: "a:1"}, {ID: 2, ClientAddr: ""}, {ID: 3, ClientAddr: "c:1"}},
		[]string{"a:1", "b:1", "c:1"}, true)
	step(nil, []string{"a:1", "b:1", "c:1"}, false)
	step([]Member{{ID: 3, ClientAddr: "c:1"}}, []string{"a:1", "c:1"}, true)
	step([]Member{{ID: 3, ClientAddr: "c:1"}}, []string{"a:1", "c:1"}, false)
}

// TestSyncIntervalValidated: a negative interval is refused at Dial.
func TestSyncIntervalValidated(t *testing.T) {
	if _, err := Dial(context.Background(), "127.0.0.1:1", WithSyncInterval(-time.Second)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Dial with a negative sync interval: %v; want ErrInvalidArgument", err)
	}
}
