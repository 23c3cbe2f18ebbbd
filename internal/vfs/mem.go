package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// MemFS is a strict in-memory file system for crash testing: it remembers,
// besides what every file and directory holds now, what each would hold
// after a power cut, and Crash throws the difference away.
//
// The model is Linux's, made as unforgiving as the durability rules in the
// package doc allow:
//
//   - A file (an inode) has current bytes and durable bytes. File.Sync makes
//     the current bytes and size durable. Nothing else does: Close does not,
//     and neither does a directory sync.
//   - A directory has current entries and durable entries (name -> inode).
//     SyncDir(dir) makes dir's current entries durable: every creation,
//     rename into or out of dir and removal in dir since its last SyncDir.
//     Directories made by MkdirAll are entries of their parents like files
//     (MkdirAllDurable makes a new tree durable).
//   - Crash rebuilds the tree from the root along durable entries only:
//     each directory's entries become its durable entries and each file's
//     bytes its durable bytes. A file that was synced but whose name was
//     never synced in its parent is gone; so is everything under a
//     directory whose own entry was not durable.
//   - A rename between two directories needs a SyncDir of both. If only one
//     was synced the durable tree can name the same inode twice (or, for
//     directories, in a cycle); Crash keeps the first name it meets, walking
//     names in sorted order from the root, and drops the rest. So a crash
//     leaves each inode under at most one name, as a real file system does.
//   - Handles opened before a crash fail on every method except Name with
//     ErrCrashed; files are reopened by name afterwards.
//   - A removed file, or one renamed over, stays readable and writable
//     through handles opened before, and only through them.
//   - Open of a directory fails with ErrIsDir; operations on missing paths
//     fail with errors for which IsNotExist holds.
//
// Paths: MemFS has one root. Paths are cleaned and relative ones are taken
// from the root, so "a/b", "/a/b" and "./a//b" name one file. The root
// exists, is durable and cannot be removed.
//
// Fault injection: SetHook and CrashAfter see every mutating operation
// (each Op) before it does anything; MutatingOps counts them.
//
// Concurrency: every method is safe for concurrent use. Concurrent ReadAt
// and WriteAt on one file are serialized per file, so a reader sees a
// WriteAt entirely or not at all. Crash may run concurrently with anything:
// an operation on a pre-crash handle either completes before the crash
// reverts its file or fails with ErrCrashed.
//
// Files are limited to 1 GiB (ErrTooLarge): a MemFS that large in a test
// is a bug, and refusing it beats an out-of-memory kill.
type MemFS struct {
	// gen is the crash generation. A handle records it at open and is dead
	// once Crash has moved it on. File methods read it with the file's
	// mutex held, and Crash bumps it before it takes any file's mutex, so a
	// write on a pre-crash handle either happens before Crash reverts that
	// file or sees the new generation and fails.
	gen atomic.Uint64
	// ops counts mutating operations attempted, including refused ones.
	ops atomic.Int64
	// crashAt, when >= 0, is the value of ops after which every mutating
	// operation fails with ErrCrashed (CrashAfter). -1 when off.
	crashAt atomic.Int64
	hook    atomic.Pointer[func(Op, string) error]

	// mu guards the namespace: every directory's children and
	// durableChildren, and root.
	// Lock order: MemFS.mu before memNode.mu; never the reverse.
	mu   sync.Mutex
	root *memNode
}

// Op names a mutating operation for SetHook.
type Op uint8

// The mutating operations. Open, List, Stat, ReadAt, Size, Close and Name
// change nothing that a crash could keep or lose, so they are not Ops.
const (
	// OpCreate is Create, and OpenReadWrite whether or not the file exists
	// (so that the count of operations does not depend on the file system's
	// state).
	OpCreate Op = iota + 1
	OpWrite
	OpSync
	OpTruncate
	OpRename
	// OpRemove is Remove and RemoveAll, one per call.
	OpRemove
	// OpMkdir is MkdirAll, one per call whatever it creates.
	OpMkdir
	OpSyncDir
)

func (o Op) String() string {
	switch o {
	case OpCreate:
		return "create"
	case OpWrite:
		return "write"
	case OpSync:
		return "sync"
	case OpTruncate:
		return "truncate"
	case OpRename:
		return "rename"
	case OpRemove:
		return "remove"
	case OpMkdir:
		return "mkdir"
	case OpSyncDir:
		return "syncdir"
	}
	return "op(?)"
}

// maxMemFileSize bounds a MemFS file (see ErrTooLarge).
const maxMemFileSize = 1 << 30

// maxGarbledBytes bounds how many of the kept unsynced bytes CrashTorn may
// garble: about one sector's worth of a torn write is what it models, not
// random corruption of whole files.
const maxGarbledBytes = 8

// memNode is an inode: a directory or a file.
type memNode struct {
	dir bool

	// Directories only. Guarded by MemFS.mu.
	children        map[string]*memNode // current entries
	durableChildren map[string]*memNode // entries as of the last SyncDir

	// Files only. Guarded by mu.
	mu      sync.RWMutex
	data    []byte // current contents
	durable []byte // contents as of the last Sync; never shares data's array
	// synced is the length of a prefix on which data and durable agree, so
	// that Sync copies only what changed since the last one rather than
	// the whole file (append-and-sync workloads would be quadratic).
	// Invariant: synced <= min(len(data), len(durable)) and
	// data[:synced] == durable[:synced].
	synced int
}

func newDirNode() *memNode {
	return &memNode{
		dir:             true,
		children:        map[string]*memNode{},
		durableChildren: map[string]*memNode{},
	}
}

// NewMem returns an empty MemFS: a root directory and nothing else.
func NewMem() *MemFS {
	m := &MemFS{root: newDirNode()}
	m.crashAt.Store(-1)
	return m
}

// SetHook installs hook, called before every mutating operation with the
// Op and the path it names (for Rename, the new name; for a File method,
// the name the file was opened with). A non-nil return makes that
// operation fail with exactly that error and have no effect. nil removes
// the hook. The hook runs without MemFS's locks held, possibly on several
// goroutines at once.
func (m *MemFS) SetHook(hook func(op Op, path string) error) {
	if hook == nil {
		m.hook.Store(nil)
		return
	}
	m.hook.Store(&hook)
}

// MutatingOps returns how many mutating operations have been attempted on
// m, refused ones included.
func (m *MemFS) MutatingOps() int64 { return m.ops.Load() }

// CrashAfter lets the next n mutating operations run and makes every one
// after them fail with ErrCrashed and no effect, until the next Crash or
// CrashTorn (which turn this off). Independently of any SetHook hook.
//
// The intended use enumerates every crash point of a workload: run it once
// on a fresh MemFS and take the difference in MutatingOps; then for each n
// from 0 to that count, set up afresh, CrashAfter(n), run the workload
// (which fails from operation n+1 on), Crash, and check what is left.
// Call it while no operation is in flight, or the boundary is blurred.
func (m *MemFS) CrashAfter(n int64) {
	if n < 0 {
		n = 0
	}
	m.crashAt.Store(m.ops.Load() + n)
}

// Crash simulates a power cut: every directory's entries revert to its
// durable entries and every file's bytes to its durable bytes, as the
// MemFS doc describes. Handles opened before fail from now on with
// ErrCrashed, and CrashAfter is turned off. The SetHook hook stays.
func (m *MemFS) Crash() { m.crash(nil) }

// CrashTorn is Crash with torn writes. For each file that survives (its
// name is durable), if its durable bytes D are a proper prefix of its
// current bytes C (the file was appended to, or grown, since its last
// Sync, and nothing synced was overwritten or cut), it keeps D followed by
// the first k bytes of the unsynced tail C[len(D):], k drawn uniformly from
// 0..len(C)-len(D). Then, half the time and only if k > 0, the last g of
// those kept bytes, 1 <= g <= min(k, 8), are garbled: all set to zero, or
// each set to a random value (even odds). Every other file reverts to D
// exactly, as in Crash.
//
// So for every surviving file: D is a prefix of the result, its length is
// between len(D) and len(C), and it differs from C[:len] in at most its
// last 8 bytes and only after len(D). What survives is then durable.
// Given the same rng state and the same MemFS history, the result is the
// same.
func (m *MemFS) CrashTorn(rng *rand.Rand) {
	if rng == nil {
		panic("vfs: CrashTorn needs a *rand.Rand")
	}
	m.crash(rng)
}

func (m *MemFS) crash(rng *rand.Rand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen.Add(1)
	m.crashAt.Store(-1)

	// Walk the durable tree. seen makes each inode appear once, which also
	// breaks any cycle a half-durable cross-directory rename of a
	// directory could have made.
	seen := map[*memNode]bool{m.root: true}
	var walk func(d *memNode)
	walk = func(d *memNode) {
		kept := make(map[string]*memNode, len(d.durableChildren))
		for _, name := range slices.Sorted(maps.Keys(d.durableChildren)) {
			c := d.durableChildren[name]
			if seen[c] {
				continue
			}
			seen[c] = true
			kept[name] = c
			if c.dir {
				walk(c)
			} else {
				c.mu.Lock()
				c.crashLocked(rng)
				c.mu.Unlock()
			}
		}
		d.durableChildren = kept
		d.children = maps.Clone(kept)
	}
	walk(m.root)
}

// crashLocked sets the file to what survives a crash (see CrashTorn; rng
// nil for Crash). REQUIRES: n.mu held for writing.
func (n *memNode) crashLocked(rng *rand.Rand) {
	next := slices.Clone(n.durable)
	if rng != nil && len(n.data) > len(n.durable) && bytes.Equal(n.data[:len(n.durable)], n.durable) {
		tail := n.data[len(n.durable):]
		k := rng.IntN(len(tail) + 1)
		next = append(next, tail[:k]...)
		if k > 0 && rng.IntN(2) == 0 {
			g := 1 + rng.IntN(min(k, maxGarbledBytes))
			garbled := next[len(next)-g:]
			if rng.IntN(2) == 0 {
				clear(garbled)
			} else {
				for i := range garbled {
					garbled[i] = byte(rng.Uint32())
				}
			}
		}
	}
	// What survived a crash is on the disk: it is durable now.
	n.data = next
	n.durable = slices.Clone(next)
	n.synced = len(next)
}

// before runs the fault injection for one mutating operation.
func (m *MemFS) before(op Op, name string) error {
	count := m.ops.Add(1)
	if limit := m.crashAt.Load(); limit >= 0 && count > limit {
		return &fs.PathError{Op: op.String(), Path: name, Err: ErrCrashed}
	}
	if h := m.hook.Load(); h != nil {
		return (*h)(op, name)
	}
	return nil
}

// splitPath returns name's components below the root.
func splitPath(name string) []string {
	c := path.Clean("/" + filepath.ToSlash(name))
	if c == "/" {
		return nil
	}
	return strings.Split(c[1:], "/")
}

// walkLocked returns the node at parts. REQUIRES: m.mu held.
func (m *MemFS) walkLocked(parts []string) (*memNode, error) {
	n := m.root
	for _, p := range parts {
		if !n.dir {
			return nil, ErrNotDir
		}
		c, ok := n.children[p]
		if !ok {
			return nil, fs.ErrNotExist
		}
		n = c
	}
	return n, nil
}

// parentLocked returns the directory that holds name, and name's last
// component. The root has no parent: fs.ErrInvalid. REQUIRES: m.mu held.
func (m *MemFS) parentLocked(name string) (*memNode, string, error) {
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, "", fs.ErrInvalid
	}
	dir, err := m.walkLocked(parts[:len(parts)-1])
	if err != nil {
		return nil, "", err
	}
	if !dir.dir {
		return nil, "", ErrNotDir
	}
	return dir, parts[len(parts)-1], nil
}

func (m *MemFS) Create(name string) (File, error) {
	if err := m.before(OpCreate, name); err != nil {
		return nil, err
	}
	return m.open("create", name, true, true, true)
}

func (m *MemFS) Open(name string) (File, error) {
	return m.open("open", name, false, false, false)
}

func (m *MemFS) OpenReadWrite(name string) (File, error) {
	if err := m.before(OpCreate, name); err != nil {
		return nil, err
	}
	return m.open("open", name, true, false, true)
}

func (m *MemFS) open(op, name string, create, truncate, writable bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n *memNode
	if create {
		dir, base, err := m.parentLocked(name)
		if errors.Is(err, fs.ErrInvalid) {
			err = ErrIsDir // the root
		}
		if err != nil {
			return nil, &fs.PathError{Op: op, Path: name, Err: err}
		}
		n = dir.children[base]
		if n == nil {
			n = &memNode{}
			dir.children[base] = n
		}
	} else {
		var err error
		if n, err = m.walkLocked(splitPath(name)); err != nil {
			return nil, &fs.PathError{Op: op, Path: name, Err: err}
		}
	}
	if n.dir {
		return nil, &fs.PathError{Op: op, Path: name, Err: ErrIsDir}
	}
	if truncate {
		n.mu.Lock()
		n.data = n.data[:0]
		n.synced = 0
		n.mu.Unlock()
	}
	return &memFile{fs: m, n: n, name: name, gen: m.gen.Load(), writable: writable}, nil
}

func (m *MemFS) Remove(name string) error {
	if err := m.before(OpRemove, name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parentLocked(name)
	if err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	n, ok := dir.children[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(n.children) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: ErrNotEmpty}
	}
	delete(dir.children, base)
	return nil
}

// RemoveAll unlinks name from its parent. The subtree below is then
// unreachable except through open handles, so it is not taken apart: if a
// crash brings name back (its parent was not synced), it comes back as its
// own durable entries say.
func (m *MemFS) RemoveAll(name string) error {
	if err := m.before(OpRemove, name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parentLocked(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "removeall", Path: name, Err: err}
	}
	delete(dir.children, base)
	return nil
}

func (m *MemFS) Rename(oldname, newname string) error {
	if err := m.before(OpRename, newname); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	fail := func(err error) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	oldDir, oldBase, err := m.parentLocked(oldname)
	if err != nil {
		return fail(err)
	}
	src, ok := oldDir.children[oldBase]
	if !ok {
		return fail(fs.ErrNotExist)
	}
	newDir, newBase, err := m.parentLocked(newname)
	if err != nil {
		return fail(err)
	}
	if newDir == oldDir && newBase == oldBase {
		return nil
	}
	if src.dir {
		// A directory cannot move below itself: check newname's ancestors.
		n := m.root
		for _, p := range splitPath(newname) {
			if n == src {
				return fail(fs.ErrInvalid)
			}
			n = n.children[p]
			if n == nil {
				break
			}
		}
	}
	if dst, ok := newDir.children[newBase]; ok {
		switch {
		case src.dir && !dst.dir:
			return fail(ErrNotDir)
		case !src.dir && dst.dir:
			return fail(ErrIsDir)
		case dst.dir && len(dst.children) > 0:
			return fail(ErrNotEmpty)
		}
	}
	newDir.children[newBase] = src
	delete(oldDir.children, oldBase)
	return nil
}

func (m *MemFS) MkdirAll(dir string) error {
	if err := m.before(OpMkdir, dir); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, p := range splitPath(dir) {
		c, ok := n.children[p]
		if !ok {
			c = newDirNode()
			n.children[p] = c
		} else if !c.dir {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: ErrNotDir}
		}
		n = c
	}
	return nil
}

func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walkLocked(splitPath(dir))
	if err == nil && !n.dir {
		err = ErrNotDir
	}
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: err}
	}
	return slices.Sorted(maps.Keys(n.children)), nil
}

func (m *MemFS) Stat(name string) (FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walkLocked(splitPath(name))
	if err != nil {
		return FileInfo{}, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	if n.dir {
		return FileInfo{IsDir: true}, nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return FileInfo{Size: int64(len(n.data))}, nil
}

func (m *MemFS) SyncDir(dir string) error {
	if err := m.before(OpSyncDir, dir); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walkLocked(splitPath(dir))
	if err == nil && !n.dir {
		err = ErrNotDir
	}
	if err != nil {
		return &fs.PathError{Op: "sync", Path: dir, Err: err}
	}
	n.durableChildren = maps.Clone(n.children)
	return nil
}

// memFile is a handle on a MemFS file.
type memFile struct {
	fs       *MemFS
	n        *memNode
	name     string
	gen      uint64 // MemFS.gen when opened
	writable bool
	closed   atomic.Bool
}

// check says why the handle cannot be used, if it cannot. File methods call
// it again with n.mu held, where it decides the race with Crash.
func (f *memFile) check(op string) error {
	if f.fs.gen.Load() != f.gen {
		return &fs.PathError{Op: op, Path: f.name, Err: ErrCrashed}
	}
	if f.closed.Load() {
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil // as os.File: an empty read is not at EOF
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check("write"); err != nil {
		return 0, err
	}
	if err := f.fs.before(OpWrite, f.name); err != nil {
		return 0, err
	}
	if !f.writable {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrPermission}
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrInvalid}
	}
	if off > maxMemFileSize || int64(len(p)) > maxMemFileSize-off {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: ErrTooLarge}
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if err := f.check("write"); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil // as os.File: does not extend the file
	}
	if end := int(off) + len(p); end > len(f.n.data) {
		f.n.resizeLocked(end)
	}
	f.n.synced = min(f.n.synced, int(off))
	copy(f.n.data[off:], p)
	return len(p), nil
}

func (f *memFile) Sync() error {
	if err := f.check("sync"); err != nil {
		return err
	}
	if err := f.fs.before(OpSync, f.name); err != nil {
		return err
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if err := f.check("sync"); err != nil {
		return err
	}
	n := f.n
	n.durable = append(n.durable[:n.synced], n.data[n.synced:]...)
	n.synced = len(n.data)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	if err := f.check("truncate"); err != nil {
		return err
	}
	if err := f.fs.before(OpTruncate, f.name); err != nil {
		return err
	}
	if !f.writable {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: fs.ErrPermission}
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	if size > maxMemFileSize {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: ErrTooLarge}
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if err := f.check("truncate"); err != nil {
		return err
	}
	f.n.resizeLocked(int(size))
	return nil
}

// resizeLocked sets the file's length, zeroing the bytes it adds (the
// array may hold stale bytes from before a shrink). REQUIRES: n.mu held
// for writing.
func (n *memNode) resizeLocked(size int) {
	if size <= len(n.data) {
		n.data = n.data[:size]
		n.synced = min(n.synced, size)
		return
	}
	if size > cap(n.data) {
		grown := make([]byte, len(n.data), max(size, 2*cap(n.data)))
		copy(grown, n.data)
		n.data = grown
	}
	old := len(n.data)
	n.data = n.data[:size]
	clear(n.data[old:])
}

func (f *memFile) Size() (int64, error) {
	if err := f.check("stat"); err != nil {
		return 0, err
	}
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	if err := f.check("stat"); err != nil {
		return 0, err
	}
	return int64(len(f.n.data)), nil
}

func (f *memFile) Close() error {
	if f.fs.gen.Load() != f.gen {
		return &fs.PathError{Op: "close", Path: f.name, Err: ErrCrashed}
	}
	if !f.closed.CompareAndSwap(false, true) {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	return nil
}

func (f *memFile) Name() string { return f.name }
