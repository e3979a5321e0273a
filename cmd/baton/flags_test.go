package main

import (
	"os"
	"strings"
	"testing"

	"github.com/batonlock/baton/embed"
)

func TestByteSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		str     string
		wantErr bool
	}{
		{in: "auto", want: embed.MinFreeDiskAuto, str: "auto"},
		{in: "AUTO", want: embed.MinFreeDiskAuto, str: "auto"},
		{in: "0", want: 0, str: "0"},
		{in: "268435456", want: 256 << 20, str: "256MiB"},
		{in: "256MiB", want: 256 << 20, str: "256MiB"},
		{in: "256 mib", want: 256 << 20, str: "256MiB"},
		{in: "2GiB", want: 2 << 30, str: "2GiB"},
		{in: "1GB", want: 1e9, str: "1000000000"},
		{in: "1500KB", want: 1500000, str: "1500000"},
		{in: "3TiB", want: 3 << 40, str: "3TiB"},
		{in: "100B", want: 100, str: "100"},
		{in: "1.5GiB", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "12XB", wantErr: true},
		{in: "", wantErr: true},
		{in: "MiB", wantErr: true},
		{in: "9000000TiB", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var b byteSize
			err := b.Set(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Set(%q) = %d, want an error", tt.in, b)
				}
				return
			}
			if err != nil || int64(b) != tt.want || b.String() != tt.str {
				t.Fatalf("Set(%q): %d %q, %v; want %d %q", tt.in, b, b.String(), err, tt.want, tt.str)
			}
		})
	}
}

// A removed flag fails `baton server` with the reason and what to use
// instead, from the command line and from its BATON_* variable (which an
// unknown flag's variable would not: applyEnv reads only the flags it
// knows). The extra argument keeps the server from starting if the flag
// were accepted.
func TestRemovedServerFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  string
		args []string
	}{
		{"flag", "", []string{"--gc-floor-mib", "64", "unexpected"}},
		{"environment", "64", []string{"unexpected"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("BATON_GC_FLOOR_MIB", tc.env)
			}
			var code int
			out := captureStderr(t, func() { code = runServer(tc.args) })
			if code != 2 || !strings.Contains(out, "--gc-floor-mib was removed: ") || !strings.Contains(out, "GOGC") {
				t.Errorf("runServer(%q) = %d, printed\n%s\nwant 2 and why --gc-floor-mib was removed", tc.args, code, out)
			}
		})
	}
}

// captureStderr returns what f writes to os.Stderr.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	file, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	saved := os.Stderr
	os.Stderr = file
	defer func() { os.Stderr = saved }()
	f()
	out, err := os.ReadFile(file.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
