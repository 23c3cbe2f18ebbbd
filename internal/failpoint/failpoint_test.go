package failpoint

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string][2]string{
		"":                {"", ""},
		"poison.x":        {"", ""},
		"poison.x@":       {"", ""},
		"@/tmp/m":         {"", ""},
		"poison.x@/tmp/m": {"poison.x", "/tmp/m"},
		"a@b@c":           {"a", "b@c"},
	} {
		if n, m := parse(in); n != want[0] || m != want[1] {
			t.Errorf("parse(%q) = %q, %q; want %q, %q", in, n, m, want[0], want[1])
		}
	}
}

// Hit of a point that is not armed returns.
func TestHitUnarmed(t *testing.T) {
	armed, marker = "other", t.TempDir()+"/m"
	defer func() { armed, marker = "", "" }()
	Hit("poison.x")
}

// FJORD_FSYNC_EIO's fault: nothing until the marker exists, then EIO for
// the directory and every file under it, for good, and never for a
// neighbour whose name only starts the same; relative paths are the data
// directory's.
func TestSyncEIO(t *testing.T) {
	data := t.TempDir()
	t.Setenv(SyncEIOEnv, "")
	if SyncEIO(data) != nil {
		t.Fatal("a fault without the variable")
	}
	t.Setenv(SyncEIOEnv, "orders-0")
	if SyncEIO(data) != nil {
		t.Fatal("a fault from a value without a marker")
	}
	t.Setenv(SyncEIOEnv, "orders-0@eio-marker")
	fail := SyncEIO(data)
	if fail == nil {
		t.Fatal("no fault with the variable set")
	}
	dir := filepath.Join(data, "orders-0")
	inside := []string{dir, filepath.Join(dir, "00000000000000000000.log"), dir + "/./leader-epoch-checkpoint.tmp"}
	outside := []string{data, filepath.Join(data, "orders-01", "00000000000000000000.log"), filepath.Join(data, "orders-1"),
		filepath.Join(data, "recovery-point-offset-checkpoint")}
	for _, name := range append(inside, outside...) {
		if err := fail(name); err != nil {
			t.Fatalf("%s before the marker: %v", name, err)
		}
	}
	if err := os.WriteFile(filepath.Join(data, "eio-marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range inside {
		if err := fail(name); !errors.Is(err, syscall.EIO) {
			t.Errorf("%s after the marker: %v, want EIO", name, err)
		}
	}
	for _, name := range outside {
		if err := fail(name); err != nil {
			t.Errorf("%s after the marker: %v", name, err)
		}
	}
	if err := os.Remove(filepath.Join(data, "eio-marker")); err != nil {
		t.Fatal(err)
	}
	if err := fail(inside[1]); !errors.Is(err, syscall.EIO) {
		t.Fatalf("after the marker went: %v, want EIO still", err)
	}
}
