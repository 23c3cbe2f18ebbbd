package replica

import (
	"encoding/base64"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage/checkpoint"
	"github.com/fjordmq/fjord/internal/vfs"
)

// The partition.metadata file, Kafka's name and format, in each partition
// log's directory:
//
//	version: 0
//	topic_id: <16 bytes, base64url without padding>
//
// It ties the log to the topic id it was created for. Logs are named by
// topic name, so a topic deleted and re-created under the same name while
// this node was down (or between two images it saw) would otherwise find
// the old topic's log on disk and serve its records as the new topic's.
// A log whose file names another id is deleted and created afresh.
//
// A log with no file (created before a crash that came before the file's
// write) is adopted by whatever topic owns its name, as Kafka does: the
// window is one atomic file write right after the log is created.
const partitionMetadataFile = "partition.metadata"

func encodePartitionMetadata(id metadata.UUID) []byte {
	return []byte("version: 0\ntopic_id: " + base64.RawURLEncoding.EncodeToString(id[:]) + "\n")
}

func parsePartitionMetadata(data []byte) (metadata.UUID, error) {
	var id metadata.UUID
	var sawVersion, sawID bool
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			return id, fmt.Errorf("line %q is not \"key: value\"", line)
		}
		value = strings.TrimSpace(value)
		switch strings.TrimSpace(key) {
		case "version":
			if value != "0" {
				return id, fmt.Errorf("version %q (known: 0)", value)
			}
			sawVersion = true
		case "topic_id":
			b, err := base64.RawURLEncoding.DecodeString(value)
			if err != nil || len(b) != len(id) {
				return id, fmt.Errorf("topic_id %q is not 16 bytes of base64url", value)
			}
			copy(id[:], b)
			sawID = true
		}
	}
	if !sawVersion || !sawID {
		return id, fmt.Errorf("missing version or topic_id")
	}
	return id, nil
}

// readPartitionMetadata returns the topic id recorded in logDir; found is
// false when there is no file.
func readPartitionMetadata(fsys vfs.FS, logDir string) (id metadata.UUID, found bool, err error) {
	path := filepath.Join(logDir, partitionMetadataFile)
	f, err := fsys.Open(path)
	if vfs.IsNotExist(err) {
		return id, false, nil
	}
	if err != nil {
		return id, false, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return id, false, err
	}
	if size > 4096 {
		return id, false, fmt.Errorf("%s: %d bytes, not a partition.metadata file", path, size)
	}
	data := make([]byte, size)
	if n, err := f.ReadAt(data, 0); err != nil && !(err == io.EOF && n == len(data)) {
		return id, false, err
	}
	if id, err = parsePartitionMetadata(data); err != nil {
		return id, false, fmt.Errorf("%s: %w", path, err)
	}
	return id, true, nil
}

func writePartitionMetadata(fsys vfs.FS, logDir string, id metadata.UUID) error {
	return checkpoint.WriteFileAtomic(fsys, filepath.Join(logDir, partitionMetadataFile), encodePartitionMetadata(id))
}
