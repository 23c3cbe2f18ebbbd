package kafkaserver

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddRaftVoter and RemoveRaftVoter for another cluster are refused
// before the controller is asked; for this one the controller's answer
// is the response's (the fake refuses every change: INVALID_REQUEST).
func TestRaftVoterRequests(t *testing.T) {
	f := newAdminFixture(t)
	other := "another-cluster"

	add := kmsg.NewPtrAddRaftVoterRequest()
	add.ClusterID, add.VoterID, add.TimeoutMillis = &other, 4, 1000
	add.Listeners = []kmsg.AddRaftVoterRequestListener{{Name: "CONTROLLER", Host: "127.0.0.1", Port: 9093}}
	if resp := adminCall[*kmsg.AddRaftVoterResponse](t, f, add, 1); resp.ErrorCode != kerr.InconsistentClusterID.Code || resp.ErrorMessage == nil {
		t.Errorf("AddRaftVoter for another cluster: code %d, want INCONSISTENT_CLUSTER_ID with a message", resp.ErrorCode)
	}
	rm := kmsg.NewPtrRemoveRaftVoterRequest()
	rm.ClusterID, rm.VoterID = &other, 4
	if resp := adminCall[*kmsg.RemoveRaftVoterResponse](t, f, rm, 0); resp.ErrorCode != kerr.InconsistentClusterID.Code {
		t.Errorf("RemoveRaftVoter for another cluster: code %d, want INCONSISTENT_CLUSTER_ID", resp.ErrorCode)
	}

	add.ClusterID, rm.ClusterID = nil, nil // null: any cluster
	if resp := adminCall[*kmsg.AddRaftVoterResponse](t, f, add, 1); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("AddRaftVoter: code %d, want the fake controller's INVALID_REQUEST", resp.ErrorCode)
	}
	if resp := adminCall[*kmsg.RemoveRaftVoterResponse](t, f, rm, 0); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("RemoveRaftVoter: code %d, want the fake controller's INVALID_REQUEST", resp.ErrorCode)
	}
}

// UnregisterBroker goes to the controller and answers with its error,
// code and message.
func TestUnregisterBrokerRequest(t *testing.T) {
	f := newAdminFixture(t)
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = 7
	resp := adminCall[*kmsg.UnregisterBrokerResponse](t, f, req, 0)
	if resp.ErrorCode != kerr.BrokerIDNotRegistered.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "broker 7") {
		t.Errorf("UnregisterBroker: code %d message %s, want BROKER_ID_NOT_REGISTERED naming broker 7", resp.ErrorCode, adminMsg(resp.ErrorMessage))
	}
}
