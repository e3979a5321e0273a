package fence

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// lease is a Holder, as a *baton.Lease is.
type lease struct {
	name  string
	token uint64
}

func (l lease) Name() string  { return l.name }
func (l lease) Token() uint64 { return l.token }

func TestMiddleware(t *testing.T) {
	for _, tt := range []struct {
		name     string
		unfenced Unfenced
		headers  map[string][]string
		status   int
		body     string // a part of the refusal's body
		seen     Claim  // the claim the handler saw, if it ran
	}{
		{name: "no claim passes", status: http.StatusOK},
		{name: "no claim refused", unfenced: RefuseUnfenced, status: http.StatusPreconditionRequired, body: TokenHeader},
		{name: "newer token", headers: claim("jobs/42", "11"), status: http.StatusOK, seen: Claim{"jobs/42", 11}},
		{name: "same token", headers: claim("jobs/42", "10"), status: http.StatusOK, seen: Claim{"jobs/42", 10}},
		{name: "stale token", headers: claim("jobs/42", "9"), status: http.StatusConflict, body: `stale token 9 for "jobs/42": token 10 was seen`},
		{name: "stale token, unfenced refused", unfenced: RefuseUnfenced, headers: claim("jobs/42", "9"), status: http.StatusConflict},
		{name: "another lock", headers: claim("jobs/43", "1"), status: http.StatusOK, seen: Claim{"jobs/43", 1}},
		{name: "escaped name", headers: claim("caf%C3%A9%20au%25lait", "1"), status: http.StatusOK, seen: Claim{"café au%lait", 1}},
		{name: "token not a number", headers: claim("jobs/42", "ten"), status: http.StatusBadRequest, body: "not a decimal number"},
		{name: "token zero", headers: claim("jobs/42", "0"), status: http.StatusBadRequest},
		{name: "token negative", headers: claim("jobs/42", "-11"), status: http.StatusBadRequest},
		{name: "token signed", headers: claim("jobs/42", "+11"), status: http.StatusBadRequest},
		{name: "token above 2^63-1", headers: claim("jobs/42", "9223372036854775808"), status: http.StatusBadRequest},
		{name: "token without lock", headers: map[string][]string{TokenHeader: {"11"}}, status: http.StatusBadRequest, body: "want one"},
		{name: "lock without token", headers: map[string][]string{LockHeader: {"jobs/42"}}, status: http.StatusBadRequest},
		{name: "two tokens", headers: map[string][]string{LockHeader: {"jobs/42"}, TokenHeader: {"11", "12"}}, status: http.StatusBadRequest},
		{name: "bad escape", headers: claim("jobs%4", "11"), status: http.StatusBadRequest, body: "cut escape"},
		{name: "bad hex", headers: claim("jobs%zz", "11"), status: http.StatusBadRequest, body: "bad escape"},
		{name: "empty lock", headers: claim("", "11"), status: http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGuard(0)
			if err := g.Check("jobs/42", 10); err != nil {
				t.Fatal(err)
			}
			var ran bool
			var seen Claim
			h := Middleware(g, tt.unfenced)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ran = true
				seen, _ = ClaimFrom(r.Context())
			}))
			req := httptest.NewRequest(http.MethodPut, "/items/1", nil)
			for k, vs := range tt.headers {
				for _, v := range vs {
					req.Header.Add(k, v)
				}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Errorf("status %d (%s); want %d", rec.Code, strings.TrimSpace(rec.Body.String()), tt.status)
			}
			if ran != (tt.status == http.StatusOK) {
				t.Errorf("handler ran: %v; status %d", ran, rec.Code)
			}
			if !strings.Contains(rec.Body.String(), tt.body) {
				t.Errorf("body %q; want it to contain %q", rec.Body.String(), tt.body)
			}
			if seen != tt.seen {
				t.Errorf("handler saw claim %+v; want %+v", seen, tt.seen)
			}
		})
	}
}

func claim(lock, token string) map[string][]string {
	return map[string][]string{LockHeader: {lock}, TokenHeader: {token}}
}

// TestTransportToMiddleware sends requests through Transport to a server
// behind Middleware: the Lease's claim arrives, the newest holder writes,
// a stale one gets 409, and the caller's request is left as it was.
func TestTransportToMiddleware(t *testing.T) {
	g := NewGuard(0)
	var writes []Claim
	srv := httptest.NewServer(Middleware(g, RefuseUnfenced)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := ClaimFrom(r.Context())
		writes = append(writes, c)
	})))
	defer srv.Close()
	put := func(l Holder) int {
		t.Helper()
		hc := &http.Client{Transport: &Transport{Holder: l}}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(req.Header) != 0 {
			t.Errorf("Transport changed the caller's request: %v", req.Header)
		}
		return resp.StatusCode
	}
	old, next := lease{"orders/7 ü", 41}, lease{"orders/7 ü", 57}
	for _, step := range []struct {
		l    lease
		want int
	}{{old, 200}, {next, 200}, {old, 409}, {next, 200}} {
		if got := put(step.l); got != step.want {
			t.Errorf("PUT with token %d: %d; want %d", step.l.token, got, step.want)
		}
	}
	want := []Claim{{"orders/7 ü", 41}, {"orders/7 ü", 57}, {"orders/7 ü", 57}}
	if len(writes) != len(want) {
		t.Fatalf("writes %v; want %v", writes, want)
	}
	for i := range want {
		if writes[i] != want[i] {
			t.Errorf("write %d: %+v; want %+v", i, writes[i], want[i])
		}
	}
}

// TestEscapeLock: any name survives the round trip, and its escaped form
// is printable ASCII.
func TestEscapeLock(t *testing.T) {
	if got := EscapeLock("jobs/42"); got != "jobs/42" {
		t.Errorf("EscapeLock(jobs/42) = %q", got)
	}
	rng := rand.New(rand.NewPCG(26, 2))
	for range 2000 {
		b := make([]byte, 1+rng.IntN(24))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		name := string(b)
		esc := EscapeLock(name)
		for i := range len(esc) {
			if esc[i] <= ' ' || esc[i] >= 0x7f {
				t.Fatalf("EscapeLock(%q) = %q: byte %#x", name, esc, esc[i])
			}
		}
		back, err := UnescapeLock(esc)
		if err != nil || back != name {
			t.Fatalf("UnescapeLock(EscapeLock(%q)) = %q, %v", name, back, err)
		}
	}
	if _, err := UnescapeLock("a b"); !errors.Is(err, ErrMalformed) {
		t.Errorf("an unescaped space: %v", err)
	}
}
