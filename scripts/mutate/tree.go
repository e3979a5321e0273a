package main

import (
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// repoRoot is the top of the git work tree the command runs in.
func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("run from within the repository: git rev-parse: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// copyTree copies the files of the work tree at root that git tracks or
// would track (not ignored) into a new temporary directory, which it
// returns. Mutants are applied there only: the work tree is never edited,
// so no interrupt or crash can leave a mutant in it. The copy keeps its
// path for the whole run, so the build cache serves every package a
// mutant does not touch.
func copyTree(root string) (string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git ls-files: %w", err)
	}
	dir, err := os.MkdirTemp("", "baton-mutate-")
	if err != nil {
		return "", err
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		info, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil || !info.Mode().IsRegular() {
			continue // a symlink or a submodule: no Go source of ours
		}
		data, err := os.ReadFile(src)
		if err == nil {
			dst := filepath.Join(dir, name)
			if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
				err = os.WriteFile(dst, data, info.Mode().Perm())
			}
		}
		if err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("copy %s: %w", name, err)
		}
	}
	return dir, nil
}

// mutate returns src with m applied, or why it cannot be: the original
// text must be in src exactly once, and the result must still parse.
func (m mutant) mutate(src []byte) ([]byte, error) {
	switch n := bytes.Count(src, []byte(m.from)); n {
	case 1:
	case 0:
		return nil, fmt.Errorf("%s: the original text is no longer in %s", m.name, m.file)
	default:
		return nil, fmt.Errorf("%s: the original text is in %s %d times; make it name one place", m.name, m.file, n)
	}
	out := bytes.Replace(src, []byte(m.from), []byte(m.to), 1)
	if _, err := parser.ParseFile(token.NewFileSet(), m.file, out, parser.SkipObjectResolution); err != nil {
		return nil, fmt.Errorf("%s: the mutated %s does not parse: %w", m.name, m.file, err)
	}
	return out, nil
}

// checkApply reports every mutant of ms that does not apply to the tree
// at dir.
func checkApply(dir string, ms []mutant) []error {
	var errs []error
	for _, m := range ms {
		src, err := os.ReadFile(filepath.Join(dir, m.file))
		if err == nil {
			_, err = m.mutate(src)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// apply writes m into its file in the tree at dir and returns the function
// that puts the original back.
func (m mutant) apply(dir string) (restore func() error, err error) {
	path := filepath.Join(dir, m.file)
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := m.mutate(src)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return nil, err
	}
	return func() error { return os.WriteFile(path, src, 0o644) }, nil
}
