package checkpoint

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/fjordmq/fjord/internal/vfs"
)

// TopicPartition names a partition in an offset checkpoint.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string {
	return tp.Topic + "-" + strconv.FormatInt(int64(tp.Partition), 10)
}

// WriteOffsets atomically replaces path with an offset checkpoint holding
// offsets, one "topic partition offset" line each, sorted by topic then
// partition so the same map always gives the same bytes. Every offset must
// be >= 0 and every partition valid (see ErrInvalidEntry).
func WriteOffsets(fs vfs.FS, path string, offsets map[TopicPartition]int64) error {
	data, err := encodeOffsets(offsets)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return WriteFileAtomic(fs, path, data)
}

func encodeOffsets(offsets map[TopicPartition]int64) ([]byte, error) {
	if err := checkCount(len(offsets)); err != nil {
		return nil, err
	}
	keys := slices.SortedFunc(maps.Keys(offsets), func(a, b TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	b := appendHeader(nil, len(keys))
	for _, tp := range keys {
		offset := offsets[tp]
		switch {
		case tp.Topic == "" || strings.ContainsAny(tp.Topic, " \n"):
			return nil, fmt.Errorf("%w: topic %q", ErrInvalidEntry, tp.Topic)
		case tp.Partition < 0:
			return nil, fmt.Errorf("%w: %v: negative partition", ErrInvalidEntry, tp)
		case offset < 0:
			return nil, fmt.Errorf("%w: %v: negative offset %d", ErrInvalidEntry, tp, offset)
		}
		b = append(b, tp.Topic...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(tp.Partition), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, offset, 10)
		b = append(b, '\n')
	}
	return b, nil
}

// ReadOffsets reads an offset checkpoint. A missing file is an empty map
// and a nil error (a log directory's first start). A file that does not
// parse, repeats a partition, or holds a negative partition or offset is
// an error wrapping ErrCorruptCheckpoint; an I/O error is returned as is.
func ReadOffsets(fs vfs.FS, path string) (map[TopicPartition]int64, error) {
	data, exists, err := readFile(fs, path)
	if err != nil {
		return nil, err
	}
	if !exists {
		return map[TopicPartition]int64{}, nil
	}
	return decodeOffsets(path, data)
}

func decodeOffsets(path string, data []byte) (map[TopicPartition]int64, error) {
	lines, err := entryLines(path, data)
	if err != nil {
		return nil, err
	}
	offsets := make(map[TopicPartition]int64, len(lines))
	for i, line := range lines {
		fields := strings.Split(line, " ")
		if len(fields) != 3 || fields[0] == "" {
			return nil, corrupt(path, "entry %d: want \"topic partition offset\", got %q", i, line)
		}
		partition, ok := parseInt(fields[1], 32)
		if !ok || partition < 0 {
			return nil, corrupt(path, "entry %d: bad partition in %q", i, line)
		}
		offset, ok := parseInt(fields[2], 64)
		if !ok || offset < 0 {
			return nil, corrupt(path, "entry %d: bad offset in %q", i, line)
		}
		tp := TopicPartition{Topic: fields[0], Partition: int32(partition)}
		if _, dup := offsets[tp]; dup {
			return nil, corrupt(path, "entry %d: %v appears twice", i, tp)
		}
		offsets[tp] = offset
	}
	return offsets, nil
}
