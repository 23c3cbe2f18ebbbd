package history

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadAll reads every record of the topics' partitions, from each one's
// log start offset up to the high watermark it had when ReadAll began, with
// a franz-go consumer assigned to the partitions directly (no group). Every
// partition of the topics is a key of the result, empty ones included.
//
// It is meant for quiet topics (the producers are done). It waits for the
// record just below each high watermark; a transaction marker there
// counts (control records are read and left out of the result), but a
// partition whose last offsets compaction removed would wait until ctx
// ends.
func ReadAll(ctx context.Context, brokers string, topics ...string) (map[TopicPartition][]Record, error) {
	return readAll(ctx, brokers, false, topics)
}

// ReadAllCommitted is ReadAll as a read_committed consumer reads: the
// records of aborted transactions are left out. It first waits (within
// ctx) until no transaction is open on any of the partitions (the last
// stable offset at the high watermark), so that it reads every decided
// record, and fails naming the partitions where one stays open: a
// transaction that outlives its timeout is a hanging one.
func ReadAllCommitted(ctx context.Context, brokers string, topics ...string) (map[TopicPartition][]Record, error) {
	return readAll(ctx, brokers, true, topics)
}

func readAll(ctx context.Context, brokers string, committed bool, topics []string) (map[TopicPartition][]Record, error) {
	if len(topics) == 0 {
		return nil, errors.New("ReadAll: no topics")
	}
	seeds := strings.Split(brokers, ",")
	admClient, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	defer admClient.Close()
	adm := kadm.NewClient(admClient)
	starts, err := listOffsets(ctx, adm.ListStartOffsets, topics)
	if err != nil {
		return nil, fmt.Errorf("listing log start offsets of %v: %w", topics, err)
	}
	ends, err := listOffsets(ctx, adm.ListEndOffsets, topics)
	if err != nil {
		return nil, fmt.Errorf("listing high watermarks of %v: %w", topics, err)
	}
	if committed {
		if err := awaitStable(ctx, adm, ends, topics); err != nil {
			return nil, err
		}
	}

	out := make(map[TopicPartition][]Record)
	pending := make(map[TopicPartition]int64) // partition -> high watermark still to reach
	assign := make(map[string]map[int32]kgo.Offset)
	var missing error
	ends.Each(func(end kadm.ListedOffset) {
		tp := TopicPartition{end.Topic, end.Partition}
		out[tp] = []Record{}
		start, ok := starts.Lookup(end.Topic, end.Partition)
		if !ok {
			missing = errors.Join(missing, fmt.Errorf("%s: no log start offset listed", tp))
			return
		}
		if end.Offset <= start.Offset {
			return
		}
		pending[tp] = end.Offset
		if assign[end.Topic] == nil {
			assign[end.Topic] = make(map[int32]kgo.Offset)
		}
		assign[end.Topic][end.Partition] = kgo.NewOffset().At(start.Offset)
	})
	if missing != nil {
		return nil, missing
	}
	if len(pending) == 0 {
		return out, nil
	}

	// Control records (transaction markers) are kept, and skipped
	// below: a partition whose last record is a marker is read to its
	// end only by seeing it.
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(assign), kgo.KeepControlRecords()}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	consumer, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	for len(pending) > 0 {
		fetches := consumer.PollFetches(ctx)
		var ferr error
		fetches.EachError(func(topic string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("%s-%d: %w", topic, p, err))
		})
		if ferr != nil {
			return nil, fmt.Errorf("reading %v (still to read: %s): %w", topics, describePending(pending), ferr)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			tp := TopicPartition{r.Topic, r.Partition}
			end, ok := pending[tp]
			if !ok || r.Offset >= end {
				return // past the high watermark ReadAll started with
			}
			if r.Offset == end-1 {
				delete(pending, tp)
			}
			if r.Attrs.IsControl() {
				return
			}
			out[tp] = append(out[tp], Record{
				Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
				Key: r.Key, Value: r.Value,
				Timestamp: r.Timestamp, ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch,
				Compression: r.Attrs.CompressionType(),
			})
		})
	}
	return out, nil
}

// awaitStable waits until every partition's last stable offset is its
// high watermark in ends.
func awaitStable(ctx context.Context, adm *kadm.Client, ends kadm.ListedOffsets, topics []string) error {
	for {
		stable, err := listOffsets(ctx, adm.ListCommittedOffsets, topics)
		if err != nil {
			return fmt.Errorf("listing last stable offsets of %v: %w", topics, err)
		}
		var open []string
		ends.Each(func(end kadm.ListedOffset) {
			if s, ok := stable.Lookup(end.Topic, end.Partition); !ok || s.Offset < end.Offset {
				open = append(open, fmt.Sprintf("%s-%d (last stable offset %d, high watermark %d)", end.Topic, end.Partition, s.Offset, end.Offset))
			}
		})
		if len(open) == 0 {
			return nil
		}
		sort.Strings(open)
		select {
		case <-ctx.Done():
			return fmt.Errorf("a transaction is still open on %s: %w", strings.Join(open, ", "), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func describePending(pending map[TopicPartition]int64) string {
	parts := make([]string, 0, len(pending))
	for tp, end := range pending {
		parts = append(parts, fmt.Sprintf("%s up to %d", tp, end))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// listOffsets runs list (kadm's ListStartOffsets or ListEndOffsets)
// again while a partition's answer is a retriable error: kadm does not
// retry per-partition errors, and a leadership that just moved (an
// election, a controlled shutdown) answers NOT_LEADER_FOR_PARTITION from
// the old leader until the client's metadata catches up.
func listOffsets(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error), topics []string) (kadm.ListedOffsets, error) {
	for {
		listed, err := list(ctx, topics...)
		if err == nil {
			err = listed.Error()
		}
		if err == nil || !kerr.IsRetriable(err) {
			return listed, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (still, when %w)", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
