// Package archtest keeps the layout telling the architecture: each rule
// bans a package from depending on another, from naming more of a package
// it imports than it should, or the code from a call that changes how the
// process runs, each with its reason (STYLE.md 1).
package archtest

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/batonlock/baton/internal/raftnode"
	"github.com/batonlock/baton/internal/server"
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
	{mod + "/internal/liveness", mod + "/internal/raftnode", "the tracker proposes through its own Proposer; embed wires it to the node"},
	{mod + "/internal/raftnode", mod + "/internal/liveness", "raftnode tells what applied to the one Observer it declares (embed's fan-out), not to the tracker"},
	{mod + "/internal/server", mod + "/internal/storage", "the API goes through raftnode"},
	{mod + "/internal/server", mod + "/internal/transport", "the API goes through raftnode"},
	{mod, mod + "/internal/", "the client ships to users and may become its own module"},
}

// imports ban a package from importing another itself. Through its
// dependencies every package reaches os, sync and time (fmt alone does),
// so these rules look at the package's own imports, and at anything
// under the banned path too; the first rule that matches an import
// reports it.
var imports = []struct {
	pkg, banned, why string
}{
	{mod + "/internal/fsm", "os", "the state machine is a pure function of the log: no files, no environment"},
	{mod + "/internal/fsm", "sync/atomic", "the state machine is a pure function of the log: concurrency belongs to raftnode (a frozen state is copy-on-write)"},
	{mod + "/internal/fsm", "sync", "the state machine is a pure function of the log: concurrency belongs to raftnode (a frozen state is copy-on-write)"},
	{mod + "/internal/fsm", "runtime", "the state machine is a pure function of the log: no scheduler or collector calls; concurrency belongs to raftnode"},
	{mod + "/internal/fsm", "time", "the state machine is a pure function of the log: clocks belong to raftnode and liveness; durations are int64 nanoseconds"},
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
	{mod + "/fence", nil,
		"resource owners take the fencing kit alone: it imports none of Baton (a Lease reaches it as an interface)"},
	{mod + "/fence/fencegrpc", []string{mod + "/fence", "google.golang.org/grpc", "google.golang.org/grpc/codes",
		"google.golang.org/grpc/metadata", "google.golang.org/grpc/status", "google.golang.org/genproto/googleapis/rpc/errdetails"},
		"the fencing kit's gRPC side: fence and gRPC, none of Baton"},
	{mod + "/fence/fencepgx", []string{mod + "/fence", "github.com/jackc/pgx/v5/pgconn"},
		"the fencing kit's pgx side: fence and pgx, none of Baton"},
}

// narrowUses lets a package name, of a package it imports, only the
// identifiers that start with a prefix, with the reason.
var narrowUses = []struct{ pkg, imported, prefix, why string }{
	{mod + "/internal/server", mod + "/internal/liveness", "Err",
		"the server serves the API: it reaches the tracker through its own Liveness interface (embed builds, runs and feeds it) and names only its error sentinels, in the one error table"},
}

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
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
		for _, imp := range p.Imports {
			for _, r := range imports {
				if p.ImportPath == r.pkg && matches(imp, r.banned) {
					t.Errorf("%s imports %s: %s", p.ImportPath, imp, r.why)
					break
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
		for _, u := range narrowUses {
			if p.ImportPath == u.pkg {
				checkNarrowUse(t, p, u.imported, u.prefix, u.why)
			}
		}
		// Test helpers that start processes serve tests and examples only.
		for _, imp := range p.Imports {
			if _, ok := startersAllowedIn[strings.TrimPrefix(imp, mod+"/")]; ok && !strings.HasPrefix(p.ImportPath, mod+"/examples/") {
				t.Errorf("%s imports %s in non-test code: it starts processes, for tests and examples only", p.ImportPath, imp)
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

// checkNarrowUse reports every identifier of imported that p's non-test
// files name without prefix.
func checkNarrowUse(t *testing.T, p pkg, imported, prefix, why string) {
	t.Helper()
	for _, name := range p.GoFiles {
		path := filepath.Join(p.Dir, name)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		local := ""
		for _, imp := range f.Imports {
			if strings.Trim(imp.Path.Value, `"`) == imported {
				local = imported[strings.LastIndex(imported, "/")+1:]
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == local && !strings.HasPrefix(sel.Sel.Name, prefix) {
				t.Errorf("%s names %s.%s: %s", path, imported, sel.Sel.Name, why)
			}
			return true
		})
	}
}

// TestServerIsNotTheObserver keeps the server's one job: it serves the
// API. embed's fan-out is the node's Observer and feeds the tracker and
// the server, so the server is built in one phase, with its node.
func TestServerIsNotTheObserver(t *testing.T) {
	var s any = (*server.Server)(nil)
	if _, ok := s.(raftnode.Observer); ok {
		t.Error("server.Server implements raftnode.Observer: embed's fan-out observes the node and feeds the server (Deliver, Flush, Restored, StoppedLeading)")
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
