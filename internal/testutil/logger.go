package testutil

import (
	"log/slog"
	"testing"
)

// Logger logs through t at debug level, so a failing test shows what
// the code under test said (why a connection closed, why a Raft leader
// stepped down), and a passing one stays quiet without -v.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	// t.Log after the test ended panics; servers log while closing.
	defer func() { _ = recover() }()
	w.t.Log(string(p))
	return len(p), nil
}
