package raftnode

import (
	"context"
	"fmt"
	"log/slog"
	"os"
)

// raftLogger adapts slog to raft.Logger. Panic and Fatal keep their
// meaning: raft calls them only on broken invariants.
type raftLogger struct{ l *slog.Logger }

func newRaftLogger(l *slog.Logger) *raftLogger { return &raftLogger{l: l.With("component", "raft")} }

// Debug and Debugf format only if debug logging is on: raft calls them
// on hot paths (every rejected append, every vote) with arguments to
// format.
func (r *raftLogger) Debug(v ...any) {
	if r.l.Enabled(context.Background(), slog.LevelDebug) {
		r.l.Debug(fmt.Sprint(v...))
	}
}
func (r *raftLogger) Debugf(format string, v ...any) {
	if r.l.Enabled(context.Background(), slog.LevelDebug) {
		r.l.Debug(fmt.Sprintf(format, v...))
	}
}
func (r *raftLogger) Error(v ...any)                 { r.l.Error(fmt.Sprint(v...)) }
func (r *raftLogger) Errorf(format string, v ...any) { r.l.Error(fmt.Sprintf(format, v...)) }
func (r *raftLogger) Info(v ...any)                  { r.l.Info(fmt.Sprint(v...)) }
func (r *raftLogger) Infof(format string, v ...any) {
	level := slog.LevelInfo
	if routineInfo[format] {
		level = slog.LevelDebug
	}
	if r.l.Enabled(context.Background(), level) {
		r.l.Log(context.Background(), level, fmt.Sprintf(format, v...))
	}
}

// routineInfo are raft's Info messages that are routine with asynchronous
// storage writes, not news: a hard-state-only append carries the index of
// the entries still being written, so its response finds them already
// stable. A leader at the issue-5 scale point logged about 3,600 of them
// in 40 s, burying the lines an operator needs.
var routineInfo = map[string]bool{
	"entry at index %d missing from unstable log; ignoring": true,
	"entry at index %d matched unstable snapshot; ignoring": true,
}

func (r *raftLogger) Warning(v ...any) { r.l.Warn(fmt.Sprint(v...)) }
func (r *raftLogger) Warningf(format string, v ...any) {
	r.l.Warn(fmt.Sprintf(format, v...))
}
func (r *raftLogger) Fatal(v ...any) { r.fatal(fmt.Sprint(v...)) }
func (r *raftLogger) Fatalf(format string, v ...any) {
	r.fatal(fmt.Sprintf(format, v...))
}
func (r *raftLogger) Panic(v ...any) { r.panic(fmt.Sprint(v...)) }
func (r *raftLogger) Panicf(format string, v ...any) {
	r.panic(fmt.Sprintf(format, v...))
}

func (r *raftLogger) fatal(msg string) {
	r.l.Log(context.Background(), slog.LevelError+4, msg)
	os.Exit(1)
}

func (r *raftLogger) panic(msg string) {
	r.l.Log(context.Background(), slog.LevelError+4, msg)
	panic(msg)
}
