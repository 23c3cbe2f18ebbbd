package vfs

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// WriteBack is a file system over another (the operating system's) that
// keeps every file's unsynced writes and truncations in this process's
// memory, and hands them to the file system below only when the file is
// synced. A process that dies then loses exactly what a machine that
// loses power would: everything not yet synced. A SIGKILLed process on
// the operating system's file system loses nothing the kernel's page
// cache holds, so without this a local cluster cannot show what
// flush.policy=interval gives up (fjord verify --local runs its nodes on
// it, through serve's --unsynced-writes-in-memory).
//
// Only file data is held back. Directory entries (creating, renaming and
// removing names) reach the file system below at once, and a name
// created but never synced survives as an empty or short file, which a
// power cut can also leave. A file whose unsynced data reaches
// writeBackLimit is written to the file system below without a sync,
// as the kernel's own writeback does in time: that data then survives
// a process's death.
//
// Handles on one file share its unsynced data, whichever path they were
// opened by, as handles share an inode: a rename moves it with the name,
// and a removed file's open handles still read it.
type WriteBack struct {
	under FS
	// limit is writeBackLimit, smaller in tests.
	limit int

	mu sync.Mutex
	// files are the files with an open handle or unsynced data, by path.
	files map[string]*wbFile
}

// writeBackLimit bounds one file's unsynced data held in memory.
const writeBackLimit = 64 << 20

// NewWriteBack returns a WriteBack over under.
func NewWriteBack(under FS) *WriteBack {
	return &WriteBack{under: under, limit: writeBackLimit, files: make(map[string]*wbFile)}
}

// wbFile is one file's state: its size as its handles see it and the
// writes and truncations the file system below has not been given.
type wbFile struct {
	mu sync.RWMutex
	// path is where the file is now ("" once removed); guarded by
	// WriteBack.mu.
	path string
	// refs counts open handles; guarded by WriteBack.mu.
	refs int
	// size is the file's size with every pending operation applied.
	size int64
	// pending are the unsynced operations, oldest first.
	pending []wbOp
	// pendingBytes is the data the pending writes hold.
	pendingBytes int
	// writers are the open read-write handles below, any of which can
	// take the pending operations.
	writers []File
}

// wbOp is a write of data at off, or (data nil) a truncation to off.
type wbOp struct {
	off  int64
	data []byte
}

// wbHandle is one open handle.
type wbHandle struct {
	fs       *WriteBack
	file     *wbFile
	f        File // the handle below, for reads and for Sync
	name     string
	writable bool

	mu     sync.Mutex
	closed bool
}

var errWriteBackClosed = errors.New("vfs: file already closed")

// open gives a handle below its shared state.
func (w *WriteBack) open(name string, f File, writable, truncated bool) (File, error) {
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, err
	}
	name = filepath.Clean(name)
	w.mu.Lock()
	defer w.mu.Unlock()
	file := w.files[name]
	switch {
	case file == nil:
		file = &wbFile{path: name, size: size}
		w.files[name] = file
	case truncated: // Create emptied the file below: its pending data goes too
		file.mu.Lock()
		file.pending, file.pendingBytes, file.size = nil, 0, 0
		file.mu.Unlock()
	}
	file.refs++
	if writable {
		file.mu.Lock()
		file.writers = append(file.writers, f)
		file.mu.Unlock()
	}
	return &wbHandle{fs: w, file: file, f: f, name: f.Name(), writable: writable}, nil
}

// Create implements FS.
func (w *WriteBack) Create(name string) (File, error) {
	f, err := w.under.Create(name)
	if err != nil {
		return nil, err
	}
	return w.open(name, f, true, true)
}

// Open implements FS.
func (w *WriteBack) Open(name string) (File, error) {
	f, err := w.under.Open(name)
	if err != nil {
		return nil, err
	}
	return w.open(name, f, false, false)
}

// OpenReadWrite implements FS.
func (w *WriteBack) OpenReadWrite(name string) (File, error) {
	f, err := w.under.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return w.open(name, f, true, false)
}

// forget detaches the files at name and below from their paths: they
// were removed, or renamed over.
//
// REQUIRES: w.mu held.
func (w *WriteBack) forgetLocked(name string) {
	for p, file := range w.files {
		if p == name || strings.HasPrefix(p, name+string(filepath.Separator)) {
			delete(w.files, p)
			file.path = "" // its data, synced or not, has no name to reach
		}
	}
}

// Remove implements FS.
func (w *WriteBack) Remove(name string) error {
	if err := w.under.Remove(name); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(filepath.Clean(name))
	return nil
}

// RemoveAll implements FS.
func (w *WriteBack) RemoveAll(name string) error {
	if err := w.under.RemoveAll(name); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(filepath.Clean(name))
	return nil
}

// Rename implements FS. The renamed file (or every file under a renamed
// directory) keeps its unsynced data under the new name.
func (w *WriteBack) Rename(oldname, newname string) error {
	if err := w.under.Rename(oldname, newname); err != nil {
		return err
	}
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	w.mu.Lock()
	defer w.mu.Unlock()
	moved := map[string]*wbFile{}
	for p, file := range w.files {
		if p == oldname || strings.HasPrefix(p, oldname+string(filepath.Separator)) {
			moved[newname+p[len(oldname):]] = file
			delete(w.files, p)
		}
	}
	w.forgetLocked(newname)
	for p, file := range moved {
		file.path = p
		w.files[p] = file
	}
	return nil
}

// MkdirAll implements FS.
func (w *WriteBack) MkdirAll(dir string) error { return w.under.MkdirAll(dir) }

// List implements FS.
func (w *WriteBack) List(dir string) ([]string, error) { return w.under.List(dir) }

// SyncDir implements FS.
func (w *WriteBack) SyncDir(dir string) error { return w.under.SyncDir(dir) }

// Stat implements FS: a file's size is the one its handles see.
func (w *WriteBack) Stat(name string) (FileInfo, error) {
	info, err := w.under.Stat(name)
	if err != nil || info.IsDir {
		return info, err
	}
	w.mu.Lock()
	file := w.files[filepath.Clean(name)]
	w.mu.Unlock()
	if file != nil {
		file.mu.RLock()
		info.Size = file.size
		file.mu.RUnlock()
	}
	return info, nil
}

func (h *wbHandle) check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return &fs.PathError{Op: "use", Path: h.name, Err: errWriteBackClosed}
	}
	return nil
}

// ReadAt implements File: the file below as last synced, with the
// pending operations applied over it in order.
func (h *wbHandle) ReadAt(p []byte, off int64) (int, error) {
	if err := h.check(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: h.name, Err: fs.ErrInvalid}
	}
	if len(p) == 0 {
		return 0, nil
	}
	file := h.file
	file.mu.RLock()
	defer file.mu.RUnlock()
	if off >= file.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), file.size-off))
	buf := p[:n]
	got, err := h.f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	clear(buf[got:]) // past the end below: zeros, or pending writes
	for _, op := range file.pending {
		if op.data == nil { // a truncation: what was past it reads as zeros
			if op.off < off+int64(n) {
				clear(buf[max(op.off-off, 0):])
			}
			continue
		}
		lo, hi := max(op.off, off), min(op.off+int64(len(op.data)), off+int64(n))
		if lo < hi {
			copy(buf[lo-off:hi-off], op.data[lo-op.off:hi-op.off])
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt implements File. The data is kept until Sync.
func (h *wbHandle) WriteAt(p []byte, off int64) (int, error) {
	if err := h.check(); err != nil {
		return 0, err
	}
	if !h.writable {
		return 0, &fs.PathError{Op: "write", Path: h.name, Err: fs.ErrPermission}
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: h.name, Err: fs.ErrInvalid}
	}
	if len(p) == 0 {
		return 0, nil
	}
	file := h.file
	file.mu.Lock()
	defer file.mu.Unlock()
	last := len(file.pending) - 1
	if last >= 0 && file.pending[last].data != nil && file.pending[last].off+int64(len(file.pending[last].data)) == off {
		// An append to the last write: the log's own pattern, kept as
		// one operation.
		file.pending[last].data = append(file.pending[last].data, p...)
	} else {
		file.pending = append(file.pending, wbOp{off: off, data: append([]byte{}, p...)})
	}
	file.pendingBytes += len(p)
	file.size = max(file.size, off+int64(len(p)))
	if file.pendingBytes >= h.fs.limit {
		if _, err := h.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Truncate implements File. The truncation is kept until Sync.
func (h *wbHandle) Truncate(size int64) error {
	if err := h.check(); err != nil {
		return err
	}
	if !h.writable {
		return &fs.PathError{Op: "truncate", Path: h.name, Err: fs.ErrPermission}
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: h.name, Err: fs.ErrInvalid}
	}
	file := h.file
	file.mu.Lock()
	defer file.mu.Unlock()
	file.pending = append(file.pending, wbOp{off: size})
	file.size = size
	return nil
}

// flushLocked hands the pending operations to the file below, in order,
// without a sync, and returns the handle below that took them (nil when
// there were none).
//
// REQUIRES: file.mu held for writing.
func (h *wbHandle) flushLocked() (File, error) {
	file := h.file
	if len(file.pending) == 0 {
		return nil, nil
	}
	var w File
	switch {
	case h.writable:
		w = h.f
	case len(file.writers) > 0:
		w = file.writers[0]
	default:
		// Written through a handle since closed, synced through a
		// read-only one: open the file below for the writes.
		f, err := h.fs.under.OpenReadWrite(h.name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		w = f
	}
	for i, op := range file.pending {
		var err error
		if op.data == nil {
			err = w.Truncate(op.off)
		} else {
			_, err = w.WriteAt(op.data, op.off)
		}
		if err != nil {
			file.pending = file.pending[i:]
			return nil, err
		}
		file.pendingBytes -= len(op.data)
	}
	file.pending, file.pendingBytes = nil, 0
	if w != h.f && !slices.Contains(file.writers, w) {
		return nil, w.Sync() // the temporary handle, before it closes
	}
	return w, nil
}

// Sync implements File: the pending operations reach the file below,
// which is then synced.
func (h *wbHandle) Sync() error {
	if err := h.check(); err != nil {
		return err
	}
	file := h.file
	file.mu.Lock()
	defer file.mu.Unlock()
	w, err := h.flushLocked()
	if err != nil {
		return err
	}
	if w != nil && w != h.f {
		if err := w.Sync(); err != nil {
			return err
		}
	}
	return h.f.Sync()
}

// Size implements File.
func (h *wbHandle) Size() (int64, error) {
	if err := h.check(); err != nil {
		return 0, err
	}
	h.file.mu.RLock()
	defer h.file.mu.RUnlock()
	return h.file.size, nil
}

// Name implements File.
func (h *wbHandle) Name() string { return h.name }

// Close implements File. It does not sync: a file closed with unsynced
// data keeps it in memory, readable by the next handle, until a handle
// syncs it or the process ends.
func (h *wbHandle) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return &fs.PathError{Op: "close", Path: h.name, Err: errWriteBackClosed}
	}
	h.closed = true
	h.mu.Unlock()

	w, file := h.fs, h.file
	w.mu.Lock()
	file.mu.Lock()
	if h.writable {
		if i := slices.Index(file.writers, h.f); i >= 0 {
			file.writers = slices.Delete(file.writers, i, i+1)
		}
	}
	file.refs--
	if file.refs == 0 && len(file.pending) == 0 && file.path != "" && w.files[file.path] == file {
		delete(w.files, file.path)
	}
	file.mu.Unlock()
	w.mu.Unlock()
	return h.f.Close()
}
