package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/fjordmq/fjord/internal/vfs"
)

// forEachFS runs fn on the real file system and on a MemFS, each with an
// existing, durable directory.
func forEachFS(t *testing.T, fn func(t *testing.T, fs vfs.FS, dir string)) {
	t.Helper()
	t.Run("OS", func(t *testing.T) { fn(t, vfs.OS(), t.TempDir()) })
	t.Run("Mem", func(t *testing.T) {
		m := vfs.NewMem()
		if err := vfs.MkdirAllDurable(m, "/log"); err != nil {
			t.Fatal(err)
		}
		fn(t, m, "/log")
	})
}

func readAll(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	data, exists, err := readFile(fs, path)
	if err != nil || !exists {
		t.Fatalf("read %s: exists %v, %v", path, exists, err)
	}
	return data
}

func writeRaw(t *testing.T, fs vfs.FS, path, data string) {
	t.Helper()
	if err := WriteFileAtomic(fs, path, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

func TestOffsetsRoundTrip(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		path := filepath.Join(dir, "recovery-point-offset-checkpoint")
		want := map[TopicPartition]int64{
			{"orders", 1}:             1 << 40,
			{"orders", 0}:             17,
			{"__consumer_offsets", 3}: 0,
			{"b", 2147483647}:         9223372036854775807,
		}
		if err := WriteOffsets(fs, path, want); err != nil {
			t.Fatal(err)
		}
		got, err := ReadOffsets(fs, path)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, want) {
			t.Fatalf("read %v, wrote %v", got, want)
		}
		// Sorted by topic then partition (numerically), so the bytes are
		// the same for the same map.
		wantBytes := "0\n4\n__consumer_offsets 3 0\nb 2147483647 9223372036854775807\norders 0 17\norders 1 1099511627776\n"
		if got := string(readAll(t, fs, path)); got != wantBytes {
			t.Fatalf("file is\n%s\nwant\n%s", got, wantBytes)
		}
		if names, _ := fs.List(dir); slices.Contains(names, "recovery-point-offset-checkpoint.tmp") {
			t.Fatalf("temporary file left behind: %v", names)
		}

		// Empty map: a valid, empty checkpoint.
		if err := WriteOffsets(fs, path, nil); err != nil {
			t.Fatal(err)
		}
		if got := string(readAll(t, fs, path)); got != "0\n0\n" {
			t.Fatalf("empty checkpoint is %q", got)
		}
		if got, err := ReadOffsets(fs, path); err != nil || len(got) != 0 {
			t.Fatalf("ReadOffsets(empty) = %v, %v", got, err)
		}
	})
}

func TestReadOffsetsMissingFile(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		got, err := ReadOffsets(fs, filepath.Join(dir, "replication-offset-checkpoint"))
		if err != nil || got == nil || len(got) != 0 {
			t.Fatalf("ReadOffsets(missing) = %v, %v; want empty map, nil", got, err)
		}
	})
}

// TestReadOffsetsMalformed: one case per way a file can be damaged; each
// must be ErrCorruptCheckpoint.
func TestReadOffsetsMalformed(t *testing.T) {
	cases := map[string]string{
		"empty file":              "",
		"no final newline":        "0\n1\nt 0 1000",
		"cut inside a number":     "0\n1\nt 0 10",
		"only version":            "0\n",
		"bad version":             "1\n0\n",
		"non-numeric version":     "v0\n0\n",
		"version with plus":       "+0\n0\n",
		"count mismatch (fewer)":  "0\n2\nt 0 1\n",
		"count mismatch (more)":   "0\n1\nt 0 1\nt 1 2\n",
		"negative count":          "0\n-1\n",
		"count with leading zero": "0\n01\nt 0 1\n",
		"count beyond int32":      "0\n4000000000\n",
		"count claims billions":   "0\n2000000000\nt 0 1\n",
		"blank entry line":        "0\n1\n\n",
		"two fields":              "0\n1\nt 0\n",
		"four fields":             "0\n1\nt 0 1 2\n",
		"double space":            "0\n1\nt  0 1\n",
		"tab separated":           "0\n1\nt\t0\t1\n",
		"empty topic":             "0\n1\n 0 1\n",
		"negative partition":      "0\n1\nt -1 5\n",
		"partition beyond int32":  "0\n1\nt 2147483648 5\n",
		"non-numeric partition":   "0\n1\nt p 5\n",
		"negative offset":         "0\n1\nt 0 -1\n",
		"offset beyond int64":     "0\n1\nt 0 9223372036854775808\n",
		"offset with plus":        "0\n1\nt 0 +5\n",
		"offset with zero pad":    "0\n1\nt 0 05\n",
		"carriage return":         "0\n1\nt 0 5\r\n",
		"duplicate partition":     "0\n2\nt 0 5\nt 0 6\n",
		"trailing garbage":        "0\n1\nt 0 5\ngarbage\n",
		"trailing blank line":     "0\n1\nt 0 5\n\n",
		"trailing bytes":          "0\n1\nt 0 5\nxx",
		"NUL padding":             "0\n1\nt 0 5\n\x00\x00\x00\x00",
	}
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		path := filepath.Join(dir, "cp")
		for name, data := range cases {
			writeRaw(t, fs, path, data)
			got, err := ReadOffsets(fs, path)
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Errorf("%s: ReadOffsets(%q) = %v, %v; want ErrCorruptCheckpoint", name, data, got, err)
			}
		}
	})
}

// TestReadOffsetsHugeCountAllocatesLittle pins that the count line is
// never trusted to size an allocation.
func TestReadOffsetsHugeCountAllocatesLittle(t *testing.T) {
	m := vfs.NewMem()
	writeRaw(t, m, "/cp", "0\n2147483647\nt 0 1\n")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadOffsets(m, "/cp")
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("err = %v", err)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 1<<20 {
		t.Fatalf("reading a 20-byte file allocated %d bytes", allocated)
	}
}

func TestReadOffsetsTooLarge(t *testing.T) {
	m := vfs.NewMem()
	f, err := m.Create("/cp")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := ReadOffsets(m, "/cp"); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("err = %v", err)
	}
}

func TestReadOffsetsIOError(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		// A directory where the file should be is not "missing" and not
		// corrupt: it is an error of its own.
		if err := fs.MkdirAll(filepath.Join(dir, "cp")); err != nil {
			t.Fatal(err)
		}
		_, err := ReadOffsets(fs, filepath.Join(dir, "cp"))
		if err == nil || errors.Is(err, ErrCorruptCheckpoint) {
			t.Fatalf("err = %v; want an I/O error", err)
		}
	})
}

func TestWriteOffsetsRejectsInvalidEntries(t *testing.T) {
	cases := map[string]map[TopicPartition]int64{
		"empty topic":        {{"", 0}: 1},
		"space in topic":     {{"a b", 0}: 1},
		"newline in topic":   {{"a\nb", 0}: 1},
		"negative partition": {{"t", -1}: 1},
		"negative offset":    {{"t", 0}: -1},
	}
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		path := filepath.Join(dir, "cp")
		want := map[TopicPartition]int64{{"t", 0}: 5}
		if err := WriteOffsets(fs, path, want); err != nil {
			t.Fatal(err)
		}
		for name, offsets := range cases {
			if err := WriteOffsets(fs, path, offsets); !errors.Is(err, ErrInvalidEntry) {
				t.Errorf("%s: WriteOffsets = %v, want ErrInvalidEntry", name, err)
			}
		}
		if got, err := ReadOffsets(fs, path); err != nil || !maps.Equal(got, want) {
			t.Fatalf("after rejected writes: %v, %v; want the old %v", got, err, want)
		}
	})
}

func TestEpochsRoundTrip(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		path := filepath.Join(dir, "leader-epoch-checkpoint")
		want := []EpochEntry{{0, 0}, {3, 100}, {7, 1 << 40}, {2147483647, 9223372036854775807}}
		if err := WriteEpochs(fs, path, want); err != nil {
			t.Fatal(err)
		}
		got, err := ReadEpochs(fs, path)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("ReadEpochs = %v, %v; want %v", got, err, want)
		}
		wantBytes := "0\n4\n0 0\n3 100\n7 1099511627776\n2147483647 9223372036854775807\n"
		if got := string(readAll(t, fs, path)); got != wantBytes {
			t.Fatalf("file is %q, want %q", got, wantBytes)
		}
		if err := WriteEpochs(fs, path, nil); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadEpochs(fs, path); err != nil || len(got) != 0 {
			t.Fatalf("ReadEpochs(empty) = %v, %v", got, err)
		}
		got, err = ReadEpochs(fs, filepath.Join(dir, "missing"))
		if err != nil || got == nil || len(got) != 0 {
			t.Fatalf("ReadEpochs(missing) = %v, %v; want empty, nil", got, err)
		}
	})
}

func TestReadEpochsMalformed(t *testing.T) {
	cases := map[string]string{
		"empty file":                 "",
		"no final newline":           "0\n1\n1 100",
		"bad version":                "1\n0\n",
		"count mismatch":             "0\n2\n1 100\n",
		"count claims billions":      "0\n2000000000\n1 100\n",
		"one field":                  "0\n1\n1\n",
		"three fields":               "0\n1\n1 100 7\n",
		"negative epoch":             "0\n1\n-1 100\n",
		"negative start offset":      "0\n1\n1 -100\n",
		"epoch beyond int32":         "0\n1\n2147483648 100\n",
		"non-numeric":                "0\n1\none 100\n",
		"epochs not increasing":      "0\n2\n3 100\n3 200\n",
		"epochs decreasing":          "0\n2\n3 100\n2 200\n",
		"start offsets not rising":   "0\n2\n1 100\n2 100\n",
		"start offsets decreasing":   "0\n2\n1 100\n2 50\n",
		"trailing garbage":           "0\n1\n1 100\nxyz\n",
		"offset-checkpoint contents": "0\n1\nt 0 5\n",
	}
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		path := filepath.Join(dir, "leader-epoch-checkpoint")
		for name, data := range cases {
			writeRaw(t, fs, path, data)
			got, err := ReadEpochs(fs, path)
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Errorf("%s: ReadEpochs(%q) = %v, %v; want ErrCorruptCheckpoint", name, data, got, err)
			}
		}
	})
}

func TestWriteEpochsRejectsInvalidEntries(t *testing.T) {
	cases := map[string][]EpochEntry{
		"negative epoch":        {{-1, 0}},
		"negative start offset": {{0, -1}},
		"repeated epoch":        {{1, 0}, {1, 5}},
		"repeated start offset": {{1, 5}, {2, 5}},
		"out of order":          {{2, 5}, {1, 9}},
	}
	m := vfs.NewMem()
	for name, entries := range cases {
		if err := WriteEpochs(m, "/cp", entries); !errors.Is(err, ErrInvalidEntry) {
			t.Errorf("%s: WriteEpochs = %v, want ErrInvalidEntry", name, err)
		}
	}
	if _, err := m.Stat("/cp"); !vfs.IsNotExist(err) {
		t.Fatalf("a rejected write created the file: %v", err)
	}
}

// TestWriteFileAtomicCrashAtEveryBoundary proves WriteFileAtomic's promise
// on MemFS: crash after every prefix of its mutating operations, plainly
// and with torn writes, and the file is the old one or the new one, whole.
// With no old file, it is missing or the new one.
func TestWriteFileAtomicCrashAtEveryBoundary(t *testing.T) {
	const path = "/log/cp"
	newData := []byte("0\n1\nnew-topic 0 123456\n")
	for _, oldData := range [][]byte{nil, []byte("0\n1\nold-topic 0 1\n")} {
		setup := func() *vfs.MemFS {
			m := vfs.NewMem()
			if err := vfs.MkdirAllDurable(m, "/log"); err != nil {
				t.Fatal(err)
			}
			if oldData != nil {
				if err := WriteFileAtomic(m, path, oldData); err != nil {
					t.Fatal(err)
				}
			}
			return m
		}
		m := setup()
		start := m.MutatingOps()
		if err := WriteFileAtomic(m, path, newData); err != nil {
			t.Fatal(err)
		}
		total := m.MutatingOps() - start

		outcomes := map[string]int{}
		for n := int64(0); n <= total; n++ {
			for _, torn := range []bool{false, true} {
				m := setup()
				m.CrashAfter(n)
				err := WriteFileAtomic(m, path, newData)
				if (err == nil) != (n == total) {
					t.Fatalf("crash after %d of %d ops: WriteFileAtomic = %v", n, total, err)
				}
				if torn {
					m.CrashTorn(rand.New(rand.NewPCG(uint64(n), 99)))
				} else {
					m.Crash()
				}
				got, exists, err := readFile(m, path)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case !exists && oldData == nil:
					outcomes["missing"]++
				case exists && oldData != nil && bytes.Equal(got, oldData):
					outcomes["old"]++
				case exists && bytes.Equal(got, newData):
					outcomes["new"]++
				default:
					t.Fatalf("crash after %d of %d ops (torn %v): file exists %v holding %q", n, total, torn, exists, got)
				}
				if n == total && !bytes.Equal(got, newData) {
					t.Fatalf("WriteFileAtomic returned nil, yet the crash lost the new file")
				}
			}
		}
		// Both outcomes must occur, or the enumeration missed a boundary.
		if len(outcomes) != 2 {
			t.Fatalf("old file %v: outcomes %v, want two kinds", oldData != nil, outcomes)
		}
	}
}

// TestWriteFileAtomicFailureKeepsOldFile injects an error at each step and
// checks the old contents stay and no temporary file is left.
func TestWriteFileAtomicFailureKeepsOldFile(t *testing.T) {
	injected := errors.New("injected")
	for _, op := range []vfs.Op{vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpRename} {
		t.Run(op.String(), func(t *testing.T) {
			m := vfs.NewMem()
			if err := vfs.MkdirAllDurable(m, "/log"); err != nil {
				t.Fatal(err)
			}
			writeRaw(t, m, "/log/cp", "old")
			m.SetHook(func(o vfs.Op, path string) error {
				if o == op {
					return injected
				}
				return nil
			})
			if err := WriteFileAtomic(m, "/log/cp", []byte("new")); !errors.Is(err, injected) {
				t.Fatalf("err = %v", err)
			}
			m.SetHook(nil)
			if got := readAll(t, m, "/log/cp"); string(got) != "old" {
				t.Fatalf("file holds %q", got)
			}
			if names, _ := m.List("/log"); !slices.Equal(names, []string{"cp"}) {
				t.Fatalf("directory holds %v", names)
			}
		})
	}
}

// TestOffsetsCrashKeepsOldOrNew runs the crash enumeration through
// WriteOffsets and ReadOffsets: the map read back is the old or the new.
func TestOffsetsCrashKeepsOldOrNew(t *testing.T) {
	old := map[TopicPartition]int64{{"t", 0}: 10, {"t", 1}: 20}
	next := map[TopicPartition]int64{{"t", 0}: 15, {"t", 1}: 25, {"u", 0}: 1}
	setup := func() *vfs.MemFS {
		m := vfs.NewMem()
		if err := vfs.MkdirAllDurable(m, "/log"); err != nil {
			t.Fatal(err)
		}
		if err := WriteOffsets(m, "/log/cp", old); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := setup()
	start := m.MutatingOps()
	if err := WriteOffsets(m, "/log/cp", next); err != nil {
		t.Fatal(err)
	}
	total := m.MutatingOps() - start
	for n := int64(0); n <= total; n++ {
		m := setup()
		m.CrashAfter(n)
		_ = WriteOffsets(m, "/log/cp", next)
		m.CrashTorn(rand.New(rand.NewPCG(uint64(n), 1)))
		got, err := ReadOffsets(m, "/log/cp")
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if !maps.Equal(got, old) && !maps.Equal(got, next) {
			t.Fatalf("n=%d: read %v", n, got)
		}
	}
}

func TestTopicPartitionString(t *testing.T) {
	if got := (TopicPartition{"orders", 3}).String(); got != "orders-3" {
		t.Fatalf("got %q", got)
	}
}

func BenchmarkWriteOffsets(b *testing.B) {
	offsets := map[TopicPartition]int64{}
	for i := range 1000 {
		offsets[TopicPartition{fmt.Sprintf("topic-%d", i%50), int32(i)}] = int64(i) * 1000
	}
	m := vfs.NewMem()
	for b.Loop() {
		if err := WriteOffsets(m, "/cp", offsets); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadOffsets(b *testing.B) {
	offsets := map[TopicPartition]int64{}
	for i := range 1000 {
		offsets[TopicPartition{fmt.Sprintf("topic-%d", i%50), int32(i)}] = int64(i) * 1000
	}
	m := vfs.NewMem()
	if err := WriteOffsets(m, "/cp", offsets); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := ReadOffsets(m, "/cp"); err != nil {
			b.Fatal(err)
		}
	}
}
