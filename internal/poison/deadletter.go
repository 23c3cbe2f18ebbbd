package poison

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/failpoint"
)

// Dead-letter records: a poison record copied to its group's dead-letter
// topic keeps its key, value, headers and timestamp, and gains headers
// saying where it came from and why, so `fjord dlq list` can show them
// and `fjord dlq replay` can re-drive it to where it failed.
const (
	HeaderTopic     = "fjord.dlq.topic"
	HeaderPartition = "fjord.dlq.partition"
	HeaderOffset    = "fjord.dlq.offset"
	HeaderTimestamp = "fjord.dlq.timestamp" // the original's, Unix milliseconds
	HeaderGroup     = "fjord.dlq.group"
	HeaderReason    = "fjord.dlq.reason"
	HeaderAttempts  = "fjord.dlq.attempts"
	// HeaderReplayed marks a record `fjord dlq replay` wrote back: its
	// value is the dead-letter record's coordinates (topic/partition/
	// offset), so a replay that died before its commit finds what it
	// already wrote.
	HeaderReplayed = "fjord.dlq.replayed-from"
)

// DeadLetter is rec's copy for dlqTopic: rec's key, value, headers and
// timestamp, plus the fjord.dlq.* headers naming its topic, partition,
// offset and timestamp, the group, the reason (cut to MaxReasonBytes) and
// the attempts.
func DeadLetter(rec *kgo.Record, dlqTopic, group, reason string, attempts int32) *kgo.Record {
	headers := make([]kgo.RecordHeader, 0, len(rec.Headers)+7)
	headers = append(headers, rec.Headers...)
	reason = Pause{Reason: reason}.normalized().Reason
	headers = append(headers,
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(rec.Topic)},
		kgo.RecordHeader{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(rec.Partition), 10)},
		kgo.RecordHeader{Key: HeaderOffset, Value: strconv.AppendInt(nil, rec.Offset, 10)},
		kgo.RecordHeader{Key: HeaderTimestamp, Value: strconv.AppendInt(nil, rec.Timestamp.UnixMilli(), 10)},
		kgo.RecordHeader{Key: HeaderGroup, Value: []byte(group)},
		kgo.RecordHeader{Key: HeaderReason, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderAttempts, Value: strconv.AppendInt(nil, int64(attempts), 10)},
	)
	return &kgo.Record{Topic: dlqTopic, Key: rec.Key, Value: rec.Value, Headers: headers, Timestamp: rec.Timestamp}
}

// Origin is where a dead-letter record came from, read back from its
// headers; ok is false for a record without them (not a dead letter).
type Origin struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Group     string
	Reason    string
	Attempts  int32
}

// OriginOf reads a dead-letter record's origin headers (the last of
// each, as a dead letter of a dead letter carries both).
func OriginOf(rec *kgo.Record) (o Origin, ok bool) {
	var seen int
	for _, h := range rec.Headers {
		v := string(h.Value)
		switch h.Key {
		case HeaderTopic:
			o.Topic, seen = v, seen|1
		case HeaderPartition:
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return o, false
			}
			o.Partition, seen = int32(n), seen|2
		case HeaderOffset:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return o, false
			}
			o.Offset, seen = n, seen|4
		case HeaderTimestamp:
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				o.Timestamp = time.UnixMilli(n)
			}
		case HeaderGroup:
			o.Group = v
		case HeaderReason:
			o.Reason = v
		case HeaderAttempts:
			if n, err := strconv.ParseInt(v, 10, 32); err == nil {
				o.Attempts = int32(n)
			}
		}
	}
	return o, seen == 7
}

// EnsureDLQTopic creates topic with the cluster's default partitions and
// replication factor when it does not exist.
func EnsureDLQTopic(ctx context.Context, adm *kadm.Client, topic string) error {
	resp, err := adm.CreateTopic(ctx, -1, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating the dead-letter topic %q: %w", topic, err)
	}
	return nil
}

// ErrNotPaused: Resume found no pause for the partition.
var ErrNotPaused = errors.New("poison: the partition is not paused")

// ResumeResult says what Resume did.
type ResumeResult struct {
	// Pause is the pause that ended (or, with a skip left to the
	// partition's owner, was marked).
	Pause Pause
	// DeadLetter is the record's dead-letter copy as written (with
	// Partition and Offset set), for a skip.
	DeadLetter *kgo.Record
	// Committed: the group's commit is past the record now (a skip of a
	// group with no members). False for a skip the owner carries out at
	// its next consume, and for a resume without a skip.
	Committed bool
}

// Resume ends group's pause on topic's partition. Without skip the
// pause is removed: delivery starts again at the paused record. With
// skip, the record (read from the log through cl) is first written to
// the policy's dead-letter topic (<topic>.dlq without a policy) through
// producer (acks=all), and then either the group's commit moves past it
// and the pause goes (a group with no members: the commit is taken), or
// the pause is marked Skip for the partition's owner, a member, to
// commit past and remove (Kafka refuses a commit from outside a group
// with members). In every order a crash leaves the record paused or its
// copy written once more at most, never skipped without its copy.
func Resume(ctx context.Context, s *Store, cl, producer *kgo.Client, group, topic string, partition int32, skip bool) (ResumeResult, error) {
	// A pause another node recorded a moment ago is seen.
	if err := s.Sync(ctx); err != nil {
		return ResumeResult{}, err
	}
	var pz Pause
	found := false
	for _, p := range s.Pauses(group, topic) {
		if p.Partition == partition {
			pz, found = p, true
		}
	}
	if !found {
		return ResumeResult{}, ErrNotPaused
	}
	res := ResumeResult{Pause: pz}
	if !skip {
		_, _, err := s.Resume(ctx, group, topic, partition)
		return res, err
	}
	rec, err := readAt(ctx, cl, topic, partition, pz.Offset)
	if err != nil {
		return res, err
	}
	dlq := DefaultDLQTopic(topic)
	if pol, ok := s.Policy(group, topic); ok {
		dlq = pol.DeadLetterTopic()
	}
	if err := EnsureDLQTopic(ctx, kadm.NewClient(cl), dlq); err != nil {
		return res, err
	}
	res.DeadLetter = DeadLetter(rec, dlq, group, pz.Reason, pz.Attempts)
	if err := producer.ProduceSync(ctx, res.DeadLetter).FirstErr(); err != nil {
		return res, fmt.Errorf("writing the paused record to the dead-letter topic %q: %w", dlq, err)
	}
	failpoint.Hit("poison.resume-dead-letter-written")
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: topic, Partition: partition, At: pz.Offset + 1, LeaderEpoch: -1})
	resp, err := kadm.NewClient(cl).CommitOffsets(ctx, group, commit)
	if err == nil {
		err = resp.Error()
	}
	switch {
	case err == nil:
		res.Committed = true
		_, _, err = s.Resume(ctx, group, topic, partition)
		return res, err
	case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.RebalanceInProgress):
		// Members run: the owner commits past it.
		pz.Skip = true
		res.Pause = pz
		return res, s.Pause(ctx, pz)
	default:
		return res, fmt.Errorf("committing past the paused record: %w", err)
	}
}

// readAt reads the record at offset of topic's partition, with a client
// of cl's options (its brokers, id and security).
func readAt(ctx context.Context, cl *kgo.Client, topic string, partition int32, offset int64) (*kgo.Record, error) {
	rd, err := kgo.NewClient(append(cl.Opts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(offset)}}))...)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		fs := rd.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			return nil, fmt.Errorf("reading %s-%d at %d: %w", topic, partition, offset, err)
		}
		for _, r := range fs.Records() {
			if r.Offset == offset {
				return r, nil
			}
			if r.Offset > offset {
				return nil, fmt.Errorf("reading %s-%d at %d: the record is gone (compacted?); the first after it is at %d", topic, partition, offset, r.Offset)
			}
		}
	}
}
