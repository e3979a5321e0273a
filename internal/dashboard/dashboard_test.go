package dashboard

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonlock/baton/internal/testenv"
)

func TestHandler(t *testing.T) {
	h := Handler()
	tests := []struct {
		method, path string
		code         int
		ctype, body  string
	}{
		{"GET", "/", http.StatusFound, "", ""},
		{"GET", "/ui/", http.StatusOK, "text/html", `<script src="app.js" defer></script>`},
		{"GET", "/ui/app.js", http.StatusOK, "javascript", `fetch("/v1/feed"`},
		{"GET", "/ui/style.css", http.StatusOK, "text/css", "table"},
		{"HEAD", "/ui/", http.StatusOK, "text/html", ""},
		{"POST", "/ui/", http.StatusMethodNotAllowed, "", "actions are the API's"},
		{"GET", "/ui/nope.js", http.StatusNotFound, "", ""},
		{"GET", "/elsewhere", http.StatusNotFound, "", ""},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
		if rec.Code != tt.code {
			t.Errorf("%s %s: %d, want %d", tt.method, tt.path, rec.Code, tt.code)
			continue
		}
		if got := rec.Header().Get("Content-Type"); !strings.Contains(got, tt.ctype) {
			t.Errorf("%s %s: Content-Type %q, want %q", tt.method, tt.path, got, tt.ctype)
		}
		if !strings.Contains(rec.Body.String(), tt.body) {
			t.Errorf("%s %s: body lacks %q", tt.method, tt.path, tt.body)
		}
		if tt.code == http.StatusOK && !strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s %s: no Content-Security-Policy limiting scripts to the member", tt.method, tt.path)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if loc := rec.Header().Get("Location"); loc != Prefix {
		t.Errorf("/ redirects to %q, want %q", loc, Prefix)
	}
}

// TestNoHTMLFromData: the page puts data into the document as text only.
func TestNoHTMLFromData(t *testing.T) {
	js, err := static.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		if strings.Contains(string(js), bad) {
			t.Errorf("app.js uses %s: lock names and owner labels are user data", bad)
		}
	}
}

// TestScriptParses runs the page's script through node's parser where
// node is installed (.ci/run installs it; without node the test skips, or
// fails under testenv.Strict): a syntax error would otherwise reach
// browsers unseen, since no Go test executes the script.
func TestScriptParses(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node is not installed: %v", err)
	}
	js, err := static.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "app.js")
	if err := os.WriteFile(path, js, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(node, "--check", path).CombinedOutput(); err != nil {
		t.Fatalf("node --check app.js: %v\n%s", err, out)
	}
}
