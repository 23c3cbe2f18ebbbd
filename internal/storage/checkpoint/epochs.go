package checkpoint

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fjordmq/fjord/internal/vfs"
)

// EpochEntry says that leader epoch Epoch began at StartOffset: the first
// offset written by that epoch's leader.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// WriteEpochs atomically replaces path with a leader-epoch checkpoint
// holding entries, one "epoch startOffset" line each, in order. Entries
// must be as a leader-epoch cache holds them: epochs and start offsets
// both >= 0 and both strictly increasing (see ErrInvalidEntry).
func WriteEpochs(fs vfs.FS, path string, entries []EpochEntry) error {
	data, err := encodeEpochs(entries)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return WriteFileAtomic(fs, path, data)
}

func encodeEpochs(entries []EpochEntry) ([]byte, error) {
	if err := checkCount(len(entries)); err != nil {
		return nil, err
	}
	if i, why := checkEpochs(entries); why != "" {
		return nil, fmt.Errorf("%w: entry %d %+v: %s", ErrInvalidEntry, i, entries[i], why)
	}
	b := appendHeader(nil, len(entries))
	for _, e := range entries {
		b = strconv.AppendInt(b, int64(e.Epoch), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.StartOffset, 10)
		b = append(b, '\n')
	}
	return b, nil
}

// checkEpochs returns the index of the first entry that breaks the
// cache's invariant, and why; why is "" when all is well.
func checkEpochs(entries []EpochEntry) (int, string) {
	for i, e := range entries {
		switch {
		case e.Epoch < 0:
			return i, "negative epoch"
		case e.StartOffset < 0:
			return i, "negative start offset"
		case i > 0 && e.Epoch <= entries[i-1].Epoch:
			return i, "epoch not above the previous entry's"
		case i > 0 && e.StartOffset <= entries[i-1].StartOffset:
			return i, "start offset not above the previous entry's"
		}
	}
	return 0, ""
}

// ReadEpochs reads a leader-epoch checkpoint. A missing file is an empty
// slice and a nil error. A file that does not parse, or whose entries break
// the rules WriteEpochs enforces, is an error wrapping
// ErrCorruptCheckpoint; an I/O error is returned as is.
func ReadEpochs(fs vfs.FS, path string) ([]EpochEntry, error) {
	data, exists, err := readFile(fs, path)
	if err != nil {
		return nil, err
	}
	if !exists {
		return []EpochEntry{}, nil
	}
	return decodeEpochs(path, data)
}

func decodeEpochs(path string, data []byte) ([]EpochEntry, error) {
	lines, err := entryLines(path, data)
	if err != nil {
		return nil, err
	}
	entries := make([]EpochEntry, 0, len(lines))
	for i, line := range lines {
		fields := strings.Split(line, " ")
		if len(fields) != 2 {
			return nil, corrupt(path, "entry %d: want \"epoch startOffset\", got %q", i, line)
		}
		epoch, ok := parseInt(fields[0], 32)
		if !ok {
			return nil, corrupt(path, "entry %d: bad epoch in %q", i, line)
		}
		start, ok := parseInt(fields[1], 64)
		if !ok {
			return nil, corrupt(path, "entry %d: bad start offset in %q", i, line)
		}
		entries = append(entries, EpochEntry{Epoch: int32(epoch), StartOffset: start})
	}
	if i, why := checkEpochs(entries); why != "" {
		return nil, corrupt(path, "entry %d %+v: %s", i, entries[i], why)
	}
	return entries, nil
}
