package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	. "github.com/batonlock/baton" // moved from the baton package: its names as they were there
	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed/embedtest"
)

// TestStrangerCannotActForASession: a stranger who knows a session's id
// and its lock's token (both public: listings show them) and tries every
// request a session can make, over gRPC and over HTTP, with no secret,
// with a guessed one, and with another session's, is refused with
// PERMISSION_DENIED every time; the victim's Lease stays valid, the lock
// stays its, and its own next requests (whose sequence numbers the
// stranger tried to move past) work.
func TestStrangerCannotActForASession(t *testing.T) {
	c, cl := single(t)
	ctx := testCtx(t)
	victim := newSession(t, cl, WithTTL(10*time.Second), WithOwner("victim"))
	lease, err := victim.Mutex("jobs/42", WithHoldLimit(time.Minute), WithManualRenewal()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := newSession(t, cl, WithOwner("stranger"))
	id, token := victim.ID(), lease.Token()

	addr := c.ClientAddr(0)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := batonpb.NewBatonClient(cc)
	refused := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: %v, want PERMISSION_DENIED naming the secret", what, err)
		}
	}
	for _, secret := range []string{"", "a-guess-of-the-secret-0123", other.Secret()} {
		hdr := func(seq uint64) *batonpb.RequestHeader {
			return &batonpb.RequestHeader{SessionId: id, Seq: seq, MinUnackedSeq: seq, Secret: secret}
		}
		by := fmt.Sprintf(" with secret %q", secret)
		_, err := api.Release(ctx, &batonpb.ReleaseRequest{Header: hdr(1000), Name: "jobs/42", Token: token})
		refused("release"+by, err)
		_, err = api.Acquire(ctx, &batonpb.AcquireRequest{Header: hdr(1001), Name: "jobs/43"})
		refused("acquire"+by, err)
		_, err = api.AcquireMany(ctx, &batonpb.AcquireManyRequest{Header: hdr(1002), Names: []string{"jobs/44"}})
		refused("acquire-many"+by, err)
		_, err = api.RenewHold(ctx, &batonpb.RenewHoldRequest{SessionId: id, Name: "jobs/42", Token: token, Secret: secret})
		refused("renew"+by, err)
		_, err = api.KeepAlive(ctx, &batonpb.KeepAliveRequest{SessionId: id, Secret: secret})
		refused("keepalive"+by, err)
		_, err = api.CloseSession(ctx, &batonpb.CloseSessionRequest{SessionId: id, Seq: 1003, Secret: secret})
		refused("close"+by, err)

		gs, err := api.Sessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := gs.Send(&batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{{Channel: 1, Request: &batonpb.SessionRequest{Id: 1, Kind: &batonpb.SessionRequest_Resume{Resume: &batonpb.ResumeSession{SessionId: id, Secret: secret}}}}}}); err != nil {
			t.Fatal(err)
		}
		// Channel 1 is the stream's only one: its first frame is the answer.
		msg, err := gs.Recv()
		if err != nil || len(msg.GetResponses()) == 0 {
			t.Fatalf("resume of a session channel%s: %v %v", by, msg, err)
		}
		end := msg.GetResponses()[0].GetEnd().GetError()
		refused("resume of a session channel"+by, status.Error(codes.Code(end.GetCode()), end.GetMessage()))

		for _, call := range []struct{ path, body string }{
			{"/v1/locks/release", fmt.Sprintf(`{"header": {"session_id": %d, "seq": 1004, "secret": %q}, "name": "jobs/42", "token": %d}`, id, secret, token)},
			{"/v1/locks/acquire", fmt.Sprintf(`{"header": {"session_id": %d, "seq": 1005, "secret": %q}, "name": "jobs/45"}`, id, secret)},
			{"/v1/locks/renew", fmt.Sprintf(`{"session_id": %d, "name": "jobs/42", "token": %d, "secret": %q}`, id, token, secret)},
			{fmt.Sprintf("/v1/sessions/%d/keepalive", id), fmt.Sprintf(`{"secret": %q}`, secret)},
			{fmt.Sprintf("/v1/sessions/%d/close", id), fmt.Sprintf(`{"seq": 1006, "secret": %q}`, secret)},
		} {
			resp, err := http.Post("http://"+addr+call.path, "application/json", strings.NewReader(call.body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("HTTP %s%s: %s, want 403", call.path, by, resp.Status)
			}
		}
	}

	if !lease.Valid() || lease.Err() != nil || victim.Err() != nil {
		t.Fatalf("after the stranger: lease valid %v, err %v; session err %v", lease.Valid(), lease.Err(), victim.Err())
	}
	info, err := cl.Get(ctx, "jobs/42")
	if err != nil || len(info.Holders) != 1 || info.Holders[0].SessionID != id || info.Holders[0].Token != token {
		t.Fatalf("jobs/42 after the stranger: %+v %v; want held by session %d with token %d", info, err, id, token)
	}
	for _, name := range []string{"jobs/43", "jobs/44", "jobs/45"} {
		if info, err := cl.Get(ctx, name); err != nil || len(info.Holders) != 0 {
			t.Errorf("%s, which only the stranger asked for: %+v %v; want free", name, info, err)
		}
	}
	// The victim's own numbers were not moved: its next requests apply.
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("the victim's renewal: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("the victim's release: %v", err)
	}
	l2, err := victim.Mutex("jobs/46").TryLock(ctx)
	if err != nil {
		t.Fatalf("the victim's next acquire: %v", err)
	}
	l2.Release(ctx)
}

// TestSessionSecretOverHTTP: an HTTP client gets its session's secret from
// the open (the server draws one when the client does not choose it) and
// shows it on each request.
func TestSessionSecretOverHTTP(t *testing.T) {
	c, cl := single(t)
	newSession(t, cl) // the member leads
	base := "http://" + c.ClientAddr(0)
	post := func(path, body string, out any) int {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil && resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode
	}
	var opened struct {
		SessionID string `json:"session_id"`
		Secret    string `json:"secret"`
	}
	if code := post("/v1/sessions", `{"owner": "curl", "ttl": "10s"}`, &opened); code != http.StatusOK || len(opened.Secret) < 22 {
		t.Fatalf("open: %d %+v; want a secret of at least 22 characters", code, opened)
	}
	var acq struct {
		Acquired bool   `json:"acquired"`
		Token    string `json:"token"`
	}
	body := fmt.Sprintf(`{"header": {"session_id": %s, "seq": 1, "secret": %q}, "name": "http/x"}`, opened.SessionID, opened.Secret)
	if code := post("/v1/locks/acquire", body, &acq); code != http.StatusOK || !acq.Acquired {
		t.Fatalf("acquire with the secret: %d %+v", code, acq)
	}
	body = fmt.Sprintf(`{"header": {"session_id": %s, "seq": 2, "secret": %q}, "name": "http/x", "token": %s}`, opened.SessionID, opened.Secret, acq.Token)
	if code := post("/v1/locks/release", body, nil); code != http.StatusOK {
		t.Fatalf("release with the secret: %d", code)
	}
	// A secret the client chooses must be long enough to be one.
	if code := post("/v1/sessions", `{"owner": "curl", "secret": "short"}`, nil); code != http.StatusBadRequest {
		t.Fatalf("open with a 5-character secret: %d, want 400", code)
	}
	// Listings never show a secret.
	resp, err := http.Get(base + "/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	list, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(list), opened.Secret) || strings.Contains(string(list), "secret") {
		t.Fatalf("the session listing shows a secret: %s", list)
	}
}

// TestStrangerCannotStealAWaitersGrant: a stranger's waiting acquire that
// names a victim's queued (session, seq) is refused by the log, and the
// victim's unary call still hears its grant (the server's listener for
// that wait was once replaced by the stranger's and then forgotten).
func TestStrangerCannotStealAWaitersGrant(t *testing.T) {
	c, cl := single(t)
	ctx := testCtx(t)
	holder := newSession(t, cl)
	held, err := holder.Mutex("q/1").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(c.ClientAddr(0), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := batonpb.NewBatonClient(cc)
	opened, err := api.OpenSession(ctx, &batonpb.OpenSessionRequest{Owner: "victim"})
	if err != nil {
		t.Fatal(err)
	}
	id := opened.GetSessionId()
	got := make(chan *batonpb.AcquireResponse, 1)
	go func() {
		r, err := api.Acquire(ctx, &batonpb.AcquireRequest{Name: "q/1", Wait: true,
			Header: &batonpb.RequestHeader{SessionId: id, Seq: 1, Secret: opened.GetSecret()}})
		if err != nil {
			t.Errorf("the victim's wait: %v", err)
		}
		got <- r
	}()
	embedtest.WaitFor(t, 5*time.Second, "the victim queued", func() bool {
		info, err := cl.Get(ctx, "q/1")
		return err == nil && len(info.Waiters) == 1
	})
	_, err = api.Acquire(ctx, &batonpb.AcquireRequest{Name: "q/1", Wait: true,
		Header: &batonpb.RequestHeader{SessionId: id, Seq: 1, Secret: "a-guess-of-the-secret-0123"}})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the stranger's wait: %v, want PERMISSION_DENIED", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if !r.GetAcquired() {
			t.Fatalf("the victim's wait ended with %v, want its grant", r)
		}
	case <-ctx.Done():
		t.Fatal("the victim never heard its grant")
	}
}
