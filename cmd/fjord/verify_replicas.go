package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/storage"
)

// replicaSettle bounds how long a --local run waits, once the writes
// stopped, for every replica of a partition to hold its leader's bytes:
// a follower that was just restarted may still be copying.
const replicaSettle = 30 * time.Second

// compareReplicas reads each partition of topic from the data directory
// of every node Metadata names as its replica and reports, for each
// partition whose replicas still differ after replicaSettle, how. A
// follower copies its leader's batches byte for byte, so once writes
// stop the replicas are the same bytes (storage.LogBytes), whatever
// each crashed, truncated or rolled.
func compareReplicas(ctx context.Context, cl *kgo.Client, c *localCluster, topic string) (int, []history.Violation, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Topics) == 1 {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err == nil && len(resp.Topics) != 1 {
		err = fmt.Errorf("answered %d topics", len(resp.Topics))
	}
	if err != nil {
		return 0, nil, fmt.Errorf("finding %s's replicas: %w", topic, err)
	}
	deadline := time.Now().Add(replicaSettle)
	var diffs []history.Violation
	for _, p := range resp.Topics[0].Partitions {
		var why string
		for {
			why = replicaDifference(c, topic, p.Partition, p.Replicas)
			if why == "" || !time.Now().Before(deadline) || !sleepCtx(ctx, 200*time.Millisecond) {
				break
			}
		}
		if why != "" {
			diffs = append(diffs, history.Violation{Kind: kindReplicasDiffer,
				Text: fmt.Sprintf("%s-%d: replicas not byte-identical %v after the writes stopped: %s", topic, p.Partition, replicaSettle, why)})
		}
	}
	return len(resp.Topics[0].Partitions), diffs, nil
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
