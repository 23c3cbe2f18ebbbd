package checkpoint

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/fjordmq/fjord/internal/vfs"
)

// FuzzReadOffsets reads arbitrary bytes as an offset checkpoint file.
// Invariants:
//   - ReadOffsets never panics, and every failure wraps
//     ErrCorruptCheckpoint (the input is all there is to blame);
//   - whatever it accepts, WriteOffsets accepts too, and reading that back
//     gives an equal map;
//   - writing is canonical: a second write of the re-read map gives the
//     same bytes as the first.
//
// Seeds beyond the ones added here live in testdata/fuzz/FuzzReadOffsets.
func FuzzReadOffsets(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n2\nt 0 5\nu 3 1099511627776\n"))
	f.Add([]byte("0\n1\nt 0 5\ngarbage"))
	f.Add([]byte("0\n2147483647\n"))
	f.Add([]byte("0\n1\nt 2147483647 9223372036854775807\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := vfs.NewMem()
		writeFuzzFile(t, m, "/in", data)
		got, err := ReadOffsets(m, "/in")
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("error %v does not wrap ErrCorruptCheckpoint", err)
			}
			return
		}
		if err := WriteOffsets(m, "/out", got); err != nil {
			t.Fatalf("read %v from %q but cannot write it: %v", got, data, err)
		}
		first, _, _ := readFile(m, "/out")
		again, err := ReadOffsets(m, "/out")
		if err != nil {
			t.Fatalf("re-reading %q: %v", first, err)
		}
		if !maps.Equal(got, again) {
			t.Fatalf("read %v, wrote and re-read %v", got, again)
		}
		if err := WriteOffsets(m, "/out", again); err != nil {
			t.Fatal(err)
		}
		if second, _, _ := readFile(m, "/out"); !bytes.Equal(first, second) {
			t.Fatalf("not canonical: %q then %q", first, second)
		}
	})
}

// FuzzReadEpochs is FuzzReadOffsets for the leader-epoch checkpoint, with
// the same invariants (re-reading gives an equal slice).
func FuzzReadEpochs(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n3\n0 0\n2 10\n5 17\n"))
	f.Add([]byte("0\n2\n5 17\n2 10\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := vfs.NewMem()
		writeFuzzFile(t, m, "/in", data)
		got, err := ReadEpochs(m, "/in")
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("error %v does not wrap ErrCorruptCheckpoint", err)
			}
			return
		}
		if err := WriteEpochs(m, "/out", got); err != nil {
			t.Fatalf("read %v from %q but cannot write it: %v", got, data, err)
		}
		again, err := ReadEpochs(m, "/out")
		if err != nil || !slices.Equal(got, again) {
			t.Fatalf("read %v, wrote and re-read %v, %v", got, again, err)
		}
	})
}

func writeFuzzFile(t *testing.T, m *vfs.MemFS, path string, data []byte) {
	t.Helper()
	f, err := m.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
