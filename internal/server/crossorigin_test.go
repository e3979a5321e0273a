package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCrossOriginProtection(t *testing.T) {
	h := crossOriginProtection().Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	tests := []struct {
		name, method, site, origin string
		code                       int
	}{
		{"a program (no browser headers)", "POST", "", "", http.StatusNoContent},
		{"the member's own page", "POST", "same-origin", "http://member:7700", http.StatusNoContent},
		{"typed in the address bar", "POST", "none", "", http.StatusNoContent},
		{"another site's page", "POST", "cross-site", "http://elsewhere.example", http.StatusForbidden},
		{"a sibling subdomain's page", "POST", "same-site", "http://other.member", http.StatusForbidden},
		{"an older browser from another origin", "POST", "", "http://elsewhere.example", http.StatusForbidden},
		{"an older browser from the same origin", "POST", "", "http://member:7700", http.StatusNoContent},
		{"a read from another site", "GET", "cross-site", "http://elsewhere.example", http.StatusNoContent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, "http://member:7700/v1/sessions/1/blacklist", strings.NewReader("{}"))
			if tt.site != "" {
				r.Header.Set("Sec-Fetch-Site", tt.site)
			}
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tt.code {
				t.Fatalf("%d, want %d: %s", rec.Code, tt.code, rec.Body)
			}
			if tt.code == http.StatusForbidden && (!strings.Contains(rec.Body.String(), `"code":7`) || rec.Header().Get("Content-Type") != "application/json") {
				t.Errorf("refusal %q (%s), want PERMISSION_DENIED as JSON", rec.Body, rec.Header().Get("Content-Type"))
			}
		})
	}
}
