package fence

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSignedMiddleware: a request's claim is its verified signed token's;
// one that does not verify is refused 403, a stale one 409, plain headers
// alone count as no claim, and a lock header naming another lock is 400.
func TestSignedMiddleware(t *testing.T) {
	pub, priv := testKey(t, 0)
	keys := KeySet{{ID: 7, Public: pub}}
	var served []Claims
	h := SignedMiddleware(NewGuard(0), func() KeySet { return keys }, RefuseUnfenced)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := SignedClaimsFrom(r.Context())
		if cl, ok2 := ClaimFrom(r.Context()); !ok || !ok2 || cl != c.Claim() {
			t.Errorf("handler: signed claims %+v %v, claim %+v %v", c, ok, cl, ok2)
		}
		served = append(served, c)
	}))
	now := time.Now()
	sign := func(token uint64) string {
		c := testClaims
		c.Token, c.Issued = token, now
		return SignToken(priv, c)
	}
	do := func(hdr map[string]string) int {
		r := httptest.NewRequest(http.MethodPost, "/write", nil)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	tampered := []byte(sign(20))
	tampered[len(tampered)-3] ^= 1
	for i, tc := range []struct {
		hdr  map[string]string
		want int
	}{
		{map[string]string{SignedTokenHeader: sign(10)}, 200},
		{map[string]string{SignedTokenHeader: sign(12), LockHeader: "jobs/42"}, 200},
		{map[string]string{SignedTokenHeader: sign(11)}, 409}, // below 12
		{map[string]string{SignedTokenHeader: string(tampered)}, 403},
		{map[string]string{SignedTokenHeader: sign(13), LockHeader: "jobs/other"}, 400},
		{map[string]string{SignedTokenHeader: "not base64!"}, 400},
		{map[string]string{LockHeader: "jobs/42", TokenHeader: "99"}, 428}, // unsigned: no claim
		{nil, 428},
	} {
		if got := do(tc.hdr); got != tc.want {
			t.Errorf("request %d %v: %d, want %d", i, tc.hdr, got, tc.want)
		}
	}
	if len(served) != 2 || served[0].Token != 10 || served[1].Token != 12 {
		t.Fatalf("served %+v; want tokens 10 and 12", served)
	}
}

func TestParseKeys(t *testing.T) {
	pub, _ := testKey(t, 0)
	old, _ := testKey(t, 1)
	doc := fmt.Sprintf(`{"keys":[{"id":"8","public_key":%q,"created_unix_nano":"1","not_after_unix_nano":"0"},`+
		`{"id":"7","public_key":%q,"created_unix_nano":"1","not_after_unix_nano":"1800000000000000000"}]}`,
		base64.StdEncoding.EncodeToString(pub), base64.StdEncoding.EncodeToString(old))
	ks, err := ParseKeys([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 2 || ks[0].ID != 8 || !ks[0].NotAfter.IsZero() || ks[1].ID != 7 || !ks[1].NotAfter.Equal(time.Unix(1_800_000_000, 0)) {
		t.Fatalf("keys %+v", ks)
	}
	for _, bad := range []string{`{"keys":[]}`, `{"keys":[{"id":"x","public_key":""}]}`, `{"keys":[{"id":"1","public_key":"AAAA"}]}`, `nope`} {
		if _, err := ParseKeys([]byte(bad)); err == nil {
			t.Errorf("ParseKeys(%s) accepted it", bad)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/keys" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(doc))
	}))
	defer srv.Close()
	got, err := FetchKeys(t.Context(), srv.Client(), srv.URL+"/")
	if err != nil || len(got) != 2 {
		t.Fatalf("FetchKeys: %v, %v", got, err)
	}
	if _, err := FetchKeys(t.Context(), srv.Client(), srv.URL+"/nowhere"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("FetchKeys from a wrong URL: %v", err)
	}
}
