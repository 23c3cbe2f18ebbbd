// Package leaderfetch is a follower's Kafka-protocol client to its
// partitions' leaders (replica.LeaderTransport): it sends each of the
// replica manager's follower fetches as a Fetch request naming this
// node as the replica (ReplicaState from v15, the replica id before),
// with topic ids, LastFetchedEpoch and no fetch session, to the leader's
// listener as this node's image has it, and turns the answer back into
// the replica manager's terms.
//
// A full fetch every round (no KIP-227 session) costs a request that
// names every partition the fetcher carries; sessions are a later
// optimisation for followers of thousands of partitions.
//
// Threads: Fetch may be called by every fetcher at once; the connections
// are the peers.Pool's.
package leaderfetch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/peers"
	"github.com/fjordmq/fjord/internal/replica"
)

// Client is the follower's transport.
type Client struct {
	peers *peers.Pool
}

var _ replica.LeaderTransport = (*Client)(nil)

// New returns a Client that dials leaders through pool (this node's
// internal client, so the leader knows a peer).
func New(pool *peers.Pool) *Client { return &Client{peers: pool} }

func (c *Client) broker(leader int32) (*kgo.Broker, error) {
	b, err := c.peers.Broker(leader)
	if errors.Is(err, peers.ErrNotRegistered) {
		return nil, fmt.Errorf("%w: leader %d has not registered a listener", replica.ErrNotLeader, leader)
	}
	return b, err
}

type key struct {
	id        metadata.UUID
	name      string
	partition int32
}

// Fetch implements replica.LeaderTransport.
func (c *Client) Fetch(ctx context.Context, leader int32, f replica.LeaderFetch) ([]replica.LeaderFetchResult, error) {
	b, err := c.broker(leader)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = f.ReplicaID
	req.ReplicaState.ID, req.ReplicaState.Epoch = f.ReplicaID, f.BrokerEpoch
	req.MaxWaitMillis = int32(f.MaxWait / time.Millisecond)
	req.MinBytes, req.MaxBytes = f.MinBytes, f.MaxBytes
	req.SessionID, req.SessionEpoch = 0, -1
	topicIdx := map[metadata.UUID]int{}
	for _, p := range f.Partitions {
		i, ok := topicIdx[p.TopicID]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = p.Topic, p.TopicID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			topicIdx[p.TopicID] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch = p.Partition, p.CurrentLeaderEpoch
		rp.FetchOffset, rp.LastFetchedEpoch = p.FetchOffset, p.LastFetchedEpoch
		rp.LogStartOffset, rp.PartitionMaxBytes = p.LogStartOffset, p.MaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	kresp, err := b.Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("fetch from leader %d: %w", leader, err)
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetch from leader %d: %w", leader, err)
	}
	got := map[key]*kmsg.FetchResponseTopicPartition{}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			got[key{t.TopicID, t.Topic, p.Partition}] = p
		}
	}
	out := make([]replica.LeaderFetchResult, len(f.Partitions))
	for i, p := range f.Partitions {
		rp := got[key{p.TopicID, "", p.Partition}]
		if rp == nil {
			rp = got[key{metadata.UUID{}, p.Topic, p.Partition}] // below v13: by name
		}
		if rp == nil {
			out[i] = replica.LeaderFetchResult{Err: fmt.Errorf("%w: leader %d did not answer %s-%d", replica.ErrNotLeader, leader, p.Topic, p.Partition),
				DivergingEpoch: replica.EpochEndOffset{Epoch: -1, EndOffset: -1}}
			continue
		}
		out[i] = replica.LeaderFetchResult{
			Err:            kerr.ErrorForCode(rp.ErrorCode),
			HighWatermark:  rp.HighWatermark,
			LogStartOffset: rp.LogStartOffset,
			DivergingEpoch: replica.EpochEndOffset{Epoch: rp.DivergingEpoch.Epoch, EndOffset: rp.DivergingEpoch.EndOffset},
			Records:        rp.RecordBatches,
		}
	}
	return out, nil
}
