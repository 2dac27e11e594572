package meta

import (
	"context"
	"log/slog"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcd (server and client) logs through zap; the broker logs through
// slog. slogCore hands etcd's warnings and errors to the node's logger,
// tagged "etcd", so an operator reads one log in one format. While the
// node stops, etcd's errors about its own servers closing ("setting up
// serving from embedded etcd failed ... server closed") are what a stop
// is, not news: they are logged at debug.

// slogCore is a zapcore.Core writing to a slog.Logger.
type slogCore struct {
	log      *slog.Logger
	stopping *atomic.Bool // the node is stopping: etcd's errors are expected
	attrs    []any
}

// newZapLogger is a zap logger for etcd writing to log from warn level.
func newZapLogger(log *slog.Logger, stopping *atomic.Bool) *zap.Logger {
	return zap.New(&slogCore{log: log.With("part", "etcd"), stopping: stopping})
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, stopping: c.stopping, attrs: append(append([]any(nil), c.attrs...), attrsOf(fields)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	level := slog.LevelWarn
	if e.Level >= zapcore.ErrorLevel {
		level = slog.LevelError
	}
	if c.stopping.Load() {
		level = slog.LevelDebug
	}
	c.log.Log(context.Background(), level, e.Message, append(append([]any(nil), c.attrs...), attrsOf(fields)...)...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

// attrsOf turns zap's fields into slog's key-value pairs (stack traces
// left out: etcd attaches one to every error).
func attrsOf(fields []zapcore.Field) []any {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		if f.Key == "stacktrace" {
			continue
		}
		f.AddTo(enc)
	}
	out := make([]any, 0, 2*len(enc.Fields))
	for k, v := range enc.Fields {
		out = append(out, k, v)
	}
	return out
}
