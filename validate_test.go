package baton

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
)

// streamWatch notes a client's streams and counts its sessions'
// reconnects, to show afterwards that nothing broke.
type streamWatch struct {
	cl         *Client
	muxes      map[string]*sessionMux
	sessions   map[*Session]*streamConn
	reconnects atomic.Int64
}

func watchStreams(t *testing.T, cl *Client, sessions ...*Session) *streamWatch {
	t.Helper()
	w := &streamWatch{cl: cl, sessions: make(map[*Session]*streamConn)}
	cl.mu.Lock()
	w.muxes = maps.Clone(cl.muxes)
	cl.mu.Unlock()
	if len(w.muxes) == 0 {
		t.Fatal("the client has no Sessions stream")
	}
	for _, s := range sessions {
		s.mu.Lock()
		w.sessions[s] = s.stream
		s.mu.Unlock()
	}
	hook := func() { w.reconnects.Add(1) }
	testHookReconnect.Store(&hook)
	t.Cleanup(func() { testHookReconnect.Store(nil) })
	return w
}

// unbroken fails t unless the client has the same streams as when w was
// made, and no session reconnected.
func (w *streamWatch) unbroken(t *testing.T) {
	t.Helper()
	if n := w.reconnects.Load(); n != 0 {
		t.Fatalf("sessions reconnected %d times", n)
	}
	w.cl.mu.Lock()
	same := maps.Equal(w.muxes, w.cl.muxes)
	w.cl.mu.Unlock()
	if !same {
		t.Fatal("the client's Sessions stream was replaced")
	}
	for s, sc := range w.sessions {
		s.mu.Lock()
		now := s.stream
		s.mu.Unlock()
		if now != sc {
			t.Fatalf("session %d is on another stream", s.ID())
		}
	}
}

// wantInvalid fails t unless err matches ErrInvalidArgument and says
// want, and came at once (the ctx of the call had not ended).
func wantInvalid(t *testing.T, what string, err error, want string) {
	t.Helper()
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: %v, want ErrInvalidArgument saying %q", what, err, want)
	}
}

// TestBadNameFailsAlone: a lock name the encoder refuses (not UTF-8) used
// to end the Sessions stream that every session of the client shares,
// over and over as each resumed and sent it again (issue 23). Now each
// way to acquire it fails at once with ErrInvalidArgument naming what is
// wrong, and another session's hold lives on, on the same stream.
func TestBadNameFailsAlone(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	holder, other := newSession(t, cl), newSession(t, cl)
	held, err := holder.Mutex("jobs/held").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := watchStreams(t, cl, holder, other)

	const bad = "bad\xffname"
	const want = `lock name "bad\xffname" is not valid UTF-8`
	// A short ctx per call: before the fix each hung until it ended.
	calls := map[string]func(context.Context) error{
		"Mutex.Lock":    func(ctx context.Context) error { _, err := other.Mutex(bad).Lock(ctx); return err },
		"Mutex.TryLock": func(ctx context.Context) error { _, err := other.Mutex(bad).TryLock(ctx); return err },
		"Mutex.LockWithin": func(ctx context.Context) error {
			_, err := other.Mutex(bad).LockWithin(ctx, time.Second)
			return err
		},
		"TryLockAll":  func(ctx context.Context) error { _, err := other.TryLockAll(ctx, "jobs/ok", bad); return err },
		"TryLockMany": func(ctx context.Context) error { _, _, err := other.TryLockMany(ctx, bad); return err },
		"LockAll":     func(ctx context.Context) error { _, err := other.LockAll(ctx, bad, "jobs/ok"); return err },
		"Semaphore.Acquire": func(ctx context.Context) error {
			_, err := other.Semaphore(bad, 2).Acquire(ctx)
			return err
		},
		"Semaphore.TryAcquire": func(ctx context.Context) error {
			_, err := other.Semaphore(bad, 2).TryAcquire(ctx)
			return err
		},
		"RWMutex.RLock": func(ctx context.Context) error { _, err := other.RWMutex(bad).RLock(ctx); return err },
		// The holder's own session too: its hold must not suffer.
		"holder's TryLock": func(ctx context.Context) error { _, err := holder.Mutex(bad).TryLock(ctx); return err },
	}
	for what, call := range calls {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := call(cctx)
		ended := cctx.Err()
		cancel()
		if ended != nil {
			t.Fatalf("%s: still unanswered when its ctx ended: %v", what, err)
		}
		wantInvalid(t, what, err, want)
	}
	w.unbroken(t)
	if err := held.Err(); err != nil {
		t.Fatalf("the other session's lease was lost: %v", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("release after the bad names: %v", err)
	}
	again, err := holder.Mutex("jobs/held").TryLock(ctx)
	if err != nil || again.Token() <= held.Token() {
		t.Fatalf("lock again after the bad names: %v (token %d after %d)", err, again.Token(), held.Token())
	}
	if _, err := other.Mutex("jobs/other").TryLock(ctx); err != nil {
		t.Fatalf("the session that sent the bad names: %v", err)
	}
	w.unbroken(t)
}

// TestUnsendableRequestFailsAlone: a request that the checks of the
// public methods would not let through (built here by hand) still fails
// alone if it cannot be encoded or is bigger than a member reads, and the
// shared stream carries on.
func TestUnsendableRequestFailsAlone(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	holder, s := newSession(t, cl), newSession(t, cl)
	held, err := holder.Mutex("jobs/held").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := watchStreams(t, cl, holder, s)
	big := make([]string, 3*rules.MaxAcquireMany) // 1.5 MB of valid names
	for i := range big {
		big[i] = fmt.Sprintf("%0500d", i)
	}
	for what, tt := range map[string]struct {
		req  *batonpb.SessionRequest
		want string
	}{
		"cancel with a name not UTF-8": {
			&batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Cancel{Cancel: &batonpb.CancelRequest{Name: "bad\xff", AcquireSeq: 1}}},
			"cannot be encoded",
		},
		"acquire with an owner key not UTF-8": {
			&batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Acquire{Acquire: &batonpb.AcquireRequest{Name: "ok", OwnerKey: "k\xff"}}},
			"cannot be encoded",
		},
		"acquire_many over the request limit": {
			&batonpb.SessionRequest{Kind: &batonpb.SessionRequest_AcquireMany{AcquireMany: &batonpb.AcquireManyRequest{Names: big}}},
			"a member reads at most",
		},
	} {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.do(cctx, tt.req, nil)
		cancel()
		wantInvalid(t, what, err, tt.want)
	}
	w.unbroken(t)
	if err := held.Err(); err != nil {
		t.Fatalf("the other session's lease was lost: %v", err)
	}
	if _, err := s.Mutex("jobs/after").TryLock(ctx); err != nil {
		t.Fatalf("a request after the bad ones: %v", err)
	}
	w.unbroken(t)
}

// countCalls counts the RPCs a client starts.
type countCalls struct{ n atomic.Int64 }

func (c *countCalls) options() Option {
	return WithDialOptions(
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.n.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			c.n.Add(1)
			return streamer(ctx, desc, cc, method, opts...)
		}),
	)
}

// TestClientChecksBeforeSending: labels, keys, names, limits and sizes
// the members would refuse are refused by the client, at once, with
// ErrInvalidArgument in the rules' words, and nothing is sent: no RPC, no
// request on the session's stream.
func TestClientChecksBeforeSending(t *testing.T) {
	c := startCluster(t, 1)
	var rpcs countCalls
	cl := dial(t, c.Endpoints(0), rpcs.options())
	ctx := testCtx(t)
	s := newSession(t, cl)
	w := watchStreams(t, cl, s)
	long := strings.Repeat("x", rules.MaxOwnerLen+1)
	tooMany := make([]string, rules.MaxAcquireMany+1)
	for i := range tooMany {
		tooMany[i] = "n/" + strings.Repeat("i", i%50) + string(rune('A'+i/50))
	}
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"owner label too long", func() error { _, err := cl.NewSession(ctx, WithOwner(long)); return err }, "owner is 257 bytes; the limit is 256"},
		{"owner label not UTF-8", func() error { _, err := cl.NewSession(ctx, WithOwner("o\xff")); return err }, `owner "o\xff" is not valid UTF-8`},
		{"ttl too short", func() error { _, err := cl.NewSession(ctx, WithTTL(time.Millisecond)); return err }, "ttl 1ms is outside 1s..10m0s"},
		{"owner key too long", func() error { _, err := s.Mutex("a", WithOwnerKey(long)).Lock(ctx); return err }, "owner key is 257 bytes"},
		{"owner key not UTF-8", func() error { _, err := s.Mutex("a", WithOwnerKey("k\xff")).TryLock(ctx); return err }, `owner key "k\xff" is not valid UTF-8`},
		{"rw owner key", func() error { _, err := s.RWMutex("a", WithOwnerKey(long)).Lock(ctx); return err }, "owner key is 257 bytes"},
		{"name too long", func() error { _, err := s.Mutex(strings.Repeat("n", 513)).TryLock(ctx); return err }, "lock name is 513 bytes; the limit is 512"},
		{"name empty", func() error { _, err := s.Mutex("").TryLock(ctx); return err }, "lock name is empty"},
		{"name with a newline", func() error { _, err := s.Mutex("a\nb").Lock(ctx); return err }, "control character U+000A at byte 1"},
		{"hold limit too short", func() error { _, err := s.Mutex("a", WithHoldLimit(10*time.Millisecond)).Lock(ctx); return err }, "hold limit 10ms is outside 1s..24h0m0s"},
		{"rw hold limit", func() error { _, err := s.RWMutex("a", WithHoldLimit(time.Second+1)).RLock(ctx); return err }, "not a whole number of milliseconds"},
		{"wait timeout 0", func() error { _, err := s.Mutex("a").LockWithin(ctx, 0); return err }, "wait timeout 0s is outside"},
		{"wait timeout too long", func() error { _, err := s.Mutex("a").LockWithin(ctx, 25*time.Hour); return err }, "wait timeout 25h0m0s is outside"},
		{"permits", func() error { _, err := s.Semaphore("a", MaxHolders+1).TryAcquire(ctx); return err }, "of 10001 permits"},
		{"too many names", func() error { _, _, err := s.TryLockMany(ctx, tooMany...); return err }, "acquire_many names 1001 locks; the limit is 1000"},
		{"a name twice", func() error { _, err := s.LockAll(ctx, "a", "b", "a"); return err }, `lock "a" is named twice (positions 1 and 3)`},
		{"set owner key", func() error { _, err := s.LockSet([]string{"a"}, WithOwnerKey(long)).TryLockAll(ctx); return err }, "owner key is 257 bytes"},
		{"max readers of a Mutex", func() error { _, err := s.Mutex("a", WithMaxReaders(3)).Lock(ctx); return err }, "WithMaxReaders applies to an RWMutex only, not to a Mutex"},
		{"max readers of a Semaphore", func() error { _, err := s.Semaphore("a", 2, WithMaxReaders(3)).Acquire(ctx); return err }, "WithMaxReaders applies to an RWMutex only, not to a Semaphore"},
		{"max readers of a LockSet", func() error { _, err := s.LockSet([]string{"a"}, WithMaxReaders(3)).LockAll(ctx); return err }, "WithMaxReaders applies to an RWMutex only, not to a LockSet"},
		{"max readers 0", func() error { _, err := s.RWMutex("a", WithMaxReaders(0)).RLock(ctx); return err }, `read/write lock "a" with 0 readers; want 1..10000`},
		{"Get", func() error { _, err := cl.Get(ctx, "g\xff"); return err }, "not valid UTF-8"},
		{"Check", func() error { _, err := cl.Check(ctx, "", 1); return err }, "lock name is empty"},
		{"Watch", func() error { _, err := cl.Watch(ctx, "w\x00"); return err }, "control character U+0000"},
		{"List", func() error { _, err := cl.List(ctx, "p\xff"); return err }, `prefix "p\xff" is not valid UTF-8`},
		{"List long prefix", func() error { _, err := cl.List(ctx, strings.Repeat("p", 513)); return err }, "prefix is 513 bytes"},
		{"CasRelease name", func() error { return cl.CasRelease(ctx, "c\xff", 1, 1) }, "not valid UTF-8"},
		{"CasRelease session", func() error { return cl.CasRelease(ctx, "c", 0, 1) }, "session id 0"},
		{"Blacklist", func() error { return cl.Blacklist(ctx, 0) }, "session id 0"},
		{"AddMember name", func() error { _, _, err := cl.AddMember(ctx, "n/4", "127.0.0.1:1", true); return err }, `member name "n/4"`},
		{"AddMember address", func() error { _, _, err := cl.AddMember(ctx, "n4", "127.0.0.1", true); return err }, `peer address "127.0.0.1": want host:port`},
		{"PromoteMember", func() error { _, err := cl.PromoteMember(ctx, ""); return err }, "want 1..64 characters"},
		{"RemoveMember", func() error { _, err := cl.RemoveMember(ctx, "n\xff"); return err }, "only letters, digits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := rpcs.n.Load()
			// Every session request but a keepalive takes a sequence
			// number (keepalives go on by themselves).
			s.mu.Lock()
			lastSeq := s.requests.lastSeq
			s.mu.Unlock()
			wantInvalid(t, tt.name, tt.call(), tt.want)
			if n := rpcs.n.Load() - before; n != 0 {
				t.Errorf("%d RPCs started", n)
			}
			s.mu.Lock()
			sent := s.requests.lastSeq != lastSeq
			s.mu.Unlock()
			if sent {
				t.Error("a request went on the session's stream")
			}
		})
	}
	w.unbroken(t)
}
