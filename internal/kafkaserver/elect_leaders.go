package kafkaserver

// ElectLeaders: v0-2
//
// Asks the active controller (through any node) for leader elections:
// PREFERRED (0; the only kind before v1) makes each partition's first
// replica its leader again, UNCLEAN (1) gives a leader to a partition
// that has none, from outside its ISR when no ISR member is in service
// (controller/elect.go has the rules). Topics null is every partition,
// and then the answer names only the partitions that needed an election,
// as Kafka's controller does; otherwise every named partition is
// answered once, however often it was named: no error (elected),
// ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
// ELIGIBLE_LEADERS_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PARTITION. An
// election type other than 0 or 1 is INVALID_REQUEST, with nothing
// elected. An error of the whole request (NOT_CONTROLLER after the
// retries, REQUEST_TIMED_OUT) is the top-level ErrorCode in v1+ and
// every named partition's error. TimeoutMillis bounds the wait for the
// commit.
//
// Authorization: ALTER on the cluster, before anything else. Denied, the
// whole request is refused as above with CLUSTER_AUTHORIZATION_FAILED
// (Kafka's error response: the top-level code in v1+ and every named
// partition's), and nothing is elected.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
)

func handleElectLeaders(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.ElectLeadersRequest)
	resp := kmsg.NewPtrElectLeadersResponse()
	resp.SetVersion(req.version)

	typ := controlplane.ElectPreferred
	if req.version >= 1 {
		typ = controlplane.ElectionType(r.ElectionType)
	}
	var named []controlplane.TopicPartition
	if r.Topics != nil {
		named = []controlplane.TopicPartition{}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				named = append(named, controlplane.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	var results []controlplane.ElectionResult
	err := s.clusterDenied(req, acl.OperationAlter)
	switch {
	case err != nil:
	case typ != controlplane.ElectPreferred && typ != controlplane.ElectUnclean:
		err = fmt.Errorf("%w: unknown election type %d (0 is preferred, 1 unclean)", kerr.InvalidRequest, r.ElectionType)
	case r.Topics == nil || len(named) > 0:
		cctx, cancel := withRequestTimeout(ctx, r.TimeoutMillis)
		results, err = s.controller.ElectLeaders(cctx, controlplane.ElectLeaders{Type: typ, Partitions: named})
		cancel()
	}
	if err != nil {
		resp.ErrorCode, _ = s.errorAndMessage(err, "ElectLeaders", "type", typ.String())
		// Every named partition, once, with the request's error.
		seen := map[controlplane.TopicPartition]bool{}
		results = results[:0]
		for _, tp := range named {
			if !seen[tp] {
				seen[tp] = true
				results = append(results, controlplane.ElectionResult{TopicPartition: tp, Err: err})
			}
		}
	}
	index := map[string]int{}
	for _, res := range results {
		i, ok := index[res.Topic]
		if !ok {
			i = len(resp.Topics)
			index[res.Topic] = i
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = res.Topic
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewElectLeadersResponseTopicPartition()
		p.Partition = res.Partition
		if res.Err != nil {
			p.ErrorCode, p.ErrorMessage = s.errorAndMessage(res.Err, "ElectLeaders", "topic", res.Topic, "partition", res.Partition)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
	}
	return resp, nil, nil
}
