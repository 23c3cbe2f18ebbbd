package storage

import (
	"os"
	"path/filepath"
	"slices"
)

// LogBytes reads the segment files of the partition log in dir through
// the operating system, concatenated in offset order. Followers copy
// their leader's batches byte for byte, so every in-sync replica of a
// quiet partition holds the same bytes here, wherever each rolled its
// segments: the cluster tests and fjord verify compare replicas with
// it. The log may be open elsewhere (a running node); what is read is
// whatever was written when each file was read.
func LogBytes(dir string) ([]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if _, ok := parseSegmentName(e.Name(), ".log"); ok {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names) // zero-padded base offsets sort as numbers
	var out []byte
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}
