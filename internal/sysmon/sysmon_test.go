package sysmon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		environ []string
		procs   int
		want    []string // nil: no re-exec
	}{
		{"no GODEBUG", []string{"A=1"}, 2, []string{"A=1", "GODEBUG=" + Setting}},
		{"empty GODEBUG", []string{"GODEBUG=", "B=2"}, 8, []string{"GODEBUG=" + Setting, "B=2"}},
		{"other settings kept", []string{"GODEBUG=gctrace=1,madvdontneed=1"}, 2, []string{"GODEBUG=gctrace=1,madvdontneed=1," + Setting}},
		{"the first GODEBUG is the one read", []string{"GODEBUG=gctrace=1", "GODEBUG=schedtrace=5"}, 2, []string{"GODEBUG=gctrace=1," + Setting, "GODEBUG=schedtrace=5"}},
		{"already set: done", []string{"GODEBUG=" + Setting}, 2, nil},
		{"opted out", []string{"GODEBUG=gctrace=1,schedtrace=0"}, 2, nil},
		{"any schedtrace wins", []string{"GODEBUG=schedtrace=100"}, 2, nil},
		{"scheddetail is not schedtrace", []string{"GODEBUG=scheddetail=1"}, 2, []string{"GODEBUG=scheddetail=1," + Setting}},
		{"one processor", []string{"A=1"}, 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.environ)
			got, ok := Env(in, tc.procs)
			if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
				t.Errorf("Env(%q, %d) = %q, %v; want %q", tc.environ, tc.procs, got, ok, tc.want)
			}
			if !slices.Equal(in, tc.environ) {
				t.Errorf("Env changed its argument: %q", in)
			}
		})
	}
}

// TestMain is also the child of TestReexec: it reports each start, calls
// Reexec, and reports what it goes on with.
func TestMain(m *testing.M) {
	if os.Getenv("SYSMON_TEST_CHILD") == "1" {
		fmt.Println("start")
		if err := Reexec(); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Printf("running with GODEBUG=%s\n", os.Getenv("GODEBUG"))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestReexec(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("re-executes only on Unix")
	}
	for _, tc := range []struct {
		name   string
		env    []string
		starts int
		want   string
	}{
		{"added once", []string{"GOMAXPROCS=2", "GODEBUG=gctrace=0"}, 2, "gctrace=0," + Setting},
		{"opted out", []string{"GOMAXPROCS=2", "GODEBUG=schedtrace=0"}, 1, "schedtrace=0"},
		{"one processor", []string{"GOMAXPROCS=1", "GODEBUG=gctrace=0"}, 1, "gctrace=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A child that re-executed for ever would print "start" until
			// this ends it.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(withoutRuntimeEnv(os.Environ()), append(tc.env, "SYSMON_TEST_CHILD=1")...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			want := strings.Repeat("start\n", tc.starts) + "running with GODEBUG=" + tc.want + "\n"
			if string(out) != want {
				t.Errorf("child printed\n%s\nwant\n%s", out, want)
			}
		})
	}
}

// withoutRuntimeEnv drops the test process's own GODEBUG and GOMAXPROCS,
// which each case sets for its child.
func withoutRuntimeEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, "GODEBUG=") || strings.HasPrefix(kv, "GOMAXPROCS=")
	})
}
