package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/fjordmsg"
)

// growPartitions is fjordmsg.GrowPartitions with the CLI's request
// timeout and errors.
func growPartitions(ctx context.Context, cl *kgo.Client, topic string, count int32, allowKeyRemap, validateOnly bool) error {
	msg, err := fjordmsg.GrowPartitions(ctx, cl, topic, count, requestTimeout, allowKeyRemap, validateOnly)
	if err != nil && !errors.Is(err, fjordmsg.ErrKeyedTopic) {
		return kafkaError(err, msg)
	}
	return err
}

// keyedRefusal is what `topic alter --partitions` says when the node
// refuses to grow a topic with keyed records: why, and the two ways on.
// One line, as every error of the CLI.
func keyedRefusal(topic string, from, to int32) error {
	return fmt.Errorf("%w: not growing %s from %d to %d partitions: its records have keys, and a key's partition is "+
		"murmur2(key) modulo the partition count, so growing it moves existing keys to other partitions and per-key order "+
		"breaks across the change (nothing was changed). Use --allow-key-remap to grow it anyway, or "+
		"`fjord topic migrate %s DST --partitions %d` to copy it to a new topic of %d partitions keeping each key's order",
		fjordmsg.ErrKeyedTopic, topic, from, to, topic, to, to)
}
