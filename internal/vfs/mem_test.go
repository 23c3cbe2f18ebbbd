package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// newMemDir returns a MemFS with a durable /data directory.
func newMemDir(t *testing.T) *MemFS {
	t.Helper()
	m := NewMem()
	if err := MkdirAllDurable(m, "/data"); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustWrite(t *testing.T, f File, s string, off int64) {
	t.Helper()
	if _, err := f.WriteAt([]byte(s), off); err != nil {
		t.Fatal(err)
	}
}

func mustSync(t *testing.T, f File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func mustSyncDir(t *testing.T, m *MemFS, dir string) {
	t.Helper()
	if err := m.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}

// durableFile creates name holding contents, with data and name durable.
func durableFile(t *testing.T, m *MemFS, name, contents string) {
	t.Helper()
	writeFile(t, m, name, []byte(contents))
	mustSyncDir(t, m, "/data")
}

func wantContents(t *testing.T, m *MemFS, name, want string) {
	t.Helper()
	got, err := readFile(m, name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if string(got) != want {
		t.Fatalf("%s holds %q, want %q", name, got, want)
	}
}

func wantMissing(t *testing.T, m *MemFS, name string) {
	t.Helper()
	if _, err := m.Stat(name); !IsNotExist(err) {
		t.Fatalf("Stat(%s) = %v, want not-exist", name, err)
	}
}

func TestCrashDropsUnsyncedData(t *testing.T) {
	m := newMemDir(t)
	f, err := m.Create("/data/f")
	if err != nil {
		t.Fatal(err)
	}
	mustSyncDir(t, m, "/data")
	mustWrite(t, f, "synced", 0)
	mustSync(t, f)
	mustWrite(t, f, "+unsynced", 6)
	mustWrite(t, f, "S", 0) // overwrite of synced bytes, not synced
	m.Crash()
	wantContents(t, m, "/data/f", "synced")
}

func TestCrashRevertsUnsyncedTruncate(t *testing.T) {
	m := newMemDir(t)
	durableFile(t, m, "/data/f", "abcdef")
	f, err := m.OpenReadWrite("/data/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2); err != nil {
		t.Fatal(err)
	}
	m.Crash()
	wantContents(t, m, "/data/f", "abcdef")

	// And Create's truncation is no more durable than Truncate's.
	f, err = m.Create("/data/f")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	m.Crash()
	wantContents(t, m, "/data/f", "abcdef")
}

func TestCrashSyncedFileNeedsDirEntry(t *testing.T) {
	m := newMemDir(t)
	// Synced data, name never synced: gone.
	writeFile(t, m, "/data/f", []byte("data"))
	m.Crash()
	wantMissing(t, m, "/data/f")

	// The order of the two syncs does not matter.
	f, err := m.Create("/data/f")
	if err != nil {
		t.Fatal(err)
	}
	mustSyncDir(t, m, "/data")
	mustWrite(t, f, "data", 0)
	mustSync(t, f)
	m.Crash()
	wantContents(t, m, "/data/f", "data")

	// A durable name with unsynced data: an empty file.
	f, err = m.Create("/data/g")
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "lost", 0)
	mustSyncDir(t, m, "/data")
	m.Crash()
	wantContents(t, m, "/data/g", "")
}

func TestCrashDirectoryNeedsParentSync(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("/a/b"); err != nil {
		t.Fatal(err)
	}
	// b's entry is durable in a, and f's in b, but a's is not in /.
	writeFile(t, m, "/a/b/f", []byte("x"))
	mustSyncDir(t, m, "/a/b")
	mustSyncDir(t, m, "/a")
	m.Crash()
	wantMissing(t, m, "/a")

	if err := MkdirAllDurable(m, "/a/b"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m, "/a/b/f", []byte("x"))
	mustSyncDir(t, m, "/a/b")
	m.Crash()
	wantContents(t, m, "/a/b/f", "x")
}

func TestCrashRevertsUnsyncedRename(t *testing.T) {
	m := newMemDir(t)
	durableFile(t, m, "/data/cp", "old")
	durableFile(t, m, "/data/cp.tmp", "new")
	if err := m.Rename("/data/cp.tmp", "/data/cp"); err != nil {
		t.Fatal(err)
	}
	wantContents(t, m, "/data/cp", "new")
	m.Crash()
	wantContents(t, m, "/data/cp", "old")
	wantContents(t, m, "/data/cp.tmp", "new")
}

func TestCrashKeepsSyncedRename(t *testing.T) {
	m := newMemDir(t)
	durableFile(t, m, "/data/cp", "old")
	durableFile(t, m, "/data/cp.tmp", "new")
	if err := m.Rename("/data/cp.tmp", "/data/cp"); err != nil {
		t.Fatal(err)
	}
	mustSyncDir(t, m, "/data")
	m.Crash()
	wantContents(t, m, "/data/cp", "new")
	wantMissing(t, m, "/data/cp.tmp")
}

func TestCrashRemove(t *testing.T) {
	m := newMemDir(t)
	durableFile(t, m, "/data/f", "x")
	if err := m.Remove("/data/f"); err != nil {
		t.Fatal(err)
	}
	m.Crash()
	wantContents(t, m, "/data/f", "x") // removal not durable

	if err := m.Remove("/data/f"); err != nil {
		t.Fatal(err)
	}
	mustSyncDir(t, m, "/data")
	m.Crash()
	wantMissing(t, m, "/data/f")

	// RemoveAll of an unsynced removal brings the whole tree back.
	if err := MkdirAllDurable(m, "/data/t/u"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m, "/data/t/u/f", []byte("deep"))
	mustSyncDir(t, m, "/data/t/u")
	if err := m.RemoveAll("/data/t"); err != nil {
		t.Fatal(err)
	}
	wantMissing(t, m, "/data/t")
	m.Crash()
	wantContents(t, m, "/data/t/u/f", "deep")
}

// TestCrashHalfSyncedCrossDirRename pins what happens when a rename
// between two directories is durable in only one: the inode keeps one name.
func TestCrashHalfSyncedCrossDirRename(t *testing.T) {
	m := NewMem()
	for _, d := range []string{"/a", "/b"} {
		if err := MkdirAllDurable(m, d); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, m, "/a/f", []byte("x"))
	mustSyncDir(t, m, "/a")
	if err := m.Rename("/a/f", "/b/f"); err != nil {
		t.Fatal(err)
	}
	mustSyncDir(t, m, "/b") // but not /a
	m.Crash()
	wantContents(t, m, "/a/f", "x") // /a sorts first
	wantMissing(t, m, "/b/f")

	// Directories: a durable cycle /A -> /A/B -> /A.
	m = NewMem()
	if err := MkdirAllDurable(m, "/A/B"); err != nil {
		t.Fatal(err)
	}
	if err := m.Rename("/A/B", "/B"); err != nil {
		t.Fatal(err)
	}
	mustSyncDir(t, m, "/") // durable: / = {A, B}; A = {B} still
	if err := m.Rename("/A", "/B/A"); err != nil {
		t.Fatal(err)
	}
	mustSyncDir(t, m, "/B") // durable: B = {A}
	m.Crash()
	if names, err := m.List("/"); err != nil || !slices.Equal(names, []string{"A"}) {
		t.Fatalf("List(/) = %v, %v", names, err)
	}
	if names, err := m.List("/A"); err != nil || !slices.Equal(names, []string{"B"}) {
		t.Fatalf("List(/A) = %v, %v", names, err)
	}
	if names, err := m.List("/A/B"); err != nil || len(names) != 0 {
		t.Fatalf("List(/A/B) = %v, %v", names, err)
	}
}

func TestCrashedHandlesFail(t *testing.T) {
	m := newMemDir(t)
	durableFile(t, m, "/data/f", "abc")
	rw, err := m.OpenReadWrite("/data/f")
	if err != nil {
		t.Fatal(err)
	}
	ro, err := m.Open("/data/f")
	if err != nil {
		t.Fatal(err)
	}
	m.Crash()
	buf := make([]byte, 1)
	for name, h := range map[string]File{"rw": rw, "ro": ro} {
		calls := map[string]error{}
		_, calls["ReadAt"] = h.ReadAt(buf, 0)
		_, calls["WriteAt"] = h.WriteAt(buf, 0)
		calls["Sync"] = h.Sync()
		calls["Truncate"] = h.Truncate(0)
		_, calls["Size"] = h.Size()
		calls["Close"] = h.Close()
		for call, err := range calls {
			if !errors.Is(err, ErrCrashed) {
				t.Errorf("%s.%s after crash = %v, want ErrCrashed", name, call, err)
			}
		}
		if h.Name() != "/data/f" {
			t.Errorf("%s.Name() = %q", name, h.Name())
		}
	}
	// A handle opened after the crash works.
	wantContents(t, m, "/data/f", "abc")
	f, err := m.OpenReadWrite("/data/f")
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "X", 0)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCrashTornProperties(t *testing.T) {
	const durable, unsynced = "durable|", "0123456789abcdefghij"
	var sawLonger, sawExact, sawGarbled bool
	for seed := range uint64(300) {
		m := newMemDir(t)
		durableFile(t, m, "/data/f", durable)
		f, err := m.OpenReadWrite("/data/f")
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, f, unsynced, int64(len(durable)))
		current := durable + unsynced

		m.CrashTorn(rand.New(rand.NewPCG(seed, 1)))
		got, err := readFile(m, "/data/f")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(got, []byte(durable)) {
			t.Fatalf("seed %d: %q lost durable prefix %q", seed, got, durable)
		}
		if len(got) > len(current) {
			t.Fatalf("seed %d: %q longer than current contents %q", seed, got, current)
		}
		// Only the last maxGarbledBytes may differ from what was written.
		differ := 0
		for i := len(durable); i < len(got); i++ {
			if got[i] != current[i] {
				if i < len(got)-maxGarbledBytes {
					t.Fatalf("seed %d: byte %d of %q garbled, more than %d from the end", seed, i, got, maxGarbledBytes)
				}
				differ++
			}
		}
		sawLonger = sawLonger || len(got) > len(durable)
		sawExact = sawExact || len(got) == len(durable)
		sawGarbled = sawGarbled || differ > 0

		// What survived is durable: a second crash changes nothing.
		m.Crash()
		if again, _ := readFile(m, "/data/f"); !bytes.Equal(again, got) {
			t.Fatalf("seed %d: %q became %q at a second crash", seed, got, again)
		}
	}
	if !sawLonger || !sawExact || !sawGarbled {
		t.Fatalf("over 300 seeds: kept unsynced bytes %v, kept none %v, garbled %v; want all", sawLonger, sawExact, sawGarbled)
	}
}

func TestCrashTornOnlyExtendsPrefixes(t *testing.T) {
	// An unsynced overwrite of durable bytes, or an unsynced shrink, is not
	// an append: CrashTorn reverts it exactly as Crash does.
	for seed := range uint64(50) {
		m := newMemDir(t)
		durableFile(t, m, "/data/over", "abcdef")
		durableFile(t, m, "/data/shrunk", "abcdef")
		f, _ := m.OpenReadWrite("/data/over")
		mustWrite(t, f, "XYZ-and-more", 3)
		g, _ := m.OpenReadWrite("/data/shrunk")
		if err := g.Truncate(2); err != nil {
			t.Fatal(err)
		}
		m.CrashTorn(rand.New(rand.NewPCG(seed, 2)))
		wantContents(t, m, "/data/over", "abcdef")
		wantContents(t, m, "/data/shrunk", "abcdef")
	}
}

func TestCrashTornDeterministic(t *testing.T) {
	run := func() []byte {
		m := newMemDir(t)
		durableFile(t, m, "/data/f", "d")
		f, _ := m.OpenReadWrite("/data/f")
		mustWrite(t, f, "0123456789abcdefghijklmnopqrstuvwxyz", 1)
		m.CrashTorn(rand.New(rand.NewPCG(7, 7)))
		got, _ := readFile(m, "/data/f")
		return got
	}
	if a, b := run(), run(); !bytes.Equal(a, b) {
		t.Fatalf("same seed, different results: %q, %q", a, b)
	}
}

// TestHookFailureHasNoEffect checks, for each Op, that a hook error comes
// back unchanged and that the operation did nothing, visible or durable.
func TestHookFailureHasNoEffect(t *testing.T) {
	errInjected := errors.New("injected")
	type tc struct {
		op    Op
		run   func(m *MemFS, f File) error
		check func(t *testing.T, m *MemFS)
	}
	// Every case starts from /data/f durable with "abc" and f open on it.
	cases := []tc{
		{OpCreate, func(m *MemFS, f File) error { _, err := m.Create("/data/f"); return err },
			func(t *testing.T, m *MemFS) { wantContents(t, m, "/data/f", "abc") }},
		{OpCreate, func(m *MemFS, f File) error { _, err := m.OpenReadWrite("/data/new"); return err },
			func(t *testing.T, m *MemFS) { wantMissing(t, m, "/data/new") }},
		{OpWrite, func(m *MemFS, f File) error { _, err := f.WriteAt([]byte("XYZW"), 0); return err },
			func(t *testing.T, m *MemFS) { wantContents(t, m, "/data/f", "abc") }},
		{OpSync, func(m *MemFS, f File) error {
			if _, err := f.WriteAt([]byte("Z"), 0); err != nil {
				return fmt.Errorf("setup: %w", err)
			}
			return f.Sync()
		}, func(t *testing.T, m *MemFS) {
			wantContents(t, m, "/data/f", "Zbc")
			m.Crash()
			wantContents(t, m, "/data/f", "abc")
		}},
		{OpTruncate, func(m *MemFS, f File) error { return f.Truncate(1) },
			func(t *testing.T, m *MemFS) { wantContents(t, m, "/data/f", "abc") }},
		{OpRename, func(m *MemFS, f File) error { return m.Rename("/data/f", "/data/g") },
			func(t *testing.T, m *MemFS) { wantContents(t, m, "/data/f", "abc"); wantMissing(t, m, "/data/g") }},
		{OpRemove, func(m *MemFS, f File) error { return m.Remove("/data/f") },
			func(t *testing.T, m *MemFS) { wantContents(t, m, "/data/f", "abc") }},
		{OpRemove, func(m *MemFS, f File) error { return m.RemoveAll("/data") },
			func(t *testing.T, m *MemFS) { wantContents(t, m, "/data/f", "abc") }},
		{OpMkdir, func(m *MemFS, f File) error { return m.MkdirAll("/data/d/e") },
			func(t *testing.T, m *MemFS) { wantMissing(t, m, "/data/d") }},
		{OpSyncDir, func(m *MemFS, f File) error {
			if err := m.Remove("/data/f"); err != nil {
				return fmt.Errorf("setup: %w", err)
			}
			return m.SyncDir("/data")
		}, func(t *testing.T, m *MemFS) {
			m.Crash()
			wantContents(t, m, "/data/f", "abc")
		}},
	}
	for _, c := range cases {
		t.Run(c.op.String(), func(t *testing.T) {
			m := newMemDir(t)
			durableFile(t, m, "/data/f", "abc")
			f, err := m.OpenReadWrite("/data/f")
			if err != nil {
				t.Fatal(err)
			}
			var seen []Op
			m.SetHook(func(op Op, path string) error {
				seen = append(seen, op)
				if op == c.op {
					return errInjected
				}
				return nil
			})
			if err := c.run(m, f); err != errInjected {
				t.Fatalf("got %v, want the hook's error itself", err)
			}
			if seen[len(seen)-1] != c.op {
				t.Fatalf("hook saw %v", seen)
			}
			m.SetHook(nil)
			c.check(t, m)
		})
	}
}

func TestHookSeesPaths(t *testing.T) {
	m := newMemDir(t)
	type call struct {
		op   Op
		path string
	}
	var calls []call
	m.SetHook(func(op Op, path string) error {
		calls = append(calls, call{op, path})
		return nil
	})
	f, _ := m.Create("/data/a.tmp")
	mustWrite(t, f, "x", 0)
	mustSync(t, f)
	_ = f.Truncate(1)
	_ = f.Close()
	_ = m.Rename("/data/a.tmp", "/data/a")
	_ = m.MkdirAll("/data/d")
	_ = m.Remove("/data/d")
	_ = m.SyncDir("/data")
	// Reads are not mutating operations.
	_, _ = m.Stat("/data/a")
	_, _ = m.List("/data")
	g, _ := m.Open("/data/a")
	_, _ = g.ReadAt(make([]byte, 1), 0)
	want := []call{
		{OpCreate, "/data/a.tmp"}, {OpWrite, "/data/a.tmp"}, {OpSync, "/data/a.tmp"},
		{OpTruncate, "/data/a.tmp"}, {OpRename, "/data/a"}, {OpMkdir, "/data/d"},
		{OpRemove, "/data/d"}, {OpSyncDir, "/data"},
	}
	if !slices.Equal(calls, want) {
		t.Fatalf("hook calls %v, want %v", calls, want)
	}
}

func TestCrashAfterCounting(t *testing.T) {
	m := newMemDir(t)
	workload := func() []error {
		var errs []error
		f, err := m.Create("/data/f") // 1
		errs = append(errs, err)
		if err != nil {
			return errs
		}
		_, err = f.WriteAt([]byte("x"), 0) // 2
		errs = append(errs, err)
		errs = append(errs, f.Sync())           // 3
		errs = append(errs, m.SyncDir("/data")) // 4
		return errs
	}
	before := m.MutatingOps()
	for _, err := range workload() {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := m.MutatingOps() - before; n != 4 {
		t.Fatalf("workload counted %d mutating operations, want 4", n)
	}

	m = newMemDir(t)
	m.CrashAfter(2)
	errs := workload()
	for i, err := range errs {
		if (i < 2) != (err == nil) {
			t.Fatalf("op %d: %v", i+1, err)
		}
		if i >= 2 && !errors.Is(err, ErrCrashed) {
			t.Fatalf("op %d: %v, want ErrCrashed", i+1, err)
		}
	}
	// The refused ops had no effect: nothing was durable.
	m.Crash()
	wantMissing(t, m, "/data/f")
	// Crash turned CrashAfter off.
	writeFile(t, m, "/data/f", []byte("after"))
	mustSyncDir(t, m, "/data")
}

// TestCrashAfterEveryBoundary is the enumeration CrashAfter exists for,
// on the atomic-replace sequence: at every crash point the file is old or
// new, never absent or partial.
func TestCrashAfterEveryBoundary(t *testing.T) {
	replace := func(m *MemFS) error {
		f, err := m.Create("/data/cp.tmp")
		if err != nil {
			return err
		}
		if _, err := f.WriteAt([]byte("new contents"), 0); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := m.Rename("/data/cp.tmp", "/data/cp"); err != nil {
			return err
		}
		return m.SyncDir("/data")
	}
	setup := func() *MemFS {
		m := newMemDir(t)
		durableFile(t, m, "/data/cp", "old")
		return m
	}
	m := setup()
	start := m.MutatingOps()
	if err := replace(m); err != nil {
		t.Fatal(err)
	}
	total := m.MutatingOps() - start
	seen := map[string]bool{}
	for n := int64(0); n <= total; n++ {
		m := setup()
		m.CrashAfter(n)
		err := replace(m)
		if (err == nil) != (n == total) {
			t.Fatalf("n=%d: replace returned %v", n, err)
		}
		m.Crash()
		got, err := readFile(m, "/data/cp")
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if string(got) != "old" && string(got) != "new contents" {
			t.Fatalf("n=%d: %q", n, got)
		}
		seen[string(got)] = true
	}
	if !seen["old"] || !seen["new contents"] {
		t.Fatalf("outcomes %v: want both old and new among the crash points", seen)
	}
}

// TestMemFileAgainstModel drives one durable-named file with random writes,
// truncates, syncs and crashes and compares it with a model that keeps the
// current and durable bytes as two plain slices. It pins the synced-prefix
// bookkeeping that keeps Sync from copying whole files.
func TestMemFileAgainstModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := NewMem()
		if err := MkdirAllDurable(m, "/d"); err != nil {
			rt.Fatal(err)
		}
		f, err := m.Create("/d/f")
		if err != nil {
			rt.Fatal(err)
		}
		if err := m.SyncDir("/d"); err != nil {
			rt.Fatal(err)
		}
		var current, durable []byte
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 4).Draw(rt, "op") {
			case 0:
				off := rapid.IntRange(0, 40).Draw(rt, "off")
				p := rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(rt, "p")
				if _, err := f.WriteAt(p, int64(off)); err != nil {
					rt.Fatal(err)
				}
				if len(p) > 0 {
					for len(current) < off+len(p) {
						current = append(current, 0)
					}
					copy(current[off:], p)
				}
			case 1:
				size := rapid.IntRange(0, 50).Draw(rt, "size")
				if err := f.Truncate(int64(size)); err != nil {
					rt.Fatal(err)
				}
				for len(current) < size {
					current = append(current, 0)
				}
				current = current[:size]
			case 2:
				if err := f.Sync(); err != nil {
					rt.Fatal(err)
				}
				durable = slices.Clone(current)
			case 3:
				m.Crash()
				current = slices.Clone(durable)
				if f, err = m.OpenReadWrite("/d/f"); err != nil {
					rt.Fatal(err)
				}
			case 4:
				got, err := readAll(f)
				if err != nil {
					rt.Fatal(err)
				}
				if !bytes.Equal(got, current) {
					rt.Fatalf("file %q, model %q", got, current)
				}
			}
		}
		m.Crash()
		got, err := readFile(m, "/d/f")
		if err != nil {
			rt.Fatal(err)
		}
		if !bytes.Equal(got, durable) {
			rt.Fatalf("after crash %q, model durable %q", got, durable)
		}
	})
}

// TestConcurrentCrash runs writers, readers and namespace operations while
// another goroutine crashes the file system: under -race, and every error
// must be ErrCrashed.
func TestConcurrentCrash(t *testing.T) {
	m := newMemDir(t)
	const workers = 4
	files := make([]File, workers)
	for i := range files {
		name := fmt.Sprintf("/data/f%d", i)
		durableFile(t, m, name, "")
		f, err := m.OpenReadWrite(name)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = f
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3*workers)
	started := make(chan struct{}, 2*workers)
	for i, f := range files {
		wg.Add(2)
		go func() { // writer: until its handle dies
			defer wg.Done()
			for n := 0; ; n++ {
				if n == 1 {
					started <- struct{}{}
				}
				if _, err := f.WriteAt([]byte{byte(n)}, int64(n%512)); err != nil {
					errs <- err
					return
				}
				if n%16 == 0 {
					if err := f.Sync(); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
		go func() { // reader on the same file
			defer wg.Done()
			buf := make([]byte, 64)
			for n := 0; ; n++ {
				if n == 1 {
					started <- struct{}{}
				}
				if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
					errs <- err
					return
				}
			}
		}()
		wg.Add(1)
		go func() { // namespace traffic on its own names
			defer wg.Done()
			for n := range 200 {
				name := fmt.Sprintf("/data/ns%d-%d", i, n%3)
				g, err := m.Create(name)
				if err != nil {
					errs <- err
					return
				}
				_ = g.Close()
				// The crash may revert the Create: then the name is gone.
				if err := m.Rename(name, name+".r"); err != nil && !IsNotExist(err) {
					errs <- err
					return
				}
				if _, err := m.List("/data"); err != nil {
					errs <- err
					return
				}
				if err := m.SyncDir("/data"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range 2 * workers {
		<-started
	}
	m.Crash()
	wg.Wait()
	close(errs)
	crashed := 0
	for err := range errs {
		if !errors.Is(err, ErrCrashed) {
			t.Errorf("unexpected error %v", err)
		}
		crashed++
	}
	if crashed != 2*workers {
		t.Fatalf("%d handle loops ended with ErrCrashed, want %d", crashed, 2*workers)
	}
}
