package history

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

func compareTopicPartitions(a, b TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// Record is one record as a producer was told it was written, or as a
// consumer read it. The Checker compares topic, partition, offset, key and
// value; the rest is filled in by ReadAll for tests that look at batches.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte

	// Read back only.
	Timestamp     time.Time
	ProducerID    int64 // -1 when the batch had none (not idempotent)
	ProducerEpoch int16
	// Compression is the codec of the batch the record was read from:
	// 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
	Compression uint8
}

// TopicPartition is where the record lives.
func (r Record) TopicPartition() TopicPartition { return TopicPartition{r.Topic, r.Partition} }

// Checker verifies a log read back against what producers sent and were
// told (DESIGN.md section 7.5). Producers report each record they send
// (Sent, in send order per key) and each acknowledgement (Acked); after the
// faults, the test reads every partition from its log start to its high
// watermark and calls Verify.
//
// A record is identified by its topic and value: each value a test sends
// to a topic must be unique (a counter in the value does it). That is
// what lets the checker tell a retry that was deduplicated from one that
// was written twice.
//
// All methods are safe for concurrent use (a producer's callbacks run on
// the client's goroutines).
type Checker struct {
	mu struct {
		sync.Mutex
		// sent maps topic and value to its key and its position among the
		// records sent with that key.
		sent map[valueID]sentRecord
		// keySeq is the number of records sent per topic and key.
		keySeq map[keyID]int
		// sentTopics are the topics with at least one Sent record: a record
		// in their log that was never sent is a phantom.
		sentTopics map[string]bool
		// acked holds each acknowledgement by partition and offset.
		acked map[TopicPartition]map[int64]Record
		// ackedAt maps an acknowledged value to where it was acknowledged.
		ackedAt map[valueID]Record
		// ackedNowhere holds values acknowledged without an offset
		// (Acked with a negative one), by value.
		ackedNowhere map[valueID]Record
		// read holds what live readers saw during the run, by partition
		// and offset (Read), to hold against the log at the end.
		read map[TopicPartition]map[int64]Record
		// reads counts the Read calls.
		reads int
		// owner, processed and committed are the groups' (groups.go):
		// who owns a partition now, the offset after the last record
		// processed, and the last acknowledged commit; commits counts
		// those.
		owner     map[groupPartition]string
		processed map[groupPartition]int64
		committed map[groupPartition]int64
		commits   int
		// problems are contradictions found while recording (one offset
		// acknowledged for two records, one value sent twice, two
		// readers seeing two records at one offset, ...).
		problems []Violation
	}
}

type valueID struct{ topic, value string }

type keyID struct{ topic, key string }

type sentRecord struct {
	key string
	seq int // 0 for the key's first record, 1 for its second, ...
}

// NewChecker returns an empty Checker.
func NewChecker() *Checker {
	c := &Checker{}
	c.mu.sent = make(map[valueID]sentRecord)
	c.mu.keySeq = make(map[keyID]int)
	c.mu.sentTopics = make(map[string]bool)
	c.mu.acked = make(map[TopicPartition]map[int64]Record)
	c.mu.ackedAt = make(map[valueID]Record)
	c.mu.read = make(map[TopicPartition]map[int64]Record)
	return c
}

// Read records that a reader, while the run went on, was served r at
// r.Offset. Every reader must be served the same record at an offset,
// and what one was served must still be there at the end: a record read
// and then gone is an unstable read (a leader served what it had not
// committed, and lost it).
func (c *Checker) Read(r Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.reads++
	tp := r.TopicPartition()
	byOffset := c.mu.read[tp]
	if byOffset == nil {
		byOffset = make(map[int64]Record)
		c.mu.read[tp] = byOffset
	}
	if prev, ok := byOffset[r.Offset]; ok {
		if !sameRecord(prev, r) {
			c.problemLocked(KindDivergentRead, "%s offset %d: readers were served two records: value %q and value %q", tp, r.Offset, prev.Value, r.Value)
		}
		return
	}
	byOffset[r.Offset] = Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value}
}

// Sent records that a producer handed the client a record. Calls for one
// key must be made in the order the producer sent them: that order is
// what per-key order is checked against.
func (c *Checker) Sent(topic string, key, value []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := valueID{topic, string(value)}
	if _, dup := c.mu.sent[id]; dup {
		c.problemLocked(KindBadHistory, "value %q sent twice to %s: values must be unique", value, topic)
		return
	}
	k := keyID{topic, string(key)}
	c.mu.sent[id] = sentRecord{key: string(key), seq: c.mu.keySeq[k]}
	c.mu.keySeq[k]++
	c.mu.sentTopics[topic] = true
}

// Acked records that the producer was told r is at r.Offset in its
// partition.
//
// A negative offset means acknowledged without an offset: librdkafka's
// idempotent producer reports records it infers were written (a later
// batch of the same sequence succeeded) with offset -1001. Such a record
// must be in its partition's log, once; where is not checked.
func (c *Checker) Acked(r Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tp := r.TopicPartition()
	if r.Offset < 0 {
		id := valueID{r.Topic, string(r.Value)}
		if _, ok := c.mu.ackedAt[id]; !ok {
			if c.mu.ackedNowhere == nil {
				c.mu.ackedNowhere = make(map[valueID]Record)
			}
			c.mu.ackedNowhere[id] = r
		}
		return
	}
	byOffset := c.mu.acked[tp]
	if byOffset == nil {
		byOffset = make(map[int64]Record)
		c.mu.acked[tp] = byOffset
	}
	if prev, ok := byOffset[r.Offset]; ok && !sameRecord(prev, r) {
		c.problemLocked(KindConflictingAck, "%s offset %d acknowledged twice, for value %q and for value %q", tp, r.Offset, prev.Value, r.Value)
		return
	}
	id := valueID{r.Topic, string(r.Value)}
	if prev, ok := c.mu.ackedAt[id]; ok && (prev.Partition != r.Partition || prev.Offset != r.Offset) {
		// A retry answered as a duplicate gets the original offset; a
		// different one means the value was written twice.
		c.problemLocked(KindDuplicate, "value %q acknowledged at %s offset %d and again at %s offset %d",
			r.Value, prev.TopicPartition(), prev.Offset, tp, r.Offset)
		return
	}
	byOffset[r.Offset] = r
	c.mu.ackedAt[id] = r
	delete(c.mu.ackedNowhere, id)
}

// AckedCount is the number of distinct records acknowledged so far.
func (c *Checker) AckedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.ackedAt) + len(c.mu.ackedNowhere)
}

// Acks returns every acknowledged record, by partition and offset.
func (c *Checker) Acks() []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Record, 0, len(c.mu.ackedAt))
	for _, r := range c.mu.ackedAt {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int {
		return cmp.Or(compareTopicPartitions(a.TopicPartition(), b.TopicPartition()), cmp.Compare(a.Offset, b.Offset))
	})
	return out
}

// REQUIRES: c.mu held.
func (c *Checker) problemLocked(kind, format string, args ...any) {
	c.mu.problems = append(c.mu.problems, Violation{Kind: kind, Text: fmt.Sprintf(format, args...)})
}

func sameRecord(a, b Record) bool {
	return a.Topic == b.Topic && a.Partition == b.Partition && a.Offset == b.Offset &&
		bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value)
}

// Summary counts what Verify saw.
type Summary struct {
	Acked int // records acknowledged
	Read  int // records in the logs read back
	// Unacked are records read back that were sent but never
	// acknowledged: in flight when a fault hit, written, the answer lost.
	// They are allowed (at-least-once), but only once each.
	Unacked int
	// LiveReads counts the records readers were served during the run
	// (Read), each checked against the log read back.
	LiveReads int
}

func (s Summary) String() string {
	out := fmt.Sprintf("%d acknowledged, %d read back, %d read back without an acknowledgement", s.Acked, s.Read, s.Unacked)
	if s.LiveReads > 0 {
		out += fmt.Sprintf(", %d served to readers during the run", s.LiveReads)
	}
	return out
}

// maxReported bounds the violations Verify lists; the rest are counted.
const maxReported = 20

// Verify checks logs, every record of each partition from its log start
// offset to its high watermark in offset order, against what was sent and
// acknowledged:
//
//   - offsets increase strictly within a partition (no offset holds two
//     records);
//   - every acknowledged record is at exactly its acknowledged partition
//     and offset, with its key and value;
//   - no value appears twice in a topic (idempotent producers' retries
//     were deduplicated; a non-idempotent test must not use Verify);
//   - records with one key appear, within a partition, in the order they
//     were sent;
//   - in a topic with Sent records, every record read was sent (no
//     phantoms);
//   - every record a reader was served during the run (Read) is still
//     at its offset, and no two readers were served different records
//     at one offset.
//
// It returns nil, or a *Violations naming each violation's kind, with
// the contradictions seen while recording acknowledgements first.
func (c *Checker) Verify(logs map[TopicPartition][]Record) (Summary, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	problems := slices.Clone(c.mu.problems)
	report := func(kind, format string, args ...any) {
		problems = append(problems, Violation{Kind: kind, Text: fmt.Sprintf(format, args...)})
	}

	sum := Summary{Acked: len(c.mu.ackedAt) + len(c.mu.ackedNowhere), LiveReads: c.mu.reads}
	seen := make(map[valueID]Record)
	for _, tp := range slices.SortedFunc(maps.Keys(logs), compareTopicPartitions) {
		recs := logs[tp]
		lastSeq := make(map[string]int) // key -> send position of the last record read with it
		for i, r := range recs {
			sum.Read++
			if r.TopicPartition() != tp {
				report(KindBadOffsets, "%s: record at index %d claims to be from %s", tp, i, r.TopicPartition())
			}
			if i > 0 && r.Offset <= recs[i-1].Offset {
				report(KindBadOffsets, "%s: offset %d follows offset %d", tp, r.Offset, recs[i-1].Offset)
			}
			id := valueID{tp.Topic, string(r.Value)}
			if prev, dup := seen[id]; dup {
				report(KindDuplicate, "value %q appears twice: %s offset %d and %s offset %d", r.Value, prev.TopicPartition(), prev.Offset, tp, r.Offset)
			}
			seen[id] = r
			s, wasSent := c.mu.sent[id]
			if !wasSent {
				if c.mu.sentTopics[tp.Topic] {
					report(KindPhantom, "%s offset %d: value %q was never sent", tp, r.Offset, r.Value)
				}
			} else {
				if s.key != string(r.Key) {
					report(KindCorrupt, "%s offset %d: value %q has key %q, sent with key %q", tp, r.Offset, r.Value, r.Key, s.key)
				}
				if last, ok := lastSeq[s.key]; ok && s.seq <= last {
					report(KindOutOfOrder, "%s offset %d: key %q out of order: its record #%d after its record #%d", tp, r.Offset, s.key, s.seq, last)
				}
				lastSeq[s.key] = s.seq
			}
			_, acked := c.mu.ackedAt[id]
			_, ackedNowhere := c.mu.ackedNowhere[id]
			if !acked && !ackedNowhere && wasSent {
				sum.Unacked++
			}
		}
	}

	// Every acknowledged record where it was acknowledged.
	for _, tp := range slices.SortedFunc(maps.Keys(c.mu.acked), compareTopicPartitions) {
		byOffset := c.mu.acked[tp]
		recs := logs[tp]
		for _, off := range slices.Sorted(maps.Keys(byOffset)) {
			want := byOffset[off]
			i := sort.Search(len(recs), func(i int) bool { return recs[i].Offset >= off })
			switch {
			case i == len(recs) || recs[i].Offset != off:
				kind, where := KindLost, "missing"
				if got, ok := seen[valueID{tp.Topic, string(want.Value)}]; ok {
					kind, where = KindMoved, fmt.Sprintf("found at %s offset %d instead", got.TopicPartition(), got.Offset)
				}
				report(kind, "%s offset %d: acknowledged value %q %s", tp, off, want.Value, where)
			case !bytes.Equal(recs[i].Value, want.Value):
				kind, where := KindLost, "nowhere else in the log"
				if got, ok := seen[valueID{tp.Topic, string(want.Value)}]; ok {
					kind, where = KindMoved, fmt.Sprintf("at %s offset %d instead", got.TopicPartition(), got.Offset)
				}
				report(kind, "%s offset %d: acknowledged key %q value %q, read key %q value %q; the acknowledged value is %s",
					tp, off, want.Key, want.Value, recs[i].Key, recs[i].Value, where)
			case !bytes.Equal(recs[i].Key, want.Key):
				report(KindCorrupt, "%s offset %d: acknowledged key %q value %q, read key %q", tp, off, want.Key, want.Value, recs[i].Key)
			}
		}
	}

	// Every record acknowledged without an offset in its partition.
	for _, id := range slices.SortedFunc(maps.Keys(c.mu.ackedNowhere), func(a, b valueID) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.value, b.value))
	}) {
		want := c.mu.ackedNowhere[id]
		got, ok := seen[id]
		switch {
		case !ok:
			report(KindLost, "%s: value %q, acknowledged without an offset, is missing", want.TopicPartition(), want.Value)
		case got.Partition != want.Partition:
			report(KindMoved, "%s: value %q, acknowledged without an offset, found at %s offset %d instead",
				want.TopicPartition(), want.Value, got.TopicPartition(), got.Offset)
		case !bytes.Equal(got.Key, want.Key):
			report(KindCorrupt, "%s offset %d: value %q acknowledged with key %q, read key %q", got.TopicPartition(), got.Offset, want.Value, want.Key, got.Key)
		}
	}

	// What readers were served is still there.
	for _, tp := range slices.SortedFunc(maps.Keys(c.mu.read), compareTopicPartitions) {
		byOffset := c.mu.read[tp]
		recs := logs[tp]
		for _, off := range slices.Sorted(maps.Keys(byOffset)) {
			was := byOffset[off]
			i := sort.Search(len(recs), func(i int) bool { return recs[i].Offset >= off })
			switch {
			case i == len(recs) || recs[i].Offset != off:
				report(KindUnstableRead, "%s offset %d: unstable read: value %q was served to a reader, and the log no longer has it", tp, off, was.Value)
			case !bytes.Equal(recs[i].Value, was.Value) || !bytes.Equal(recs[i].Key, was.Key):
				report(KindUnstableRead, "%s offset %d: unstable read: value %q was served to a reader, the log now has value %q", tp, off, was.Value, recs[i].Value)
			}
		}
	}

	if len(problems) == 0 {
		return sum, nil
	}
	return sum, &Violations{Summary: sum, All: problems}
}
