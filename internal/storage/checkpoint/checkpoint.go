// Package checkpoint writes Fjord's small metadata files atomically and
// reads and writes the checkpoint files Kafka keeps beside its logs: the
// offset checkpoints of a log directory (recovery-point-offset-checkpoint,
// replication-offset-checkpoint holding high watermarks,
// log-start-offset-checkpoint, cleaner-offset-checkpoint) and each
// partition's leader-epoch-checkpoint.
//
// File format (Kafka's CheckpointFile), ASCII, every line ended by '\n':
//
//	0\n                               version; 0 for both kinds
//	<count>\n                         number of entry lines that follow
//	<topic> <partition> <offset>\n    offset checkpoints, or
//	<epoch> <startOffset>\n           the leader-epoch checkpoint
//	...                               count lines in all, then end of file
//
// Reading is stricter than Kafka's reader, which splits on any whitespace
// and accepts "+7" or "007". Fjord reads only files it wrote, so anything
// but the exact form above is damage: numbers must be canonical decimal,
// fields separated by one space, the count exact, the last line ended by a
// newline and nothing after it. Leniency would turn some damage into wrong
// answers: a file cut inside "1000\n" still parses as 100 unless the final
// newline is required. Damage is an error wrapping ErrCorruptCheckpoint,
// never a panic, and never an allocation sized by what the file claims.
package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fjordmq/fjord/internal/vfs"
)

// Errors.
var (
	// ErrCorruptCheckpoint is wrapped by every error that reports a
	// checkpoint file that does not parse. The caller decides what a
	// damaged checkpoint costs (Kafka falls back to recovering the whole
	// log when the recovery point is unreadable).
	ErrCorruptCheckpoint = errors.New("corrupt checkpoint file")
	// ErrInvalidEntry is wrapped by a Write error for an entry the format
	// cannot hold or the reader would reject: an empty topic or one with a
	// space or newline in it, a negative partition, offset or epoch, or
	// leader epochs out of order. Nothing is written.
	ErrInvalidEntry = errors.New("invalid checkpoint entry")
)

// formatVersion is the only version Fjord writes or reads, for both kinds
// of file (Kafka's is 0 for both as well).
const formatVersion = 0

// maxFileBytes bounds how much a reader will load. A million partitions'
// worth of offset lines is about 50 MiB; past this the size is damage.
const maxFileBytes = 256 << 20

// WriteFileAtomic replaces path with data so that a crash at any point
// leaves either the old file or the new one, whole: it writes path+".tmp",
// syncs and closes it, renames it over path and syncs the directory.
// Until the final sync returns the new file may be lost at a crash; once
// WriteFileAtomic returns nil it is durable.
//
// The caller serializes writes to one path: two concurrent writers would
// share the temporary file. On error the temporary file is removed if
// possible; a crash can leave one behind, which the next write replaces
// and readers never look at.
func WriteFileAtomic(fs vfs.FS, path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fail := func(err error) error {
		_ = fs.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		_ = f.Close()
		return fail(err)
	}
	// The rename must not become durable before the data: without this
	// sync a crash could leave path naming an empty or partial file.
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := fs.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if err := fs.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readFile returns path's contents; exists is false, with a nil error,
// when there is no such file.
func readFile(fs vfs.FS, path string) (data []byte, exists bool, err error) {
	f, err := fs.Open(path)
	if vfs.IsNotExist(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, false, err
	}
	if size > maxFileBytes {
		return nil, false, corrupt(path, "%d bytes, more than any checkpoint file Fjord writes", size)
	}
	data = make([]byte, size)
	n, err := f.ReadAt(data, 0)
	if err != nil && !(err == io.EOF && n == len(data)) {
		return nil, false, err
	}
	return data, true, nil
}

func corrupt(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrCorruptCheckpoint, path, fmt.Sprintf(format, args...))
}

// entryLines checks the version and count lines of a checkpoint file and
// returns its entry lines, without their newlines. The count is checked
// against the lines actually present, so a count claiming billions of
// entries costs nothing.
func entryLines(path string, data []byte) ([]string, error) {
	// Every file Fjord writes, even one with no entries, ends in a newline;
	// an empty file is damage too.
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return nil, corrupt(path, "does not end with a newline")
	}
	lines := strings.Split(string(data[:len(data)-1]), "\n")
	if v, ok := parseInt(lines[0], 32); !ok || v != formatVersion {
		return nil, corrupt(path, "unsupported version line %q", lines[0])
	}
	if len(lines) < 2 {
		return nil, corrupt(path, "no entry count")
	}
	count, ok := parseInt(lines[1], 32)
	if !ok || count < 0 {
		return nil, corrupt(path, "bad entry count %q", lines[1])
	}
	entries := lines[2:]
	if int64(len(entries)) != count {
		return nil, corrupt(path, "entry count says %d, file holds %d entry lines", count, len(entries))
	}
	return entries, nil
}

// appendHeader starts a checkpoint file of count entries.
func appendHeader(b []byte, count int) []byte {
	b = strconv.AppendInt(b, formatVersion, 10)
	b = append(b, '\n')
	b = strconv.AppendInt(b, int64(count), 10)
	return append(b, '\n')
}

// parseInt parses s as a canonical decimal integer of the given bit size:
// what strconv.FormatInt produces, so no sign on positives, no leading
// zeros, no "-0", no spaces.
func parseInt(s string, bits int) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, bits)
	if err != nil || strconv.FormatInt(v, 10) != s {
		return 0, false
	}
	return v, true
}

// checkCount refuses more entries than the count line may claim.
func checkCount(n int) error {
	if n > math.MaxInt32 {
		return fmt.Errorf("%w: %d entries, more than the count line can hold", ErrInvalidEntry, n)
	}
	return nil
}
