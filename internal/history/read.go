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
// record just below each high watermark, so a partition whose last offsets
// hold no data record (compaction, transaction markers) would wait until
// ctx ends; nothing in issue 3's tests writes those.
func ReadAll(ctx context.Context, brokers string, topics ...string) (map[TopicPartition][]Record, error) {
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

	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(assign))
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
			out[tp] = append(out[tp], Record{
				Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
				Key: r.Key, Value: r.Value,
				Timestamp: r.Timestamp, ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch,
				Compression: r.Attrs.CompressionType(),
			})
			if r.Offset == end-1 {
				delete(pending, tp)
			}
		})
	}
	return out, nil
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
