package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/fjordmsg"
)

// errKeyedTopic: a Fjord node refused to grow a topic because it has
// keyed records (fjordmsg.RefusedKeyed on its answer).
var errKeyedTopic = errors.New("topic has keyed records")

// growPartitions grows topic to count partitions with CreatePartitions,
// built here rather than through kadm.UpdatePartitions, which cannot
// carry tagged fields: unless allowKeyRemap, the topic's entry carries
// Fjord's RefuseKeyedTag, and a Fjord node that knows the topic has keyed
// records refuses (errKeyedTopic, nothing changed). franz-go sends v3,
// flexible, which every Fjord node serves; a Kafka broker skips the tag
// and grows the topic, as it skips every tag it does not know.
func growPartitions(ctx context.Context, cl *kgo.Client, topic string, count int32, allowKeyRemap, validateOnly bool) error {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = int32(requestTimeout.Milliseconds())
	req.ValidateOnly = validateOnly
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, count
	if !allowKeyRemap {
		fjordmsg.SetRefuseKeyed(&rt)
	}
	req.Topics = []kmsg.CreatePartitionsRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != topic {
		return fmt.Errorf("the node answered %d topics for %q", len(resp.Topics), topic)
	}
	t := &resp.Topics[0]
	if fjordmsg.RefusedKeyed(t) {
		return errKeyedTopic
	}
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		msg := ""
		if t.ErrorMessage != nil {
			msg = *t.ErrorMessage
		}
		return kafkaError(err, msg)
	}
	return nil
}

// keyedRefusal is what `topic alter --partitions` says when the node
// refuses to grow a topic with keyed records: why, and the two ways on.
// One line, as every error of the CLI.
func keyedRefusal(topic string, from, to int32) error {
	return fmt.Errorf("%w: not growing %s from %d to %d partitions: its records have keys, and a key's partition is "+
		"murmur2(key) modulo the partition count, so growing it moves existing keys to other partitions and per-key order "+
		"breaks across the change (nothing was changed). Use --allow-key-remap to grow it anyway, or "+
		"`fjord topic migrate %s DST --partitions %d` to copy it to a new topic of %d partitions keeping each key's order",
		errKeyedTopic, topic, from, to, topic, to, to)
}
