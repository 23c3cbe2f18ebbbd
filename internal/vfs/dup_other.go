//go:build !unix

package vfs

import "os"

// DupOSFile is not offered here: callers read instead (ErrNotOSFile).
func DupOSFile(f File) (*os.File, error) { return nil, ErrNotOSFile }
