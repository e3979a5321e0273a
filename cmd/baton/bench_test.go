package main

import (
	"strings"
	"testing"
)

// TestBenchClients: by default every worker has a client of its own, as a
// fleet of processes has; --conns N spreads the workers over N.
func TestBenchClients(t *testing.T) {
	tests := []struct {
		conns, workers, want int
		line                 string
	}{
		{conns: 0, workers: 64, want: 64, line: "64 workers, each with its own client: its own connection and session (--conns 64)"},
		{conns: 0, workers: 1, want: 1, line: "1 worker with its own client: its own connection and session (--conns 1)"},
		{conns: 64, workers: 64, want: 64, line: "each with its own client"},
		{conns: 100, workers: 16, want: 16, line: "16 workers, each with its own client"},
		{conns: 1, workers: 64, want: 1, line: "64 workers sharing one client: one connection and one Sessions stream for all their sessions (--conns 1)"},
		{conns: 8, workers: 64, want: 8, line: "64 workers over 8 clients: 8 to 8 sessions share each connection (--conns 8)"},
		{conns: 5, workers: 16, want: 5, line: "16 workers over 5 clients: 3 to 4 sessions share each connection (--conns 5)"},
	}
	for _, tt := range tests {
		got, err := benchClients(tt.conns, tt.workers)
		if err != nil || got != tt.want {
			t.Errorf("benchClients(%d, %d) = %d, %v; want %d", tt.conns, tt.workers, got, err, tt.want)
			continue
		}
		if line := clientsLine(tt.workers, got); !strings.Contains(line, tt.line) {
			t.Errorf("clientsLine(%d, %d) = %q; want it to contain %q", tt.workers, got, line, tt.line)
		}
	}
	if _, err := benchClients(-1, 4); err == nil {
		t.Error("benchClients took --conns -1")
	}
}
