package server

import (
	"slices"
	"testing"
)

func TestAllowedMethods(t *testing.T) {
	tests := []struct {
		path string
		want []string
	}{
		{"/v1/sessions", []string{"GET", "POST"}},
		{"/v1/sessions/12/keepalive", []string{"POST"}},
		{"/v1/locks/acquire", []string{"POST"}},
		{"/v1/check", []string{"GET"}},
		{"/v1/sessions/12", nil},
		{"/v1/sessions/12/keepalive/more", nil},
		{"/v1/nope", nil},
	}
	for _, tt := range tests {
		if got := allowedMethods(tt.path); !slices.Equal(got, tt.want) {
			t.Errorf("allowedMethods(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}
