package main

import (
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
