package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
)

func TestParseLockDelays(t *testing.T) {
	tests := []struct {
		in      string
		want    string // String() of the result
		wantErr string
	}{
		{"0s", "0s", ""},
		{"15s", "15s", ""},
		{"15s,jobs/=30s, cache/=0s", "15s,cache/=0s,jobs/=30s", ""},
		{"1m", "1m0s", ""},
		{"61s", "", "default lock-delay: lock-delay 1m1s is outside 0s..1m0s"},
		{"1500ms", "", "not a whole number of seconds"},
		{"5s,jobs/=2m", "", `lock-delay of prefix "jobs/": lock-delay 2m0s is outside`},
		{"5s,jobs/", "", `"jobs/" is not PREFIX=DELAY`},
		{"5s,=3s", "", `"=3s" is not PREFIX=DELAY`},
		{"5s,a=1s,a=2s", "", `prefix "a" twice`},
		{"5s,a=x", "", `prefix "a": "x" is not a duration`},
		{"soon", "", "the first item is the default"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, err := ParseLockDelays(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseLockDelays(%q) = %v, %v; want an error with %q", tt.in, d, err, tt.wantErr)
				}
				return
			}
			if err != nil || d.String() != tt.want {
				t.Fatalf("ParseLockDelays(%q) = %v, %v; want %s", tt.in, d, err, tt.want)
			}
		})
	}
}

func TestLockDelaysFor(t *testing.T) {
	d := LockDelays{Default: 5 * time.Second, ByPrefix: map[string]time.Duration{"jobs/": 30 * time.Second, "jobs/fast/": 0}}
	for name, want := range map[string]time.Duration{
		"x": 5 * time.Second, "jobs/a": 30 * time.Second, "jobs/fast/a": 0, "jobs": 5 * time.Second,
	} {
		if got := d.For(name); got != want {
			t.Errorf("For(%q) = %v, want %v (the longest prefix wins)", name, got, want)
		}
	}
}

// TestAcquireLockDelayField: the API refuses a lock_delay no hold could
// have, naming the field, before anything is proposed; a valid one goes
// into the command, and unset leaves it to the member's default.
func TestAcquireLockDelayField(t *testing.T) {
	req := func(d *durationpb.Duration) *batonpb.AcquireRequest {
		return &batonpb.AcquireRequest{Header: &batonpb.RequestHeader{SessionId: 1, Seq: 1}, Name: "x", LockDelay: d}
	}
	for _, tt := range []struct {
		d       *durationpb.Duration
		want    time.Duration
		wantErr string
	}{
		{nil, 0, ""},
		{durationpb.New(0), 0, ""},
		{durationpb.New(15 * time.Second), 15 * time.Second, ""},
		{durationpb.New(61 * time.Second), 0, "lock_delay: lock-delay 1m1s is outside 0s..1m0s"},
		{durationpb.New(1500 * time.Millisecond), 0, "lock_delay: lock-delay 1.5s is not a whole number of seconds"},
		{&durationpb.Duration{Seconds: 1, Nanos: -1}, 0, "lock_delay:"},
	} {
		cmd, err := acquireCommand(req(tt.d))
		if tt.wantErr != "" {
			if !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("lock_delay %v: %v; want INVALID_ARGUMENT with %q", tt.d, err, tt.wantErr)
			}
			continue
		}
		if err != nil || time.Duration(cmd.GetAcquire().GetLockDelayNanos()) != tt.want {
			t.Errorf("lock_delay %v: %v, %v; want %v", tt.d, cmd, err, tt.want)
		}
	}
	many, err := acquireManyCommand(&batonpb.AcquireManyRequest{Header: &batonpb.RequestHeader{SessionId: 1, Seq: 1},
		Names: []string{"a"}, LockDelay: durationpb.New(90 * time.Second)})
	if !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), "lock_delay") {
		t.Errorf("acquire_many with a lock_delay of 90s: %v, %v", many, err)
	}
}
