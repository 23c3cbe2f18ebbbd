package replica

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Options configure a Manager.
type Options struct {
	NodeID  int32
	Storage *storage.Manager
	// Defaults is the log config of a topic that overrides nothing; the
	// topic's configs from the metadata image override it field by field.
	Defaults storage.Config
	Logger   *slog.Logger
	// Now is the clock of the followers' lag (replica.lag.time.max.ms).
	Now func() time.Time
	// ISR commits the ISR changes this node asks for as a leader (the
	// forwarding control-plane client). nil: the ISR never changes (unit
	// tests of one replica).
	ISR controlplane.ISR
	// ReplicaLagTime is replica.lag.time.max.ms: how long a follower
	// may go without catching up before it leaves the ISR. 0:
	// DefaultReplicaLagTime.
	ReplicaLagTime time.Duration
	// Leaders carries the fetches of the partitions this node follows
	// to their leaders (fetcher.go). nil: this node copies nothing (unit
	// tests of the leader side).
	Leaders LeaderTransport
	// FS is the file system under Storage, for the partition.metadata
	// files the manager keeps beside each log. Default: vfs.OS().
	FS vfs.FS
	// DataDir is Storage's data directory, as DescribeLogDirs reports it
	// (and the file system whose space it reports).
	DataDir string
	// Lease says whether this node may answer clients as a leader now
	// (node/lease.go): without it, produce, consumer fetches, offset
	// lookups and record deletions on partitions it leads are refused
	// NOT_LEADER_OR_FOLLOWER; followers' fetches are still served. nil:
	// always held. Its owner calls LeaseLapsed when it lapses, for the
	// requests already waiting (lease.go).
	Lease interface{ Held() bool }
	// ReplicaSelector is replica.selector.class: whether, as a leader,
	// this node names consumers a replica in their rack to read from
	// (selector.go). Zero: SelectLeader.
	ReplicaSelector ReplicaSelector
	// KeyedAppend is told when a partition this node leads first
	// appends a record with a key (storage.AppendInfo.Keyed): at most
	// once per partition object, from the produce path's goroutine,
	// after the append and before its acks wait. It must not block
	// (the node starts its mark in the background). nil: nobody is
	// told.
	KeyedAppend func(topic string, topicID metadata.UUID)
	// LogFailed is told, once per partition, that the log of a
	// partition this node hosts failed (a write or fsync error): the
	// replica is offline until the process restarts (offline.go), and
	// the node reports it to the controller (OfflineReplicas lists
	// them). It runs on a goroutine of the manager's and must not
	// block. nil: nobody is told.
	LogFailed func(topic string, topicID metadata.UUID, partition int32)
	// FreeSpaceWarn and FreeSpaceRefuse are the node's
	// log.dir.free.space.warn and .refuse (--log-dir-free-space-warn,
	// --log-dir-free-space-refuse), in force where the metadata image
	// sets neither for this broker (diskpressure.go). Zero: no
	// threshold (a client append still never takes the disk past full).
	FreeSpaceWarn, FreeSpaceRefuse metadata.FreeSpace
	// DiskPollInterval is how often the data directory's free space is
	// read. 0: DefaultDiskPollInterval.
	DiskPollInterval time.Duration
}

// Manager is the replica manager: the partitions this node hosts, built
// from metadata images, and the produce, fetch and offset requests on
// them. See doc.go for threads and locks.
type Manager struct {
	opts Options
	log  *slog.Logger

	// table is the partitions by name and the topic ids, replaced whole
	// by ApplyImage (copy-on-write), so request paths look partitions up
	// without a lock.
	table atomic.Pointer[partitionTable]
	ready atomic.Bool

	// applyMu serializes ApplyImage and Close. ApplyImage has one caller
	// (the controller's publisher), but Close may come from anywhere.
	applyMu   sync.Mutex
	lastImage *metadata.Image // the image last applied; guarded by applyMu
	// image is the image being applied or last applied, for the fetch
	// path, which reads the brokers' racks and states from it without
	// applyMu (the read-replica choice, and whether a follower may join
	// an ISR); nil before the first. ApplyImage stores it before it
	// updates the partitions, as Kafka's publisher updates its metadata
	// cache first: a partition's state is never newer than the brokers
	// read beside it.
	image atomic.Pointer[metadata.Image]

	// lifecycle guards background goroutines against Close: they are
	// added to wg only while not closed, so Close's Wait cannot race an
	// Add.
	lifecycle struct {
		sync.RWMutex
		closed bool
	}
	wg sync.WaitGroup

	// brokerEpoch is this node's broker epoch from the latest image
	// (its latest registration), which its requests to the controller
	// and to leaders carry.
	brokerEpoch atomic.Int64
	// leaseLapses counts the lapses of this node's leader lease that
	// LeaseLapsed was told of. A write remembers the count it was made
	// under, and a delayed produce the high watermark has not passed is
	// answered NOT_LEADER_OR_FOLLOWER once the count moves (lease.go).
	// Invariant: only grows.
	leaseLapses atomic.Uint64
	// closing is closed by Close: background loops stop.
	closing chan struct{}
	// fetchers copies the partitions this node follows (fetcher.go).
	fetchers *fetchers

	stats struct {
		isrShrinks, isrExpands        atomic.Int64
		fetchedBytes, fetchedBatches  atomic.Int64
		truncations, truncatedRecords atomic.Int64
		// throttledBytes counts what the fetchers appended for replicas
		// a reassignment is adding (the throttled ones).
		throttledBytes atomic.Int64
	}
	// throttle is follower.replication.throttled.rate, set from each
	// image (throttle.go).
	throttle byteRate
	// disk is the data directory's free space and the produce refusal
	// under disk pressure (diskpressure.go).
	disk *diskPressure
	// replay is the budget of consumer reads far behind the log end
	// (replay.go), set from each image.
	replay replayBudget
}

type partitionTable struct {
	partitions map[storage.TopicPartition]*Partition
	topicIDs   map[metadata.UUID]string
}

var emptyTable = &partitionTable{
	partitions: map[storage.TopicPartition]*Partition{},
	topicIDs:   map[metadata.UUID]string{},
}

// NewManager returns a manager with no partitions; ApplyImage gives it
// some. It does not take ownership of Storage.
func NewManager(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.FS == nil {
		opts.FS = vfs.OS()
	}
	if opts.ReplicaLagTime <= 0 {
		opts.ReplicaLagTime = DefaultReplicaLagTime
	}
	m := &Manager{opts: opts, log: opts.Logger, closing: make(chan struct{})}
	m.brokerEpoch.Store(-1)
	m.table.Store(emptyTable)
	m.fetchers = newFetchers(m)
	if opts.Storage != nil {
		opts.Storage.OnLogFailure(m.logFailed) // offline.go
	}
	disk := newDiskPressure(m, opts.FreeSpaceWarn, opts.FreeSpaceRefuse)
	disk.check()
	m.disk = disk
	m.goBackground(func() { disk.run(cmp.Or(opts.DiskPollInterval, DefaultDiskPollInterval)) })
	if opts.ISR != nil {
		m.goBackground(m.runISRChecks)
	}
	return m
}

// Ready reports whether an image has been applied and every partition it
// gives this node is open.
func (m *Manager) Ready() bool { return m.ready.Load() }

// Close wakes every waiting request, which answers NOT_LEADER (the
// client retries elsewhere or after the restart), refuses new ones the
// same way and waits for the manager's background flushes. It does not
// close Storage: the node does, after this.
func (m *Manager) Close() error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.lifecycle.Lock()
	if m.lifecycle.closed {
		m.lifecycle.Unlock()
		return nil
	}
	m.lifecycle.closed = true
	close(m.closing)
	m.lifecycle.Unlock()
	m.fetchers.stopAll()
	closed := fmt.Errorf("%w: replica manager closed", ErrNotLeader)
	for _, p := range m.table.Load().partitions {
		p.retire(closed)
	}
	m.ready.Store(false)
	m.wg.Wait()
	return nil
}

func (m *Manager) closed() bool {
	m.lifecycle.RLock()
	defer m.lifecycle.RUnlock()
	return m.lifecycle.closed
}

// goBackground runs fn on its own goroutine, which Close waits for; it
// returns false, running nothing, once the manager is closed.
func (m *Manager) goBackground(fn func()) bool {
	m.lifecycle.RLock()
	defer m.lifecycle.RUnlock()
	if m.lifecycle.closed {
		return false
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		fn()
	}()
	return true
}

// partition finds a partition by name; topicID, when not zero, must be
// the topic's (Fetch v13+ names topics by id only; kafkaserver resolves
// the name, and a stale id means the topic was re-created).
func (m *Manager) partition(topic string, topicID metadata.UUID, partition int32) (*Partition, error) {
	t := m.table.Load()
	if topicID != (metadata.UUID{}) {
		name, ok := t.topicIDs[topicID]
		if !ok || (topic != "" && topic != name) {
			return nil, fmt.Errorf("%w: %s", ErrUnknownTopicID, topicID)
		}
		topic = name
	}
	p, ok := t.partitions[storage.TopicPartition{Topic: topic, Partition: partition}]
	if !ok {
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, topic, partition)
	}
	return p, nil
}

// Partition returns the partition named, if this node hosts it.
func (m *Manager) Partition(topic string, partition int32) (*Partition, bool) {
	p, ok := m.table.Load().partitions[storage.TopicPartition{Topic: topic, Partition: partition}]
	return p, ok
}

// ApplyImage reacts to a new metadata image: it opens (creating if
// needed) the log of every partition that names this node among its
// replicas, applies leadership, ISR and topic configs, and deletes the
// logs of partitions this node no longer hosts: topics deleted (or
// re-created with a new id), and logs on disk that no topic in the image
// owns, such as those of a topic deleted while the node was down.
//
// Called from one goroutine, in image order. The image must be complete
// (the controller publishes only images it has caught up to): a log on
// disk that the image does not know is deleted, so an image missing
// topics would delete their data.
func (m *Manager) ApplyImage(img *metadata.Image) {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	if m.closed() || img == nil {
		return
	}
	m.image.Store(img)
	old := m.table.Load()
	next := &partitionTable{
		partitions: make(map[storage.TopicPartition]*Partition, len(old.partitions)),
		topicIDs:   make(map[metadata.UUID]string, len(img.Topics)),
	}
	var prevTopics map[string]*metadata.Topic
	if m.lastImage != nil {
		prevTopics = m.lastImage.Topics
	}
	failed := map[storage.TopicPartition]bool{}
	hosted := map[storage.TopicPartition]bool{}
	for name, topic := range img.Topics {
		next.topicIDs[topic.ID] = name
		// Images are copy-on-write: an unchanged topic is the same
		// pointer, and its partitions need nothing (unless one failed to
		// open last time). This keeps a config change on one topic from
		// costing a pass over every partition of the node.
		unchanged := prevTopics[name] == topic
		var (
			cfg      storage.Config
			settings topicSettings
			computed bool
		)
		topicConfig := func() {
			if computed {
				return
			}
			computed = true
			var err error
			if cfg, err = storageConfig(m.opts.Defaults, topic); err != nil {
				m.log.Error("topic config refused by the log; using the defaults", "topic", name, "err", err)
			}
			if settings.minInsync, err = minInsyncReplicas(topic); err != nil {
				m.log.Error("bad min.insync.replicas; using the default for the replication factor", "topic", name, "min_insync_replicas", settings.minInsync, "err", err)
			}
			settings.migratedTo = topic.Configs[metadata.MigratedToConfig]
		}
		for i := range topic.Partitions {
			part := &topic.Partitions[i]
			if !slices.Contains(part.Replicas, m.opts.NodeID) {
				continue
			}
			tp := storage.TopicPartition{Topic: name, Partition: int32(i)}
			hosted[tp] = true
			p := old.partitions[tp]
			if p != nil && p.topicID != topic.ID {
				m.log.Info("topic re-created with a new id; deleting the old log", "partition", tp,
					"old_id", p.topicID.String(), "new_id", topic.ID.String())
				m.removePartition(p, ErrUnknownTopicOrPartition)
				p = nil
			}
			if p != nil && unchanged {
				next.partitions[tp] = p
				continue
			}
			topicConfig()
			if p == nil {
				var err error
				if p, err = m.openPartition(tp, topic.ID, cfg); err != nil {
					m.log.Error("opening partition log", "partition", tp, "err", err)
					failed[tp] = true
					continue
				}
			}
			ch, err := p.update(part, cfg, settings)
			if err != nil {
				m.log.Error("applying partition state", "partition", tp, "err", err)
			}
			if ch.becameLeader || ch.becameFollower {
				m.log.Debug("partition leadership", "partition", tp, "leader", part.Leader,
					"leader_epoch", part.LeaderEpoch, "isr", part.ISR)
			}
			next.partitions[tp] = p
		}
	}
	// Partitions that left: their topic was deleted, or this node is no
	// longer among their replicas.
	for tp, p := range old.partitions {
		if next.partitions[tp] != p && !hosted[tp] {
			m.log.Info("partition removed from this node; deleting its log", "partition", tp)
			m.removePartition(p, ErrUnknownTopicOrPartition)
		}
	}
	m.table.Store(next)
	// Stray logs: on disk, but no partition of the image puts them here.
	// Only an image with a cluster id can say so: metadata.Empty() and
	// anything before the first committed record have none, and one of
	// those applied by mistake must not wipe the data directory.
	for tp := range m.opts.Storage.Logs() {
		if hosted[tp] {
			continue
		}
		if img.ClusterID == "" {
			m.log.Warn("keeping a partition log that the metadata does not name: the image has no cluster id, so it is not the committed metadata", "partition", tp)
			continue
		}
		m.log.Warn("deleting stray partition log: no topic in the metadata puts it on this node", "partition", tp)
		if err := m.opts.Storage.DeleteLog(tp); err != nil {
			m.log.Error("deleting stray partition log", "partition", tp, "err", err)
		}
	}
	if b, ok := img.Brokers[m.opts.NodeID]; ok {
		m.brokerEpoch.Store(b.Epoch)
	}
	m.throttle.setRate(img.FollowerThrottleRate(m.opts.NodeID), m.opts.Now())
	m.disk.applyImage(img)
	rate, tail := img.ReplayBudget(m.opts.NodeID)
	m.replay.set(rate, tail, m.opts.Now())
	m.lastImage = img
	m.noteFailedLogs(next)
	m.fetchers.apply(img, next)
	m.ready.Store(len(failed) == 0)
}

// removePartition retires p (waiters answer err) and deletes its log.
// REQUIRES: m.applyMu held.
func (m *Manager) removePartition(p *Partition, err error) {
	p.retire(fmt.Errorf("%w: %s was deleted", err, p))
	tp := storage.TopicPartition{Topic: p.topic, Partition: p.partition}
	// Only p's own log: a re-created topic may already have a new one.
	if cur, ok := m.opts.Storage.Log(tp); ok && cur == p.log {
		if err := m.opts.Storage.DeleteLog(tp); err != nil {
			m.log.Error("deleting partition log", "partition", tp, "err", err)
		}
	}
}

// openPartition opens or creates tp's log for topic id, replacing a log
// left on disk by an earlier topic of the same name.
// REQUIRES: m.applyMu held.
func (m *Manager) openPartition(tp storage.TopicPartition, id metadata.UUID, cfg storage.Config) (*Partition, error) {
	needWrite := true
	if l, ok := m.opts.Storage.Log(tp); ok {
		onDisk, found, err := readPartitionMetadata(m.opts.FS, l.Dir())
		switch {
		case err != nil:
			// The file is written atomically, so this is damage, not a
			// torn write. The log's records are worth more than the id
			// check: keep them and write the file again.
			m.log.Warn("unreadable partition.metadata; keeping the log and rewriting it", "partition", tp, "err", err)
		case found && onDisk != id:
			m.log.Info("log on disk belongs to an earlier topic of the same name; deleting it", "partition", tp,
				"log_topic_id", onDisk.Base64(), "topic_id", id.Base64())
			if err := m.opts.Storage.DeleteLog(tp); err != nil {
				return nil, err
			}
		case found:
			needWrite = false
		}
	}
	l, err := m.opts.Storage.GetOrCreateLog(tp, cfg)
	if err != nil {
		return nil, err
	}
	if needWrite {
		if err := writePartitionMetadata(m.opts.FS, l.Dir(), id); err != nil {
			return nil, err
		}
	}
	return newPartition(m, tp, id, l), nil
}
