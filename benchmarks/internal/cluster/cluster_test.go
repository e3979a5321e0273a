package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/internal/bench"
)

func TestParseStat(t *testing.T) {
	// A name with spaces and a ')' of its own: fields count from the last ')'.
	line := "4242 (baton (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 9 0 100 0 0"
	got, err := parseStat(line)
	if err != nil || got != 325*clockTick {
		t.Fatalf("parseStat = %v, %v; want %v", got, err, 325*clockTick)
	}
	for _, bad := range []string{"", "4242 baton S 1", "4242 (baton) S 1 2 3", "4242 (b) S 1 1 1 0 -1 0 0 0 0 0 x 75"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) took it", bad)
		}
	}
}

func TestProcCPUOfThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	d, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d < 0 || d > time.Hour {
		t.Fatalf("this process used %v of CPU", d)
	}
}

func TestDecodeReport(t *testing.T) {
	var r bench.Report
	out := "some log line\n{\n  \"cycles\": 10,\n  \"cycles_per_sec\": 5,\n  \"acquire_p50_ms\": 0.5\n}\n"
	if err := DecodeReport(out, &r); err != nil || r.Cycles != 10 || r.CyclesPerSec != 5 || r.AcquireP50 != 0.5 {
		t.Fatalf("DecodeReport = %+v, %v", r, err)
	}
	if err := DecodeReport("no report", &r); err == nil {
		t.Error("DecodeReport took output without a report")
	}
	if err := DecodeReport("{\"cycles\": ", &r); err == nil {
		t.Error("DecodeReport took a cut report")
	}
}

func TestUntarRefusesPathsOutside(t *testing.T) {
	for _, name := range []string{"../evil", "/abs/evil", "a/../../evil"} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
		tw.Write([]byte("x"))
		tw.Close()
		dir := t.TempDir()
		if err := untar(&buf, filepath.Join(dir, "src")); err == nil {
			t.Errorf("untar wrote %q", name)
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "d/", Mode: 0o755, Typeflag: tar.TypeDir})
	tw.WriteHeader(&tar.Header{Name: "d/f.go", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
	tw.Write([]byte("ok"))
	tw.Close()
	dir := t.TempDir()
	if err := untar(&buf, dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "d", "f.go")); err != nil || string(b) != "ok" {
		t.Fatalf("untar wrote %q, %v", b, err)
	}
}

func TestCheckFlags(t *testing.T) {
	if err := CheckFlags(3, 5*time.Second, 0, 27900); err != nil {
		t.Errorf("good flags: %v", err)
	}
	for _, tt := range []struct {
		rounds           int
		duration, warmup time.Duration
		port             int
	}{
		{0, time.Second, 0, 27900},
		{1, 0, 0, 27900},
		{1, time.Second, -time.Second, 27900},
		{1, time.Second, 0, 80},
		{1, time.Second, 0, 65515},
	} {
		if err := CheckFlags(tt.rounds, tt.duration, tt.warmup, tt.port); err == nil {
			t.Errorf("CheckFlags%v took it", tt)
		}
	}
}

func TestWorkdir(t *testing.T) {
	for _, keep := range []bool{false, true} {
		w, err := NewWorkdir("workdir-test-", keep)
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		_, err = os.Stat(w.Dir)
		if kept := err == nil; kept != keep {
			t.Errorf("keep %v: the directory stayed: %v", keep, kept)
		}
		os.RemoveAll(w.Dir)
	}
}

func TestEndpointsLeaderFirst(t *testing.T) {
	var addrs []string
	for range Members {
		srv := httptest.NewServer(nil)
		t.Cleanup(srv.Close)
		addrs = append(addrs, strings.TrimPrefix(srv.URL, "http://"))
	}
	// The first member answers for the cluster: the third leads.
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"leaderAddr": %q}`, addrs[2])
	}))
	t.Cleanup(first.Close)
	addrs[0] = strings.TrimPrefix(first.URL, "http://")
	c := &Cluster{members: make([]*member, Members), endpoints: addrs}
	got, ok := c.EndpointsLeaderFirst(context.Background())
	if want := strings.Join([]string{addrs[2], addrs[0], addrs[1]}, ","); !ok || got != want {
		t.Errorf("EndpointsLeaderFirst = %q, %v; want %q", got, ok, want)
	}
	if c.Endpoints() != strings.Join(addrs, ",") {
		t.Errorf("Endpoints changed: %q", c.Endpoints())
	}
	// No answer: the endpoints as they are, and false.
	c.endpoints = []string{addrs[1], addrs[0], addrs[2]}
	if got, ok := c.EndpointsLeaderFirst(context.Background()); ok || got != c.Endpoints() {
		t.Errorf("without a leader: %q, %v", got, ok)
	}
}
