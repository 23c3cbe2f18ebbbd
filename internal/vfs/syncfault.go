package vfs

// SyncFaults wraps a file system so that chosen syncs fail: a fault
// injection for a real process (a test that starts `fjord serve` cannot
// reach into it to set a MemFS hook). Every File.Sync and FS.SyncDir
// first asks fail with the path (the file's, as it was opened, or the
// directory's); a non-nil answer is returned and nothing is synced. The
// rest passes through to the file system below untouched, and its files
// stay what they are: an operating-system file still hands its
// descriptor to sendfile (DupOSFile, OSFile).
//
// The node builds one only when told to by internal/failpoint's
// FJORD_FSYNC_EIO; without it, the node's file system is not wrapped at
// all, so the data path pays nothing.
func SyncFaults(under FS, fail func(name string) error) FS {
	return &syncFaultFS{FS: under, fail: fail}
}

type syncFaultFS struct {
	FS
	fail func(name string) error
}

type syncFaultFile struct {
	File
	fail func(name string) error
}

// unwrapFile is how DupOSFile and OSFile find the file below.
func (f *syncFaultFile) unwrapFile() File { return f.File }

func (f *syncFaultFile) Sync() error {
	if err := f.fail(f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (s *syncFaultFS) wrap(f File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &syncFaultFile{File: f, fail: s.fail}, nil
}

func (s *syncFaultFS) Create(name string) (File, error) { return s.wrap(s.FS.Create(name)) }
func (s *syncFaultFS) Open(name string) (File, error)   { return s.wrap(s.FS.Open(name)) }
func (s *syncFaultFS) OpenReadWrite(name string) (File, error) {
	return s.wrap(s.FS.OpenReadWrite(name))
}

func (s *syncFaultFS) SyncDir(dir string) error {
	if err := s.fail(dir); err != nil {
		return err
	}
	return s.FS.SyncDir(dir)
}

// unwrap returns the file below f's wrappers (SyncFaults').
func unwrap(f File) File {
	for {
		w, ok := f.(interface{ unwrapFile() File })
		if !ok {
			return f
		}
		f = w.unwrapFile()
	}
}
