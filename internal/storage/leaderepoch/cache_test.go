package leaderepoch

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/fjordmq/fjord/internal/storage/checkpoint"
	"github.com/fjordmq/fjord/internal/vfs"
	"pgregory.net/rapid"
)

const cpPath = "/log/t-0/leader-epoch-checkpoint"

// tb is what the helpers need of *testing.T, *testing.B and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func newMem(t tb) *vfs.MemFS {
	t.Helper()
	m := vfs.NewMem()
	if err := vfs.MkdirAllDurable(m, filepath.Dir(cpPath)); err != nil {
		t.Fatal(err)
	}
	return m
}

func open(t tb, fs vfs.FS, path string) *Cache {
	t.Helper()
	c, err := Open(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// e is short for an entry in the tables below.
func e(epoch int32, start int64) EpochEntry { return EpochEntry{Epoch: epoch, StartOffset: start} }

// assignAll assigns each entry in order.
func assignAll(t tb, c *Cache, entries ...EpochEntry) {
	t.Helper()
	for _, x := range entries {
		if err := c.Assign(x.Epoch, x.StartOffset); err != nil {
			t.Fatal(err)
		}
	}
}

// wantPersisted checks the file says what the cache says.
func wantPersisted(t tb, fs vfs.FS, c *Cache) {
	t.Helper()
	reopened := open(t, fs, c.path)
	if got, want := reopened.Entries(), c.Entries(); !slices.Equal(got, want) {
		t.Fatalf("reopened cache holds %v, cache holds %v", got, want)
	}
}

// TestChanges is one case per sentence of Kafka's rules for the methods
// that change the history (Reference: KIP-101, KIP-279). Every case also
// checks that the change was persisted.
func TestChanges(t *testing.T) {
	base := []EpochEntry{e(2, 6), e(3, 8), e(4, 11)}
	cases := []struct {
		name   string
		before []EpochEntry
		change func(c *Cache) error
		want   []EpochEntry
	}{
		// Assign.
		{"assign to an empty cache adds the entry",
			nil, func(c *Cache) error { return c.Assign(2, 10) }, []EpochEntry{e(2, 10)}},
		{"assign of a newer epoch at a later offset appends it",
			[]EpochEntry{e(2, 6)}, func(c *Cache) error { return c.Assign(3, 8) }, []EpochEntry{e(2, 6), e(3, 8)}},
		{"epochs need not start from zero or be consecutive",
			[]EpochEntry{e(5, 0)}, func(c *Cache) error { return c.Assign(9, 3) }, []EpochEntry{e(5, 0), e(9, 3)}},
		{"assign of the latest epoch at a later offset is a no-op: a start offset is never moved later",
			[]EpochEntry{e(2, 6)}, func(c *Cache) error { return c.Assign(2, 10) }, []EpochEntry{e(2, 6)}},
		{"assign of the latest epoch at its own start offset is a no-op",
			[]EpochEntry{e(2, 6)}, func(c *Cache) error { return c.Assign(2, 6) }, []EpochEntry{e(2, 6)}},
		{"assign of the latest epoch at an earlier offset moves its start back, dropping entries starting at or after it",
			[]EpochEntry{e(5, 11), e(6, 12), e(7, 13)}, func(c *Cache) error { return c.Assign(7, 12) },
			[]EpochEntry{e(5, 11), e(7, 12)}},
		{"a newer epoch at the latest entry's start offset replaces it",
			[]EpochEntry{e(2, 9)}, func(c *Cache) error { return c.Assign(3, 9) }, []EpochEntry{e(3, 9)}},
		{"a newer epoch at an earlier offset drops every entry starting at or after that offset",
			[]EpochEntry{e(1, 5), e(2, 10), e(3, 20)}, func(c *Cache) error { return c.Assign(4, 10) },
			[]EpochEntry{e(1, 5), e(4, 10)}},
		{"a newer epoch before every start offset replaces the whole history",
			[]EpochEntry{e(2, 6)}, func(c *Cache) error { return c.Assign(3, 5) }, []EpochEntry{e(3, 5)}},
		{"an older epoch drops every entry of that epoch or newer",
			[]EpochEntry{e(1, 5), e(2, 6)}, func(c *Cache) error { return c.Assign(1, 7) }, []EpochEntry{e(1, 7)}},
		{"an older epoch at a later offset keeps the older entries below it",
			[]EpochEntry{e(1, 5), e(3, 6), e(5, 9)}, func(c *Cache) error { return c.Assign(4, 20) },
			[]EpochEntry{e(1, 5), e(3, 6), e(4, 20)}},

		// TruncateFromEnd.
		{"truncate from end drops entries starting at the end offset (an epoch boundary)",
			base, func(c *Cache) error { return c.TruncateFromEnd(8) }, []EpochEntry{e(2, 6)}},
		{"truncate from end between boundaries keeps the epoch that covers the new end",
			base, func(c *Cache) error { return c.TruncateFromEnd(9) }, []EpochEntry{e(2, 6), e(3, 8)}},
		{"truncate from end past the latest start offset changes nothing",
			base, func(c *Cache) error { return c.TruncateFromEnd(12) }, base},
		{"truncate from end at or before the first start offset empties the cache",
			base, func(c *Cache) error { return c.TruncateFromEnd(6) }, []EpochEntry{}},
		{"truncate from end of an undefined offset changes nothing",
			base, func(c *Cache) error { return c.TruncateFromEnd(UndefinedEpochOffset) }, base},
		{"truncate from end of an empty cache is fine",
			nil, func(c *Cache) error { return c.TruncateFromEnd(7) }, []EpochEntry{}},

		// TruncateFromStart.
		{"truncate from start below the first start offset changes nothing",
			base, func(c *Cache) error { return c.TruncateFromStart(1) }, base},
		{"truncate from start at the first start offset changes nothing",
			base, func(c *Cache) error { return c.TruncateFromStart(6) }, base},
		{"truncate from start at a later boundary drops the entries before it",
			base, func(c *Cache) error { return c.TruncateFromStart(8) }, []EpochEntry{e(3, 8), e(4, 11)}},
		{"truncate from start between boundaries moves the covering epoch's start up",
			base, func(c *Cache) error { return c.TruncateFromStart(9) }, []EpochEntry{e(3, 9), e(4, 11)}},
		{"truncate from start inside the first epoch moves only its start",
			[]EpochEntry{e(0, 0), e(1, 7), e(2, 10)}, func(c *Cache) error { return c.TruncateFromStart(5) },
			[]EpochEntry{e(0, 5), e(1, 7), e(2, 10)}},
		{"truncate from start at the latest start offset keeps only the latest epoch",
			base, func(c *Cache) error { return c.TruncateFromStart(11) }, []EpochEntry{e(4, 11)}},
		{"truncate from start past the latest start offset keeps the latest epoch, moved up",
			base, func(c *Cache) error { return c.TruncateFromStart(15) }, []EpochEntry{e(4, 15)}},
		{"truncate from start of an undefined offset changes nothing",
			base, func(c *Cache) error { return c.TruncateFromStart(UndefinedEpochOffset) }, base},
		{"truncate from start of an empty cache is fine",
			nil, func(c *Cache) error { return c.TruncateFromStart(7) }, []EpochEntry{}},

		// Clear.
		{"clear drops every entry",
			base, func(c *Cache) error { return c.Clear() }, []EpochEntry{}},
		{"truncate from end then from start, both persisted",
			base, func(c *Cache) error {
				if err := c.TruncateFromEnd(11); err != nil {
					return err
				}
				return c.TruncateFromStart(8)
			}, []EpochEntry{e(3, 8)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(t)
			c := open(t, m, cpPath)
			assignAll(t, c, tc.before...)
			if got := c.Entries(); !slices.Equal(got, tc.before) {
				t.Fatalf("setup: cache holds %v, want %v", got, tc.before)
			}
			if err := tc.change(c); err != nil {
				t.Fatal(err)
			}
			if got := c.Entries(); !slices.Equal(got, tc.want) {
				t.Fatalf("cache holds %v, want %v", got, tc.want)
			}
			// A crash now loses nothing: every change was durable on return.
			m.Crash()
			wantPersisted(t, m, c)
		})
	}
}

func TestAssignRejectsNegative(t *testing.T) {
	m := newMem(t)
	c := open(t, m, cpPath)
	assignAll(t, c, e(1, 5))
	for _, x := range []EpochEntry{e(-1, 10), e(2, -1), e(-1, -1)} {
		if err := c.Assign(x.Epoch, x.StartOffset); !errors.Is(err, ErrInvalidEpochEntry) {
			t.Errorf("Assign(%d, %d) = %v, want ErrInvalidEpochEntry", x.Epoch, x.StartOffset, err)
		}
	}
	if got := c.Entries(); !slices.Equal(got, []EpochEntry{e(1, 5)}) {
		t.Fatalf("cache holds %v", got)
	}
}

// TestNoOpChangesWriteNothing pins that the per-batch Assign of the current
// epoch, and truncations that remove nothing, do not touch the disk.
func TestNoOpChangesWriteNothing(t *testing.T) {
	m := newMem(t)
	c := open(t, m, cpPath)
	assignAll(t, c, e(2, 6), e(3, 8))
	before := m.MutatingOps()
	assignAll(t, c, e(3, 9), e(3, 100), e(3, 8))
	for _, err := range []error{c.TruncateFromEnd(50), c.TruncateFromStart(2), c.TruncateFromStart(6), c.TruncateFromEnd(-1)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := m.MutatingOps() - before; n != 0 {
		t.Fatalf("no-op changes made %d mutating file operations", n)
	}
}

// TestEndOffsetFor is one case per sentence of OffsetForLeaderEpoch's
// answer (Reference: KIP-101, KIP-279).
func TestEndOffsetFor(t *testing.T) {
	cases := []struct {
		name      string
		entries   []EpochEntry
		requested int32
		leo       int64
		wantEpoch int32
		wantEnd   int64
	}{
		{"the latest epoch ends at the log end offset",
			[]EpochEntry{e(2, 10)}, 2, 11, 2, 11},
		{"the latest epoch ends at the log end offset even when it wrote nothing yet",
			[]EpochEntry{e(0, 0), e(1, 0)}, 1, 0, 1, 0},
		{"an earlier epoch ends where the next one starts",
			[]EpochEntry{e(1, 11), e(2, 13), e(3, 15)}, 2, 17, 2, 15},
		{"the first of several epochs ends where the second starts",
			[]EpochEntry{e(0, 0), e(1, 3), e(2, 6)}, 0, 9, 0, 3},
		{"an epoch this log lacks is answered with the largest epoch below it and the start of the next one above (KIP-279)",
			[]EpochEntry{e(0, 10), e(2, 13), e(4, 17)}, 1, 20, 0, 13},
		{"the same holds for an epoch missing between two later ones",
			[]EpochEntry{e(0, 10), e(2, 13), e(4, 17)}, 3, 20, 2, 17},
		{"an epoch older than all here gets itself and the first entry's start offset",
			[]EpochEntry{e(5, 11), e(6, 12), e(7, 13)}, 4, 0, 4, 11},
		{"an epoch newer than all here is undefined",
			[]EpochEntry{e(2, 100)}, 3, 100, UndefinedEpoch, UndefinedEpochOffset},
		{"an empty history answers undefined",
			nil, 0, 0, UndefinedEpoch, UndefinedEpochOffset},
		{"an undefined requested epoch is undefined even with history",
			[]EpochEntry{e(2, 11), e(3, 12)}, UndefinedEpoch, 0, UndefinedEpoch, UndefinedEpochOffset},
		{"an undefined requested epoch on an empty history is undefined",
			nil, UndefinedEpoch, 73, UndefinedEpoch, UndefinedEpochOffset},
		{"any negative requested epoch is undefined (Fjord; Kafka checks -1 only)",
			[]EpochEntry{e(2, 11)}, -5, 20, UndefinedEpoch, UndefinedEpochOffset},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := open(t, newMem(t), cpPath)
			assignAll(t, c, tc.entries...)
			epoch, end := c.EndOffsetFor(tc.requested, tc.leo)
			if epoch != tc.wantEpoch || end != tc.wantEnd {
				t.Fatalf("EndOffsetFor(%d, %d) = (%d, %d), want (%d, %d)", tc.requested, tc.leo, epoch, end, tc.wantEpoch, tc.wantEnd)
			}
		})
	}
}

// TestEndOffsetForAsLeadersChange follows a replica through leader
// changes, asking about every epoch after each.
func TestEndOffsetForAsLeadersChange(t *testing.T) {
	c := open(t, newMem(t), cpPath)
	assignAll(t, c, e(0, 0), e(0, 1), e(0, 2))
	assignAll(t, c, e(1, 3), e(1, 4), e(1, 5))
	assignAll(t, c, e(2, 6), e(2, 7), e(2, 8))
	const leo = 9
	for requested, want := range map[int32][2]int64{0: {0, 3}, 1: {1, 6}, 2: {2, leo}} {
		if epoch, end := c.EndOffsetFor(requested, leo); int64(epoch) != want[0] || end != want[1] {
			t.Errorf("EndOffsetFor(%d) = (%d, %d), want %v", requested, epoch, end, want)
		}
	}
	if got := c.Entries(); !slices.Equal(got, []EpochEntry{e(0, 0), e(1, 3), e(2, 6)}) {
		t.Fatalf("entries %v", got)
	}
}

func TestEpochForOffset(t *testing.T) {
	c := open(t, newMem(t), cpPath)
	if _, ok := c.EpochForOffset(0); ok {
		t.Fatal("empty cache answered EpochForOffset")
	}
	assignAll(t, c, e(0, 10), e(1, 20), e(5, 30))
	cases := []struct {
		name   string
		offset int64
		want   int32
		ok     bool
	}{
		{"before the first start offset: no epoch", 5, 0, false},
		{"at a start offset: that epoch", 20, 1, true},
		{"inside an epoch: that epoch", 25, 1, true},
		{"at the first start offset: the first epoch", 10, 0, true},
		{"at the latest start offset: the latest epoch", 30, 5, true},
		{"past the latest start offset: the latest epoch", 50, 5, true},
	}
	for _, tc := range cases {
		if got, ok := c.EpochForOffset(tc.offset); got != tc.want || ok != tc.ok {
			t.Errorf("%s: EpochForOffset(%d) = %d, %v; want %d, %v", tc.name, tc.offset, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLatestAndEarliest(t *testing.T) {
	c := open(t, newMem(t), cpPath)
	if _, ok := c.LatestEpoch(); ok {
		t.Fatal("empty cache has a latest epoch")
	}
	if _, ok := c.EarliestEntry(); ok {
		t.Fatal("empty cache has an earliest entry")
	}
	assignAll(t, c, e(2, 6), e(4, 15), e(10, 20))
	if got, ok := c.LatestEpoch(); !ok || got != 10 {
		t.Fatalf("LatestEpoch = %d, %v", got, ok)
	}
	if got, ok := c.EarliestEntry(); !ok || got != e(2, 6) {
		t.Fatalf("EarliestEntry = %v, %v", got, ok)
	}
	// Entries is a copy.
	entries := c.Entries()
	entries[0].Epoch = 99
	if got, _ := c.EarliestEntry(); got != e(2, 6) {
		t.Fatalf("modifying Entries' result changed the cache: %v", got)
	}
}

func TestPersistenceAcrossReopen(t *testing.T) {
	for _, fsCase := range []struct {
		name string
		fs   func(t *testing.T) (vfs.FS, string)
	}{
		{"OS", func(t *testing.T) (vfs.FS, string) {
			return vfs.OS(), filepath.Join(t.TempDir(), "leader-epoch-checkpoint")
		}},
		{"Mem", func(t *testing.T) (vfs.FS, string) { return newMem(t), cpPath }},
	} {
		t.Run(fsCase.name, func(t *testing.T) {
			fs, path := fsCase.fs(t)
			c := open(t, fs, path)
			if got := c.Entries(); len(got) != 0 {
				t.Fatalf("fresh cache holds %v", got)
			}
			assignAll(t, c, e(2, 6), e(3, 8), e(4, 11))
			if got := open(t, fs, path).Entries(); !slices.Equal(got, []EpochEntry{e(2, 6), e(3, 8), e(4, 11)}) {
				t.Fatalf("reopened: %v", got)
			}
			if err := c.TruncateFromStart(9); err != nil {
				t.Fatal(err)
			}
			if got := open(t, fs, path).Entries(); !slices.Equal(got, []EpochEntry{e(3, 9), e(4, 11)}) {
				t.Fatalf("reopened after TruncateFromStart: %v", got)
			}
			if err := c.Clear(); err != nil {
				t.Fatal(err)
			}
			if got := open(t, fs, path).Entries(); len(got) != 0 {
				t.Fatalf("reopened after Clear: %v", got)
			}
		})
	}
}

func TestOpenCorrupt(t *testing.T) {
	for name, data := range map[string]string{
		"garbage":             "not a checkpoint",
		"epochs out of order": "0\n2\n5 10\n3 20\n",
		"count mismatch":      "0\n3\n1 0\n",
	} {
		m := newMem(t)
		if err := checkpoint.WriteFileAtomic(m, cpPath, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(m, cpPath); !errors.Is(err, checkpoint.ErrCorruptCheckpoint) {
			t.Errorf("%s: Open = %v, want ErrCorruptCheckpoint", name, err)
		}
	}
}

// TestCrashKeepsOldOrNew crashes during each kind of change, after every
// prefix of its file operations: reopened, the cache holds the history
// from before the change or after it. A change that returned an error
// also left the live cache as it was.
func TestCrashKeepsOldOrNew(t *testing.T) {
	before := []EpochEntry{e(2, 6), e(3, 8), e(4, 11)}
	changes := map[string]func(c *Cache) error{
		"assign new epoch":    func(c *Cache) error { return c.Assign(5, 20) },
		"assign conflicting":  func(c *Cache) error { return c.Assign(3, 7) },
		"truncate from end":   func(c *Cache) error { return c.TruncateFromEnd(9) },
		"truncate from start": func(c *Cache) error { return c.TruncateFromStart(9) },
		"clear":               func(c *Cache) error { return c.Clear() },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			setup := func() (*vfs.MemFS, *Cache) {
				m := newMem(t)
				c := open(t, m, cpPath)
				assignAll(t, c, before...)
				return m, c
			}
			m, c := setup()
			start := m.MutatingOps()
			if err := change(c); err != nil {
				t.Fatal(err)
			}
			after := c.Entries()
			total := m.MutatingOps() - start
			if total == 0 {
				t.Fatal("the change wrote nothing")
			}
			outcomes := map[bool]bool{}
			for n := int64(0); n <= total; n++ {
				m, c := setup()
				m.CrashAfter(n)
				err := change(c)
				if err != nil && !slices.Equal(c.Entries(), before) {
					t.Fatalf("n=%d: failed change (%v) left the cache at %v", n, err, c.Entries())
				}
				m.CrashTorn(rand.New(rand.NewPCG(uint64(n), 5)))
				got := open(t, m, cpPath).Entries()
				isNew := slices.Equal(got, after)
				if !isNew && !slices.Equal(got, before) {
					t.Fatalf("n=%d: reopened %v, want %v or %v", n, got, before, after)
				}
				if err == nil && !isNew {
					t.Fatalf("n=%d: change returned nil but the crash lost it", n)
				}
				outcomes[isNew] = true
			}
			if len(outcomes) != 2 {
				t.Fatalf("outcomes %v: want both old and new among the crash points", outcomes)
			}
		})
	}
}

// TestRandomOperationsKeepInvariant applies random changes and checks,
// after each, the invariant (epochs and start offsets strictly
// increasing), that the file matches, and the answers' basic laws.
func TestRandomOperationsKeepInvariant(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newMem(rt)
		c := open(rt, m, cpPath)
		offset := rapid.Custom(func(t *rapid.T) int64 { return int64(rapid.IntRange(-1, 60).Draw(t, "offset")) })
		for range rapid.IntRange(1, 40).Draw(rt, "steps") {
			var err error
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0:
				err = c.Assign(int32(rapid.IntRange(0, 12).Draw(rt, "epoch")), int64(rapid.IntRange(0, 60).Draw(rt, "start")))
			case 1:
				err = c.TruncateFromEnd(offset.Draw(rt, "end"))
			case 2:
				err = c.TruncateFromStart(offset.Draw(rt, "start"))
			case 3:
				if rapid.IntRange(0, 9).Draw(rt, "clear?") == 0 {
					err = c.Clear()
				}
			}
			if err != nil {
				rt.Fatal(err)
			}
			entries := c.Entries()
			for i := 1; i < len(entries); i++ {
				if entries[i].Epoch <= entries[i-1].Epoch || entries[i].StartOffset <= entries[i-1].StartOffset {
					rt.Fatalf("invariant broken: %v", entries)
				}
			}
			wantPersisted(rt, m, c)
			// Every entry's epoch covers its own start offset, and the end
			// of every epoch but the latest is the next one's start.
			for i, x := range entries {
				if got, ok := c.EpochForOffset(x.StartOffset); !ok || got != x.Epoch {
					rt.Fatalf("EpochForOffset(%d) = %d, %v in %v", x.StartOffset, got, ok, entries)
				}
				if i+1 < len(entries) {
					if ep, end := c.EndOffsetFor(x.Epoch, 1000); ep != x.Epoch || end != entries[i+1].StartOffset {
						rt.Fatalf("EndOffsetFor(%d) = (%d, %d) in %v", x.Epoch, ep, end, entries)
					}
				}
			}
		}
	})
}

// TestConcurrentUse runs one changer (the partition's appender; Kafka
// changes the history under the log's lock, one change at a time) against
// readers that check the invariant on every
// snapshot they see; -race checks the locking.
func TestConcurrentUse(t *testing.T) {
	m := newMem(t)
	c := open(t, m, cpPath)
	const rounds = 200
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := range rounds {
			epoch, start := int32(i), int64(i*10)
			if err := c.Assign(epoch, start); err != nil {
				errs <- err
				return
			}
			if err := c.Assign(epoch, start+5); err != nil { // a later batch: no-op
				errs <- err
				return
			}
			if i%20 == 19 {
				if err := c.TruncateFromStart(start - 50); err != nil {
					errs <- err
					return
				}
			}
			if i%33 == 32 {
				if err := c.TruncateFromEnd(start - 15); err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	// A reader asking for the end of the latest epoch, as a consumer
	// validating its position would. The answer may be stale but must be
	// one the history had: the latest epoch and the log end offset, an
	// epoch at or below the requested one, or undefined if the epoch was
	// truncated away meanwhile.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done: // the changer finished: stop reading
				return
			default:
			}
			latest, ok := c.LatestEpoch()
			if !ok {
				continue
			}
			epoch, end := c.EndOffsetFor(latest, 0)
			if epoch == UndefinedEpoch && end == UndefinedEpochOffset {
				continue
			}
			if epoch > latest || end < 0 {
				errs <- fmt.Errorf("EndOffsetFor(%d) = (%d, %d)", latest, epoch, end)
				return
			}
		}
	}()
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done: // the changer finished: stop reading
					return
				default:
				}
				entries := c.Entries()
				for i := 1; i < len(entries); i++ {
					if entries[i].Epoch <= entries[i-1].Epoch || entries[i].StartOffset <= entries[i-1].StartOffset {
						errs <- fmt.Errorf("reader saw a broken history %v", entries)
						return
					}
				}
				if first, ok := c.EarliestEntry(); ok {
					_, _ = c.EpochForOffset(first.StartOffset)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if latest, ok := c.LatestEpoch(); !ok || latest != rounds-1 {
		t.Fatalf("LatestEpoch = %d, %v; want %d", latest, ok, rounds-1)
	}
	wantPersisted(t, m, c)
}

func BenchmarkAssignCurrentEpoch(b *testing.B) {
	c := open(b, newMem(b), cpPath)
	assignAll(b, c, e(1, 0), e(2, 100))
	offset := int64(100)
	for b.Loop() {
		offset++
		if err := c.Assign(2, offset); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEndOffsetFor(b *testing.B) {
	c := open(b, newMem(b), cpPath)
	for i := range 100 {
		assignAll(b, c, e(int32(i), int64(i)*1000))
	}
	for b.Loop() {
		_, _ = c.EndOffsetFor(50, 1<<20)
	}
}
