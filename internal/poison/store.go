package poison

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/clock"
)

const (
	// replicationFactor is the most replicas Topic is created with: as
	// many as a user topic gets by default (controller
	// .DefaultReplicationFactor), so a policy survives a node's loss as
	// well as the records it governs.
	replicationFactor = 3
	// metadataMinAge lets the clients find Topic a moment after it is
	// created (franz-go's default would make Open wait seconds for it);
	// they ask for metadata only when they miss something, so this costs
	// nothing in steady state.
	metadataMinAge = 50 * time.Millisecond
	// syncTimeout bounds Sync, and a write's wait to read itself back,
	// when the caller's context allows longer.
	syncTimeout = 10 * time.Second
	// retryBackoff spaces the tries of a request answered with a
	// retriable error (a controller still being elected, a topic created
	// a moment ago not yet known to the broker asked).
	retryBackoff = 50 * time.Millisecond
	// maxFetchBytes bounds what one fetch of the follower holds: the
	// topic is small, and a hostile one must not cost franz-go's 50 MB
	// per fetch.
	maxFetchBytes = 4 << 20
)

// Store is one process's view of Topic, kept current by a follower that
// reads it from its start, and the writer of its records (acks=all,
// idempotent). Writes return once this Store's own view has applied them
// (read your writes).
//
// Threads: the follower goroutine (follow) owns the reader client and is
// the only one that changes mu's maps; every method may be called from
// any goroutine, at once. Slices returned are the caller's.
type Store struct {
	writer *kgo.Client  // to Topic's partition 0; acks=all, idempotent
	adm    *kadm.Client // on writer
	reader *kgo.Client  // Topic's partition 0 from its start; follow's

	stop      context.CancelFunc // ends follow
	followed  chan struct{}      // closed when follow has returned
	closeOnce sync.Once
	closed    atomic.Bool

	mu struct {
		sync.Mutex
		policies map[policyID]Policy
		pauses   map[pauseID]Pause
		// applied is the offset of Topic's partition 0 below which
		// every record is in the maps (the next one to apply).
		// Invariant: it only grows.
		applied int64
		// progress is closed, and replaced, whenever applied grows.
		progress chan struct{}
		// skipped counts the records left out as undecodable.
		skipped int64
		// fetchErr is the follower's last fetch error (nil once a
		// fetch brings no error), named by a wait that times out.
		fetchErr error
	}
}

type policyID struct{ group, topic string }

type pauseID struct {
	group, topic string
	partition    int32
}

// Open creates Topic if it is missing (compacted, one partition, min(3,
// brokers registered) replicas: see the package doc's Limits on when to
// open the first Store), makes an existing one compacted if it is not,
// reads it to its end and returns a Store that follows it; ctx bounds
// all of that, not the Store's life. opts go to each of the Store's
// franz-go clients (a client id, TLS, SASL; the node passes its internal
// client id, which an internal topic would require); the Store's own
// settings (acks, partitioning, what to consume) come after them.
func Open(ctx context.Context, brokers []string, opts ...kgo.Opt) (*Store, error) {
	if len(brokers) == 0 {
		return nil, errors.New("poison: no brokers to open the store on")
	}
	base := append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.MetadataMinAge(metadataMinAge)}, opts...)
	writer, err := kgo.NewClient(append(slices.Clip(base),
		kgo.DefaultProduceTopic(Topic),
		// Every record goes to partition 0, the one the follower
		// reads: a topic made with more partitions by someone else
		// still has one order of writes.
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// A write waits for itself; lingering would only delay it.
		kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(maxMessageBytes),
	)...)
	if err != nil {
		return nil, fmt.Errorf("poison: %w", err)
	}
	s := &Store{writer: writer, adm: kadm.NewClient(writer), followed: make(chan struct{})}
	s.mu.policies = map[policyID]Policy{}
	s.mu.pauses = map[pauseID]Pause{}
	s.mu.progress = make(chan struct{})
	if err := s.ensureTopic(ctx); err != nil {
		writer.Close()
		return nil, fmt.Errorf("poison: %w", err)
	}
	reader, err := kgo.NewClient(append(slices.Clip(base),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{Topic: {0: kgo.NewOffset().AtStart()}}),
		// A transaction marker has an offset too: kept, the follower
		// counts it as read (apply skips it as a record).
		kgo.KeepControlRecords(),
		kgo.FetchMaxBytes(maxFetchBytes),
	)...)
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("poison: %w", err)
	}
	var fctx context.Context
	fctx, s.stop = context.WithCancel(context.Background())
	s.reader = reader
	go s.follow(fctx)
	if err := s.Sync(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("poison: loading %s: %w", Topic, err)
	}
	return s, nil
}

// Close stops the follower and closes the clients. Writes and Syncs
// after it (or waiting across it) return ErrClosed; reads return the
// view as it was.
func (s *Store) Close() {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.stop()
		<-s.followed
		s.reader.Close()
		s.writer.Close()
	})
}

// Undecodable is how many records of Topic this Store has left out because
// it could not decode them (package doc, Records), since it opened.
func (s *Store) Undecodable() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.skipped
}

// Policy is group's policy on topic, if it has one.
func (s *Store) Policy(group, topic string) (Policy, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.mu.policies[policyID{group, topic}]
	return p, ok
}

// Policies are group's policies ("" for every group's), sorted by group
// then topic.
func (s *Store) Policies(group string) []Policy {
	s.mu.Lock()
	out := make([]Policy, 0, len(s.mu.policies))
	for id, p := range s.mu.policies {
		if group == "" || id.group == group {
			out = append(out, p)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Policy) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Topic, b.Topic))
	})
	return out
}

// Pauses are group's paused partitions of topic, sorted by partition;
// topic "" gives every topic's (sorted by topic, then partition), and
// group "" every group's (sorted by group first).
func (s *Store) Pauses(group, topic string) []Pause {
	s.mu.Lock()
	out := []Pause{}
	for id, p := range s.mu.pauses {
		if (group == "" || id.group == group) && (topic == "" || id.topic == topic) {
			out = append(out, p)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Pause) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// SetPolicy writes p, replacing the group's policy on the topic. An
// invalid p (Validate) is refused with nothing written.
func (s *Store) SetPolicy(ctx context.Context, p Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return s.write(ctx, policyKey(p.Group, p.Topic), encodePolicy(p))
}

// ClearPolicy removes group's policy on topic: a tombstone, written
// even when this Store holds no such policy (not an error), so that
// clearing also removes a policy written a moment ago elsewhere and not
// read here yet, or one this Store skipped as undecodable (a newer
// version's). An empty group or invalid topic name is ErrInvalidPolicy.
func (s *Store) ClearPolicy(ctx context.Context, group, topic string) error {
	if problem := validateID(group, topic); problem != "" {
		return fmt.Errorf("%w: %s", ErrInvalidPolicy, problem)
	}
	return s.write(ctx, policyKey(group, topic), nil)
}

// Pause writes p, replacing any pause of the same group and partition.
// p's reason is stored cut and made UTF-8, and its time set to now when
// zero (Pause.normalized). A negative partition, offset or attempts, an
// empty group or an invalid topic name is ErrInvalidPause, nothing
// written.
func (s *Store) Pause(ctx context.Context, p Pause) error {
	if err := p.validate(); err != nil {
		return err
	}
	if p.At.IsZero() {
		p.At = time.Now()
	}
	p = p.normalized()
	return s.write(ctx, pauseKey(p.Group, p.Topic, p.Partition), encodePause(p))
}

// Resume removes group's pause of topic's partition and returns it, as
// this Store held it once caught up with Topic (Sync), and whether there
// was one. The tombstone is written either way, for ClearPolicy's
// reasons.
func (s *Store) Resume(ctx context.Context, group, topic string, partition int32) (Pause, bool, error) {
	if err := validatePartition(group, topic, partition, 0, 0); err != nil {
		return Pause{}, false, err
	}
	if err := s.Sync(ctx); err != nil {
		return Pause{}, false, err
	}
	s.mu.Lock()
	was, ok := s.mu.pauses[pauseID{group, topic, partition}]
	s.mu.Unlock()
	if err := s.write(ctx, pauseKey(group, topic, partition), nil); err != nil {
		return Pause{}, false, err
	}
	return was, ok, nil
}

// Sync returns once this Store holds every record written to Topic
// before it was called, by any Store on any node: for a decision that
// must not miss one. It asks the partition's leader for its bounds and
// waits for the follower, at most syncTimeout.
func (s *Store) Sync(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	start, end, err := s.bounds(ctx)
	if err != nil {
		return fmt.Errorf("poison: finding the end of %s: %w", Topic, err)
	}
	if start >= end {
		// Nothing below end is left to read (DeleteRecords took it
		// all), so the follower would never get there by reading.
		s.advance(end)
		return nil
	}
	return s.waitApplied(ctx, end)
}

// bounds asks for the log start and high watermark of Topic's partition
// 0, trying again while the answer is a retriable error.
func (s *Store) bounds(ctx context.Context) (start, end int64, err error) {
	for {
		if start, end, err = s.listBounds(ctx); err == nil {
			return start, end, nil
		}
		if !kerr.IsRetriable(err) || !clock.Sleep(ctx, retryBackoff) {
			return 0, 0, err
		}
	}
}

func (s *Store) listBounds(ctx context.Context) (start, end int64, err error) {
	lookup := func(list func(context.Context, ...string) (kadm.ListedOffsets, error)) (int64, error) {
		listed, err := list(ctx, Topic)
		if err != nil {
			return 0, err
		}
		o, ok := listed.Lookup(Topic, 0)
		if !ok {
			return 0, kerr.UnknownTopicOrPartition
		}
		return o.Offset, o.Err
	}
	if start, err = lookup(s.adm.ListStartOffsets); err != nil {
		return 0, 0, err
	}
	end, err = lookup(s.adm.ListEndOffsets)
	return start, end, err
}

// write produces one record (a nil value is a tombstone) and waits until
// the follower has applied it.
func (s *Store) write(ctx context.Context, k recordKey, value []byte) error {
	if s.closed.Load() {
		return ErrClosed
	}
	r := &kgo.Record{Key: k.encode(), Value: value, Partition: 0}
	if err := s.writer.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("poison: writing to %s: %w", Topic, err)
	}
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	return s.waitApplied(ctx, r.Offset+1)
}

// waitApplied returns once the follower has applied every record below
// offset.
func (s *Store) waitApplied(ctx context.Context, offset int64) error {
	for {
		s.mu.Lock()
		applied, progress, fetchErr := s.mu.applied, s.mu.progress, s.mu.fetchErr
		s.mu.Unlock()
		if applied >= offset {
			return nil
		}
		select {
		case <-progress: // more applied: look again
		case <-s.followed: // closed: nothing more will be applied
			return ErrClosed
		case <-ctx.Done():
			if fetchErr != nil {
				return fmt.Errorf("poison: %s read to offset %d, not yet %d (last fetch error: %v): %w", Topic, applied, offset, fetchErr, ctx.Err())
			}
			return fmt.Errorf("poison: %s read to offset %d, not yet %d: %w", Topic, applied, offset, ctx.Err())
		}
	}
}

// follow applies Topic's records as the reader fetches them, until ctx
// ends. franz-go retries fetch errors itself (a leader moving); the ones
// it hands back are kept for waitApplied's message.
func (s *Store) follow(ctx context.Context) {
	defer close(s.followed)
	for {
		fs := s.reader.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		s.apply(fs)
		if fs.NumRecords() == 0 && fs.Err() != nil {
			// An error handed back at once, again and again (a topic
			// deleted under the reader), must not spin a core.
			clock.Sleep(ctx, retryBackoff)
		}
	}
}

// apply puts the records fs brought in the view, in offset order.
func (s *Store) apply(fs kgo.Fetches) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.fetchErr = fs.Err()
	next := s.mu.applied
	fs.EachRecord(func(r *kgo.Record) {
		if r.Topic != Topic || r.Partition != 0 {
			return
		}
		s.applyLocked(r)
		next = max(next, r.Offset+1)
	})
	s.advanceLocked(next)
}

// applyLocked puts one record in the view: a tombstone removes its key's
// entry, a value replaces it. An undecodable record is counted and,
// when its key decodes, removes the key's entry (package doc, Records).
// REQUIRES: s.mu held.
func (s *Store) applyLocked(r *kgo.Record) {
	if r.Attrs.IsControl() {
		return // a transaction marker: its offset is all it brings
	}
	k, err := decodeKey(r.Key)
	if err != nil {
		s.mu.skipped++
		return
	}
	switch k.kind {
	case kindPolicy:
		s.mu.skipped += applyEntry(s.mu.policies, policyID{k.group, k.topic}, r.Value,
			func(v []byte) (Policy, error) { return decodePolicy(k, v) })
	case kindPause:
		s.mu.skipped += applyEntry(s.mu.pauses, pauseID{k.group, k.topic, k.partition}, r.Value,
			func(v []byte) (Pause, error) { return decodePause(k, v) })
	default:
		panic(fmt.Sprintf("poison: decodeKey returned kind %d", k.kind))
	}
}

// applyEntry applies a record's value to its key's entry id of m: a
// tombstone (nil) or an undecodable value removes the entry, any other
// replaces it. It returns 1 for an undecodable value (to count), else 0.
func applyEntry[K comparable, V any](m map[K]V, id K, value []byte, decode func([]byte) (V, error)) int64 {
	delete(m, id)
	if value == nil {
		return 0
	}
	v, err := decode(value)
	if err != nil {
		return 1
	}
	m[id] = v
	return 0
}

// advance marks the view current below offset, when that is further.
func (s *Store) advance(offset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked(offset)
}

// advanceLocked is advance. REQUIRES: s.mu held.
func (s *Store) advanceLocked(offset int64) {
	if offset > s.mu.applied {
		s.mu.applied = offset
		close(s.mu.progress)
		s.mu.progress = make(chan struct{})
	}
}

// ensureTopic creates Topic, or makes sure the existing one is
// compacted, trying again while the cluster answers a retriable error
// (a controller still being elected).
func (s *Store) ensureTopic(ctx context.Context) error {
	for {
		err := s.createTopic(ctx)
		if err == nil || !kerr.IsRetriable(err) || !clock.Sleep(ctx, retryBackoff) {
			return err
		}
	}
}

func (s *Store) createTopic(ctx context.Context) error {
	md, err := s.adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	rf := int16(min(replicationFactor, max(1, len(md.Brokers))))
	compact, maxBytes := "compact", strconv.Itoa(maxMessageBytes)
	resp, err := s.adm.CreateTopic(ctx, 1, rf, map[string]*string{"cleanup.policy": &compact, "max.message.bytes": &maxBytes}, Topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.TopicAlreadyExists):
		return s.keepCompacted(ctx)
	}
	return fmt.Errorf("creating %s: %w", Topic, err)
}

// keepCompacted sets an existing Topic's cleanup.policy to "compact"
// when it is anything else. The topic is not internal, so it may have
// been made by a stray produce (auto-create: "delete", 7 days) or
// changed by hand; under "delete" a policy set once would vanish after
// retention.ms, silently. Compaction alone keeps the newest record of
// every key for good, which is what the Store assumes.
func (s *Store) keepCompacted(ctx context.Context) error {
	rcs, err := s.adm.DescribeTopicConfigs(ctx, Topic)
	if err != nil {
		return err
	}
	rc, err := rcs.On(Topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return fmt.Errorf("reading %s's cleanup.policy: %w", Topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.MaybeValue() == "compact" {
			return nil
		}
	}
	v := "compact"
	resps, err := s.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: &v}}, Topic)
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = resps.On(Topic, nil); err == nil {
			err = r.Err
		}
	}
	if err != nil {
		return fmt.Errorf("making %s compacted: %w", Topic, err)
	}
	return nil
}
