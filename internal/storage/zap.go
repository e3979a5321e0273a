package storage

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newZapLogger returns a *zap.Logger, as etcd's wal and snap packages want,
// that writes to log. A nil log gives zap.NewNop.
func newZapLogger(log *slog.Logger) *zap.Logger {
	if log == nil {
		return zap.NewNop()
	}
	return zap.New(&slogCore{log: log})
}

// slogCore is a zapcore.Core that forwards entries to a slog.Logger. Field
// values are rendered by zap's map encoder and passed as slog attributes,
// sorted by key so that output is stable.
type slogCore struct {
	log   *slog.Logger
	attrs []slog.Attr // from With
}

func zapToSlogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.log.Enabled(context.Background(), zapToSlogLevel(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, attrs: append(slices.Clip(c.attrs), fieldsToAttrs(fields)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	attrs := append(slices.Clip(c.attrs), fieldsToAttrs(fields)...)
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	c.log.LogAttrs(context.Background(), zapToSlogLevel(e.Level), e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

// fieldsToAttrs renders zap fields as slog attributes. Keys are converted to
// snake_case ("tmp-dir-path" -> "tmp_dir_path") to match Baton's log keys;
// zap's "error" becomes "err".
func fieldsToAttrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	attrs := make([]slog.Attr, 0, len(keys))
	for _, k := range keys {
		name := strings.ReplaceAll(k, "-", "_")
		if name == "error" {
			name = "err"
		}
		attrs = append(attrs, slog.Any(name, enc.Fields[k]))
	}
	return attrs
}
