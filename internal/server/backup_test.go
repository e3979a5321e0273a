package server

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestBackupsAreBounded: a member takes or sends at most MaxBackups
// backups at once; one more is refused with RESOURCE_EXHAUSTED, and a
// finished one makes room.
func TestBackupsAreBounded(t *testing.T) {
	s := &Server{}
	var dones []func()
	for range MaxBackups {
		done, err := s.startBackup()
		if err != nil {
			t.Fatalf("backup %d of %d refused: %v", len(dones)+1, MaxBackups, err)
		}
		dones = append(dones, done)
	}
	if _, err := s.startBackup(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a backup past the limit: %v, want RESOURCE_EXHAUSTED", err)
	}
	dones[0]()
	done, err := s.startBackup()
	if err != nil {
		t.Fatalf("a backup after one finished: %v", err)
	}
	done()
	for _, d := range dones[1:] {
		d()
	}
	if n := s.backups.Load(); n != 0 {
		t.Fatalf("%d backups counted after all finished", n)
	}
}
