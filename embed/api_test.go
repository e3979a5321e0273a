package embed_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// publicPackages are the packages a program outside this module imports
// to run members: none of what they export may name a type a program
// cannot import (a package under internal/).
var publicPackages = []string{
	"github.com/batonlock/baton/embed",
	"github.com/batonlock/baton/embed/embedtest",
}

// TestExportedAPIHasNoInternalTypes walks everything publicPackages
// export (functions, variables, constants, the exported fields and
// methods of their types, and of the types those name in turn) as the
// compiler sees them, and fails on each type of an internal/ package it
// meets.
func TestExportedAPIHasNoInternalTypes(t *testing.T) {
	imp := exportDataImporter(t, publicPackages)
	for _, path := range publicPackages {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatal(err)
		}
		w := &apiWalker{public: map[string]bool{}, seen: map[types.Type]bool{}}
		for _, p := range publicPackages {
			w.public[p] = true
		}
		for _, name := range pkg.Scope().Names() {
			if obj := pkg.Scope().Lookup(name); obj.Exported() {
				w.walk(pkg.Name()+"."+name, obj.Type())
			}
		}
		for _, f := range w.found {
			t.Errorf("%s exports an internal type: %s", path, f)
		}
	}
}

// exportDataImporter imports pkgs and their dependencies from the
// compiler's export data (go list -export, from the build cache).
func exportDataImporter(t *testing.T, pkgs []string) types.Importer {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-export", "-deps", "-json"}, pkgs...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	exports := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
	}
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file := exports[path]
		if file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
}

// apiWalker collects the internal types a public API names.
type apiWalker struct {
	public map[string]bool // packages whose exported types it walks into
	seen   map[types.Type]bool
	found  []string
}

// walk visits T, which where (a path such as embed.Member.Status) names.
func (w *apiWalker) walk(where string, T types.Type) {
	if w.seen[T] {
		return
	}
	w.seen[T] = true
	switch T := types.Unalias(T).(type) {
	case *types.Named:
		pkg := T.Obj().Pkg()
		if pkg != nil && strings.Contains(pkg.Path()+"/", "/internal/") {
			w.found = append(w.found, fmt.Sprintf("%s: %s", where, T))
			return
		}
		for i := range T.TypeArgs().Len() {
			w.walk(where, T.TypeArgs().At(i))
		}
		if pkg == nil || !w.public[pkg.Path()] {
			return // the standard library's or another module's type
		}
		w.walk(where, T.Underlying())
		ms := types.NewMethodSet(types.NewPointer(T))
		for i := range ms.Len() {
			if m := ms.At(i).Obj(); m.Exported() {
				w.walk(where+"."+m.Name(), m.Type())
			}
		}
	case *types.Pointer:
		w.walk(where, T.Elem())
	case *types.Slice:
		w.walk(where, T.Elem())
	case *types.Array:
		w.walk(where, T.Elem())
	case *types.Chan:
		w.walk(where, T.Elem())
	case *types.Map:
		w.walk(where, T.Key())
		w.walk(where, T.Elem())
	case *types.Signature:
		for _, tuple := range []*types.Tuple{T.Params(), T.Results()} {
			for i := range tuple.Len() {
				w.walk(where, tuple.At(i).Type())
			}
		}
	case *types.Struct:
		for i := range T.NumFields() {
			if f := T.Field(i); f.Exported() {
				w.walk(where+"."+f.Name(), f.Type())
			}
		}
	case *types.Interface:
		for i := range T.NumMethods() {
			if m := T.Method(i); m.Exported() {
				w.walk(where+"."+m.Name(), m.Type())
			}
		}
	}
}
