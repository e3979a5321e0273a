package baton

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/batonlock/baton/api/backup"
	"github.com/batonlock/baton/api/batonpb"
)

// SnapshotInfo describes a backup of a cluster (SaveSnapshot,
// VerifySnapshot).
type SnapshotInfo struct {
	// ClusterID is the id of the cluster it was taken of.
	ClusterID uint64
	// Index and Term are the Raft index and term of the last log entry
	// the backup reflects: every fencing token in it is at most Index,
	// and a cluster restored from it grants tokens above Index.
	Index, Term uint64
	// LogVersion is the cluster's log version at Index.
	LogVersion uint32
	// Members are the cluster's voters and learners at Index (Name, ID,
	// PeerAddr, Learner).
	Members []Member
	// Size is the state machine snapshot's size in bytes.
	Size uint64
	// TakenBy is the member that took it; TakenAt its wall clock then,
	// for people.
	TakenBy string
	TakenAt time.Time
}

func snapshotInfoOf(h *batonpb.SnapshotHeader) SnapshotInfo {
	info := SnapshotInfo{ClusterID: h.GetClusterId(), Index: h.GetIndex(), Term: h.GetTerm(), LogVersion: h.GetLogVersion(),
		Members: membersOf(h.GetMembers()), Size: h.GetSize(), TakenBy: h.GetTakenBy()}
	if h.GetTakenAt() != nil {
		info.TakenAt = h.GetTakenAt().AsTime()
	}
	return info
}

// SaveSnapshot writes a backup of the cluster to w: a consistent state at
// one applied index, at least the commit index when the call began, so
// that every acquire and release acknowledged before it is in it. It is
// written in the backup file format (package api/backup), which `baton
// snapshot status` checks and `baton snapshot restore` seeds a new
// cluster from; the file ends with a SHA-256 of its contents, and the
// data is checked against the member's own SHA-256 of it as it arrives.
// The leader takes it (the client follows a follower's NOT_LEADER to it,
// as for reads). Writes go on meanwhile: taking a backup costs
// the member one of its ordinary snapshots. An operator call; with
// authentication on, it needs admin over every name. On an error, what
// was written to w is not a backup.
func (c *Client) SaveSnapshot(ctx context.Context, w io.Writer) (SnapshotInfo, error) {
	var (
		h      *batonpb.SnapshotHeader
		stream batonpb.Baton_SaveSnapshotClient
	)
	err := c.invoke(ctx, retryRead, func(ctx context.Context, bc batonpb.BatonClient) error {
		st, err := bc.SaveSnapshot(ctx, &batonpb.SaveSnapshotRequest{})
		if err != nil {
			return err
		}
		first, err := st.Recv()
		if err != nil {
			return err
		}
		if first.GetHeader() == nil {
			return errors.New("baton: the member's backup did not start with its header")
		}
		h, stream = first.GetHeader(), st
		return nil
	})
	if err != nil {
		return SnapshotInfo{}, err
	}
	bw, err := backup.NewWriter(w, h)
	if err != nil {
		return SnapshotInfo{}, err
	}
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return SnapshotInfo{}, fmt.Errorf("baton: backup broke off: %w", fromStatus(err))
		}
		if _, err := bw.Write(r.GetData()); err != nil {
			return SnapshotInfo{}, err
		}
	}
	if err := bw.Close(); err != nil {
		return SnapshotInfo{}, err
	}
	return snapshotInfoOf(h), nil
}

// VerifySnapshot reads a whole backup file from r and describes it once
// it checked out (package api/backup: its format, size and checksums).
// A file that is not a backup, is truncated or damaged, is refused with
// an error saying which (backup.ErrNotBackup, ErrTruncated, ErrCorrupt,
// ErrFormat).
func VerifySnapshot(r io.Reader) (SnapshotInfo, error) {
	h, err := backup.Read(r, io.Discard)
	if err != nil {
		return SnapshotInfo{}, err
	}
	return snapshotInfoOf(h), nil
}
