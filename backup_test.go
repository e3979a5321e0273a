package baton

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton/api/backup"
	"github.com/batonlock/baton/api/batonpb"
)

// With authentication on, only an admin may take a backup, over gRPC and
// over HTTP: a user who may only lock under jobs/ is refused with
// PERMISSION_DENIED (403), a caller without a credential with
// UNAUTHENTICATED (401). root's backup checks out, and is the same file
// format over both.
func TestSaveSnapshotNeedsAdmin(t *testing.T) {
	addr, rootTok, aliceTok, root := authCluster(t)
	ctx := testCtx(t)
	s := newSession(t, root)
	lease, err := s.Mutex("jobs/1").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	alice := dial(t, addr, WithToken(aliceTok))
	if _, err := alice.SaveSnapshot(ctx, &out); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("alice's backup: %v, want ErrPermissionDenied", err)
	}
	if out.Len() != 0 {
		t.Fatalf("a refused backup wrote %d bytes", out.Len())
	}
	// Without a credential the client cannot even Dial (Status needs a
	// user), so the call goes straight to the member.
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if st, err := batonpb.NewBatonClient(cc).SaveSnapshot(ctx, &batonpb.SaveSnapshotRequest{}); err == nil {
		if _, err = st.Recv(); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("a backup without a credential: %v, want UNAUTHENTICATED", err)
		}
	} else if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a backup without a credential: %v, want UNAUTHENTICATED", err)
	}

	info, err := root.SaveSnapshot(ctx, &out)
	if err != nil {
		t.Fatal(err)
	}
	if info.Index < lease.Token() || info.Size == 0 || len(info.Members) != 1 || info.TakenBy == "" {
		t.Fatalf("root's backup: %+v (jobs/1 granted at %d)", info, lease.Token())
	}
	verified, err := VerifySnapshot(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if verified.Index != info.Index || verified.ClusterID != info.ClusterID || verified.ClusterID == 0 {
		t.Fatalf("the file says %+v, the call said %+v", verified, info)
	}

	get := func(token string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/snapshot", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := get(""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/snapshot without a token: %s", resp.Status)
	}
	if resp := get(aliceTok); resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET /v1/snapshot as alice: %s", resp.Status)
	}
	resp := get(rootTok)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/snapshot as root: %s", resp.Status)
	}
	h, err := backup.Read(resp.Body, io.Discard)
	if err != nil {
		t.Fatalf("the backup served over HTTP: %v", err)
	}
	if h.GetIndex() < info.Index || h.GetClusterId() != info.ClusterID {
		t.Fatalf("over HTTP: index %d cluster %x; over gRPC: %+v", h.GetIndex(), h.GetClusterId(), info)
	}
}

// A file that is not a whole backup is refused by VerifySnapshot, saying
// why.
func TestVerifySnapshotRefusesDamage(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	var out bytes.Buffer
	if _, err := cl.SaveSnapshot(ctx, &out); err != nil {
		t.Fatal(err)
	}
	file := out.Bytes()
	flipped := bytes.Clone(file)
	flipped[len(flipped)-sha256.Size-1] ^= 0xff // the data's last byte
	for _, tc := range []struct {
		name string
		file []byte
		want error
	}{
		{"truncated", file[:len(file)-10], backup.ErrTruncated},
		{"a byte flipped", flipped, backup.ErrCorrupt},
		{"not a backup", []byte("hello"), backup.ErrNotBackup},
	} {
		if _, err := VerifySnapshot(bytes.NewReader(tc.file)); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
