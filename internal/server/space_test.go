package server

import "testing"

func TestDiskState(t *testing.T) {
	free := func(n uint64, ok bool) func() (uint64, bool) { return func() (uint64, bool) { return n, ok } }
	tests := []struct {
		name       string
		g          DiskGuard
		known, low bool
	}{
		{"no source", DiskGuard{MinFree: 100}, false, false},
		{"unknown", DiskGuard{MinFree: 100, Free: free(0, false)}, false, false},
		{"below", DiskGuard{MinFree: 100, Free: free(99, true)}, true, true},
		{"at", DiskGuard{MinFree: 100, Free: free(100, true)}, true, false},
		{"off", DiskGuard{Free: free(0, true)}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, known, low := tt.g.diskState(); known != tt.known || low != tt.low {
				t.Errorf("known, low = %v, %v; want %v, %v", known, low, tt.known, tt.low)
			}
		})
	}
}

func TestSizeString(t *testing.T) {
	for _, tt := range []struct {
		n    uint64
		want string
	}{
		{0, "0 bytes"},
		{1023, "1023 bytes"},
		{1536, "1.5 KiB (1536 bytes)"},
		{256 << 20, "256.0 MiB (268435456 bytes)"},
		{5 << 40, "5.0 TiB (5497558138880 bytes)"},
		{5 << 50, "5120.0 TiB (5629499534213120 bytes)"},
	} {
		if got := sizeString(tt.n); got != tt.want {
			t.Errorf("sizeString(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
