package embed

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/batonlock/baton/api/backup"
	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/storage"
)

// ErrDataDirNotEmpty: Restore was given a data dir that holds something;
// it seeds only a new member.
var ErrDataDirNotEmpty = errors.New("embed: data dir is not empty")

// Restored describes the member Restore seeded.
type Restored struct {
	// ClusterID is the new cluster's id; FromClusterID the id of the
	// cluster the backup was taken of.
	ClusterID, FromClusterID uint64
	// Index and Term are the backup's: the new cluster's log starts after
	// Index, so every fencing token it grants is above every token in
	// the backup.
	Index, Term uint64
	// Members are the new cluster's, from InitialCluster.
	Members []PeerSpec
}

// Restore seeds member cfg.Name of a new cluster from the backup file r
// (package api/backup, as `baton snapshot save` writes it) into the empty
// or absent cfg.DataDir; then Start(cfg) runs it. Run it once for every
// member of the new cluster, with the same backup and InitialCluster
// (as etcdutl's snapshot restore): each member's data dir then holds the
// same snapshot, so the members agree from their first entry on, and
// none bootstraps a cluster of its own.
//
// The state is the backup's whole: every session, hold, queue, lock-delay,
// auth setting, signing key and the log version. Only the identity is
// new: the members are InitialCluster's, and the cluster id is derived
// from the backup and InitialCluster, so every member restored alike
// computes the same one and it differs from the backup's cluster's: the
// old cluster's members refuse the new one's and the other way round
// (transport.Config.ClusterID). The log starts after the backup's index,
// so fencing tokens (log indexes) continue strictly above every token
// in it. Sessions are not expired by the restore: the new cluster's
// first leader gives every one a full TTL, as every new leader does.
//
// Restore refuses a data dir that holds anything (ErrDataDirNotEmpty),
// Join, a backup that does not check out (backup.Read's errors), and one
// of a newer log version than this release reads. On an error it leaves
// no data behind.
func Restore(cfg Config, r io.Reader) (Restored, error) {
	if err := cfg.Validate(); err != nil {
		return Restored{}, fmt.Errorf("embed: %w", err)
	}
	if cfg.Join {
		return Restored{}, errors.New("embed: a restored member starts a new cluster: Join does not apply")
	}
	created, err := emptyDataDir(cfg.DataDir)
	if err != nil {
		return Restored{}, err
	}
	var data bytes.Buffer
	h, err := backup.Read(r, &data)
	if err != nil {
		return Restored{}, fmt.Errorf("embed: %w", err)
	}
	peers := []PeerSpec{{Name: cfg.Name, ID: MemberID(cfg.Name), PeerAddr: cfg.PeerAddr}}
	if cfg.InitialCluster != "" {
		peers, _ = ParseCluster(cfg.InitialCluster)
	}
	snap, out, err := reseed(cfg, h, data.Bytes(), peers)
	if err != nil {
		return Restored{}, err
	}
	if err := writeRestored(cfg, snap, h.GetTerm()); err != nil {
		dir := filepath.Join(cfg.DataDir, fmt.Sprintf("group-%d", GroupID))
		if rmErr := os.RemoveAll(dir); rmErr == nil && created {
			_ = os.Remove(cfg.DataDir)
		}
		return Restored{}, err
	}
	return out, nil
}

// emptyDataDir checks that dir is absent or empty; created reports
// whether it is absent (Restore then makes it).
func emptyDataDir(dir string) (created bool, err error) {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("embed: data dir: %w", err)
	case len(ents) > 0:
		return false, fmt.Errorf("%w: %s holds %s: restore seeds a new member into an empty or absent directory (a member's data is not overwritten)", ErrDataDirNotEmpty, dir, ents[0].Name())
	}
	return false, nil
}

// reseed restores the backup's state machine and gives it the new
// cluster's identity; it returns the new member's first snapshot.
func reseed(cfg Config, h *batonpb.SnapshotHeader, data []byte, peers []PeerSpec) (*raftpb.Snapshot, Restored, error) {
	reads := cfg.LogVersion
	if reads == 0 {
		reads = fsm.LogVersion
	}
	switch {
	case h.GetLogVersion() > reads:
		return nil, Restored{}, fmt.Errorf("embed: the backup is of log version %d; this release reads up to %d: restore it with a newer release", h.GetLogVersion(), reads)
	case h.GetIndex() == 0 || h.GetTerm() == 0:
		return nil, Restored{}, fmt.Errorf("embed: the backup's header gives index %d, term %d: both must be positive", h.GetIndex(), h.GetTerm())
	}
	m := fsm.New()
	if err := m.Restore(data); err != nil {
		return nil, Restored{}, fmt.Errorf("embed: the backup's state: %w", err)
	}
	if m.AppliedIndex() != h.GetIndex() {
		return nil, Restored{}, fmt.Errorf("embed: the backup's state is at index %d, its header says %d", m.AppliedIndex(), h.GetIndex())
	}
	cid := restoredClusterID(h, peers)
	members := make([]fsm.Member, len(peers))
	voters := make([]uint64, len(peers))
	for i, p := range peers {
		members[i] = fsm.Member{ID: p.ID, Name: p.Name, PeerAddr: p.PeerAddr}
		voters[i] = p.ID
	}
	slices.Sort(voters) // the same configuration whatever the order of InitialCluster
	m.Reseed(cid, members)
	seeded, err := m.Snapshot()
	if err != nil {
		return nil, Restored{}, fmt.Errorf("embed: encode the restored state: %w", err)
	}
	snap := &raftpb.Snapshot{Data: seeded, Metadata: &raftpb.SnapshotMetadata{
		Index: new(h.GetIndex()), Term: new(h.GetTerm()), ConfState: &raftpb.ConfState{Voters: voters}}}
	return snap, Restored{ClusterID: cid, FromClusterID: h.GetClusterId(), Index: h.GetIndex(), Term: h.GetTerm(), Members: peers}, nil
}

// writeRestored writes the member's log: the snapshot, then a hard state
// that commits it (storage's contract for a snapshot from a leader).
func writeRestored(cfg Config, snap *raftpb.Snapshot, term uint64) error {
	dir := filepath.Join(cfg.DataDir, fmt.Sprintf("group-%d", GroupID))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("embed: data dir: %w", err)
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	st, err := storage.Open(dir, lg)
	if err != nil {
		return fmt.Errorf("embed: %w", err)
	}
	err = st.SaveSnapshot(snap)
	if err == nil {
		err = st.Save(&raftpb.HardState{Term: new(term), Commit: new(snap.GetMetadata().GetIndex())}, nil, true)
	}
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("embed: write the restored member: %w", err)
	}
	return nil
}

// restoredClusterID is the id of a cluster restored from backup h with
// peers: a hash of the backup (its cluster, index and data's SHA-256) and
// of the members' names and addresses, so that every member restored
// from the same file with the same InitialCluster computes the same id
// on its own. It is never the backup's cluster's.
func restoredClusterID(h *batonpb.SnapshotHeader, peers []PeerSpec) uint64 {
	parts := make([]string, len(peers))
	for i, p := range peers {
		parts[i] = p.Name + "=" + p.PeerAddr
	}
	slices.Sort(parts)
	f := fnv.New64a()
	fmt.Fprintf(f, "baton-restored\x00%x/%d/%x\x00%s", h.GetClusterId(), h.GetIndex(), h.GetDataSha256(), strings.Join(parts, ","))
	id := max(f.Sum64(), 1)
	if id == h.GetClusterId() {
		id = max(id+1, 1)
	}
	return id
}
