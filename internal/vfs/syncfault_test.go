package vfs

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
)

// SyncFaults fails exactly the syncs its function refuses, files and
// directories, passes everything else through, and leaves an
// operating-system file's descriptor reachable (sendfile's path).
func TestSyncFaults(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	fsys := SyncFaults(OS(), func(name string) error {
		if filepath.Dir(name) == bad || name == bad {
			return syscall.EIO
		}
		return nil
	})
	for _, d := range []string{bad, filepath.Join(dir, "good")} {
		if err := MkdirAllDurable(fsys, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.SyncDir(bad); !errors.Is(err, syscall.EIO) {
		t.Fatalf("SyncDir of the bad directory: %v, want EIO", err)
	}
	if err := fsys.SyncDir(filepath.Join(dir, "good")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want error
	}{{filepath.Join(bad, "f"), syscall.EIO}, {filepath.Join(dir, "good", "f"), nil}} {
		f, err := fsys.Create(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("abc"), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%s: Sync %v, want %v", tc.name, err, tc.want)
		}
		if of, ok := OSFile(f); !ok || of.Name() != tc.name {
			t.Errorf("%s: OSFile %v %v", tc.name, of, ok)
		}
		if dup, err := DupOSFile(f); err != nil {
			t.Errorf("%s: DupOSFile: %v", tc.name, err)
		} else {
			dup.Close()
		}
		f.Close()
		for _, open := range []func(string) (File, error){fsys.Open, fsys.OpenReadWrite} {
			g, err := open(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 3)
			if _, err := g.ReadAt(buf, 0); err != nil || string(buf) != "abc" {
				t.Errorf("%s: read %q, %v", tc.name, buf, err)
			}
			if err := g.Sync(); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Errorf("%s reopened: Sync %v, want %v", tc.name, err, tc.want)
			}
			g.Close()
		}
	}
}
