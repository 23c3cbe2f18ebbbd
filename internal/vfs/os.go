package vfs

import (
	"io/fs"
	"os"
)

// Default is the file system Fjord uses outside tests.
var Default FS = OS()

// OS returns the operating system's file system. Files are created 0o644
// and directories 0o755; umask applies.
func OS() FS { return osFS{} }

// OSFile returns the *os.File under f when f came from OS, so that a caller
// can hand its descriptor to sendfile. The File still owns the descriptor:
// the caller must not close it, and should use offset-taking calls since
// nothing else relies on the file position.
func OSFile(f File) (*os.File, bool) {
	of, ok := unwrap(f).(*osFile)
	if !ok {
		return nil, false
	}
	return of.f, true
}

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	// os.Open succeeds on a directory (it is how ReadDir works), but a
	// directory is never a File here; MemFS refuses it too.
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if info.IsDir() {
		_ = f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrIsDir}
	}
	return &osFile{f: f}, nil
}

func (osFS) OpenReadWrite(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) RemoveAll(name string) error          { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string) error            { return os.MkdirAll(dir, 0o755) }

func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) Stat(name string) (FileInfo, error) {
	info, err := os.Stat(name)
	if err != nil {
		return FileInfo{}, err
	}
	return FileInfo{Size: info.Size(), IsDir: info.IsDir()}, nil
}

func (osFS) SyncDir(dir string) error {
	// fsync on a directory descriptor is how Linux makes creations,
	// renames and removals in it durable.
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return err
	}
	return d.Close()
}

// osFile adapts *os.File: it has every File method but Size.
type osFile struct {
	f *os.File
}

func (o *osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o *osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o *osFile) Sync() error                              { return o.f.Sync() }
func (o *osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o *osFile) Close() error                             { return o.f.Close() }
func (o *osFile) Name() string                             { return o.f.Name() }

func (o *osFile) Size() (int64, error) {
	info, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}
