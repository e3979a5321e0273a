package embed_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/api/backup"
	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// A backup taken while a client acquires and releases, restored into a
// new 3-member cluster: the new cluster has every session, hold, queue
// and setting of the backup (its signing key and log version among them)
// under a cluster id of its own; the holder's session, which nobody keeps
// alive there, lasts a full TTL from the restore, and then its lock goes
// to the waiter queued in the backup with a token above every token in
// the backup, as does a new grant. The restored member that took over a
// stopped old member's peer address refuses the old members, and
// neither cluster sees the other's writes.
func TestRestoreIntoANewCluster(t *testing.T) {
	signed := func(_ int, cfg *embed.Config) { cfg.SignedTokens = true }
	old := startCluster(t, 3, embedtest.Configure(signed))
	old.WaitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := baton.Dial(ctx, old.Endpoints(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	session := func(cl *baton.Client, owner string, ttl time.Duration) *baton.Session {
		t.Helper()
		s, err := cl.NewSession(ctx, baton.WithOwner(owner), baton.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		return s
	}
	const holderTTL = 8 * time.Second
	holder := session(cl, "holder", holderTTL)
	if _, err := holder.Mutex("jobs/a").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Mutex("jobs/b").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiter := session(cl, "waiter", time.Minute)
	// It waits on the old cluster until the test ends.
	waitCtx, stopWaiting := context.WithCancel(ctx)
	var waiting sync.WaitGroup
	defer waiting.Wait()
	defer stopWaiting()
	waiting.Go(func() { _, _ = waiter.Mutex("jobs/a").Lock(waitCtx) })
	embedtest.WaitFor(t, 10*time.Second, "the waiter to queue for jobs/a", func() bool {
		info, err := cl.Get(ctx, "jobs/a")
		return err == nil && len(info.Waiters) == 1
	})

	// Load: a session acquiring and releasing while the backup is taken.
	loader := session(cl, "load", 10*time.Second)
	var acked atomic.Uint64 // the token of the last acquire acknowledged
	var cycles atomic.Int64
	stopLoad := make(chan struct{})
	loadErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopLoad:
				loadErr <- nil
				return
			default:
			}
			lease, err := loader.Mutex("load/" + string(rune('a'+i%5))).Lock(ctx)
			if err == nil {
				acked.Store(lease.Token())
				err = lease.Release(ctx)
			}
			if err != nil {
				loadErr <- err
				return
			}
			cycles.Add(1)
		}
	})
	embedtest.WaitFor(t, 20*time.Second, "the load to run", func() bool { return cycles.Load() >= 20 })
	before := acked.Load()
	var file bytes.Buffer
	info, err := cl.SaveSnapshot(ctx, &file)
	if err != nil {
		t.Fatal(err)
	}
	during := cycles.Load()
	embedtest.WaitFor(t, 20*time.Second, "the load to go on after the backup", func() bool { return cycles.Load() >= during+10 })
	close(stopLoad)
	wg.Wait()
	if err := <-loadErr; err != nil {
		t.Fatalf("the load failed while the backup was taken: %v", err)
	}
	if info.Index < before {
		t.Fatalf("backup at index %d; an acquire acknowledged before it was granted at %d", info.Index, before)
	}
	if len(info.Members) != 3 || info.LogVersion != fsm.LogVersion {
		t.Fatalf("backup describes members %v, log version %d", info.Members, info.LogVersion)
	}

	// The backup's own state, and its highest token.
	var data bytes.Buffer
	if _, err := backup.Read(bytes.NewReader(file.Bytes()), &data); err != nil {
		t.Fatal(err)
	}
	saved := fsm.New()
	if err := saved.Restore(data.Bytes()); err != nil {
		t.Fatal(err)
	}
	var maxToken uint64
	saved.EachHold(func(_ string, _, token uint64, _ int64) { maxToken = max(maxToken, token) })
	if maxToken == 0 || maxToken > info.Index || len(saved.SigningKeys()) == 0 {
		t.Fatalf("backup at %d: highest token %d, %d signing keys", info.Index, maxToken, len(saved.SigningKeys()))
	}
	oldID := embed.RaftNode(old.Member(0)).Membership().ClusterID

	// The new cluster: n3 takes over the peer address of the old n3,
	// which stops (the other old members go on sending to it there).
	oldN3Peer := old.Config(2).PeerAddr
	old.Stop(2)
	n3Log := &recordingHandler{}
	restoredAt := time.Now()
	restored := startCluster(t, 3, embedtest.Configure(signed), embedtest.Configure(func(i int, cfg *embed.Config) {
		parts := strings.Split(cfg.InitialCluster, ",")
		for k, p := range parts {
			if strings.HasPrefix(p, "n3=") {
				parts[k] = "n3=" + oldN3Peer
			}
		}
		cfg.InitialCluster = strings.Join(parts, ",")
		if i == 2 {
			cfg.PeerListener.Close()
			l, err := net.Listen("tcp", oldN3Peer)
			if err != nil {
				t.Fatal(err)
			}
			cfg.PeerListener, cfg.PeerAddr, cfg.Logger = l, oldN3Peer, slog.New(n3Log)
		}
		r, err := embed.Restore(*cfg, bytes.NewReader(file.Bytes()))
		if err != nil {
			t.Fatalf("restore %s: %v", cfg.Name, err)
		}
		if r.Index != info.Index || r.FromClusterID != oldID || r.ClusterID == oldID {
			t.Fatalf("restore %s: %+v (backup at %d of cluster %x)", cfg.Name, r, info.Index, oldID)
		}
	}))
	restored.WaitLeader()

	// Every member has the backup's state under the new identity.
	newID := embed.RaftNode(restored.Member(0)).Membership().ClusterID
	if newID == 0 || newID == oldID {
		t.Fatalf("restored cluster id %x, the old one's %x", newID, oldID)
	}
	for i := range 3 {
		embed.RaftNode(restored.Member(i)).View(func(m *fsm.Machine) {
			name := restored.Config(i).Name
			if m.ClusterID() != newID {
				t.Errorf("%s: cluster id %x, n1's %x", name, m.ClusterID(), newID)
			}
			sameRecords(t, name+"'s sessions", saved.Sessions(0, 1000), m.Sessions(0, 1000))
			sameRecords(t, name+"'s locks", saved.Locks("", "", 1000), m.Locks("", "", 1000))
			if !proto.Equal(saved.AuthState(), m.AuthState()) || len(m.SigningKeys()) != len(saved.SigningKeys()) ||
				m.LogVersion() != saved.LogVersion() {
				t.Errorf("%s: settings differ from the backup's", name)
			}
		})
	}

	// A new grant's token is above every token in the backup.
	ncl, err := baton.Dial(ctx, restored.Endpoints(0))
	if err != nil {
		t.Fatal(err)
	}
	defer ncl.Close()
	fresh, err := session(ncl, "fresh", 10*time.Second).Mutex("jobs/new").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Token() <= info.Index {
		t.Fatalf("first grant after the restore: token %d, not above the backup's index %d", fresh.Token(), info.Index)
	}

	// The holder's session lasts a full TTL from the restore, then the
	// queued waiter gets jobs/a.
	var granted uint64
	embedtest.WaitFor(t, 30*time.Second, "the waiter to be granted jobs/a in the restored cluster", func() bool {
		got, err := ncl.Get(ctx, "jobs/a")
		if err == nil && len(got.Holders) == 1 && got.Holders[0].SessionID == waiter.ID() {
			granted = got.Holders[0].Token
			return true
		}
		return false
	})
	if lasted := time.Since(restoredAt); lasted < holderTTL {
		t.Fatalf("the holder's session ended %v after the restore, before its TTL of %v", lasted, holderTTL)
	}
	if granted <= maxToken {
		t.Fatalf("the waiter's grant has token %d, not above the backup's highest %d", granted, maxToken)
	}

	// The two clusters do not talk: the old members' connections to the
	// restored n3 are refused, and neither sees the other's writes.
	embedtest.WaitFor(t, 20*time.Second, "the restored n3 to refuse the old members", func() bool {
		return n3Log.saw("refused a peer of another cluster")
	})
	if info, err := cl.Get(ctx, "jobs/new"); err != nil || len(info.Holders) != 0 {
		t.Fatalf("the old cluster's jobs/new: %+v, %v (the restored cluster's grant leaked)", info, err)
	}
	if got, err := ncl.Get(ctx, "jobs/a"); err != nil || got.Holders[0].SessionID != waiter.ID() {
		t.Fatalf("restored jobs/a: %+v, %v", got, err)
	}
	if got, err := cl.Get(ctx, "jobs/a"); err != nil || len(got.Holders) != 1 || got.Holders[0].SessionID != holder.ID() {
		t.Fatalf("the old cluster's jobs/a is no longer the holder's: %+v, %v", got, err)
	}
	if st, err := ncl.Status(ctx); err != nil || st.ClusterID != newID {
		t.Fatalf("restored status: %+v, %v; want cluster id %x", st, err, newID)
	}

	// A client given a follower's address alone backs the restored
	// cluster up too: the follower sends it to the leader, which takes
	// the backup with everything acknowledged so far.
	lead := restored.WaitLeader()
	fcl, err := baton.Dial(ctx, restored.ClientAddr((lead+1)%3))
	if err != nil {
		t.Fatal(err)
	}
	defer fcl.Close()
	again, err := fcl.SaveSnapshot(ctx, io.Discard)
	if err != nil {
		t.Fatalf("a backup asked of a follower: %v", err)
	}
	if again.ClusterID != newID || again.Index < granted || again.TakenBy != restored.Config(lead).Name {
		t.Fatalf("a backup asked of a follower: %+v; want cluster %x at %d or later, taken by the leader %s", again, newID, granted, restored.Config(lead).Name)
	}
}

// sameRecords fails t unless got and want are the same records in order.
func sameRecords[M proto.Message](t *testing.T, what string, want, got []M) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d, the backup has %d", what, len(got), len(want))
		return
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("%s: %v, the backup has %v", what, got[i], want[i])
		}
	}
}

// recordingHandler keeps the messages logged to it.
type recordingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message)
	h.mu.Unlock()
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) saw(prefix string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.msgs {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}

// backupOf is a backup file of a state machine with one session holding
// one lock, at index 42.
func backupOf(t *testing.T) []byte {
	t.Helper()
	m := fsm.New()
	m.SetClusterID(0x5eed)
	m.SetLogVersion(fsm.LogVersion)
	res := m.Apply(41, &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{TtlNanos: 10e9, Owner: "a"}}})
	m.Apply(42, &fsmpb.Command{SessionId: res.GetSessionId(), Seq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "jobs/1"}}})
	data, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	var file bytes.Buffer
	w, err := backup.NewWriter(&file, &batonpb.SnapshotHeader{ClusterId: 0x5eed, Index: 42, Term: 3, LogVersion: m.LogVersion(),
		Size: uint64(len(data)), DataSha256: sum[:]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return file.Bytes()
}

func restoreConfig(dir string) embed.Config {
	cfg := embed.DefaultConfig()
	cfg.Name, cfg.DataDir = "n1", dir
	cfg.PeerAddr = "127.0.0.1:7811"
	cfg.InitialCluster = "n1=127.0.0.1:7811,n2=127.0.0.1:7821,n3=127.0.0.1:7831"
	return cfg
}

// Restore refuses a data dir that holds anything, and changes nothing in
// it; a damaged backup, a backup of a newer log version and Join are
// refused, leaving no data dir behind; two members restored alike agree
// on the new cluster's id, which is not the backup's.
func TestRestoreRefusals(t *testing.T) {
	file := backupOf(t)

	full := t.TempDir()
	keep := filepath.Join(full, "keep")
	if err := os.WriteFile(keep, []byte("a member's data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := embed.Restore(restoreConfig(full), bytes.NewReader(file)); !errors.Is(err, embed.ErrDataDirNotEmpty) {
		t.Fatalf("restore into a non-empty dir: %v", err)
	}
	if ents, _ := os.ReadDir(full); len(ents) != 1 {
		t.Fatalf("the non-empty dir now holds %d entries", len(ents))
	}

	damaged := bytes.Clone(file)
	damaged[len(damaged)-sha256.Size-1] ^= 1 // the data's last byte
	for _, tc := range []struct {
		name string
		cfg  func(dir string) embed.Config
		file []byte
		want string
	}{
		{"damaged", restoreConfig, damaged, "corrupt"},
		{"truncated", restoreConfig, file[:len(file)-1], "truncated"},
		{"newer log version", func(dir string) embed.Config { c := restoreConfig(dir); c.LogVersion = 1; return c }, file, "log version"},
		{"join", func(dir string) embed.Config { c := restoreConfig(dir); c.Join = true; return c }, file, "Join"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "member")
			_, err := embed.Restore(tc.cfg(dir), bytes.NewReader(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("restore: %v, want an error saying %q", err, tc.want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the refused restore left %s behind (%v)", dir, err)
			}
		})
	}

	a, err := embed.Restore(restoreConfig(filepath.Join(t.TempDir(), "a")), bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	cfg := restoreConfig(filepath.Join(t.TempDir(), "b"))
	cfg.Name, cfg.PeerAddr = "n2", "127.0.0.1:7821"
	b, err := embed.Restore(cfg, bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if a.ClusterID != b.ClusterID || a.ClusterID == 0x5eed || a.Index != 42 || a.Term != 3 || len(a.Members) != 3 {
		t.Fatalf("restored n1: %+v; n2: %+v", a, b)
	}
}
