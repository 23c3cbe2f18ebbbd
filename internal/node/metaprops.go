package node

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/fjordmq/fjord/internal/storage/checkpoint"
	"github.com/fjordmq/fjord/internal/vfs"
)

// meta.properties ties a data directory to one node of one cluster, as
// Kafka's does: a Java properties file with version, node.id and
// cluster.id. It guards against the mistakes that lose data quietly:
// starting node 2 on node 1's disk (two brokers would then claim the same
// partitions), or pointing a node at the logs of another cluster.
//
// The file is written once the controller has published its first image
// (which carries the cluster id), atomically, and read before anything
// else opens the directory.

const metaPropertiesFile = "meta.properties"

type metaProperties struct {
	NodeID    int32
	ClusterID string // "" until the first start has learned it
}

// readMetaProperties returns the file's contents; exists is false when
// there is no file (a new data directory).
func readMetaProperties(fs vfs.FS, dir string) (props metaProperties, exists bool, err error) {
	path := filepath.Join(dir, metaPropertiesFile)
	f, err := fs.Open(path)
	if vfs.IsNotExist(err) {
		return metaProperties{}, false, nil
	}
	if err != nil {
		return metaProperties{}, false, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return metaProperties{}, false, err
	}
	if size > 64<<10 {
		return metaProperties{}, true, fmt.Errorf("%s is %d bytes, not a meta.properties file", path, size)
	}
	data := make([]byte, size)
	if n, err := f.ReadAt(data, 0); n < len(data) {
		return metaProperties{}, true, fmt.Errorf("reading %s: %w", path, err)
	}
	kv := parseProperties(data)
	id, ok := kv["node.id"]
	if !ok {
		return metaProperties{}, true, fmt.Errorf("%s has no node.id: fix or remove the file", path)
	}
	n, err := strconv.ParseInt(id, 10, 32)
	if err != nil || n < 0 {
		return metaProperties{}, true, fmt.Errorf("%s: node.id %q is not a node id: fix or remove the file", path, id)
	}
	return metaProperties{NodeID: int32(n), ClusterID: kv["cluster.id"]}, true, nil
}

// parseProperties reads key=value lines, skipping blank lines and
// comments (# or !). It is the subset of the properties format that
// Kafka writes; keys and values are trimmed.
func parseProperties(data []byte) map[string]string {
	kv := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return kv
}

func writeMetaProperties(fs vfs.FS, dir string, props metaProperties) error {
	kv := map[string]string{
		"version": "1",
		"node.id": strconv.FormatInt(int64(props.NodeID), 10),
	}
	if props.ClusterID != "" {
		kv["cluster.id"] = props.ClusterID
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteString("# Written by fjord. Ties this data directory to one node of one cluster.\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, kv[k])
	}
	return checkpoint.WriteFileAtomic(fs, filepath.Join(dir, metaPropertiesFile), b.Bytes())
}
