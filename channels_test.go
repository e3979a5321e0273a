package baton

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
)

// TestSessionsShareOneStream: every session of a client rides on one
// Sessions stream to the leader, and each gets its own answers and grants.
func TestSessionsShareOneStream(t *testing.T) {
	c, cl := single(t)
	ctx := testCtx(t)
	a, b, c3 := newSession(t, cl), newSession(t, cl), newSession(t, cl)
	cl.mu.Lock()
	n := len(cl.muxes)
	cl.mu.Unlock()
	if n != 1 {
		t.Fatalf("the client holds %d Sessions streams for 3 sessions on one member, want 1", n)
	}
	la, err := a.Mutex("shared").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Mutex("shared").TryLock(ctx); !errors.Is(err, ErrLockBusy) {
		t.Fatalf("b's TryLock of a held lock: %v, want ErrLockBusy", err)
	}
	// c waits; its grant is pushed on the shared stream when a releases.
	got := lockAsync(ctx, c3.Mutex("shared"))
	embedtest.WaitFor(t, 5*time.Second, "c queued", func() bool { return len(waiters(t, cl, "shared")) == 1 })
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := recv(t, got)
	if r.err != nil {
		t.Fatalf("c's Lock: %v", r.err)
	}
	if r.lease.Token() <= la.Token() {
		t.Fatalf("c's token %d is not above a's %d", r.lease.Token(), la.Token())
	}
	if r.lease.Session() != c3 {
		t.Fatal("the grant reached another session's call")
	}
	// /metrics counts the stream's messages and the answers they carried.
	msgs, resps := metricValue(t, c.ClientAddr(0), "baton_sessions_stream_messages_total"),
		metricValue(t, c.ClientAddr(0), "baton_sessions_stream_responses_total")
	if msgs == 0 || resps < msgs || resps < 6 {
		t.Fatalf("/metrics: %d Sessions messages carrying %d responses; want at least the 3 opens and 3 lock answers, in no more messages", msgs, resps)
	}
}

// metricValue reads one counter from a member's /metrics.
func metricValue(t *testing.T, addr, name string) uint64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.ParseFloat(v, 64) // large values come as 1.5e+06
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return uint64(n)
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// rawSessions opens a Sessions stream to addr, without the client library.
func rawSessions(t *testing.T, addr string) batonpb.Baton_SessionsClient {
	t.Helper()
	return rawSessionsCtx(t, testCtx(t), addr)
}

// rawSessionsCtx is rawSessions with the stream's context ctx.
func rawSessionsCtx(t *testing.T, ctx context.Context, addr string) batonpb.Baton_SessionsClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	gs, err := batonpb.NewBatonClient(cc).Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return gs
}

func sendFrames(t *testing.T, gs batonpb.Baton_SessionsClient, reqs ...*batonpb.ChannelRequest) {
	t.Helper()
	if err := gs.Send(&batonpb.SessionsRequest{Requests: reqs}); err != nil {
		t.Fatal(err)
	}
}

// nextFrame reads until a frame of channel ch arrives.
func nextFrame(t *testing.T, gs batonpb.Baton_SessionsClient, pending *[]*batonpb.ChannelResponse, ch uint64) *batonpb.ChannelResponse {
	t.Helper()
	for {
		for i, r := range *pending {
			if r.GetChannel() == ch {
				*pending = append((*pending)[:i], (*pending)[i+1:]...)
				return r
			}
		}
		msg, err := gs.Recv()
		if err != nil {
			t.Fatalf("waiting for channel %d: %v", ch, err)
		}
		*pending = append(*pending, msg.GetResponses()...)
	}
}

func openReq(id uint64) *batonpb.SessionRequest {
	return &batonpb.SessionRequest{Id: id, Kind: &batonpb.SessionRequest_Open{Open: &batonpb.OpenSessionRequest{Ttl: durationpb.New(10 * time.Second)}}}
}

// TestSessionsStreamProtocol drives the wire protocol of Sessions: channels
// are independent, a bad first request ends only its channel, a detached
// channel leaves its session alive to resume, and channel 0 is refused.
func TestSessionsStreamProtocol(t *testing.T) {
	c, _ := single(t)
	addr := c.ClientAddr(c.WaitLeader())
	gs := rawSessions(t, addr)
	var pending []*batonpb.ChannelResponse

	// Two channels opened in one message, and a third whose first request
	// is not an open.
	sendFrames(t, gs,
		&batonpb.ChannelRequest{Channel: 1, Request: openReq(1)},
		&batonpb.ChannelRequest{Channel: 2, Request: openReq(1)},
		&batonpb.ChannelRequest{Channel: 3, Request: &batonpb.SessionRequest{Id: 1, Kind: &batonpb.SessionRequest_KeepAlive{KeepAlive: &batonpb.KeepAliveRequest{SessionId: 1}}}},
	)
	f1, f2 := nextFrame(t, gs, &pending, 1), nextFrame(t, gs, &pending, 2)
	s1, s2 := f1.GetResponse().GetOpen().GetSessionId(), f2.GetResponse().GetOpen().GetSessionId()
	if s1 == 0 || s2 == 0 || s1 == s2 {
		t.Fatalf("opens answered %v and %v: want two distinct sessions", f1, f2)
	}
	bad := nextFrame(t, gs, &pending, 3)
	if bad.GetEnd() == nil || codes.Code(bad.GetEnd().GetError().GetCode()) != codes.InvalidArgument {
		t.Fatalf("a channel that starts with a keepalive: %v, want its end with INVALID_ARGUMENT", bad)
	}

	acquire := func(ch, id, session, seq uint64, name string) {
		sendFrames(t, gs, &batonpb.ChannelRequest{Channel: ch, Request: &batonpb.SessionRequest{Id: id, Kind: &batonpb.SessionRequest_Acquire{Acquire: &batonpb.AcquireRequest{
			Header: &batonpb.RequestHeader{SessionId: session, Seq: seq, MinUnackedSeq: seq}, Name: name,
		}}}})
	}
	acquire(1, 2, s1, 1, "p")
	if r := nextFrame(t, gs, &pending, 1).GetResponse(); !r.GetAcquire().GetAcquired() || r.GetId() != 2 {
		t.Fatalf("channel 1's acquire: %v", r)
	}
	acquire(2, 2, s2, 1, "p")
	if r := nextFrame(t, gs, &pending, 2).GetResponse(); r.GetAcquire().GetAcquired() {
		t.Fatalf("channel 2 acquired the lock channel 1 holds: %v", r)
	}
	// A request naming another channel's session is refused on its own.
	acquire(2, 3, s1, 2, "q")
	if r := nextFrame(t, gs, &pending, 2).GetResponse(); codes.Code(r.GetError().GetCode()) != codes.InvalidArgument {
		t.Fatalf("channel 2 acting for session %d: %v, want INVALID_ARGUMENT", s1, r)
	}

	// Detach channel 1; its session lives on. A resume that does not show
	// its secret is refused (channel 5 ends with PERMISSION_DENIED); with
	// the secret it resumes on channel 4, still holding its lock.
	sendFrames(t, gs, &batonpb.ChannelRequest{Channel: 1, Detach: true})
	if end := nextFrame(t, gs, &pending, 1); end.GetEnd() == nil || end.GetEnd().GetError() != nil {
		t.Fatalf("detached channel 1: %v, want a clean end", end)
	}
	for _, wrong := range []string{"", f2.GetResponse().GetOpen().GetSecret()} {
		sendFrames(t, gs, &batonpb.ChannelRequest{Channel: 5, Request: &batonpb.SessionRequest{Id: 1, Kind: &batonpb.SessionRequest_Resume{Resume: &batonpb.ResumeSession{SessionId: s1, Secret: wrong}}}})
		if end := nextFrame(t, gs, &pending, 5); codes.Code(end.GetEnd().GetError().GetCode()) != codes.PermissionDenied {
			t.Fatalf("a resume of session %d showing secret %q: %v, want PERMISSION_DENIED", s1, wrong, end)
		}
	}
	sendFrames(t, gs, &batonpb.ChannelRequest{Channel: 4, Request: &batonpb.SessionRequest{Id: 1, Kind: &batonpb.SessionRequest_Resume{Resume: &batonpb.ResumeSession{SessionId: s1, Secret: f1.GetResponse().GetOpen().GetSecret()}}}})
	if r := nextFrame(t, gs, &pending, 4).GetResponse(); r.GetOpen().GetSessionId() != s1 {
		t.Fatalf("resume of session %d: %v", s1, r)
	}
	// Then what the session holds: p.
	if h := nextFrame(t, gs, &pending, 4).GetResponse().GetHolds(); !h.GetDone() || len(h.GetHolds()) != 1 || h.GetHolds()[0].GetName() != "p" {
		t.Fatalf("holds after the resume of session %d: %v, want p", s1, h)
	}
	acquire(4, 2, s1, 1, "p") // the same seq: the cached answer, still held
	if r := nextFrame(t, gs, &pending, 4).GetResponse(); !r.GetAcquire().GetAcquired() {
		t.Fatalf("after the resume, session %d's acquire of p: %v", s1, r)
	}

	// Channel 0 is malformed: the whole stream ends.
	sendFrames(t, gs, &batonpb.ChannelRequest{Channel: 0, Request: openReq(1)})
	for {
		_, err := gs.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("stream after channel 0: %v, want INVALID_ARGUMENT", err)
		}
		break
	}
}

// TestStreamsEndWhenLeaderStepsDown: a member that stops leading ends the
// session channels attached to it with NOT_LEADER, then the Sessions
// stream, although their clients keep them open, so the clients follow
// the new leader.
func TestStreamsEndWhenLeaderStepsDown(t *testing.T) {
	c := startCluster(t, 3)
	lead := c.WaitLeader()
	addr := c.ClientAddr(lead)

	many := rawSessions(t, addr)
	sendFrames(t, many, &batonpb.ChannelRequest{Channel: 1, Request: openReq(1)})
	var pending []*batonpb.ChannelResponse
	if r := nextFrame(t, many, &pending, 1); r.GetResponse().GetOpen() == nil {
		t.Fatalf("open on a Sessions channel: %v", r)
	}

	// Without its followers the leader steps down (CheckQuorum).
	for i := range c.Len() {
		if i != lead {
			c.Stop(i)
		}
	}
	endC := make(chan *batonpb.ChannelResponse, 1)
	go func() {
		for {
			msg, err := many.Recv()
			if err != nil {
				close(endC)
				return
			}
			for _, r := range msg.GetResponses() {
				if r.GetEnd() != nil {
					endC <- r
					return
				}
			}
		}
	}()
	select {
	case r, ok := <-endC:
		if !ok {
			t.Fatal("the Sessions stream broke instead of ending its channel")
		}
		if codes.Code(r.GetEnd().GetError().GetCode()) != codes.Unavailable || r.GetEnd().GetError().GetReason() != batonpb.Reason_NOT_LEADER {
			t.Fatalf("channel ended with %v, want UNAVAILABLE/NOT_LEADER", r.GetEnd().GetError())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Sessions channel is still open 10 s after its member stopped leading")
	}
	// Then the Sessions stream itself ends: the client keeps no stream to
	// a member that does not lead.
	streamErr := make(chan error, 1)
	go func() {
		for {
			if _, err := many.Recv(); err != nil {
				streamErr <- err
				return
			}
		}
	}()
	select {
	case err := <-streamErr:
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("Sessions stream ended with %v, want UNAVAILABLE", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Sessions stream is still open 10 s after its member stopped leading")
	}
}

// TestSessionsChannelNumberReuse: a channel's number is free as soon as
// its end arrives, as the protocol says: a resume sent on it at once is
// answered. (The server used to free the number only after the end's
// write returned, and lost such a resume now and then.)
func TestSessionsChannelNumberReuse(t *testing.T) {
	// Every resume is a keepalive, and this loop sends them far faster
	// than a member's default keepalive rate admits.
	c := startCluster(t, 1, embedtest.Configure(func(_ int, cfg *embed.Config) { cfg.MaxKeepAliveRate = 1 << 20 }))
	// 5,000 rounds took over 10 s (testCtx's deadline) on a loaded
	// 2-core machine: the stream gets a minute.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	gs := rawSessionsCtx(t, ctx, c.ClientAddr(c.WaitLeader()))
	in := make(chan *batonpb.ChannelResponse, 64)
	var streamErr error // set before in closes
	go func() {
		defer close(in)
		for {
			msg, err := gs.Recv()
			if err != nil {
				streamErr = err
				return
			}
			for _, r := range msg.GetResponses() {
				in <- r
			}
		}
	}()
	next := func(what string) *batonpb.ChannelResponse {
		t.Helper()
		select {
		case r, ok := <-in:
			if !ok {
				t.Fatalf("%s: the stream ended: %v", what, streamErr)
			}
			return r
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no answer in 5 s", what)
		}
		return nil
	}
	sendFrames(t, gs, &batonpb.ChannelRequest{Channel: 1, Request: openReq(1)})
	opened := next("open").GetResponse().GetOpen()
	sid, secret := opened.GetSessionId(), opened.GetSecret()
	if sid == 0 {
		t.Fatal("open failed")
	}
	for i := range 5000 {
		sendFrames(t, gs, &batonpb.ChannelRequest{Channel: 1, Detach: true})
		if e := next("detach"); e.GetEnd() == nil {
			t.Fatalf("round %d: after a detach, %v, want the channel's end", i, e)
		}
		sendFrames(t, gs, &batonpb.ChannelRequest{Channel: 1, Request: &batonpb.SessionRequest{Id: 1, Kind: &batonpb.SessionRequest_Resume{Resume: &batonpb.ResumeSession{SessionId: sid, Secret: secret}}}})
		if r := next("resume on the reused number"); r.GetResponse().GetOpen().GetSessionId() != sid {
			t.Fatalf("round %d: resume on the reused number answered %v", i, r)
		}
		if r := next("holds after the resume"); !r.GetResponse().GetHolds().GetDone() {
			t.Fatalf("round %d: after the resume, %v, want its (empty) holds", i, r)
		}
	}
}

// withoutSessions is a member that serves Status but not the Sessions
// stream: it answers Unimplemented, as a server without that RPC would.
type withoutSessions struct {
	fakeMember
	attempts atomic.Int64 // Sessions streams opened
}

func (f *withoutSessions) Sessions(batonpb.Baton_SessionsServer) error {
	f.attempts.Add(1)
	return status.Error(codes.Unimplemented, "unknown method Sessions")
}

// TestMemberWithoutSessionsIsRefused: the client speaks one session
// protocol. Against a member that does not serve Sessions, NewSession
// fails at once (one attempt, no retries) with an error that matches
// errors.ErrUnsupported and names the stream.
func TestMemberWithoutSessionsIsRefused(t *testing.T) {
	f := &withoutSessions{}
	cl := serveFake(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := cl.NewSession(ctx)
	if err == nil {
		t.Fatalf("session %d opened on a member without Sessions", s.ID())
	}
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "does not serve the Sessions stream") {
		t.Fatalf("new session against a member without Sessions: %v, want errors.ErrUnsupported naming the Sessions stream", err)
	}
	if n := f.attempts.Load(); n != 1 {
		t.Fatalf("%d Sessions streams tried, want 1: the refusal is final", n)
	}
}

// A burst of requests leaves in messages under the member's request limit,
// in order, none empty; a request bigger than the bound goes alone.
func TestSplitRequests(t *testing.T) {
	var q []*batonpb.ChannelRequest
	for i := range 5000 {
		q = append(q, &batonpb.ChannelRequest{Channel: uint64(i + 1), Request: &batonpb.SessionRequest{
			Kind: &batonpb.SessionRequest_Acquire{Acquire: &batonpb.AcquireRequest{Name: fmt.Sprintf("inventory/row/%d", i)}}}})
	}
	q = append(q, &batonpb.ChannelRequest{Channel: 9999, Request: &batonpb.SessionRequest{
		Kind: &batonpb.SessionRequest_Acquire{Acquire: &batonpb.AcquireRequest{Name: strings.Repeat("x", 5000)}}}})
	const max = 4 << 10
	parts := splitRequests(q, max)
	if len(parts) < 2 {
		t.Fatalf("%d parts", len(parts))
	}
	var all []*batonpb.ChannelRequest
	for i, p := range parts {
		if len(p) == 0 {
			t.Fatalf("part %d is empty", i)
		}
		if size := proto.Size(&batonpb.SessionsRequest{Requests: p}); size > max && len(p) > 1 {
			t.Errorf("part %d: %d bytes in %d requests", i, size, len(p))
		}
		all = append(all, p...)
	}
	if len(all) != len(q) {
		t.Fatalf("%d requests out, %d in", len(all), len(q))
	}
	for i := range all {
		if all[i] != q[i] {
			t.Fatalf("request %d out of order", i)
		}
	}
	if last := parts[len(parts)-1]; len(last) != 1 || last[0].GetChannel() != 9999 {
		t.Errorf("the oversized request did not go alone: %d requests", len(last))
	}
	if splitRequests(nil, max) != nil {
		t.Error("nothing to send made a message")
	}
}
