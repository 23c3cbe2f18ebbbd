package kafkaserver

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
)

func electReq(typ int8, topics map[string][]int32) *kmsg.ElectLeadersRequest {
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType, req.TimeoutMillis = typ, 5000
	if topics != nil {
		req.Topics = []kmsg.ElectLeadersRequestTopic{}
		for _, name := range slices.Sorted(maps.Keys(topics)) {
			t := kmsg.NewElectLeadersRequestTopic()
			t.Topic, t.Partitions = name, topics[name]
			req.Topics = append(req.Topics, t)
		}
	}
	return req
}

// electAnswers flattens a response to "topic-partition=CODE".
func electAnswers(resp *kmsg.ElectLeadersResponse) []string {
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			name := "OK"
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				name = err.(*kerr.Error).Message
			}
			out = append(out, fmt.Sprintf("%s-%d=%s", t.Topic, p.Partition, name))
		}
	}
	return out
}

// The edge passes the election type (v0 is preferred, with no field for
// it), the partitions (null is every one; a partition named twice is
// asked for and answered once) and the controller's answers.
func TestElectLeadersRequestToController(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version int16
		req     *kmsg.ElectLeadersRequest
		want    controlplane.ElectLeaders
		answers []string
	}{
		{"v0 is preferred", 0, electReq(1, map[string][]int32{"a": {0}}),
			controlplane.ElectLeaders{Type: controlplane.ElectPreferred, Partitions: []controlplane.TopicPartition{{Topic: "a", Partition: 0}}},
			[]string{"a-0=ELECTION_NOT_NEEDED"}},
		{"v2 unclean, a partition twice", 2, electReq(1, map[string][]int32{"a": {1, 1, 0}}),
			controlplane.ElectLeaders{Type: controlplane.ElectUnclean, Partitions: []controlplane.TopicPartition{{Topic: "a", Partition: 1}, {Topic: "a", Partition: 1}, {Topic: "a", Partition: 0}}},
			[]string{"a-1=ELECTION_NOT_NEEDED", "a-0=ELECTION_NOT_NEEDED"}},
		{"v1 every partition", 1, electReq(0, nil),
			controlplane.ElectLeaders{Type: controlplane.ElectPreferred}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newAdminFixture(t)
			resp := adminCall[*kmsg.ElectLeadersResponse](t, f, tc.req, tc.version)
			if resp.ErrorCode != 0 {
				t.Fatalf("top-level error %d", resp.ErrorCode)
			}
			if got := electAnswers(resp); !slices.Equal(got, tc.answers) {
				t.Errorf("answers %v, want %v", got, tc.answers)
			}
			f.ctrl.mu.Lock()
			defer f.ctrl.mu.Unlock()
			if len(f.ctrl.elections) != 1 {
				t.Fatalf("%d requests reached the controller, want 1", len(f.ctrl.elections))
			}
			got := f.ctrl.elections[0]
			if got.Type != tc.want.Type || !slices.Equal(got.Partitions, tc.want.Partitions) || (got.Partitions == nil) != (tc.want.Partitions == nil) {
				t.Errorf("controller asked %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Hostile and failed requests: a clear error, nothing asked of the
// controller that it should not do.
func TestElectLeadersBadInput(t *testing.T) {
	f := newAdminFixture(t)
	resp := adminCall[*kmsg.ElectLeadersResponse](t, f, electReq(7, map[string][]int32{"a": {0, 0}}), 2)
	if resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("election type 7: top-level code %d, want INVALID_REQUEST", resp.ErrorCode)
	}
	if got, want := electAnswers(resp), []string{"a-0=INVALID_REQUEST"}; !slices.Equal(got, want) {
		t.Errorf("election type 7: answers %v, want %v", got, want)
	}
	if m := resp.Topics[0].Partitions[0].ErrorMessage; m == nil || *m == "" {
		t.Error("election type 7: no message")
	}
	resp = adminCall[*kmsg.ElectLeadersResponse](t, f, electReq(-1, nil), 2)
	if resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.Topics) != 0 {
		t.Errorf("election type -1 for every partition: %+v, want INVALID_REQUEST and no partitions", resp)
	}
	// An empty list elects nothing: it is not "every partition".
	resp = adminCall[*kmsg.ElectLeadersResponse](t, f, electReq(0, map[string][]int32{}), 2)
	if resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Errorf("empty list: %+v, want no error and no partitions", resp)
	}
	if calls := f.ctrl.callLog(); slices.Contains(calls, "ElectLeaders") {
		t.Errorf("the controller was asked: %v", calls)
	}

	// A failure of the whole request is every named partition's.
	f.ctrl.mu.Lock()
	f.ctrl.fail = fmt.Errorf("%w: fake", controlplane.ErrNotController)
	f.ctrl.mu.Unlock()
	resp = adminCall[*kmsg.ElectLeadersResponse](t, f, electReq(0, map[string][]int32{"a": {0}, "b": {3}}), 2)
	if resp.ErrorCode != kerr.NotController.Code {
		t.Errorf("a failed request: top-level code %d, want NOT_CONTROLLER", resp.ErrorCode)
	}
	if got, want := electAnswers(resp), []string{"a-0=NOT_CONTROLLER", "b-3=NOT_CONTROLLER"}; !slices.Equal(got, want) {
		t.Errorf("a failed request: answers %v, want %v", got, want)
	}
}
