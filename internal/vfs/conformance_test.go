package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// forEachFS runs fn against the operating system (in a fresh t.TempDir),
// a WriteBack over it, and a fresh MemFS (in a durable directory), so
// that WriteBack and MemFS are held to the behaviour of the real thing
// they stand in for.
func forEachFS(t *testing.T, fn func(t *testing.T, fsys FS, dir string)) {
	t.Helper()
	t.Run("OS", func(t *testing.T) {
		fn(t, OS(), t.TempDir())
	})
	t.Run("WriteBack", func(t *testing.T) {
		fn(t, NewWriteBack(OS()), t.TempDir())
	})
	t.Run("Mem", func(t *testing.T) {
		m := NewMem()
		const dir = "/data"
		if err := MkdirAllDurable(m, dir); err != nil {
			t.Fatal(err)
		}
		fn(t, m, dir)
	})
}

func writeFile(t *testing.T, fsys FS, name string, data []byte) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// readFile returns name's contents, or the error of opening or reading it.
func readFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f)
}

func readAll(f File) ([]byte, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && !(err == io.EOF && size == 0) {
		return nil, err
	}
	return buf, nil
}

func mustRead(t *testing.T, fsys FS, name string) []byte {
	t.Helper()
	b, err := readFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReadWriteAtOffsets(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		f, err := fsys.Create(filepath.Join(dir, "f"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if n, err := f.WriteAt([]byte("hello"), 0); n != 5 || err != nil {
			t.Fatalf("WriteAt = %d, %v", n, err)
		}
		// A write past the end leaves a hole that reads as zeros.
		if n, err := f.WriteAt([]byte("world"), 10); n != 5 || err != nil {
			t.Fatalf("WriteAt = %d, %v", n, err)
		}
		// Overwrite in the middle.
		if _, err := f.WriteAt([]byte("LL"), 2); err != nil {
			t.Fatal(err)
		}
		if size, err := f.Size(); size != 15 || err != nil {
			t.Fatalf("Size = %d, %v; want 15", size, err)
		}
		got, err := readAll(f)
		if err != nil {
			t.Fatal(err)
		}
		if want := []byte("heLLo\x00\x00\x00\x00\x00world"); !bytes.Equal(got, want) {
			t.Fatalf("contents %q, want %q", got, want)
		}
		mid := make([]byte, 4)
		if n, err := f.ReadAt(mid, 3); n != 4 || err != nil || string(mid) != "Lo\x00\x00" {
			t.Fatalf("ReadAt(3) = %d, %v, %q", n, err, mid)
		}
		if _, err := f.ReadAt(mid, -1); err == nil {
			t.Fatal("ReadAt at a negative offset succeeded")
		}
		if _, err := f.WriteAt(mid, -1); err == nil {
			t.Fatal("WriteAt at a negative offset succeeded")
		}
	})
}

func TestReadAtEOF(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "f")
		writeFile(t, fsys, name, []byte("0123456789"))
		f, err := fsys.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cases := []struct {
			off     int64
			len     int
			wantN   int
			wantEOF bool
		}{
			{off: 0, len: 10, wantN: 10},                // exactly to the end: no error
			{off: 6, len: 8, wantN: 4, wantEOF: true},   // straddles the end
			{off: 10, len: 1, wantN: 0, wantEOF: true},  // at the end
			{off: 100, len: 1, wantN: 0, wantEOF: true}, // past the end
			{off: 100, len: 0, wantN: 0},                // empty read: never EOF
		}
		for _, c := range cases {
			p := make([]byte, c.len)
			n, err := f.ReadAt(p, c.off)
			if n != c.wantN || (err == io.EOF) != c.wantEOF || (err != nil && err != io.EOF) {
				t.Errorf("ReadAt(len %d, off %d) = %d, %v; want %d, EOF=%v", c.len, c.off, n, err, c.wantN, c.wantEOF)
			}
		}
	})
}

func TestWriteAtEmptyDoesNotExtend(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		f, err := fsys.Create(filepath.Join(dir, "f"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if n, err := f.WriteAt(nil, 100); n != 0 || err != nil {
			t.Fatalf("WriteAt(nil, 100) = %d, %v", n, err)
		}
		if size, _ := f.Size(); size != 0 {
			t.Fatalf("size %d after an empty write, want 0", size)
		}
	})
}

func TestTruncate(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		f, err := fsys.Create(filepath.Join(dir, "f"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte("abcdefgh"), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(3); err != nil {
			t.Fatal(err)
		}
		if got, _ := readAll(f); string(got) != "abc" {
			t.Fatalf("after shrink: %q", got)
		}
		// Growing again must not resurrect the cut bytes.
		if err := f.Truncate(6); err != nil {
			t.Fatal(err)
		}
		if got, _ := readAll(f); string(got) != "abc\x00\x00\x00" {
			t.Fatalf("after grow: %q", got)
		}
		// Nor may a write past the end after a shrink.
		if err := f.Truncate(1); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("Z"), 4); err != nil {
			t.Fatal(err)
		}
		if got, _ := readAll(f); string(got) != "a\x00\x00\x00Z" {
			t.Fatalf("after shrink and write past end: %q", got)
		}
		if err := f.Truncate(-1); err == nil {
			t.Fatal("Truncate(-1) succeeded")
		}
	})
}

func TestCreateTruncatesAndOpenReadWriteDoesNot(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "f")
		writeFile(t, fsys, name, []byte("original"))

		f, err := fsys.OpenReadWrite(name)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := readAll(f); string(got) != "original" {
			t.Fatalf("OpenReadWrite saw %q", got)
		}
		if _, err := f.WriteAt([]byte("O"), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if got := mustRead(t, fsys, name); string(got) != "Original" {
			t.Fatalf("after OpenReadWrite write: %q", got)
		}

		f, err = fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if size, _ := f.Size(); size != 0 {
			t.Fatalf("Create left size %d", size)
		}
		f.Close()

		// OpenReadWrite creates a missing file, empty.
		f, err = fsys.OpenReadWrite(filepath.Join(dir, "new"))
		if err != nil {
			t.Fatal(err)
		}
		if size, _ := f.Size(); size != 0 {
			t.Fatalf("new file size %d", size)
		}
		f.Close()
		if _, err := fsys.Stat(filepath.Join(dir, "new")); err != nil {
			t.Fatal(err)
		}
	})
}

func TestOpenIsReadOnly(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "f")
		writeFile(t, fsys, name, []byte("data"))
		f, err := fsys.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte("x"), 0); err == nil {
			t.Fatal("WriteAt on a read-only handle succeeded")
		}
		if err := f.Truncate(0); err == nil {
			t.Fatal("Truncate on a read-only handle succeeded")
		}
		if got := mustRead(t, fsys, name); string(got) != "data" {
			t.Fatalf("contents changed to %q", got)
		}
	})
}

func TestOpenErrors(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		if _, err := fsys.Open(filepath.Join(dir, "missing")); !IsNotExist(err) {
			t.Errorf("Open(missing) = %v, want not-exist", err)
		}
		if _, err := fsys.Open(dir); err == nil || IsNotExist(err) || !errors.Is(err, ErrIsDir) {
			t.Errorf("Open(dir) = %v, want ErrIsDir", err)
		}
		if _, err := fsys.Create(dir); err == nil {
			t.Error("Create(dir) succeeded")
		}
		if _, err := fsys.OpenReadWrite(dir); err == nil {
			t.Error("OpenReadWrite(dir) succeeded")
		}
		if _, err := fsys.Create(filepath.Join(dir, "nodir", "f")); !IsNotExist(err) {
			t.Errorf("Create in a missing dir = %v, want not-exist", err)
		}
		writeFile(t, fsys, filepath.Join(dir, "file"), nil)
		if _, err := fsys.Create(filepath.Join(dir, "file", "f")); err == nil {
			t.Error("Create below a file succeeded")
		}
		if err := fsys.MkdirAll(filepath.Join(dir, "file", "sub")); err == nil {
			t.Error("MkdirAll below a file succeeded")
		}
	})
}

func TestCloseTwiceAndUseAfterClose(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		f, err := fsys.Create(filepath.Join(dir, "f"))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err == nil {
			t.Error("second Close succeeded")
		}
		if _, err := f.WriteAt([]byte("x"), 0); err == nil {
			t.Error("WriteAt after Close succeeded")
		}
		if _, err := f.ReadAt(make([]byte, 1), 0); err == nil || err == io.EOF {
			t.Errorf("ReadAt after Close = %v, want a closed error", err)
		}
		if _, err := f.Size(); err == nil {
			t.Error("Size after Close succeeded")
		}
	})
}

func TestName(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "f")
		f, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if f.Name() != name {
			t.Fatalf("Name() = %q, want %q", f.Name(), name)
		}
	})
}

func TestRenameReplacesAtomically(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		target := filepath.Join(dir, "target")
		tmp := filepath.Join(dir, "target.tmp")
		writeFile(t, fsys, target, []byte("old contents"))
		writeFile(t, fsys, tmp, []byte("new"))
		old, err := fsys.Open(target)
		if err != nil {
			t.Fatal(err)
		}
		defer old.Close()

		if err := fsys.Rename(tmp, target); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, fsys, target); string(got) != "new" {
			t.Fatalf("target holds %q", got)
		}
		if _, err := fsys.Stat(tmp); !IsNotExist(err) {
			t.Fatalf("Stat(old name) = %v, want not-exist", err)
		}
		// The replaced file lives on for handles opened before.
		if got, err := readAll(old); err != nil || string(got) != "old contents" {
			t.Fatalf("old handle reads %q, %v", got, err)
		}
		names, err := fsys.List(dir)
		if err != nil || !slices.Equal(names, []string{"target"}) {
			t.Fatalf("List = %v, %v", names, err)
		}

		if err := fsys.Rename(filepath.Join(dir, "missing"), target); !IsNotExist(err) {
			t.Fatalf("Rename(missing) = %v, want not-exist", err)
		}
		// Renaming a name to itself changes nothing.
		if err := fsys.Rename(target, target); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, fsys, target); string(got) != "new" {
			t.Fatalf("after self-rename target holds %q", got)
		}
	})
}

func TestRenameDirectory(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		// Kafka deletes a partition by renaming its directory first.
		src := filepath.Join(dir, "topic-0")
		dst := filepath.Join(dir, "topic-0.deleted")
		if err := fsys.MkdirAll(src); err != nil {
			t.Fatal(err)
		}
		writeFile(t, fsys, filepath.Join(src, "00.log"), []byte("batch"))
		if err := fsys.Rename(src, dst); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, fsys, filepath.Join(dst, "00.log")); string(got) != "batch" {
			t.Fatalf("moved file holds %q", got)
		}
		if err := fsys.Rename(dst, filepath.Join(dst, "inside")); err == nil {
			t.Fatal("moving a directory into itself succeeded")
		}
		if err := fsys.MkdirAll(src); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Rename(src, dst); err == nil {
			t.Fatal("renaming over a non-empty directory succeeded")
		}
		if err := fsys.Rename(filepath.Join(dst, "00.log"), src); err == nil {
			t.Fatal("renaming a file over a directory succeeded")
		}
	})
}

func TestListAndStat(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		for _, name := range []string{"b", "a", "c.log", "B"} {
			writeFile(t, fsys, filepath.Join(dir, name), []byte(name))
		}
		if err := fsys.MkdirAll(filepath.Join(dir, "sub", "deeper")); err != nil {
			t.Fatal(err)
		}
		names, err := fsys.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"B", "a", "b", "c.log", "sub"}; !slices.Equal(names, want) {
			t.Fatalf("List = %v, want %v", names, want)
		}
		if names, err := fsys.List(filepath.Join(dir, "sub", "deeper")); err != nil || len(names) != 0 {
			t.Fatalf("List(empty dir) = %v, %v", names, err)
		}
		if _, err := fsys.List(filepath.Join(dir, "missing")); !IsNotExist(err) {
			t.Fatalf("List(missing) = %v", err)
		}
		if _, err := fsys.List(filepath.Join(dir, "a")); err == nil {
			t.Fatal("List(file) succeeded")
		}

		if info, err := fsys.Stat(filepath.Join(dir, "c.log")); err != nil || info != (FileInfo{Size: 5}) {
			t.Fatalf("Stat(file) = %+v, %v", info, err)
		}
		if info, err := fsys.Stat(filepath.Join(dir, "sub")); err != nil || !info.IsDir {
			t.Fatalf("Stat(dir) = %+v, %v", info, err)
		}
		if _, err := fsys.Stat(filepath.Join(dir, "missing")); !IsNotExist(err) {
			t.Fatalf("Stat(missing) = %v", err)
		}
		// MkdirAll of an existing directory is fine.
		if err := fsys.MkdirAll(filepath.Join(dir, "sub")); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRemove(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		tree := filepath.Join(dir, "tree")
		if err := fsys.MkdirAll(filepath.Join(tree, "a", "b")); err != nil {
			t.Fatal(err)
		}
		writeFile(t, fsys, filepath.Join(tree, "a", "b", "f"), []byte("x"))
		writeFile(t, fsys, filepath.Join(tree, "g"), []byte("y"))

		if err := fsys.Remove(tree); err == nil {
			t.Fatal("Remove of a non-empty directory succeeded")
		}
		if err := fsys.Remove(filepath.Join(dir, "missing")); !IsNotExist(err) {
			t.Fatalf("Remove(missing) = %v", err)
		}
		if err := fsys.Remove(filepath.Join(tree, "g")); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Stat(filepath.Join(tree, "g")); !IsNotExist(err) {
			t.Fatalf("Stat after Remove = %v", err)
		}
		if err := fsys.RemoveAll(tree); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Stat(tree); !IsNotExist(err) {
			t.Fatalf("Stat after RemoveAll = %v", err)
		}
		if err := fsys.RemoveAll(tree); err != nil {
			t.Fatalf("RemoveAll(missing) = %v", err)
		}
		if err := fsys.RemoveAll(filepath.Join(dir, "no", "such", "path")); err != nil {
			t.Fatalf("RemoveAll(missing parents) = %v", err)
		}
		if err := fsys.MkdirAll(filepath.Join(dir, "empty")); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Remove(filepath.Join(dir, "empty")); err != nil {
			t.Fatalf("Remove(empty dir) = %v", err)
		}
	})
}

func TestRemovedFileHandleStillReadable(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "f")
		writeFile(t, fsys, name, []byte("still here"))
		f, err := fsys.OpenReadWrite(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := fsys.Remove(name); err != nil {
			t.Fatal(err)
		}
		if got, err := readAll(f); err != nil || string(got) != "still here" {
			t.Fatalf("read after remove: %q, %v", got, err)
		}
		if _, err := f.WriteAt([]byte("S"), 0); err != nil {
			t.Fatalf("write after remove: %v", err)
		}
		// A new file under the same name is a different file.
		writeFile(t, fsys, name, []byte("new"))
		if got, _ := readAll(f); string(got) != "Still here" {
			t.Fatalf("old handle reads %q", got)
		}
		if got := mustRead(t, fsys, name); string(got) != "new" {
			t.Fatalf("new file holds %q", got)
		}
	})
}

func TestSyncDir(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		if err := fsys.SyncDir(dir); err != nil {
			t.Fatal(err)
		}
		if err := fsys.SyncDir(filepath.Join(dir, "missing")); !IsNotExist(err) {
			t.Fatalf("SyncDir(missing) = %v", err)
		}
	})
}

func TestMkdirAllDurable(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		deep := filepath.Join(dir, "a", "b", "c")
		if err := MkdirAllDurable(fsys, deep); err != nil {
			t.Fatal(err)
		}
		if info, err := fsys.Stat(deep); err != nil || !info.IsDir {
			t.Fatalf("Stat = %+v, %v", info, err)
		}
		// Again, on an existing tree, is fine.
		if err := MkdirAllDurable(fsys, deep); err != nil {
			t.Fatal(err)
		}
		writeFile(t, fsys, filepath.Join(dir, "file"), nil)
		if err := MkdirAllDurable(fsys, filepath.Join(dir, "file", "x")); err == nil {
			t.Fatal("MkdirAllDurable below a file succeeded")
		}
	})
}

func TestOSFile(t *testing.T) {
	dir := t.TempDir()
	f, err := OS().Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	osf, ok := OSFile(f)
	if !ok || osf == nil || osf.Name() != f.Name() {
		t.Fatalf("OSFile(os file) = %v, %v", osf, ok)
	}
	m := NewMem()
	mf, err := m.Create("f")
	if err != nil {
		t.Fatal(err)
	}
	if osf, ok := OSFile(mf); ok || osf != nil {
		t.Fatalf("OSFile(mem file) = %v, %v", osf, ok)
	}
	if Default == nil {
		t.Fatal("Default is nil")
	}
}

// TestConcurrentReadWrite runs writers on disjoint ranges of one file and
// readers over all of it; under -race it checks both implementations are
// safe for the pread/pwrite use the interface promises.
func TestConcurrentReadWrite(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		f, err := fsys.Create(filepath.Join(dir, "f"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		const writers, blocks, blockSize = 4, 64, 128
		var wg sync.WaitGroup
		errs := make(chan error, writers*2)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for b := range blocks {
					block := bytes.Repeat([]byte{byte(w + 1)}, blockSize)
					off := int64((b*writers + w) * blockSize)
					if _, err := f.WriteAt(block, off); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, blockSize)
				for b := range blocks * writers {
					if _, err := f.ReadAt(buf, int64(b*blockSize)); err != nil && err != io.EOF {
						errs <- err
						return
					}
					if _, err := f.Size(); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got, err := readAll(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != writers*blocks*blockSize {
			t.Fatalf("size %d", len(got))
		}
		for i := 0; i < len(got); i += blockSize {
			want := byte((i/blockSize)%writers + 1)
			if !bytes.Equal(got[i:i+blockSize], bytes.Repeat([]byte{want}, blockSize)) {
				t.Fatalf("block at %d is not all %d", i, want)
			}
		}
	})
}

func Example_atomicReplace() {
	// The write-temp, sync, rename, sync-dir sequence that makes a small
	// file's replacement survive any crash whole.
	m := NewMem()
	_ = MkdirAllDurable(m, "/data")
	f, _ := m.Create("/data/meta.properties.tmp")
	_, _ = f.WriteAt([]byte("node.id=1\n"), 0)
	_ = f.Sync()
	_ = f.Close()
	_ = m.Rename("/data/meta.properties.tmp", "/data/meta.properties")
	_ = m.SyncDir("/data")
	m.Crash()
	b, _ := readFile(m, "/data/meta.properties")
	fmt.Printf("%q\n", b)
	// Output: "node.id=1\n"
}
