package vfs

import (
	"bytes"
	"path/filepath"
	"testing"
)

// A process on a WriteBack that dies loses what it had not synced: the
// test abandons one WriteBack without closing anything, as a SIGKILL
// would, and reads the directory through a new one.
func TestWriteBackLosesUnsyncedDataWithTheProcess(t *testing.T) {
	dir := t.TempDir()
	wb := NewWriteBack(OS())
	name := filepath.Join(dir, "00000000000000000000.log")
	f, err := wb.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("synced;"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("unsynced;"), 7); err != nil {
		t.Fatal(err)
	}
	// The process sees its own writes, through every handle and Stat.
	r, err := wb.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(r); err != nil || string(got) != "synced;unsynced;" {
		t.Fatalf("another handle reads %q, %v", got, err)
	}
	if info, err := wb.Stat(name); err != nil || info.Size != 16 {
		t.Fatalf("Stat = %+v, %v; want size 16", info, err)
	}
	// A closed file keeps its unsynced data for the next handle.
	other := filepath.Join(dir, "other")
	g, err := wb.Create(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt([]byte("never synced"), 0); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, wb, other); string(got) != "never synced" {
		t.Fatalf("reopened after close: %q", got)
	}
	// The file below has only what was synced.
	if got := mustRead(t, OS(), name); string(got) != "synced;" {
		t.Fatalf("below: %q", got)
	}

	// The process dies.
	after := NewWriteBack(OS())
	if got := mustRead(t, after, name); string(got) != "synced;" {
		t.Fatalf("after the process died: %q, want only the synced write", got)
	}
	if got := mustRead(t, after, other); len(got) != 0 {
		t.Fatalf("a file never synced holds %q after the process died", got)
	}
}

func TestWriteBackTruncateWaitsForSync(t *testing.T) {
	dir := t.TempDir()
	wb := NewWriteBack(OS())
	name := filepath.Join(dir, "f")
	writeFile(t, wb, name, []byte("0123456789"))
	f, err := wb.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("xy"), 6); err != nil {
		t.Fatal(err)
	}
	// Truncated to 4, then written at 6: the gap reads as zeros, not as
	// the bytes the file below still has there.
	want := []byte("0123\x00\x00xy")
	if got, err := readAll(f); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("reads %q, %v; want %q", got, err, want)
	}
	if got := mustRead(t, OS(), name); string(got) != "0123456789" {
		t.Fatalf("below before the sync: %q", got)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, OS(), name); !bytes.Equal(got, want) {
		t.Fatalf("below after the sync: %q, want %q", got, want)
	}
}

// A renamed file keeps its unsynced data under the new name; a synced
// rename of a synced file survives the process (the checkpoint pattern).
func TestWriteBackRename(t *testing.T) {
	dir := t.TempDir()
	wb := NewWriteBack(OS())
	tmp, target := filepath.Join(dir, "cp.tmp"), filepath.Join(dir, "cp")
	f, err := wb.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("pending"), 0); err != nil {
		t.Fatal(err)
	}
	if err := wb.Rename(tmp, target); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, wb, target); string(got) != "pending" {
		t.Fatalf("after the rename: %q", got)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, NewWriteBack(OS()), target); string(got) != "pending" {
		t.Fatalf("synced, after the process died: %q", got)
	}
}

// A file whose unsynced data passes the limit is written below without
// a sync, as the kernel's writeback would, so memory stays bounded.
func TestWriteBackLimit(t *testing.T) {
	dir := t.TempDir()
	wb := NewWriteBack(OS())
	wb.limit = 8
	name := filepath.Join(dir, "f")
	f, err := wb.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("1234"), 0); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, OS(), name); len(got) != 0 {
		t.Fatalf("below the limit, written below: %q", got)
	}
	if _, err := f.WriteAt([]byte("5678"), 4); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, OS(), name); string(got) != "12345678" {
		t.Fatalf("at the limit, below holds %q", got)
	}
	if got, err := readAll(f); err != nil || string(got) != "12345678" {
		t.Fatalf("reads %q, %v", got, err)
	}
}

func TestWriteBackRefusesBadArguments(t *testing.T) {
	dir := t.TempDir()
	wb := NewWriteBack(OS())
	name := filepath.Join(dir, "f")
	writeFile(t, wb, name, []byte("data"))
	ro, err := wb.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.WriteAt([]byte("x"), 0); err == nil {
		t.Error("WriteAt on a read-only handle succeeded")
	}
	if err := ro.Truncate(0); err == nil {
		t.Error("Truncate on a read-only handle succeeded")
	}
	rw, err := wb.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if _, err := rw.WriteAt([]byte("x"), -1); err == nil {
		t.Error("WriteAt at -1 succeeded")
	}
	if _, err := rw.ReadAt(make([]byte, 1), -1); err == nil {
		t.Error("ReadAt at -1 succeeded")
	}
	if err := rw.Truncate(-1); err == nil {
		t.Error("Truncate to -1 succeeded")
	}
	if got := mustRead(t, wb, name); string(got) != "data" {
		t.Fatalf("after refused calls: %q", got)
	}
}
