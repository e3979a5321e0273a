// Package testpg starts a throwaway PostgreSQL server for tests and
// examples: Debian's postgresql (or any initdb and postgres found), a new
// cluster in a temporary directory, reached through a unix socket in that
// directory only (no TCP port, so that servers of parallel test binaries
// never meet), stopped and removed by Stop.
//
// PostgreSQL refuses to run as root. When the process runs as root (as CI
// does), initdb and postgres run as the unprivileged user "postgres" that
// Debian's package creates, the temporary directory is made under /tmp and
// given to that user.
//
// The cluster trades durability for speed (fsync off): it is for tests and
// demonstrations, whose data outlives nothing.
package testpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonlock/baton/internal/testenv"
)

// ErrNotInstalled is returned by Start when no PostgreSQL server
// programs (initdb and postgres) are found.
var ErrNotInstalled = errors.New("testpg: PostgreSQL is not installed (Debian: apt-get install postgresql)")

// port is the port number in the socket's name; with no TCP listener it
// only names the socket file (.s.PGSQL.5432).
const port = 5432

// readyWithin bounds how long Start waits for a new server to accept
// connections: initdb and the first start take a few seconds on a busy
// 2-core machine.
const readyWithin = 60 * time.Second

// Server is a running PostgreSQL server started by Start.
type Server struct {
	dir  string // the temporary directory: data/, the socket, the log
	cmd  *exec.Cmd
	done chan struct{} // closed when the postgres process has exited
	err  error         // its exit status, once done is closed
}

// Start initializes a new cluster in a temporary directory and starts a
// server on it, listening on a unix socket only. It returns ErrNotInstalled
// when the programs are missing. The caller must Stop it.
func Start(ctx context.Context) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, base, err := runAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, "baton-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, done: make(chan struct{})}
	if err := s.start(ctx, bin, cred); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context, bin string, cred *credential) error {
	if cred != nil {
		if err := os.Chown(s.dir, cred.uid, cred.gid); err != nil {
			return err
		}
	}
	data := filepath.Join(s.dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--no-sync", "--no-instructions")
	initdb.Dir = s.dir
	setCredential(initdb, cred, false)
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("testpg: initdb: %w\n%s", err, out)
	}
	logFile, err := os.Create(filepath.Join(s.dir, "postgres.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data,
		"-k", s.dir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=100")
	s.cmd.Dir = s.dir
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	setCredential(s.cmd, cred, true)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("testpg: start postgres: %w", err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	return s.waitReady(ctx, filepath.Join(data, "postmaster.pid"))
}

// waitReady waits until the server says in its pid file that it accepts
// connections (the file's eighth line, as pg_ctl -w reads it), it exits,
// or ctx or readyWithin ends.
func (s *Server) waitReady(ctx context.Context, pidFile string) error {
	ctx, cancel := context.WithTimeout(ctx, readyWithin)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(pidFile); err == nil {
			if lines := strings.Split(string(b), "\n"); len(lines) > 7 && strings.TrimSpace(lines[7]) == "ready" {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("testpg: postgres exited at start (%v):\n%s", s.err, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("testpg: postgres not ready: %w\n%s", ctx.Err(), s.logTail())
		case <-tick.C:
		}
	}
}

// logTail is the end of the server's log, for an error message.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// DSN is a connection string for database postgres as user postgres, in
// the key=value form both libpq and pgx read.
func (s *Server) DSN() string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", s.dir, port)
}

// Stop shuts the server down (a fast shutdown: SIGINT ends every session
// and stops at once) and removes its directory. It is safe to call twice.
func (s *Server) Stop() error {
	var err error
	if s.cmd != nil && s.cmd.Process != nil {
		select {
		case <-s.done:
		default:
			if err = s.cmd.Process.Signal(os.Interrupt); err == nil {
				<-s.done
			}
		}
	}
	if rmErr := os.RemoveAll(s.dir); err == nil {
		err = rmErr
	}
	return err
}

// credential is the user initdb and postgres run as when this process is
// root.
type credential struct{ uid, gid int }

// runAs says whom to run PostgreSQL as (nil: this process's user) and
// where to make the temporary directory: under /tmp for another user,
// whose path to it must be searchable, else under os.TempDir.
func runAs() (*credential, string, error) {
	if os.Geteuid() != 0 {
		return nil, os.TempDir(), nil
	}
	if !canSwitchUser {
		return nil, "", errors.New("testpg: PostgreSQL refuses to run as root, and this system cannot start it as another user: run as a user other than root")
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, "", fmt.Errorf("testpg: running as root, PostgreSQL must run as user postgres: %w", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return nil, "", err
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return nil, "", err
	}
	return &credential{uid, gid}, "/tmp", nil
}

// binDir finds the directory holding initdb and postgres: the PATH's, or
// the newest of Debian's /usr/lib/postgresql/<major>/bin.
func binDir() (string, error) {
	if p, err := exec.LookPath("postgres"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var found []string
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "postgres")) {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return "", ErrNotInstalled
	}
	slices.SortFunc(found, func(a, b string) int { return majorOf(a) - majorOf(b) })
	return found[len(found)-1], nil
}

// majorOf is the major version in a Debian bin path
// (/usr/lib/postgresql/15/bin: 15), 0 if it has none.
func majorOf(bin string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	return n
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// TB is the part of testing.TB that ForTest uses (non-test code does not
// import testing).
type TB interface {
	testenv.TB
	Cleanup(f func())
	Context() context.Context
}

// ForTest starts a server for the test t and stops it when t ends. When
// PostgreSQL is not installed, t skips, or fails under BATON_TEST_STRICT=1
// (testenv.Missing); any other error fails t.
func ForTest(t TB) *Server {
	t.Helper()
	s, err := Start(t.Context())
	if errors.Is(err, ErrNotInstalled) {
		testenv.Missing(t, "%v", err)
		return nil
	}
	if err != nil {
		t.Fatalf("%v", err)
		return nil
	}
	t.Cleanup(func() { s.Stop() })
	return s
}
