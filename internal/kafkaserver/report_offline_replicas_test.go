package kafkaserver

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/metadata"
)

// FjordReportOfflineReplicas: only from a Fjord node's client reporting
// for itself (CLUSTER_AUTHORIZATION_FAILED for an outside client, and
// for a node naming another broker, nothing asked of the controller);
// more partitions than one report may hold is INVALID_REQUEST, nothing
// asked; a good report reaches the controller with every partition, the
// broker and its epoch, and the answer carries the image offset; the
// controller's refusals come back with their codes.
func TestReportOfflineReplicasHandler(t *testing.T) {
	f := newKeyedFixture(t)
	id := metadata.UUID{0xab, 1}
	report := func(clientID *string, req *fjordmsg.ReportOfflineReplicasRequest) *fjordmsg.ReportOfflineReplicasResponse {
		return keyedCall[*fjordmsg.ReportOfflineReplicasResponse](t, f, clientID, req, 0)
	}
	own := func(topics ...fjordmsg.ReportOfflineReplicasTopic) *fjordmsg.ReportOfflineReplicasRequest {
		return &fjordmsg.ReportOfflineReplicasRequest{BrokerID: adminTestNodeID, BrokerEpoch: 42, Topics: topics}
	}
	good := own(fjordmsg.ReportOfflineReplicasTopic{TopicID: id, Partitions: []int32{0, 3}},
		fjordmsg.ReportOfflineReplicasTopic{TopicID: [16]byte{0xcd}, Partitions: []int32{1}})

	internal := kmsg.StringPtr(keyedInternalID)
	for _, tc := range []struct {
		name     string
		clientID *string
		req      *fjordmsg.ReportOfflineReplicasRequest
		want     *kerr.Error
	}{
		{"a null client id", nil, good, kerr.ClusterAuthorizationFailed},
		{"an empty client id", kmsg.StringPtr(""), good, kerr.ClusterAuthorizationFailed},
		{"a Kafka client", kmsg.StringPtr("rdkafka"), good, kerr.ClusterAuthorizationFailed},
		{"a near miss of the node's id", kmsg.StringPtr(keyedInternalID + "x"), good, kerr.ClusterAuthorizationFailed},
		{"the node reporting for another broker", internal,
			&fjordmsg.ReportOfflineReplicasRequest{BrokerID: adminTestNodeID + 1, BrokerEpoch: 42, Topics: good.Topics}, kerr.ClusterAuthorizationFailed},
		{"more partitions than a report holds", internal, own(
			fjordmsg.ReportOfflineReplicasTopic{TopicID: id, Partitions: make([]int32, controlplane.MaxReportedOfflineReplicas)},
			fjordmsg.ReportOfflineReplicasTopic{TopicID: [16]byte{0xcd}, Partitions: []int32{1}}), kerr.InvalidRequest},
	} {
		resp := report(tc.clientID, tc.req)
		adminWantCode(t, tc.name, resp.ErrorCode, tc.want)
		if resp.MetadataOffset != 0 || resp.ErrorMessage == nil {
			t.Errorf("%s: refusal answered offset %d, message %s", tc.name, resp.MetadataOffset, adminMsg(resp.ErrorMessage))
		}
	}
	if got := f.ctrl.callLog(); len(got) != 0 {
		t.Fatalf("refused reports reached the controller: %v", got)
	}

	resp := report(internal, good)
	adminWantCode(t, "the node's own report", resp.ErrorCode, nil)
	if resp.MetadataOffset != int64(f.ctrl.Image().Offset) {
		t.Errorf("answered offset %d, image at %d", resp.MetadataOffset, f.ctrl.Image().Offset)
	}
	f.ctrl.mu.Lock()
	reports := slices.Clone(f.ctrl.offlineReports)
	f.ctrl.mu.Unlock()
	want := []metadata.TopicIDPartition{{TopicID: id, Partition: 0}, {TopicID: id, Partition: 3}, {TopicID: metadata.UUID{0xcd}, Partition: 1}}
	if len(reports) != 1 || reports[0].broker != adminTestNodeID || reports[0].epoch != 42 || !slices.Equal(reports[0].partitions, want) {
		t.Fatalf("the controller was asked %+v, want broker %d epoch 42 partitions %v", reports, adminTestNodeID, want)
	}

	for _, fail := range []error{
		fmt.Errorf("%w: node 2 is", controlplane.ErrNotController),
		fmt.Errorf("%w: broker 1 reports at epoch 42, its registration's is 50", controlplane.ErrStaleBrokerEpoch),
		fmt.Errorf("%w: zero topic id", controlplane.ErrInvalidRequest),
	} {
		f.ctrl.mu.Lock()
		f.ctrl.fail = fail
		f.ctrl.mu.Unlock()
		resp := report(internal, good)
		if kerr.ErrorForCode(resp.ErrorCode) == nil || !strings.Contains(fail.Error(), kerr.ErrorForCode(resp.ErrorCode).Error()[:10]) ||
			resp.MetadataOffset != 0 {
			t.Errorf("the controller's %v: answered %v, offset %d", fail, kerr.ErrorForCode(resp.ErrorCode), resp.MetadataOffset)
		}
	}
}

// Malformed FjordReportOfflineReplicas bodies never reach a handler: the
// listener closes the connection, as for any body that does not decode
// (a huge array length among them), and the node is unharmed.
func TestReportOfflineReplicasMalformedBodies(t *testing.T) {
	head := []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9}
	bodies := [][]byte{{}, head, append(head, 0x7f, 0xff, 0xff, 0xff), append(head, 0xff, 0xff, 0xff, 0xfe),
		append(append(head, 0, 0, 0, 0), 0), make([]byte, 64<<10)}
	h := newWireHarness(t)
	for _, body := range bodies {
		conn := h.dial()
		conn.write(frameOf(append(header(fjordmsg.ReportOfflineReplicasKey, 0, 1, false), body...)))
		conn.expectClosed()
	}
	resp := h.dial().roundTrip(&fjordmsg.ReportOfflineReplicasRequest{BrokerID: 1}).(*fjordmsg.ReportOfflineReplicasResponse)
	if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("after the malformed bodies: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// Metadata lists a replica whose log failed among the partition's
// offline replicas, beside those of fenced brokers.
func TestMetadataListsOfflineReplicas(t *testing.T) {
	id := metadata.UUID{0xee}
	recs := []metadata.Record{metadata.ClusterIDRecord{ClusterID: "c"},
		metadata.MetadataVersionRecord{Version: metadata.OfflineReplicasMetadataVersion}}
	for b := int32(1); b <= 3; b++ {
		recs = append(recs, metadata.BrokerRecord{NodeID: b, Host: "h", Port: 9092})
	}
	img, err := metadata.Empty(testConfigs).Apply(1, recs...)
	if err != nil {
		t.Fatal(err)
	}
	img, err = img.Apply(2,
		metadata.UnfenceBrokerRecord{NodeID: 1, Epoch: 1}, metadata.UnfenceBrokerRecord{NodeID: 2, Epoch: 1},
		metadata.TopicRecord{Name: "t", ID: id},
		metadata.PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1},
		metadata.PartitionRecord{TopicID: id, Partition: 1, Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2},
		metadata.OfflineReplicaRecord{NodeID: 2, Epoch: 1, TopicID: id, Partition: 0},
		metadata.PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: 1, PartitionEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	mt := metadataTopic(img, img.Topics["t"])
	if got := mt.Partitions[0].OfflineReplicas; !slices.Equal(got, []int32{2, 3}) {
		t.Errorf("t-0 offline replicas %v, want [2 3] (2's log failed, 3 is fenced)", got)
	}
	if got := mt.Partitions[1].OfflineReplicas; len(got) != 0 {
		t.Errorf("t-1 offline replicas %v, want none", got)
	}
}
