package raftnode

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// Routine async-write notices go to Debug; other Info stays Info.
func TestRaftLoggerDemotesRoutineInfo(t *testing.T) {
	var buf bytes.Buffer
	l := newRaftLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l.Infof("entry at index %d missing from unstable log; ignoring", 85)
	l.Infof("%x became leader at term %d", 1, 2)
	out := buf.String()
	if strings.Contains(out, "missing from unstable") {
		t.Errorf("routine notice logged at Info: %s", out)
	}
	if !strings.Contains(out, "became leader at term 2") {
		t.Errorf("other Info lost: %q", out)
	}
}
