package kafkaserver

// DescribeProducers: v0
//
// Describes the producers each partition's leader knows (KIP-664): for
// each, its id and epoch, the last sequence number and timestamp of its
// newest batch, the coordinator epoch of its last transaction marker (-1:
// none), and the first offset of its open transaction (-1: none).
// kafka-transactions.sh and kadm use it to find hanging transactions and
// to build the markers that abort them (WriteTxnMarkers).
//
// Per partition: the topic and partition exist
// (UNKNOWN_TOPIC_OR_PARTITION), and this node leads it
// (NOT_LEADER_OR_FOLLOWER), each with an error message. Internal topics
// are described like any other.
//
// Authorization: READ on the topic, each distinct name once, before any
// other check: a denied topic's partitions are TOPIC_AUTHORIZATION_FAILED
// whether or not it exists, and its producers are not read.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/replica"
)

func handleDescribeProducers(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.DescribeProducersRequest)
	resp := kmsg.NewPtrDescribeProducersResponse()
	resp.SetVersion(req.version)
	img := s.image()
	readable := s.authzByName(req, acl.OperationRead, acl.ResourceTopic)
	resp.Topics = make([]kmsg.DescribeProducersResponseTopic, len(r.Topics))
	for i := range r.Topics {
		t := &r.Topics[i]
		rt := &resp.Topics[i]
		*rt = kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.DescribeProducersResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			var err error
			if !readable.allowed(t.Topic) {
				err = authzError(acl.ResourceTopic)
			} else {
				_, err = s.leaderPartition(img, t.Topic, p, -1)
			}
			if err == nil {
				var producers []replica.ActiveProducer
				producers, err = s.replicas.ActiveProducers(t.Topic, p)
				rp.ActiveProducers = make([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, len(producers))
				for k, ap := range producers {
					out := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					out.ProducerID = ap.ProducerID
					out.ProducerEpoch = int32(ap.ProducerEpoch)
					out.LastSequence = ap.LastSequence
					out.LastTimestamp = ap.LastTimestamp
					out.CoordinatorEpoch = ap.CoordinatorEpoch
					out.CurrentTxnStartOffset = ap.CurrentTxnStartOffset
					rp.ActiveProducers[k] = out
				}
			}
			rp.ErrorCode, rp.ErrorMessage = s.errorAndMessage(err, "DescribeProducers", "topic", t.Topic, "partition", p)
		}
	}
	return resp, nil, nil
}
