//go:build !unix

package node

// On systems without flock the data directory is not locked; Fjord is
// developed and tested on Linux.
type dirLock struct{}

func lockDataDir(string) (*dirLock, error) { return &dirLock{}, nil }

func (l *dirLock) unlock() error { return nil }
