package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// LogBytes is the segment files in offset order and nothing else: not
// the indexes, checkpoints or leftovers of a swap beside them.
func TestLogBytesReadsSegmentsInOffsetOrder(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"00000000000000000100.log":       "second",
		"00000000000000000000.log":       "first",
		"00000000000000001000.log":       "third",
		"00000000000000000000.index":     "index",
		"00000000000000000100.timeindex": "timeindex",
		"00000000000000000100.log.swap":  "swap",
		"leader-epoch-checkpoint":        "epochs",
		"junk.log":                       "junk",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := LogBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte("firstsecondthird"); !bytes.Equal(got, want) {
		t.Fatalf("LogBytes = %q, want %q", got, want)
	}
	if _, err := LogBytes(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("LogBytes of a missing directory: %v, want not-exist", err)
	}
}
