package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/batonlock/baton/api/backup"
	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/raftnode"
)

// backupChunk is the data each SaveSnapshot message after the header
// carries: well under gRPC's 4 MiB message limit, large enough that a
// 100 MB backup is a hundred messages.
const backupChunk = 1 << 20

// MaxBackups bounds the backups one member takes or sends at once: each
// holds a copy of the whole state until its caller has read it, so
// callers that read slowly, or many at once, would otherwise hold as many
// copies.
const MaxBackups = 2

// startBackup counts a backup in, or refuses it past MaxBackups; done
// counts it out.
func (s *Server) startBackup() (done func(), err error) {
	if s.backups.Add(1) > MaxBackups {
		s.backups.Add(-1)
		return nil, status.Errorf(codes.ResourceExhausted, "this member is taking or sending %d backups, its limit; try again when one has finished", MaxBackups)
	}
	return func() { s.backups.Add(-1) }, nil
}

// SaveSnapshot implements batonpb.BatonServer: the header, then the data
// in chunks of backupChunk.
func (s *Server) SaveSnapshot(_ *batonpb.SaveSnapshotRequest, stream grpc.ServerStreamingServer[batonpb.SaveSnapshotResponse]) error {
	done, err := s.startBackup()
	if err != nil {
		return err
	}
	defer done()
	h, data, err := s.backup(stream.Context())
	if err != nil {
		return err
	}
	if err := stream.Send(&batonpb.SaveSnapshotResponse{Header: h}); err != nil {
		return err
	}
	for part := range slices.Chunk(data, backupChunk) {
		if err := stream.Send(&batonpb.SaveSnapshotResponse{Data: part}); err != nil {
			return err
		}
	}
	return nil
}

// httpSaveSnapshot serves SaveSnapshot over HTTP as the backup file
// itself (api/backup), which `baton snapshot status` and `restore` read:
//
//	curl -o backup.snap 127.0.0.1:7700/v1/snapshot
//
// The in-process gateway cannot serve a stream; this answers errors as
// the gateway does.
func (s *Server) httpSaveSnapshot() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		// The bearer token is passed on as the gateway passes it.
		ctx := metadata.NewIncomingContext(r.Context(), metadata.Pairs("authorization", r.Header.Get("Authorization")))
		done, err := s.startBackup()
		var h *batonpb.SnapshotHeader
		var data []byte
		if err == nil {
			defer done()
			h, data, err = s.backup(ctx)
		}
		if err != nil {
			st := status.Convert(err)
			body, _ := json.Marshal(map[string]any{"code": st.Code(), "message": st.Message()})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(runtime.HTTPStatusFromCode(st.Code()))
			_, _ = w.Write(append(body, '\n'))
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="baton-%x-%d.snap"`, h.GetClusterId(), h.GetIndex()))
		bw, err := backup.NewWriter(w, h)
		if err == nil {
			_, err = bw.Write(data)
		}
		if err == nil {
			err = bw.Close()
		}
		if err != nil && r.Context().Err() == nil {
			// The status line is sent: the client sees a short file,
			// which backup.Read refuses.
			s.log.Warn("backup not sent whole", "err", err)
		}
	}
}

// backup checks that the caller may take a backup, then takes one at an
// index at least the cluster's commit index now (a linearizable read
// first), and describes it.
func (s *Server) backup(ctx context.Context) (*batonpb.SnapshotHeader, []byte, error) {
	who, err := s.memberAdmin(ctx, "SaveSnapshot")
	if err != nil {
		return nil, nil, err
	}
	if err := s.node.ReadBarrier(ctx); err != nil {
		return nil, nil, s.toStatus(err)
	}
	b, err := s.node.Backup(ctx)
	if err != nil {
		return nil, nil, s.toStatus(err)
	}
	sum := sha256.Sum256(b.Data)
	h := &batonpb.SnapshotHeader{ClusterId: b.ClusterID, Index: b.Index, Term: b.Term, LogVersion: b.LogVersion,
		Members: s.backupMembers(b), Size: uint64(len(b.Data)), DataSha256: sum[:], TakenBy: s.cfg.Name,
		TakenAt: timestamppb.New(time.Now())}
	s.log.Info("backup taken", "by", who, "index", b.Index, "term", b.Term, "bytes", len(b.Data))
	return h, b.Data, nil
}

// backupMembers are b's voters and learners, named by the state
// machine's records, else as this member knows them (the first members
// of clusters bootstrapped before membership was recorded).
func (s *Server) backupMembers(b raftnode.Backup) []*batonpb.Member {
	var known []Member
	if s.cfg.Members != nil {
		known = s.cfg.Members()
	}
	describe := func(id uint64, learner bool) *batonpb.Member {
		m := &batonpb.Member{Id: id, Learner: learner, Name: fmt.Sprintf("%x", id)}
		for _, r := range known {
			if r.ID == id {
				m.Name, m.PeerAddr = r.Name, r.PeerAddr
			}
		}
		for _, r := range b.Members {
			if r.ID == id {
				m.Name, m.PeerAddr = r.Name, r.PeerAddr
			}
		}
		return m
	}
	var out []*batonpb.Member
	for _, id := range b.Voters {
		out = append(out, describe(id, false))
	}
	for _, id := range b.Learners {
		out = append(out, describe(id, true))
	}
	return out
}
