package kafkaserver

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every version answers COORDINATOR_NOT_AVAILABLE (groups do not exist
// yet), one key on v0-3 and each key on v4; a bad key type is refused.
func TestFindCoordinator(t *testing.T) {
	h := newWireHarness(t)
	c := h.dial()
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = v
		req.CoordinatorKey = "g"
		req.CoordinatorKeys = []string{"g1", "g2"}
		resp := c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
		if v >= 4 {
			if len(resp.Coordinators) != 2 || resp.Coordinators[1].Key != "g2" {
				t.Fatalf("v%d: %+v", v, resp.Coordinators)
			}
			for _, co := range resp.Coordinators {
				if co.ErrorCode != kerr.CoordinatorNotAvailable.Code || co.NodeID != -1 {
					t.Fatalf("v%d: %+v", v, co)
				}
			}
			continue
		}
		if resp.ErrorCode != kerr.CoordinatorNotAvailable.Code || resp.NodeID != -1 || (v >= 1) != (resp.ErrorMessage != nil) {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 3
	req.CoordinatorType = 7
	if resp := c.roundTrip(req).(*kmsg.FindCoordinatorResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("key type 7: %+v", resp)
	}
}
