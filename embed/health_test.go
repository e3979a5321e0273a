package embed_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
)

// TestHealthProbes: /healthz answers 200 while the member serves; /readyz
// answers 200 on every member of a cluster with a leader, and 503 naming
// the cause on a member cut off from the majority (the leader steps down
// and the followers lose it within an election timeout) and on one whose
// data dir is under --min-free-disk.
func TestHealthProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		disk := &fakeDisk{}
		disk.free.Store(1 << 40)
		c := startInMemory(t, 3, snapshotOften, embedtest.Configure(func(i int, cfg *embed.Config) {
			if i == 2 {
				cfg.MinFreeDisk, cfg.DiskSpace = 1<<30, disk
			}
		}))
		c.WaitLeader()
		probe := func(i int, path string) string {
			t.Helper()
			conn, err := c.Dial(context.Background(), c.ClientAddr(i))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			return httpGet(t, conn, path)
		}
		for i := range 3 {
			if got := probe(i, "/healthz"); !strings.HasPrefix(got, "HTTP/1.1 200") || !strings.HasSuffix(got, "\nok\n") {
				t.Errorf("member %d /healthz: %q", i, got)
			}
			if got := probe(i, "/readyz?verbose"); !strings.HasPrefix(got, "HTTP/1.1 200") || !strings.Contains(got, "[+]leader ok\n[+]disk ok\nok\n") {
				t.Errorf("member %d /readyz?verbose in a cluster with a leader: %q", i, got)
			}
		}

		// Member 2's disk fills past what it keeps free.
		disk.free.Store(1 << 20)
		if got := probe(2, "/readyz"); !strings.HasPrefix(got, "HTTP/1.1 503") || !strings.Contains(got, "[-]disk failed: the data dir has 1.0 MiB") {
			t.Errorf("/readyz on a member under --min-free-disk: %q", got)
		}
		disk.free.Store(1 << 40)

		// Members 0 and 1 stop: member 2 is alone, cut off from the
		// majority.
		c.Stop(0)
		c.Stop(1)
		time.Sleep(5 * time.Second) // many election timeouts (200 ms)
		got := probe(2, "/readyz")
		if !strings.HasPrefix(got, "HTTP/1.1 503") || !strings.Contains(got, "[-]leader failed: this member knows no leader") || !strings.HasSuffix(got, "readyz check failed\n") {
			t.Errorf("/readyz on a member cut off from the majority: %q", got)
		}
		if got := probe(2, "/healthz"); !strings.HasPrefix(got, "HTTP/1.1 200") {
			t.Errorf("/healthz on a member cut off from the majority (it still serves): %q", got)
		}
		if got := probe(2, "/readyz?timeout=forever"); !strings.HasPrefix(got, "HTTP/1.1 400") {
			t.Errorf("/readyz with a bad timeout: %q", got)
		}
	})
}
