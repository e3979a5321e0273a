package baton_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/embed"
)

// startNode starts a single embedded member in a temporary directory, as a
// test of your own would.
func startNode() (m *embed.Member, stop func()) {
	dir, err := os.MkdirTemp("", "baton-example")
	if err != nil {
		log.Fatal(err)
	}
	cfg := embed.DefaultConfig()
	cfg.DataDir = dir
	cfg.ClientAddr = "127.0.0.1:0"
	cfg.PeerAddr = "127.0.0.1:0"
	cfg.TickInterval = 10 * time.Millisecond // a quick first election
	m, err = embed.Start(cfg)
	if err != nil {
		log.Fatal(err)
	}
	return m, func() {
		m.Close()
		os.RemoveAll(dir)
	}
}

// Lock a job, do the work under the Lease's context, and write through the
// fencing token.
func Example() {
	m, stop := startNode()
	defer stop()
	ctx := context.Background()

	client, err := baton.Dial(ctx, m.ClientAddr())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	session, err := client.NewSession(ctx, baton.WithTTL(10*time.Second), baton.WithOwner("worker-7/batch"))
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close(ctx)

	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second) // bounds the wait, not the hold
	defer cancel()
	lease, err := session.Mutex("jobs/42").Lock(waitCtx)
	if err != nil {
		log.Fatal(err)
	}
	// Work under lease.Context(): it is cancelled before the server could
	// hand the lock to anyone else. Storage should refuse tokens smaller
	// than the largest it has seen.
	work := func(ctx context.Context, token uint64) error {
		return ctx.Err()
	}
	if err := work(lease.Context(), lease.Token()); err != nil {
		log.Fatal(err)
	}
	held, _ := client.Check(ctx, "jobs/42", lease.Token())
	fmt.Println("valid:", lease.Valid(), "held:", held)
	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	held, _ = client.Check(ctx, "jobs/42", lease.Token())
	fmt.Println("after release held:", held)
	// Output:
	// valid: true held: true
	// after release held: false
}

// TryLock answers at once; a busy lock names its holder.
func ExampleMutex_TryLock() {
	m, stop := startNode()
	defer stop()
	ctx := context.Background()
	client, err := baton.Dial(ctx, m.ClientAddr())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	alice, _ := client.NewSession(ctx, baton.WithOwner("alice"))
	bob, _ := client.NewSession(ctx, baton.WithOwner("bob"))
	defer alice.Close(ctx)
	defer bob.Close(ctx)

	if _, err := alice.Mutex("printer").TryLock(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = bob.Mutex("printer").TryLock(ctx)
	var busy *baton.BusyError
	if errors.As(err, &busy) {
		fmt.Println("busy:", errors.Is(err, baton.ErrLockBusy), "held by", busy.Holder.Owner)
	}
	// Output:
	// busy: true held by alice
}

// Reentrancy belongs to (session, owner key): the caller says who "the
// same owner" is.
func ExampleWithOwnerKey() {
	m, stop := startNode()
	defer stop()
	ctx := context.Background()
	client, err := baton.Dial(ctx, m.ClientAddr())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	s, _ := client.NewSession(ctx)
	defer s.Close(ctx)

	outer, _ := s.Mutex("config", baton.WithOwnerKey("request-1")).Lock(ctx)
	inner, _ := s.Mutex("config", baton.WithOwnerKey("request-1")).Lock(ctx) // re-enters
	_, err = s.Mutex("config", baton.WithOwnerKey("request-2")).TryLock(ctx)
	fmt.Println("same token:", outer.Token() == inner.Token())
	fmt.Println("other key busy:", errors.Is(err, baton.ErrLockBusy))
	info, _ := client.Get(ctx, "config")
	fmt.Println("count:", info.Holders[0].Count)
	// Output:
	// same token: true
	// other key busy: true
	// count: 2
}

// Try many locks at once and work on those you got.
func ExampleSession_TryLockMany() {
	m, stop := startNode()
	defer stop()
	ctx := context.Background()
	client, err := baton.Dial(ctx, m.ClientAddr())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	other, _ := client.NewSession(ctx)
	defer other.Close(ctx)
	if _, err := other.Mutex("keys/b").Lock(ctx); err != nil {
		log.Fatal(err)
	}

	s, _ := client.NewSession(ctx)
	defer s.Close(ctx)
	leases, missed, err := s.TryLockMany(ctx, "keys/a", "keys/b", "keys/c")
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range leases {
		fmt.Println("got", l.Name())
	}
	fmt.Println("missed", missed)
	// Output:
	// got keys/a
	// got keys/c
	// missed [keys/b]
}

// A semaphore of 2: two encoders may run at once, a third waits for a
// permit (or, with TryAcquire, is turned away at once).
func ExampleSession_Semaphore() {
	m, stop := startNode()
	defer stop()
	ctx := context.Background()
	client, err := baton.Dial(ctx, m.ClientAddr())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	var permits []*baton.Lease
	for range 2 {
		s, _ := client.NewSession(ctx)
		defer s.Close(ctx)
		l, err := s.Semaphore("pool/encoders", 2).Acquire(ctx)
		if err != nil {
			log.Fatal(err)
		}
		permits = append(permits, l)
	}
	third, _ := client.NewSession(ctx)
	defer third.Close(ctx)
	_, err = third.Semaphore("pool/encoders", 2).TryAcquire(ctx)
	fmt.Println("third:", errors.Is(err, baton.ErrLockBusy))

	// Each permit is a hold of its own, with its own fencing token.
	if err := permits[0].Release(ctx); err != nil {
		log.Fatal(err)
	}
	l, err := third.Semaphore("pool/encoders", 2).TryAcquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("third after a release:", l.Token() > permits[1].Token())
	// Output:
	// third: true
	// third after a release: true
}

// A read/write lock: readers share it, a writer holds it alone, and a
// reader that comes after a waiting writer waits for it.
func ExampleSession_RWMutex() {
	m, stop := startNode()
	defer stop()
	ctx := context.Background()
	client, err := baton.Dial(ctx, m.ClientAddr())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	reader, _ := client.NewSession(ctx)
	defer reader.Close(ctx)
	writer, _ := client.NewSession(ctx)
	defer writer.Close(ctx)

	r, err := reader.RWMutex("config/site").RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, err = writer.RWMutex("config/site").TryLock(ctx)
	fmt.Println("writer beside a reader:", errors.Is(err, baton.ErrLockBusy))
	if err := r.Release(ctx); err != nil {
		log.Fatal(err)
	}
	w, err := writer.RWMutex("config/site").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("writer alone:", w.Valid())
	// Output:
	// writer beside a reader: true
	// writer alone: true
}

// TryLockAll takes a set of locks together or not at all: no deadlock
// from taking them one by one in different orders, no half-taken set.
func ExampleSession_TryLockAll() {
	m, stop := startNode()
	defer stop()
	ctx := context.Background()
	client, err := baton.Dial(ctx, m.ClientAddr())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	other, _ := client.NewSession(ctx)
	defer other.Close(ctx)
	held, err := other.Mutex("accounts/b").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}

	s, _ := client.NewSession(ctx)
	defer s.Close(ctx)
	_, err = s.TryLockAll(ctx, "accounts/a", "accounts/b")
	var busy *baton.BusyError
	if errors.As(err, &busy) {
		fmt.Println("busy:", busy.Name)
	}
	info, _ := client.Get(ctx, "accounts/a")
	fmt.Println("accounts/a holders:", len(info.Holders))

	if err := held.Release(ctx); err != nil {
		log.Fatal(err)
	}
	leases, err := s.TryLockAll(ctx, "accounts/a", "accounts/b")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("got", len(leases), "with one token:", leases[0].Token() == leases[1].Token())
	// Output:
	// busy: accounts/b
	// accounts/a holders: 0
	// got 2 with one token: true
}

// LockSetOf takes locks of several kinds in one all-or-nothing request:
// a job that writes its output alone, reads the shared configuration
// beside other readers, and takes one of four encoder slots.
func ExampleSession_LockSetOf() {
	m, stop := startNode()
	defer stop()
	ctx := context.Background()
	client, err := baton.Dial(ctx, m.ClientAddr())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	s, _ := client.NewSession(ctx)
	defer s.Close(ctx)

	set := s.LockSetOf(
		s.Mutex("reports/2026-11"),
		s.RWMutex("config/site").Reader(),
		s.Semaphore("pool/encoders", 4),
	)
	leases, err := set.LockAll(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range leases {
		fmt.Println("holding", l.Name())
	}
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// holding reports/2026-11
	// holding config/site
	// holding pool/encoders
}

// Leader election: each scheduler campaigns with its address; the one
// that leads holds the election's lock (its term is the fencing token),
// observers learn who leads and at which address, and a leader that
// resigns hands over to the next candidate in campaign order.
func ExampleSession_Election() {
	m, stop := startNode()
	defer stop()
	ctx := context.Background()
	client, err := baton.Dial(ctx, m.ClientAddr())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	a, _ := client.NewSession(ctx, baton.WithOwner("scheduler-a"))
	defer a.Close(ctx)
	b, _ := client.NewSession(ctx, baton.WithOwner("scheduler-b"))
	defer b.Close(ctx)
	ea, eb := a.Election("leader/scheduler"), b.Election("leader/scheduler")

	termA, err := ea.Campaign(ctx, "10.0.0.1:8080") // a campaigns and wins
	if err != nil {
		log.Fatal(err)
	}
	elected := make(chan *baton.Lease)
	go func() { // b campaigns and waits in the queue
		term, err := eb.Campaign(ctx, "10.0.0.2:8080")
		if err != nil {
			log.Fatal(err)
		}
		elected <- term
	}()

	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	leaders, err := eb.Observe(octx) // anyone may observe
	if err != nil {
		log.Fatal(err)
	}
	for l := range leaders {
		if l.Term == 0 {
			continue // no leader for now
		}
		fmt.Println("leader:", l.Owner, l.Value)
		switch l.Value {
		case "10.0.0.1:8080":
			_ = ea.Proclaim(ctx, "10.0.0.1:9090") // a moves, and says so
		case "10.0.0.1:9090":
			_ = ea.Resign(ctx) // a resigns: b leads
		}
		if l.Owner == "scheduler-b" {
			break
		}
	}
	termB := <-elected
	fmt.Println("new term is higher:", termB.Token() > termA.Token())
	// Output:
	// leader: scheduler-a 10.0.0.1:8080
	// leader: scheduler-a 10.0.0.1:9090
	// leader: scheduler-b 10.0.0.2:8080
	// new term is higher: true
}

// Session events tell when the client can no longer vouch for its locks.
func ExampleWithEvents() {
	m, stop := startNode()
	defer stop()
	ctx := context.Background()
	client, err := baton.Dial(ctx, m.ClientAddr())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	events := make(chan baton.Event, 10)
	s, err := client.NewSession(ctx, baton.WithEvents(func(ev baton.Event) { events <- ev }))
	if err != nil {
		log.Fatal(err)
	}
	lease, _ := s.Mutex("leader").Lock(ctx)
	s.Close(ctx)
	ev := <-events
	<-lease.Lost()
	fmt.Println(ev.State, errors.Is(lease.Err(), baton.ErrSessionClosed))
	// Output:
	// closed true
}
