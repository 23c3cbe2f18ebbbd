package controller

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// raftLogger carries hashicorp/raft's log output into slog. Raft logs every
// heartbeat, append and snapshot step at info/debug; only warnings and
// errors pass, so a node's log stays about the node.
type raftLogger struct {
	log  *slog.Logger
	name string
	args []any // hclog's implied args (With)
}

var _ hclog.Logger = (*raftLogger)(nil)

func newRaftLogger(l *slog.Logger) *raftLogger {
	return &raftLogger{log: l, name: "raft"}
}

func (r *raftLogger) Log(level hclog.Level, msg string, args ...any) {
	var lvl slog.Level
	switch {
	case level == hclog.Off:
		return
	case level >= hclog.Error:
		lvl = slog.LevelError
	case level >= hclog.Warn:
		lvl = slog.LevelWarn
	default:
		return
	}
	if lvl == slog.LevelWarn && msg == "heartbeat timeout reached, starting election" && isEmpty(argValue(args, "last-leader-id")) {
		// Every start of a node logs this: there was no leader yet. It is
		// news only when a known leader went quiet.
		lvl = slog.LevelInfo
	}
	all := make([]any, 0, len(r.args)+len(args)+2)
	all = append(all, "logger", r.name)
	all = append(all, r.args...)
	all = append(all, args...)
	r.log.Log(context.Background(), lvl, msg, all...)
}

// argValue finds key in hclog's alternating key/value args.
func argValue(args []any, key string) any {
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == key {
			return args[i+1]
		}
	}
	return nil
}

// isEmpty: v prints as "" (raft passes ids as raft.ServerID, not string).
func isEmpty(v any) bool { return v != nil && fmt.Sprint(v) == "" }

func (r *raftLogger) Trace(msg string, args ...any) {}
func (r *raftLogger) Debug(msg string, args ...any) {}
func (r *raftLogger) Info(msg string, args ...any)  {}
func (r *raftLogger) Warn(msg string, args ...any)  { r.Log(hclog.Warn, msg, args...) }
func (r *raftLogger) Error(msg string, args ...any) { r.Log(hclog.Error, msg, args...) }

func (r *raftLogger) IsTrace() bool { return false }
func (r *raftLogger) IsDebug() bool { return false }
func (r *raftLogger) IsInfo() bool  { return false }
func (r *raftLogger) IsWarn() bool  { return true }
func (r *raftLogger) IsError() bool { return true }

func (r *raftLogger) ImpliedArgs() []any { return r.args }

func (r *raftLogger) With(args ...any) hclog.Logger {
	c := *r
	c.args = append(append([]any(nil), r.args...), args...)
	return &c
}

func (r *raftLogger) Name() string { return r.name }

func (r *raftLogger) Named(name string) hclog.Logger {
	c := *r
	c.name = r.name + "." + name
	return &c
}

func (r *raftLogger) ResetNamed(name string) hclog.Logger {
	c := *r
	c.name = name
	return &c
}

// SetLevel is ignored: the level is fixed at warn (see raftLogger).
func (r *raftLogger) SetLevel(hclog.Level) {}

func (r *raftLogger) GetLevel() hclog.Level { return hclog.Warn }

func (r *raftLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(r.StandardWriter(opts), "", 0)
}

func (r *raftLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	force := hclog.NoLevel
	if opts != nil {
		force = opts.ForceLevel
	}
	return &raftLogWriter{l: r, force: force}
}

// raftLogWriter takes lines from code that logs through a *log.Logger
// ("[WARN] raft: ..." style) and re-emits them by their level prefix.
type raftLogWriter struct {
	l     *raftLogger
	force hclog.Level
}

func (w *raftLogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		s := strings.TrimSpace(string(line))
		level := hclog.Info
		for prefix, lvl := range map[string]hclog.Level{
			"[ERROR]": hclog.Error, "[ERR]": hclog.Error, "[WARN]": hclog.Warn,
			"[INFO]": hclog.Info, "[DEBUG]": hclog.Debug, "[TRACE]": hclog.Trace,
		} {
			if strings.HasPrefix(s, prefix) {
				level, s = lvl, strings.TrimSpace(s[len(prefix):])
				break
			}
		}
		if w.force != hclog.NoLevel {
			level = w.force
		}
		w.l.Log(level, s)
	}
	return len(p), nil
}
