package testutil

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/record"
)

// ProduceOnce sends one acks=all Produce of n records in one batch to
// partition 0 of topic, straight to broker b (no routing, no retries),
// and returns the partition's error as the broker answered it (a kerr
// value, with the broker's message), for tests that need a node's own
// first answer rather than a client's eventual success. Its timeout_ms
// is 10 s.
func ProduceOnce(ctx context.Context, b *kgo.Broker, topic string, n int) error {
	return ProduceOnceTimeout(ctx, b, topic, n, 10*time.Second)
}

// ProduceOnceTimeout is ProduceOnce with the request's timeout_ms: how
// long the broker may hold the produce waiting for its followers before
// it answers REQUEST_TIMED_OUT. ctx bounds the wait on the client's side.
func ProduceOnceTimeout(ctx context.Context, b *kgo.Broker, topic string, n int, timeout time.Duration) error {
	bb := record.NewBuilder(record.DefaultBatchOptions())
	for i := range n {
		bb.Add([]byte("k"), fmt.Appendf(nil, "v%d", i), nil, time.Now().UnixMilli())
	}
	batch, err := bb.Build()
	if err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, int32(timeout/time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, batch
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	resp, err := b.Request(ctx, req)
	if err != nil {
		return err
	}
	p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	err = kerr.ErrorForCode(p.ErrorCode)
	if err != nil && p.ErrorMessage != nil {
		return fmt.Errorf("%w: %s", err, *p.ErrorMessage)
	}
	return err
}
