package history

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
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
	// now stamps each event; time.Now unless SetClock replaced it.
	now func() time.Time

	mu struct {
		sync.Mutex
		// sent maps topic and value to its key, its producer, its
		// positions among the records sent with that key and by that
		// producer, and when it was sent.
		sent map[valueID]sentRecord
		// keySeq is the number of records sent per topic and key, and
		// producerSeq per producer.
		keySeq      map[keyID]int
		producerSeq map[string]int
		// sentTopics are the topics with at least one Sent record: a record
		// in their log that was never sent is a phantom.
		sentTopics map[string]bool
		// acked holds each acknowledgement by partition and offset (the
		// latest, when one offset was acknowledged for two records).
		acked map[TopicPartition]map[int64]event
		// ackedAt maps an acknowledged value to where it was acknowledged.
		ackedAt map[valueID]event
		// ackedNowhere holds values acknowledged without an offset
		// (Acked with a negative one), by value.
		ackedNowhere map[valueID]event
		// aborted holds the records of aborted transactions, by value
		// (Aborted): never to be read.
		aborted map[valueID]event
		// read holds what live readers saw during the run, by partition
		// and offset (Read; the first reader's), to hold against the log
		// at the end.
		read map[TopicPartition]map[int64]event
		// mayLose are the windows MayLose declared.
		mayLose []lossWindow
		// reads counts the Read calls.
		reads int
		// owner, processed and committed are the groups' (groups.go):
		// who owns a partition now, the offset after the last record
		// processed, and the last acknowledged commit; commits counts
		// those.
		owner map[groupPartition]string
		// generation is each member's latest generation (Joined).
		generation map[groupMember]int32
		processed  map[groupPartition]int64
		// processedOffsets is every offset some member processed.
		processedOffsets map[groupPartition]*offsetSet
		committed        map[groupPartition]commit
		commits          int
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
	// producer is who sent it ("" when the caller did not say) and
	// producerSeq its position among that producer's records.
	producer    string
	producerSeq int
	at          time.Time
}

// event is a record as one acknowledgement or read gave it, and when
// the checker was told.
type event struct {
	Record
	at time.Time
}

// lossWindow is one MayLose declaration.
type lossWindow struct {
	from, to time.Time
	why      string
}

// NewChecker returns an empty Checker.
func NewChecker() *Checker {
	c := &Checker{now: time.Now}
	c.mu.sent = make(map[valueID]sentRecord)
	c.mu.keySeq = make(map[keyID]int)
	c.mu.producerSeq = make(map[string]int)
	c.mu.sentTopics = make(map[string]bool)
	c.mu.acked = make(map[TopicPartition]map[int64]event)
	c.mu.ackedAt = make(map[valueID]event)
	c.mu.read = make(map[TopicPartition]map[int64]event)
	return c
}

// SetClock makes now stamp every event from here on (tests that need
// exact times). Call it before the first event.
func (c *Checker) SetClock(now func() time.Time) { c.now = now }

// Read records that a reader, while the run went on, was served r at
// r.Offset. Every reader must be served the same record at an offset,
// and what one was served must still be there at the end: a record read
// and then gone is an unstable read (a leader served what it had not
// committed, and lost it).
func (c *Checker) Read(r Record) {
	at := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.reads++
	tp := r.TopicPartition()
	byOffset := c.mu.read[tp]
	if byOffset == nil {
		byOffset = make(map[int64]event)
		c.mu.read[tp] = byOffset
	}
	if prev, ok := byOffset[r.Offset]; ok {
		if !sameRecord(prev.Record, r) {
			c.problemLocked(prev, KindDivergentRead, "%s offset %d: readers were served two records: value %s and value %s", tp, r.Offset, quote(prev.Value), quote(r.Value))
		}
		return
	}
	byOffset[r.Offset] = event{Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value}, at}
}

// Sent records that a producer handed the client a record. Calls for one
// key must be made in the order the producer sent them: that order is
// what per-key order is checked against.
func (c *Checker) Sent(topic string, key, value []byte) { c.SentBy("", topic, key, value) }

// SentBy is Sent for a named producer: within a partition, the records
// of one producer must also be in the order it sent them (an idempotent
// producer keeps its order per partition, whatever the keys). Calls for
// one producer must be made in its send order.
func (c *Checker) SentBy(producer, topic string, key, value []byte) {
	at := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	id := valueID{topic, string(value)}
	if _, dup := c.mu.sent[id]; dup {
		c.problemLocked(event{}, KindBadHistory, "value %s sent twice to %s: values must be unique", quote(value), topic)
		return
	}
	k := keyID{topic, string(key)}
	s := sentRecord{key: string(key), seq: c.mu.keySeq[k], producer: producer, at: at}
	c.mu.keySeq[k]++
	if producer != "" {
		s.producerSeq = c.mu.producerSeq[producer]
		c.mu.producerSeq[producer]++
	}
	c.mu.sent[id] = s
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
	ack := event{r, c.now()}
	c.mu.Lock()
	defer c.mu.Unlock()
	tp := r.TopicPartition()
	id := valueID{r.Topic, string(r.Value)}
	if r.Offset < 0 {
		if _, ok := c.mu.ackedAt[id]; !ok {
			if c.mu.ackedNowhere == nil {
				c.mu.ackedNowhere = make(map[valueID]event)
			}
			c.mu.ackedNowhere[id] = ack
		}
		return
	}
	if prev, ok := c.mu.ackedAt[id]; ok && (prev.Partition != r.Partition || prev.Offset != r.Offset) {
		// A retry answered as a duplicate gets the original offset; a
		// different one means the value was written twice.
		c.problemLocked(prev, KindDuplicate, "value %s acknowledged at %s offset %d and again at %s offset %d",
			quote(r.Value), prev.TopicPartition(), prev.Offset, tp, r.Offset)
		return
	}
	byOffset := c.mu.acked[tp]
	if byOffset == nil {
		byOffset = make(map[int64]event)
		c.mu.acked[tp] = byOffset
	}
	if prev, ok := byOffset[r.Offset]; ok && !sameRecord(prev.Record, r) {
		// The earlier acknowledgement is the one contradicted: the
		// offset was given to another record after it, which is what
		// losing it looks like (MayLose may allow that). The later one
		// is then held against the log like any other.
		c.problemLocked(prev, KindConflictingAck, "%s offset %d acknowledged twice, for value %s and for value %s", tp, r.Offset, quote(prev.Value), quote(r.Value))
	}
	byOffset[r.Offset] = ack
	c.mu.ackedAt[id] = ack
	delete(c.mu.ackedNowhere, id)
}

// Aborted records that r, written in a transaction (its produce
// answered, with its offset), belongs to a transaction that was
// aborted: no read_committed reader may be served it, and the read-back
// (read_committed, ReadAllCommitted) must not hold it (KindAbortedRead).
// A record of a transaction whose end failed, its outcome unknown, is
// neither Acked nor Aborted: the log may or may not hold it.
func (c *Checker) Aborted(r Record) {
	ev := event{r, c.now()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.aborted == nil {
		c.mu.aborted = make(map[valueID]event)
	}
	c.mu.aborted[valueID{r.Topic, string(r.Value)}] = ev
}

// AbortedCount is how many records Aborted was told of.
func (c *Checker) AbortedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.aborted)
}

// MayLose declares that records acknowledged, or served to a reader,
// between from and to may be missing from the log read back, or
// replaced at their offsets, for the reason why: what a setting gives
// up (flush.policy=interval when every replica dies at once). Verify
// reports the violations that losing them explains (lost, conflicting
// acknowledgements, unstable and divergent reads) as allowed, not as
// violations. Nothing else is excused: a record moved, duplicated, out
// of order or never sent is a violation whatever the window.
func (c *Checker) MayLose(from, to time.Time, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.mayLose = append(c.mu.mayLose, lossWindow{from, to, why})
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
		out = append(out, r.Record)
	}
	slices.SortFunc(out, func(a, b Record) int {
		return cmp.Or(compareTopicPartitions(a.TopicPartition(), b.TopicPartition()), cmp.Compare(a.Offset, b.Offset))
	})
	return out
}

// Latency is one acknowledged record's send and acknowledgement times.
type Latency struct {
	Sent, Acked time.Time
}

// Latencies returns, for every record acknowledged so far, when it was
// sent and when it was acknowledged, in acknowledgement order.
func (c *Checker) Latencies() []Latency {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Latency, 0, len(c.mu.ackedAt)+len(c.mu.ackedNowhere))
	for _, acks := range []map[valueID]event{c.mu.ackedAt, c.mu.ackedNowhere} {
		for id, a := range acks {
			if s, ok := c.mu.sent[id]; ok {
				out = append(out, Latency{Sent: s.at, Acked: a.at})
			}
		}
	}
	slices.SortFunc(out, func(a, b Latency) int { return a.Acked.Compare(b.Acked) })
	return out
}

// problemLocked records a violation found while recording; about is the
// acknowledgement or read it concerns (zero when none). REQUIRES: c.mu
// held.
func (c *Checker) problemLocked(about event, kind, format string, args ...any) {
	c.mu.problems = append(c.mu.problems, violationAbout(about, kind, format, args...))
}

// violationAbout is a violation located at about's partition and offset
// and time, when about is a record.
func violationAbout(about event, kind, format string, args ...any) Violation {
	v := Violation{Kind: kind, Text: fmt.Sprintf(format, args...), Offset: -1}
	if about.Topic != "" {
		v.TopicPartition, v.Offset, v.At = about.TopicPartition(), about.Offset, about.at
	}
	return v
}

// maxQuoted is how much of a value a violation quotes: a workload's
// values begin with what tells them apart (verify's: its seed, producer
// and counter) and are padded after, which says nothing.
const maxQuoted = 40

// quote is a value as a violation shows it: quoted, cut after maxQuoted
// bytes.
func quote(value []byte) string {
	if len(value) <= maxQuoted {
		return strconv.Quote(string(value))
	}
	return strconv.Quote(string(value[:maxQuoted])) + "..."
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
	// Allowed counts the violations a MayLose window excused.
	Allowed int
}

func (s Summary) String() string {
	out := fmt.Sprintf("%d acknowledged, %d read back, %d read back without an acknowledgement", s.Acked, s.Read, s.Unacked)
	if s.LiveReads > 0 {
		out += fmt.Sprintf(", %d served to readers during the run", s.LiveReads)
	}
	if s.Allowed > 0 {
		out += fmt.Sprintf(", %d lost as allowed", s.Allowed)
	}
	return out
}

// maxReported bounds the violations Verify lists; the rest are counted.
const maxReported = 20

// Result is everything VerifyAll found.
type Result struct {
	Summary Summary
	// Violations are the broken guarantees, in the order found, with
	// the contradictions seen while recording first.
	Violations []Violation
	// Allowed are the violations a MayLose window excused, each with
	// its AllowedBy set.
	Allowed []Violation
}

// Verify is VerifyAll for callers that want an error: nil, or a
// *Violations naming each violation's kind. Allowed losses are only
// counted (Summary.Allowed).
func (c *Checker) Verify(logs map[TopicPartition][]Record) (Summary, error) {
	res := c.VerifyAll(logs)
	if len(res.Violations) == 0 {
		return res.Summary, nil
	}
	return res.Summary, &Violations{Summary: res.Summary, All: res.Violations}
}

// VerifyAll checks logs, every record of each partition from its log
// start offset to its high watermark in offset order, against what was
// sent and acknowledged:
//
//   - offsets increase strictly within a partition (no offset holds two
//     records);
//   - every acknowledged record is at exactly its acknowledged partition
//     and offset, with its key and value;
//   - no value appears twice in a topic (idempotent producers' retries
//     were deduplicated; a non-idempotent test must not use Verify);
//   - records with one key appear, within a partition, in the order they
//     were sent, and so do the records of one producer (SentBy);
//   - in a topic with Sent records, every record read was sent (no
//     phantoms);
//   - every record a reader was served during the run (Read) is still
//     at its offset, and no two readers were served different records
//     at one offset.
//
// A violation that losing a record acknowledged or read inside a
// MayLose window explains goes to Result.Allowed instead.
func (c *Checker) VerifyAll(logs map[TopicPartition][]Record) Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	problems := slices.Clone(c.mu.problems)
	report := func(about event, kind, format string, args ...any) {
		problems = append(problems, violationAbout(about, kind, format, args...))
	}

	sum := Summary{Acked: len(c.mu.ackedAt) + len(c.mu.ackedNowhere), LiveReads: c.mu.reads}
	seen := make(map[valueID]Record)
	for _, tp := range slices.SortedFunc(maps.Keys(logs), compareTopicPartitions) {
		recs := logs[tp]
		lastSeq := make(map[string]int)         // key -> send position of the last record read with it
		lastProducerSeq := make(map[string]int) // producer -> the same, among its records
		for i, r := range recs {
			sum.Read++
			here := event{Record: r}
			if r.TopicPartition() != tp {
				report(here, KindBadOffsets, "%s: record at index %d claims to be from %s", tp, i, r.TopicPartition())
			}
			if i > 0 && r.Offset <= recs[i-1].Offset {
				report(here, KindBadOffsets, "%s: offset %d follows offset %d", tp, r.Offset, recs[i-1].Offset)
			}
			id := valueID{tp.Topic, string(r.Value)}
			if prev, dup := seen[id]; dup {
				// The copy is the violation; its place says nothing of the
				// order of what was sent, which the first one was held to.
				report(here, KindDuplicate, "value %s appears twice: %s offset %d and %s offset %d", quote(r.Value), prev.TopicPartition(), prev.Offset, tp, r.Offset)
				continue
			}
			seen[id] = r
			if ab, ok := c.mu.aborted[id]; ok {
				report(ab, KindAbortedRead, "%s offset %d: value %s, of an aborted transaction, is in the log read back", tp, r.Offset, quote(r.Value))
			}
			s, wasSent := c.mu.sent[id]
			if !wasSent {
				if c.mu.sentTopics[tp.Topic] {
					report(here, KindPhantom, "%s offset %d: value %s was never sent", tp, r.Offset, quote(r.Value))
				}
			} else {
				if s.key != string(r.Key) {
					report(here, KindCorrupt, "%s offset %d: value %s has key %q, sent with key %q", tp, r.Offset, quote(r.Value), r.Key, s.key)
				}
				if last, ok := lastSeq[s.key]; ok && s.seq <= last {
					report(here, KindOutOfOrder, "%s offset %d: key %q out of order: its record #%d after its record #%d", tp, r.Offset, s.key, s.seq, last)
				}
				lastSeq[s.key] = s.seq
				if s.producer != "" {
					if last, ok := lastProducerSeq[s.producer]; ok && s.producerSeq <= last {
						report(here, KindProducerOrder, "%s offset %d: producer %s's records out of order: its record #%d after its record #%d",
							tp, r.Offset, s.producer, s.producerSeq, last)
					}
					lastProducerSeq[s.producer] = s.producerSeq
				}
			}
			_, acked := c.mu.ackedAt[id]
			_, ackedNowhere := c.mu.ackedNowhere[id]
			if !acked && !ackedNowhere && wasSent {
				sum.Unacked++
			}
		}
	}

	// Every acknowledged record where it was acknowledged. By value, not
	// by offset: when one offset was acknowledged for two records, both
	// are held against the log (the conflict itself was reported as it
	// happened), so a record lost and its offset reused counts as lost.
	acks := slices.SortedFunc(maps.Values(c.mu.ackedAt), func(a, b event) int {
		return cmp.Or(compareTopicPartitions(a.TopicPartition(), b.TopicPartition()), cmp.Compare(a.Offset, b.Offset), bytes.Compare(a.Value, b.Value))
	})
	for _, want := range acks {
		tp, off := want.TopicPartition(), want.Offset
		recs := logs[tp]
		i := sort.Search(len(recs), func(i int) bool { return recs[i].Offset >= off })
		here := i < len(recs) && recs[i].Offset == off
		switch {
		case here && bytes.Equal(recs[i].Value, want.Value):
			if !bytes.Equal(recs[i].Key, want.Key) {
				report(want, KindCorrupt, "%s offset %d: acknowledged key %q value %s, read key %q", tp, off, want.Key, quote(want.Value), recs[i].Key)
			}
		case !here:
			kind, where := KindLost, "missing"
			if got, ok := seen[valueID{tp.Topic, string(want.Value)}]; ok {
				kind, where = KindMoved, fmt.Sprintf("found at %s offset %d instead", got.TopicPartition(), got.Offset)
			}
			report(want, kind, "%s offset %d: acknowledged value %s %s", tp, off, quote(want.Value), where)
		default:
			kind, where := KindLost, "nowhere else in the log"
			if got, ok := seen[valueID{tp.Topic, string(want.Value)}]; ok {
				kind, where = KindMoved, fmt.Sprintf("at %s offset %d instead", got.TopicPartition(), got.Offset)
			}
			report(want, kind, "%s offset %d: acknowledged key %q value %s, read key %q value %s; the acknowledged value is %s",
				tp, off, want.Key, quote(want.Value), recs[i].Key, quote(recs[i].Value), where)
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
			report(want, KindLost, "%s: value %s, acknowledged without an offset, is missing", want.TopicPartition(), quote(want.Value))
		case got.Partition != want.Partition:
			report(want, KindMoved, "%s: value %s, acknowledged without an offset, found at %s offset %d instead",
				want.TopicPartition(), quote(want.Value), got.TopicPartition(), got.Offset)
		case !bytes.Equal(got.Key, want.Key):
			report(event{got, want.at}, KindCorrupt, "%s offset %d: value %s acknowledged with key %q, read key %q", got.TopicPartition(), got.Offset, quote(want.Value), want.Key, got.Key)
		}
	}

	// What readers were served is still there.
	for _, tp := range slices.SortedFunc(maps.Keys(c.mu.read), compareTopicPartitions) {
		byOffset := c.mu.read[tp]
		recs := logs[tp]
		for _, off := range slices.Sorted(maps.Keys(byOffset)) {
			was := byOffset[off]
			if ab, ok := c.mu.aborted[valueID{tp.Topic, string(was.Value)}]; ok {
				report(ab, KindAbortedRead, "%s offset %d: value %s, of an aborted transaction, was served to a reader", tp, off, quote(was.Value))
			}
			i := sort.Search(len(recs), func(i int) bool { return recs[i].Offset >= off })
			switch {
			case i == len(recs) || recs[i].Offset != off:
				report(was, KindUnstableRead, "%s offset %d: unstable read: value %s was served to a reader, and the log no longer has it", tp, off, quote(was.Value))
			case !bytes.Equal(recs[i].Value, was.Value) || !bytes.Equal(recs[i].Key, was.Key):
				report(was, KindUnstableRead, "%s offset %d: unstable read: value %s was served to a reader, the log now has value %s", tp, off, quote(was.Value), quote(recs[i].Value))
			}
		}
	}

	c.skippedLocked(logs, func(v Violation) { problems = append(problems, v) })

	res := Result{Summary: sum}
	for _, v := range problems {
		if why := c.allowedLocked(v); why != "" {
			v.AllowedBy = why
			res.Allowed = append(res.Allowed, v)
			continue
		}
		res.Violations = append(res.Violations, v)
	}
	res.Summary.Allowed = len(res.Allowed)
	return res
}

// lossKinds are the violations that losing a record explains, the ones
// a MayLose window can excuse.
var lossKinds = map[string]bool{KindLost: true, KindConflictingAck: true, KindUnstableRead: true, KindDivergentRead: true,
	// A consumer whose committed offset the log no longer reaches starts
	// again lower; located at the commit the loss undid.
	KindCommitBackwards: true}

// allowedLocked is the reason of the MayLose window that excuses v, or
// "". REQUIRES: c.mu held.
func (c *Checker) allowedLocked(v Violation) string {
	if !lossKinds[v.Kind] || v.At.IsZero() {
		return ""
	}
	for _, w := range c.mu.mayLose {
		if !v.At.Before(w.from) && !v.At.After(w.to) {
			return w.why
		}
	}
	return ""
}
