package server

import (
	"encoding/json"
	"net/http"

	"google.golang.org/grpc/codes"
)

// crossOriginProtection refuses, on the client port, a state-changing
// request (any method but GET, HEAD and OPTIONS) that a browser sent from
// another origin: a page elsewhere could otherwise make the browser of an
// operator, with its client certificate, or on a cluster without
// authentication, post a blacklist or a release to a member it can reach.
// Browsers say where a request comes from (Sec-Fetch-Site, or Origin);
// programs (the CLI, the clients, curl) send neither and are not
// concerned. The dashboard is served by the member itself, so its actions
// are same-origin. The refusal is PERMISSION_DENIED in the gateway's shape.
func crossOriginProtection() *http.CrossOriginProtection {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := json.Marshal(map[string]any{
			"code":    codes.PermissionDenied,
			"message": "a browser sent this " + r.Method + " from another origin than this member's: refused as cross-site request forgery (act from this member's own dashboard, or from a program)",
		})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write(append(body, '\n'))
	}))
	return p
}
