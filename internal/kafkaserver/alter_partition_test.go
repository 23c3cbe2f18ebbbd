package kafkaserver

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// The wire half of AlterPartition against the in-memory controller: who
// may send it, and how a request becomes the controller's calls and
// their answers the response. The controller's own checks are tested in
// package controller, and on the wire against a real one in package node.

const alterInternalID = "fjord-internal-1-test"

// alterHarness serves node 1 with alterInternalID as its own internal
// client id, topic "t" of two partitions, and an AlterPartition that
// records each call and answers with answer.
type alterHarness struct {
	*wireHarness
	topicID metadata.UUID

	mu     sync.Mutex
	calls  []controlplane.AlterPartition
	local  []bool // whether each call's ctx was LocalOnly
	answer func(controlplane.AlterPartition) (controlplane.PartitionState, error)
}

func newAlterHarness(t *testing.T) *alterHarness {
	h := &alterHarness{wireHarness: newWireHarness(t, withConfig(func(cfg *Config) { cfg.InternalClientID = alterInternalID }))}
	h.topicID = h.ctrl.addTopic("t", 2).ID
	h.answer = func(req controlplane.AlterPartition) (controlplane.PartitionState, error) {
		return controlplane.PartitionState{Leader: req.LeaderID, LeaderEpoch: req.LeaderEpoch, PartitionEpoch: req.PartitionEpoch + 1, ISR: req.NewISR}, nil
	}
	h.ctrl.alterPartition = func(ctx context.Context, req controlplane.AlterPartition) (controlplane.PartitionState, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calls = append(h.calls, req)
		h.local = append(h.local, controlplane.IsLocalOnly(ctx))
		return h.answer(req)
	}
	return h
}

func (h *alterHarness) setAnswer(fn func(controlplane.AlterPartition) (controlplane.PartitionState, error)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answer = fn
}

func (h *alterHarness) recorded() ([]controlplane.AlterPartition, []bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls, h.local
}

// send sends req with clientID (nil: a null client id).
func (h *alterHarness) send(clientID *string, req *kmsg.AlterPartitionRequest) *kmsg.AlterPartitionResponse {
	conn := h.dial()
	conn.fmt = kmsg.NewRequestFormatter()
	if clientID != nil {
		conn.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID(*clientID))
	}
	return conn.roundTrip(req).(*kmsg.AlterPartitionResponse)
}

// alterReq is an AlterPartition of version v from broker 1 at broker
// epoch 0 (the in-memory image's) for the partitions given, each asking
// for new ISR [1] from leader epoch 0 and partition epoch 0.
func alterReq(v int16, topicID metadata.UUID, partitions ...int32) *kmsg.AlterPartitionRequest {
	r := kmsg.NewPtrAlterPartitionRequest()
	r.SetVersion(v)
	r.BrokerID, r.BrokerEpoch = 1, 0
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = topicID
	for _, p := range partitions {
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition = p
		rp.NewISR = []int32{1}
		m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		m.BrokerID = 1
		rp.NewEpochISR = []kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{m}
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = []kmsg.AlterPartitionRequestTopic{rt}
	return r
}

// Only a Fjord node's internal client, naming itself, may alter an
// ISR; anyone else hears CLUSTER_AUTHORIZATION_FAILED and the
// controller is never asked.
func TestAlterPartitionOnlyFromANodeAsItself(t *testing.T) {
	h := newAlterHarness(t)
	for _, c := range []struct {
		name     string
		clientID *string
		brokerID int32
	}{
		{"outside client", kmsg.StringPtr("kafka-tools"), 1},
		{"null client id", nil, 1},
		{"empty client id", kmsg.StringPtr(""), 1},
		{"outside client naming an internal-looking id", kmsg.StringPtr("fjord-internal-1-guess"), 1},
		{"internal client naming another broker", kmsg.StringPtr(alterInternalID), 2},
	} {
		req := alterReq(3, h.topicID, 0)
		req.BrokerID = c.brokerID
		resp := h.send(c.clientID, req)
		if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(resp.Topics) != 0 {
			t.Errorf("%s: error %v, %d topics; want CLUSTER_AUTHORIZATION_FAILED and none", c.name, kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics))
		}
	}
	if calls, _ := h.recorded(); len(calls) != 0 {
		t.Fatalf("the controller was asked %d times: %+v", len(calls), calls)
	}
}

// A stale broker epoch is the whole request's answer, in the top-level
// code, whether this node's image shows it or the controller finds it.
func TestAlterPartitionStaleBrokerEpoch(t *testing.T) {
	h := newAlterHarness(t)
	req := alterReq(3, h.topicID, 0, 1)
	req.BrokerEpoch = 7
	if resp := h.send(kmsg.StringPtr(alterInternalID), req); resp.ErrorCode != kerr.StaleBrokerEpoch.Code || len(resp.Topics) != 0 {
		t.Fatalf("error %v, %d topics; want STALE_BROKER_EPOCH and none", kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics))
	}
	if calls, _ := h.recorded(); len(calls) != 0 {
		t.Fatalf("the controller was asked: %+v", calls)
	}
	h.setAnswer(func(controlplane.AlterPartition) (controlplane.PartitionState, error) {
		return controlplane.PartitionState{}, controlplane.ErrStaleBrokerEpoch
	})
	if resp := h.send(kmsg.StringPtr(alterInternalID), alterReq(3, h.topicID, 0, 1)); resp.ErrorCode != kerr.StaleBrokerEpoch.Code || len(resp.Topics) != 0 {
		t.Fatalf("controller's STALE_BROKER_EPOCH: error %v, %d topics", kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics))
	}
	if calls, _ := h.recorded(); len(calls) != 1 {
		t.Fatalf("the controller was asked %d times after a stale broker epoch, want once", len(calls))
	}
}

// v3's NewEpochISR and v2's NewISR both become the controller's request,
// served locally only; each partition is answered with its own state or
// code.
func TestAlterPartitionTranslation(t *testing.T) {
	h := newAlterHarness(t)
	h.setAnswer(func(req controlplane.AlterPartition) (controlplane.PartitionState, error) {
		if req.Partition == 1 {
			return controlplane.PartitionState{}, controlplane.ErrInvalidUpdateVersion
		}
		return controlplane.PartitionState{Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9, ISR: []int32{1, 2}}, nil
	})
	req := alterReq(3, h.topicID, 0, 1)
	p0 := &req.Topics[0].Partitions[0]
	p0.LeaderEpoch, p0.PartitionEpoch = 4, 8
	p0.NewISR = nil // not on the wire in v3
	m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
	m.BrokerID, m.BrokerEpoch = 2, 12
	p0.NewEpochISR = append(p0.NewEpochISR, m)

	resp := h.send(kmsg.StringPtr(alterInternalID), req)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].TopidID != h.topicID || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("response %+v", resp)
	}
	got0, got1 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if got0.Partition != 0 || got0.ErrorCode != 0 || got0.LeaderID != 1 || got0.LeaderEpoch != 4 || got0.PartitionEpoch != 9 || !reflect.DeepEqual(got0.ISR, []int32{1, 2}) {
		t.Errorf("partition 0 answered %+v", got0)
	}
	if got1.Partition != 1 || got1.ErrorCode != kerr.InvalidUpdateVersion.Code {
		t.Errorf("partition 1 answered %+v, want INVALID_UPDATE_VERSION", got1)
	}
	calls, local := h.recorded()
	want := controlplane.AlterPartition{TopicID: h.topicID, Partition: 0, LeaderID: 1, BrokerEpoch: 0, LeaderEpoch: 4, PartitionEpoch: 8,
		NewISR: []int32{1, 2}, NewISRBrokerEpochs: []int64{-1, 12}}
	if len(calls) != 2 || !reflect.DeepEqual(calls[0], want) || calls[1].Partition != 1 {
		t.Fatalf("v3 calls %+v; want first %+v", calls, want)
	}
	if !local[0] || !local[1] {
		t.Errorf("calls were not LocalOnly (%v): the listener would forward another node's AlterPartition", local)
	}

	// v2: NewISR, no member epochs.
	req = alterReq(2, h.topicID, 0)
	req.Topics[0].Partitions[0].NewISR = []int32{1, 3}
	if resp := h.send(kmsg.StringPtr(alterInternalID), req); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("v2 response %+v", resp)
	}
	calls, _ = h.recorded()
	if got := calls[2]; !reflect.DeepEqual(got.NewISR, []int32{1, 3}) || got.NewISRBrokerEpochs != nil {
		t.Fatalf("v2 call %+v; want NewISR [1 3] and no member epochs", got)
	}
}

// A leader recovering from an unclean election is not something Fjord
// has: INVALID_REQUEST, and the controller is not asked.
func TestAlterPartitionRecoveringLeader(t *testing.T) {
	h := newAlterHarness(t)
	req := alterReq(3, h.topicID, 0)
	req.Topics[0].Partitions[0].LeaderRecoveryState = 1
	resp := h.send(kmsg.StringPtr(alterInternalID), req)
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("response %+v; want the partition's INVALID_REQUEST", resp)
	}
	if calls, _ := h.recorded(); len(calls) != 0 {
		t.Fatalf("the controller was asked: %+v", calls)
	}
}
