// Package archtest keeps the layout telling the architecture: each rule
// bans a package from depending on another, with the reason (STYLE.md 1).
package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/batonlock/baton"

var rules = []struct {
	pkg, banned, why string
}{
	{mod + "/internal/fsm", "go.etcd.io/raft", "the state machine is pure: no consensus plumbing"},
	{mod + "/internal/fsm", "google.golang.org/grpc", "the state machine is pure: no network"},
	{mod + "/internal/fsm", mod + "/api/batonpb", "the log format is not the wire format"},
	{mod + "/internal/fsm", "log/slog", "fsm never logs; raftnode logs its results"},
	{mod + "/internal/fsm", "math/rand", "the state machine is deterministic"},
	{mod + "/internal/fsm", "net", "the state machine does no I/O"},
	{mod + "/internal/raftnode", "google.golang.org/grpc", "raftnode reaches the network through its Transport interface"},
	{mod + "/internal/raftnode", mod + "/api/batonpb", "raftnode knows the log, not the API"},
	{mod + "/internal/storage", mod + "/internal/fsm", "storage is a plain I/O adapter"},
	{mod + "/internal/transport", mod + "/internal/fsm", "transport is a plain I/O adapter"},
	{mod + "/internal/transport", mod + "/internal/raftnode", "transport is a plain I/O adapter"},
	{mod + "/internal/liveness", "google.golang.org/grpc", "liveness decides; the server talks"},
	{mod + "/internal/liveness", mod + "/internal/storage", "liveness is never persisted"},
	{mod + "/internal/server", mod + "/internal/storage", "the API goes through raftnode"},
	{mod + "/internal/server", mod + "/internal/transport", "the API goes through raftnode"},
	{mod, mod + "/internal/", "the client ships to users and may become its own module"},
}

// leaves import the standard library only, and the packages in also, with
// the reason.
var leaves = []struct {
	pkg  string
	also []string
	why  string
}{
	{mod + "/api/rules", nil, "the one table of what a request may contain: the client, the API and the state machine all import it"},
	{mod + "/api/protofield", []string{"google.golang.org/protobuf/encoding/protowire"},
		"the field helpers of every hand-written codec (api/wire, raftwire, transport, fsm) rest on protowire alone"},
}

type pkg struct {
	ImportPath string
	Deps       []string
	Imports    []string
}

func TestDependencyRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps=false", "-json", mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	for _, p := range pkgs {
		for _, r := range rules {
			if p.ImportPath != r.pkg {
				continue
			}
			for _, d := range p.Deps {
				if matches(d, r.banned) {
					t.Errorf("%s depends on %s: %s", p.ImportPath, d, r.why)
				}
			}
		}
		for _, l := range leaves {
			if p.ImportPath != l.pkg {
				continue
			}
			// Direct imports: the standard library imports only itself.
			for _, imp := range p.Imports {
				if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") && !slices.Contains(l.also, imp) {
					t.Errorf("%s imports %s: %s", p.ImportPath, imp, l.why)
				}
			}
		}
		// Non-test code never imports testing.
		for _, imp := range p.Imports {
			if imp == "testing" && !strings.Contains(p.ImportPath, "/internal/sim") {
				t.Errorf("%s imports testing in non-test code", p.ImportPath)
			}
		}
	}
}

// matches reports whether dep is banned: the package itself or anything
// under it ("x/" bans only what is under x).
func matches(dep, banned string) bool {
	if strings.HasSuffix(banned, "/") {
		return strings.HasPrefix(dep, banned)
	}
	return dep == banned || strings.HasPrefix(dep, banned+"/")
}
