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
// first answer rather than a client's eventual success.
func ProduceOnce(ctx context.Context, b *kgo.Broker, topic string, n int) error {
	bb := record.NewBuilder(record.DefaultBatchOptions())
	for i := range n {
		bb.Add([]byte("k"), fmt.Appendf(nil, "v%d", i), nil, time.Now().UnixMilli())
	}
	batch, err := bb.Build()
	if err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
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
