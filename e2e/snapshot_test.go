package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/embed/embedtest"
)

// runBaton runs the baton binary with args and returns its exit status,
// stdout and stderr.
func runBaton(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = serverEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("baton %q: %v", args, err)
	}
	return code, stdout.String(), stderr.String()
}

// The operator's path with real processes: `baton snapshot save` while a
// client acquires and releases, `baton snapshot status` on the file and
// on damaged copies of it, `baton snapshot restore` for each member of a
// new 3-member cluster (refused into a member's data dir), and `baton
// server` on the restored data dirs: the holds are there, the next grant's
// token is above the backup's index, and the cluster id is new.
func TestSnapshotSaveStatusRestore(t *testing.T) {
	skipShort(t)
	addrs := freeLoopbackAddrs(t, 6)
	old := newCluster(t, clusterConfig{n: 3, clientAddrs: addrs[:3], peerAddrs: addrs[3:]})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	old.start(ctx)
	endpoints := strings.Join(old.endpoints(), ",")
	cl := dial(t, endpoints)
	holder := newSession(t, cl, baton.WithOwner("holder"), baton.WithTTL(time.Minute))
	held, err := holder.Mutex("jobs/held").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	loader := newSession(t, cl, baton.WithOwner("load"))
	var acked atomic.Uint64
	var cycles atomic.Int64
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var loadErr error
	wg.Go(func() {
		for i := 0; loadCtx.Err() == nil; i++ {
			lease, err := loader.Mutex(fmt.Sprintf("load/%d", i%4)).Lock(loadCtx)
			if err == nil {
				acked.Store(lease.Token())
				err = lease.Release(loadCtx)
			}
			if err != nil && loadCtx.Err() == nil {
				loadErr = err
				return
			}
			cycles.Add(1)
		}
	})
	embedtest.WaitFor(t, 30*time.Second, "the load to run", func() bool { return cycles.Load() >= 20 })
	before := acked.Load()
	bin := batonBinary(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.snap")
	code, stdout, stderr := runBaton(t, bin, "snapshot", "save", file, "--endpoints", endpoints)
	stopLoad()
	wg.Wait()
	if code != 0 {
		t.Fatalf("snapshot save exited %d: %s", code, stderr)
	}
	if loadErr != nil {
		t.Fatalf("the load failed while the backup was taken: %v", loadErr)
	}
	if !strings.Contains(stdout, "saved "+file) {
		t.Errorf("snapshot save printed %q", stdout)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the backup's dir holds %d entries, want the backup alone (no temporary file)", len(ents))
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the backup's mode: %v, %v; want 0600", fi, err)
	}

	code, stdout, stderr = runBaton(t, bin, "snapshot", "status", file, "--json")
	if code != 0 {
		t.Fatalf("snapshot status exited %d: %s", code, stderr)
	}
	var info baton.SnapshotInfo
	if err := json.Unmarshal([]byte(stdout), &info); err != nil {
		t.Fatalf("snapshot status --json: %v: %s", err, stdout)
	}
	oldStatus, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Index < before || info.Index < held.Token() || info.ClusterID != oldStatus.ClusterID || len(info.Members) != 3 {
		t.Fatalf("status of the backup: %+v; an acquire acknowledged before it at %d, cluster %x", info, before, oldStatus.ClusterID)
	}

	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	damaged := bytes.Clone(good)
	damaged[len(damaged)-40] ^= 1
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"corrupt", damaged, "file is corrupt"},
		{"truncated", good[:len(good)/2], "file is truncated"},
		{"not-a-backup", []byte("#!/bin/sh\n"), "not a Baton backup file"},
	} {
		path := filepath.Join(t.TempDir(), tc.name+".snap")
		if err := os.WriteFile(path, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runBaton(t, bin, "snapshot", "status", path)
		if code != 1 || !strings.HasPrefix(stderr, "baton snapshot status: "+path+": ") || !strings.Contains(stderr, tc.want) {
			t.Errorf("snapshot status of a %s file exited %d: %q; want 1 and a line saying %q", tc.name, code, stderr, tc.want)
		}
	}

	// The new cluster, on ports of its own.
	naddrs := freeLoopbackAddrs(t, 6)
	restored := newCluster(t, clusterConfig{n: 3, clientAddrs: naddrs[:3], peerAddrs: naddrs[3:]})
	var members []string
	for _, nd := range restored.nodes {
		members = append(members, nd.name+"="+nd.peerAddr)
	}
	initial := strings.Join(members, ",")
	for _, nd := range restored.nodes {
		code, stdout, stderr := runBaton(t, bin, "snapshot", "restore", file, "--data-dir", nd.dataDir, "--name", nd.name, "--initial-cluster", initial)
		if code != 0 || !strings.Contains(stdout, "baton server --name "+nd.name) {
			t.Fatalf("snapshot restore %s exited %d: %s%s", nd.name, code, stdout, stderr)
		}
	}
	code, _, stderr = runBaton(t, bin, "snapshot", "restore", file, "--data-dir", restored.nodes[0].dataDir, "--name", "n1", "--initial-cluster", initial)
	if code != 1 || !strings.Contains(stderr, "not empty") {
		t.Fatalf("a restore into a member's data dir exited %d: %q; want 1 and a refusal", code, stderr)
	}
	restored.start(ctx)

	ncl := dial(t, strings.Join(restored.endpoints(), ","))
	got, err := ncl.Get(ctx, "jobs/held")
	if err != nil || len(got.Holders) != 1 || got.Holders[0].SessionID != holder.ID() || got.Holders[0].Token != held.Token() {
		t.Fatalf("jobs/held in the restored cluster: %+v, %v; want session %d with token %d", got, err, holder.ID(), held.Token())
	}
	fresh, err := newSession(t, ncl).Mutex("jobs/fresh").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Token() <= info.Index {
		t.Fatalf("the restored cluster's first grant: token %d, not above the backup's index %d", fresh.Token(), info.Index)
	}
	st, err := ncl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ClusterID == 0 || st.ClusterID == oldStatus.ClusterID {
		t.Fatalf("the restored cluster's id %x; the old one's %x", st.ClusterID, oldStatus.ClusterID)
	}
}
