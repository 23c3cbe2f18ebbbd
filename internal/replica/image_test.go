package replica

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/topicconfig"
	"github.com/fjordmq/fjord/internal/vfs"
)

func TestApplyImageCreates(t *testing.T) {
	e := newEnv(t, "")
	if e.m.Ready() {
		t.Fatal("ready before any image")
	}
	other := withPartition(newTopic("elsewhere", 2, 2, nil), 0, func(p *metadata.Partition) {
		p.Replicas, p.ISR, p.Leader = []int32{2}, []int32{2}, 2
	})
	e.put(newTopic("a", 1, 3, nil), other)
	if !e.m.Ready() {
		t.Fatal("not ready")
	}
	for i := range int32(3) {
		l := e.log("a", i)
		id, found, err := readPartitionMetadata(vfs.OS(), l.Dir())
		if err != nil || !found || id != topicID(1) {
			t.Fatalf("a-%d partition.metadata: %x %v %v", i, id, found, err)
		}
	}
	// Only the partitions that name this node among their replicas.
	if _, ok := e.storage.Log(storage.TopicPartition{Topic: "elsewhere", Partition: 0}); ok {
		t.Fatal("log created for a partition on another node")
	}
	e.log("elsewhere", 1)
	if _, err := e.m.Append(context.Background(), "elsewhere", 0, batch(t, "x", 1, 0), AcksLeader, time.Second); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("produce to a partition not hosted here: %v", err)
	}
}

func TestApplyImageConfigChange(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("a", 1, 1, nil), newTopic("b", 2, 1, nil))
	la, lb := e.log("a", 0), e.log("b", 0)
	if la.Config() != storage.DefaultConfig() {
		t.Fatalf("no overrides: %+v", la.Config())
	}
	e.put(withConfigs(e.topics["a"], map[string]string{
		"retention.ms": "1000", "flush.policy": "interval", "message.timestamp.type": "LogAppendTime",
	}))
	cfg := la.Config()
	if cfg.RetentionMs != 1000 || cfg.FlushPolicy != storage.FlushInterval || !cfg.LogAppendTime {
		t.Fatalf("config after change: %+v", cfg)
	}
	if lb.Config() != storage.DefaultConfig() {
		t.Fatalf("another topic's change touched b: %+v", lb.Config())
	}
	if res := e.append("a", 0, batch(t, "x", 1, 1), AcksLeader); res.LogAppendTime <= 1 {
		t.Fatalf("LogAppendTime not applied: %+v", res)
	}
	// Removing the override goes back to the default.
	e.put(withConfigs(e.topics["a"], nil))
	if la.Config() != storage.DefaultConfig() {
		t.Fatalf("after removing overrides: %+v", la.Config())
	}
	// A value the log refuses leaves the defaults, and the partition works.
	e.put(withConfigs(e.topics["a"], map[string]string{"segment.bytes": "1"}))
	if la.Config() != storage.DefaultConfig() {
		t.Fatalf("refused config applied: %+v", la.Config())
	}
	e.append("a", 0, batch(t, "y", 1, 1), AcksLeader)
}

func TestApplyImageDelete(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("a", 1, 2, nil), newTopic("b", 2, 1, nil))
	e.append("a", 0, batch(t, "x", 1, 0), AcksLeader)
	dir := e.logDir("a", 0)
	e.remove("a")
	for i := range int32(2) {
		if _, ok := e.storage.Log(storage.TopicPartition{Topic: "a", Partition: i}); ok {
			t.Fatalf("a-%d still open after delete", i)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("log directory still there: %v", err)
	}
	if _, err := e.m.Append(context.Background(), "a", 0, batch(t, "x", 1, 0), AcksLeader, time.Second); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("produce to deleted topic: %v", err)
	}
	e.log("b", 0)
}

func TestApplyImageRecreateWithNewID(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("a", 1, 1, nil))
	e.append("a", 0, batch(t, "old", 3, 0), AcksLeader)
	// Deleted and re-created between two images: same name, new id.
	e.put(newTopic("a", 7, 1, nil))
	l := e.log("a", 0)
	if l.LogEndOffset() != 0 {
		t.Fatalf("re-created topic kept the old log: log end offset %d", l.LogEndOffset())
	}
	if id, _, _ := readPartitionMetadata(vfs.OS(), l.Dir()); id != topicID(7) {
		t.Fatalf("partition.metadata has %x", id)
	}
	res := e.append("a", 0, batch(t, "new", 1, 0), AcksLeader)
	f := e.m.Fetch(context.Background(), consumerFetch(0, 0), []FetchPartition{part("a", 0, 0)})
	defer f.Release()
	if got := values(t, f.Partitions[0].Records); res.BaseOffset != 0 || !slices.Equal(got, []string{"new-0"}) {
		t.Fatalf("re-created topic reads %q (base %d)", got, res.BaseOffset)
	}
}

// A restart finds logs on disk that the image no longer explains.
func TestApplyImageAfterRestart(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, dir)
	e.put(newTopic("keep", 1, 1, nil), newTopic("gone", 2, 1, nil), newTopic("renewed", 3, 1, nil))
	e.append("keep", 0, batch(t, "k", 2, 0), AcksLeader)
	e.append("gone", 0, batch(t, "g", 2, 0), AcksLeader)
	e.append("renewed", 0, batch(t, "r", 2, 0), AcksLeader)
	e.close()

	// While the node was down: "gone" deleted, "renewed" deleted and
	// re-created (new id). A directory that is no log is left alone.
	if err := os.Mkdir(filepath.Join(dir, "not-a-log"), 0o755); err != nil {
		t.Fatal(err)
	}
	e2 := newEnv(t, dir)
	e2.put(newTopic("keep", 1, 1, nil), newTopic("renewed", 9, 1, nil))
	if !e2.m.Ready() {
		t.Fatal("not ready")
	}
	if l := e2.log("keep", 0); l.LogEndOffset() != 2 || l.HighWatermark() != 2 {
		t.Fatalf("kept log: log end %d, high watermark %d", l.LogEndOffset(), l.HighWatermark())
	}
	if _, ok := e2.storage.Log(storage.TopicPartition{Topic: "gone", Partition: 0}); ok {
		t.Fatal("stray log of a deleted topic still open")
	}
	if _, err := os.Stat(filepath.Join(dir, "gone-0")); !os.IsNotExist(err) {
		t.Fatalf("stray log directory: %v", err)
	}
	if l := e2.log("renewed", 0); l.LogEndOffset() != 0 {
		t.Fatalf("re-created topic reuses the old log: log end %d", l.LogEndOffset())
	}
	if _, err := os.Stat(filepath.Join(dir, "not-a-log")); err != nil {
		t.Fatalf("non-log directory removed: %v", err)
	}
	res := e2.m.Fetch(context.Background(), consumerFetch(0, 0), []FetchPartition{part("keep", 0, 0)})
	defer res.Release()
	if got := values(t, res.Partitions[0].Records); !slices.Equal(got, []string{"k-0", "k-1"}) {
		t.Fatalf("kept log reads %q", got)
	}
}

// A log on disk without partition.metadata (its creation was cut short
// by a crash) is adopted by the topic of its name.
func TestApplyImageAdoptsLogWithoutPartitionMetadata(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, dir)
	e.put(newTopic("a", 1, 1, nil))
	e.append("a", 0, batch(t, "x", 2, 0), AcksLeader)
	e.close()
	if err := os.Remove(filepath.Join(dir, "a-0", partitionMetadataFile)); err != nil {
		t.Fatal(err)
	}
	e2 := newEnv(t, dir)
	e2.put(newTopic("a", 1, 1, nil))
	l := e2.log("a", 0)
	if l.LogEndOffset() != 2 {
		t.Fatalf("adopted log end %d", l.LogEndOffset())
	}
	if id, found, err := readPartitionMetadata(vfs.OS(), l.Dir()); !found || err != nil || id != topicID(1) {
		t.Fatalf("partition.metadata not rewritten: %x %v %v", id, found, err)
	}
}

func TestApplyImageLeadershipChange(t *testing.T) {
	e := newEnv(t, "")
	base := withPartition(newTopic("a", 1, 1, nil), 0, func(p *metadata.Partition) {
		p.Replicas, p.ISR = []int32{1, 2}, []int32{1}
	})
	e.put(base)
	e.append("a", 0, batch(t, "x", 1, 0), AcksLeader)
	e.put(withPartition(base, 0, func(p *metadata.Partition) { p.Leader, p.LeaderEpoch = 2, 1 }))
	if _, err := e.m.Append(context.Background(), "a", 0, batch(t, "y", 1, 0), AcksLeader, time.Second); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("produce after losing leadership: %v", err)
	}
	// A stale image (lower epoch) does not bring leadership back.
	e.put(withPartition(base, 0, func(p *metadata.Partition) { p.Leader, p.LeaderEpoch = 1, 0 }))
	if _, err := e.m.Append(context.Background(), "a", 0, batch(t, "y", 1, 0), AcksLeader, time.Second); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("produce after a stale image: %v", err)
	}
	// Leadership back at a new epoch: batches are stamped with it and the
	// leader-epoch cache records where it starts.
	e.put(withPartition(base, 0, func(p *metadata.Partition) { p.Leader, p.LeaderEpoch = 1, 2 }))
	res := e.append("a", 0, batch(t, "z", 1, 0), AcksLeader)
	epoch, end, err := e.m.EndOffsetForEpoch("a", 0, 2, 0)
	if err != nil || epoch != 0 || end != res.BaseOffset {
		t.Fatalf("end of epoch 0: %d %d %v, want 0 %d", epoch, end, err, res.BaseOffset)
	}
}

// An image with no cluster id is not the committed metadata (it is
// metadata.Empty(), or earlier than the first record): it must not make
// the manager delete the logs it does not name.
func TestApplyImageWithoutClusterIDKeepsLogs(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, dir)
	e.put(newTopic("a", 1, 1, nil))
	e.append("a", 0, batch(t, "x", 2, 0), AcksLeader)
	e.close()

	e2 := newEnv(t, dir)
	e2.m.ApplyImage(metadata.Empty(topicconfig.New(storage.TopicConfigs(), TopicConfigs(), metadata.KafkaTopicConfigs())))
	if l := e2.log("a", 0); l.LogEndOffset() != 2 {
		t.Fatalf("log end %d after an empty image", l.LogEndOffset())
	}
	e2.put(newTopic("a", 1, 1, nil))
	if l := e2.log("a", 0); l.LogEndOffset() != 2 {
		t.Fatalf("log end %d after the real image", l.LogEndOffset())
	}
}
