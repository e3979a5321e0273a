package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build is a baton binary to run: its path, what it is for the reports,
// and what its servers get added to their environment.
type Build struct {
	Bin   string
	Label string
	Env   []string
}

// Resolve returns the build spec names: spec itself when it is a file,
// else the baton of git revision spec of this repository, built into dir.
func Resolve(ctx context.Context, spec, dir string) (Build, error) {
	if st, err := os.Stat(spec); err == nil && st.Mode().IsRegular() {
		abs, err := filepath.Abs(spec)
		return Build{Bin: abs, Label: spec}, err
	}
	root, err := output(ctx, "", "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return Build{}, fmt.Errorf("%q is not a file, and git cannot say where this repository is: %w", spec, err)
	}
	root = strings.TrimSpace(root)
	rev, err := output(ctx, root, "git", "rev-parse", "--verify", "--short", spec+"^{commit}")
	if err != nil {
		return Build{}, fmt.Errorf("%q is neither a file nor a git revision: %w", spec, err)
	}
	rev = strings.TrimSpace(rev)
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", rev)
	var tarball bytes.Buffer
	archive.Stdout = &tarball
	archive.Stderr = os.Stderr
	if err := archive.Run(); err != nil {
		return Build{}, fmt.Errorf("git archive %s: %w", rev, err)
	}
	src := filepath.Join(dir, "src")
	if err := untar(&tarball, src); err != nil {
		return Build{}, fmt.Errorf("unpack %s: %w", rev, err)
	}
	bin := filepath.Join(dir, "baton")
	if _, err := output(ctx, src, "go", "build", "-o", bin, "./cmd/baton"); err != nil {
		return Build{}, fmt.Errorf("build %s: %w", rev, err)
	}
	return Build{Bin: bin, Label: spec + " (" + rev + ")"}, nil
}

// output runs a command in dir and returns its standard output; its
// standard error goes into the error.
func output(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// untar writes the regular files and directories of a tar stream under dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("entry %q leaves the directory", h.Name)
		}
		path := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}
