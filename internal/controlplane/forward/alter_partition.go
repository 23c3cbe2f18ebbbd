package forward

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
)

// AlterPartition implements controlplane.ISR: a leader on any node asks
// the active controller for a partition's new ISR, and hears the
// committed state only once this node's image has it, so the leader's
// next decision, made from its image, starts from the state it was told.
//
// The request is AlterPartition v3 (NewEpochISR, KIP-903) with NewISR
// filled as well for a controller that speaks only v2; either carries
// the topic id. Like every change here it is retried on NOT_CONTROLLER
// until the caller's deadline or MaxWait; a retry after a lost
// connection may find its first attempt committed, and then hears
// INVALID_UPDATE_VERSION (the partition epoch has moved on), after which
// the leader's image brings it the state it asked for.
func (c *Client) AlterPartition(ctx context.Context, req controlplane.AlterPartition) (st controlplane.PartitionState, err error) {
	err = c.do(ctx, func(ctx context.Context) error {
		st, err = c.cfg.Local.AlterPartition(ctx, req)
		return err
	}, func(ctx context.Context) error {
		st, err = c.alterPartitionRemote(ctx, req)
		return err
	})
	return st, err
}

func (c *Client) alterPartitionRemote(ctx context.Context, req controlplane.AlterPartition) (controlplane.PartitionState, error) {
	if req.NewISRBrokerEpochs != nil && len(req.NewISRBrokerEpochs) != len(req.NewISR) {
		// v3 carries one epoch per member: there is no way to send this.
		return controlplane.PartitionState{}, fmt.Errorf("%w: %d broker epochs for %d new ISR members",
			controlplane.ErrInvalidRequest, len(req.NewISRBrokerEpochs), len(req.NewISR))
	}
	r := kmsg.NewPtrAlterPartitionRequest()
	r.BrokerID, r.BrokerEpoch = req.LeaderID, req.BrokerEpoch
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = req.Partition, req.LeaderEpoch, req.PartitionEpoch
	rp.NewISR = req.NewISR
	for i, id := range req.NewISR {
		m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR() // BrokerEpoch -1: not known
		m.BrokerID = id
		if req.NewISRBrokerEpochs != nil {
			m.BrokerEpoch = req.NewISRBrokerEpochs[i]
		}
		rp.NewEpochISR = append(rp.NewEpochISR, m)
	}
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = req.TopicID
	rt.Partitions = []kmsg.AlterPartitionRequestTopicPartition{rp}
	r.Topics = []kmsg.AlterPartitionRequestTopic{rt}

	resp, offset, err := c.send(ctx, r)
	if err != nil {
		return controlplane.PartitionState{}, err
	}
	ar := resp.(*kmsg.AlterPartitionResponse)
	if err := codeError(ar.ErrorCode, nil); err != nil {
		return controlplane.PartitionState{}, err
	}
	var got *kmsg.AlterPartitionResponseTopicPartition
	for i := range ar.Topics {
		for j := range ar.Topics[i].Partitions {
			if ar.Topics[i].TopidID == req.TopicID && ar.Topics[i].Partitions[j].Partition == req.Partition {
				got = &ar.Topics[i].Partitions[j]
			}
		}
	}
	if got == nil {
		return controlplane.PartitionState{}, fmt.Errorf("%w: the controller's answer leaves out partition %d of topic %s",
			controlplane.ErrTimedOut, req.Partition, req.TopicID)
	}
	if err := codeError(got.ErrorCode, nil); err != nil {
		return controlplane.PartitionState{}, err
	}
	if err := c.await(ctx, offset); err != nil {
		return controlplane.PartitionState{}, err
	}
	return controlplane.PartitionState{Leader: got.LeaderID, LeaderEpoch: got.LeaderEpoch,
		PartitionEpoch: got.PartitionEpoch, ISR: slices.Clone(got.ISR)}, nil
}
