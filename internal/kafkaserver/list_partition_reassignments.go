package kafkaserver

// ListPartitionReassignments: v0
//
// Lists the partition reassignments in progress (KIP-455), from this
// node's metadata image, the one Metadata answers from: every node
// answers, not only the active controller, and an answer is never older
// than the Metadata this node gave before it. Topics null is every
// partition being reassigned, by topic name and partition; otherwise the
// named partitions that are being reassigned, each once, in request
// order. A named topic or partition that does not exist, or is not being
// reassigned, is left out, as Kafka's controller does: the answer has no
// per-partition error codes. Each partition carries its replicas (the
// target's in order, then the ones being removed, Kafka's order), and
// the replicas being added and removed. TimeoutMillis is not needed: the
// answer waits for nothing.
//
// Authorization: DESCRIBE on the cluster. Denied, the answer is the
// top-level CLUSTER_AUTHORIZATION_FAILED and lists nothing.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/metadata"
)

func handleListPartitionReassignments(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.ListPartitionReassignmentsRequest)
	resp := kmsg.NewPtrListPartitionReassignmentsResponse()
	resp.SetVersion(req.version)
	if err := s.clusterDenied(req, acl.OperationDescribe); err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.errorAndMessage(err, "ListPartitionReassignments")
		return resp, nil, nil
	}
	img := s.image()

	if r.Topics == nil {
		if img.Reassignments == 0 {
			return resp, nil, nil
		}
		for _, name := range img.TopicNames() {
			t := img.Topics[name]
			var rt *kmsg.ListPartitionReassignmentsResponseTopic
			for i := range t.Partitions {
				if !t.Partitions[i].Reassigning() {
					continue
				}
				if rt == nil {
					resp.Topics = append(resp.Topics, kmsg.NewListPartitionReassignmentsResponseTopic())
					rt = &resp.Topics[len(resp.Topics)-1]
					rt.Topic = name
				}
				rt.Partitions = append(rt.Partitions, ongoingReassignment(int32(i), &t.Partitions[i]))
			}
		}
		return resp, nil, nil
	}

	// A topic named in two entries is answered in one; a partition named
	// twice, once.
	type key struct {
		topic     string
		partition int32
	}
	index := make(map[string]int, len(r.Topics))
	seen := map[key]bool{}
	for _, want := range r.Topics {
		t, ok := lookupTopic(img, want.Topic)
		if !ok {
			continue
		}
		for _, pi := range want.Partitions {
			p, ok := lookupPartition(t, pi)
			if !ok || !p.Reassigning() || seen[key{want.Topic, pi}] {
				continue
			}
			seen[key{want.Topic, pi}] = true
			i, ok := index[want.Topic]
			if !ok {
				i = len(resp.Topics)
				index[want.Topic] = i
				rt := kmsg.NewListPartitionReassignmentsResponseTopic()
				rt.Topic = want.Topic
				resp.Topics = append(resp.Topics, rt)
			}
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, ongoingReassignment(pi, p))
		}
	}
	return resp, nil, nil
}

// ongoingReassignment is partition i's entry in the answer. The slices
// are the image's, which is never changed, and only read by the encoder.
func ongoingReassignment(i int32, p *metadata.Partition) kmsg.ListPartitionReassignmentsResponseTopicPartition {
	rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
	rp.Partition = i
	rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = p.Replicas, p.Adding, p.Removing
	return rp
}
