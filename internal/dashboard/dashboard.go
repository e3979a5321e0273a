// Package dashboard is the web dashboard every member serves on its
// client address, at /ui/: the cluster (members, leader, term, indexes),
// a chart of the last minutes' grants per second and acquire wait, the
// locks under a prefix with their holder, token and queue, one lock in
// full with its FIFO queue, and the live sessions.
//
// It is three static files embedded in the binary, and serves nothing
// else: the page reads the same HTTP/JSON API as curl does (/v1/status,
// /v1/locks, /v1/lock, /v1/sessions) from the member that served it,
// again each time that member's feed (/v1/feed, internal/server) says the
// log applied, and acts through the same API (blacklist, conditional
// release) as the user whose bearer token it was given, after a
// confirmation naming the session and token it showed. So the page can do
// nothing its user could not do with curl, and the member checks every
// read and every action as it checks any client's.
package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is where the dashboard lives.
const Prefix = "/ui/"

// Handler serves the dashboard under Prefix and redirects / to it; any
// other path is not found. Mount it at /.
func Handler() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	fileServer := http.StripPrefix(Prefix, http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/":
			http.Redirect(w, r, Prefix, http.StatusFound)
		case strings.HasPrefix(r.URL.Path, Prefix):
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				http.Error(w, "the dashboard's files take GET or HEAD; its actions are the API's (/v1/)", http.StatusMethodNotAllowed)
				return
			}
			h := w.Header()
			// Scripts and styles come from this member only: nothing a
			// lock name or owner label holds can run as script.
			h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Cache-Control", "no-cache")
			fileServer.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}
