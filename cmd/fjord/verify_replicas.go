package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/storage"
)

// replicaSettle bounds how long a --local run waits, once the writes
// stopped, for every partition's replicas to be back in sync before it
// stops the nodes and compares their files: a follower that was just
// restarted may still be copying.
const replicaSettle = 30 * time.Second

// compareReplicas waits (replicaSettle at most) until every partition of
// topic has all its replicas in sync, stops every node cleanly (which
// fsyncs what each holds: under --unsynced-writes-in-memory a running
// node's files lack its unsynced writes), and reads each partition from
// the data directory of every replica. A follower copies its leader's
// batches byte for byte, so the replicas are the same bytes
// (storage.LogBytes), whatever each crashed, truncated or rolled; a
// partition whose replicas differ, or a node that does not stop
// cleanly, is a violation.
func compareReplicas(ctx context.Context, cl *kgo.Client, c *localCluster, topics []string) (int, []history.Violation, error) {
	resp, err := topicMetadata(ctx, cl, topics...)
	if err != nil {
		return 0, nil, fmt.Errorf("finding the replicas of %s: %w", strings.Join(topics, ", "), err)
	}
	var found []history.Violation
	sctx, cancel := context.WithTimeout(ctx, replicaSettle)
	short := waitFullISR(sctx, cl, topics...)
	cancel()
	if err := c.stopNodes(); err != nil {
		found = append(found, history.Violation{Kind: kindFaultFailed, Text: "stopping the nodes to compare their replicas: " + err.Error()})
	}
	compared := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			compared++
			if why := replicaDifference(c, *t.Topic, p.Partition, p.Replicas); why != "" {
				if short != nil {
					why += fmt.Sprintf(" (not every replica was back in sync %v after the writes stopped: %v)", replicaSettle, short)
				}
				found = append(found, history.Violation{Kind: kindReplicasDiffer,
					Text: fmt.Sprintf("%s-%d: replicas not byte-identical once the nodes stopped: %s", *t.Topic, p.Partition, why)})
			}
		}
	}
	return compared, found, nil
}

// topicMetadata is one node's Metadata answer for topics alone, each
// answered without an error.
func topicMetadata(ctx context.Context, cl *kgo.Client, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Topics) != len(topics) {
		err = fmt.Errorf("answered %d topics of %d", len(resp.Topics), len(topics))
	}
	for i := 0; err == nil && i < len(resp.Topics); i++ {
		if err = kerr.ErrorForCode(resp.Topics[i].ErrorCode); err != nil {
			err = fmt.Errorf("%s: %w", *resp.Topics[i].Topic, err)
		}
	}
	return resp, err
}

// waitFullISR asks for the topics' metadata until every partition has
// all its replicas in sync, or ctx ends: then the error names the
// partitions still short.
func waitFullISR(ctx context.Context, cl *kgo.Client, topics ...string) error {
	for {
		resp, err := topicMetadata(ctx, cl, topics...)
		if err == nil {
			var short []string
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if len(p.ISR) < len(p.Replicas) || p.ErrorCode != 0 {
						short = append(short, fmt.Sprintf("%s-%d replicas %v in sync %v", *t.Topic, p.Partition, p.Replicas, p.ISR))
					}
				}
			}
			if len(short) == 0 {
				return nil
			}
			err = errors.New(strings.Join(short, "; "))
		}
		if !clock.Sleep(ctx, 100*time.Millisecond) {
			return err
		}
	}
}

// replicaDifference is "" when every replica of the partition holds the
// same non-empty bytes, else each replica's size.
func replicaDifference(c *localCluster, topic string, partition int32, replicas []int32) string {
	var first []byte
	same := true
	var sizes []string
	for i, id := range replicas {
		if id < 1 || int(id) > len(c.nodes) {
			return fmt.Sprintf("replica %d is not a local node", id)
		}
		b, err := storage.LogBytes(filepath.Join(c.nodes[id-1].dataDir(), fmt.Sprintf("%s-%d", topic, partition)))
		if err != nil {
			return fmt.Sprintf("node %d: %v", id, err)
		}
		if i == 0 {
			first = b
		} else if !bytes.Equal(b, first) {
			same = false
		}
		sizes = append(sizes, fmt.Sprintf("node %d has %d bytes", id, len(b)))
	}
	if same && len(first) > 0 {
		return ""
	}
	return strings.Join(sizes, ", ")
}
