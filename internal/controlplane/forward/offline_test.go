package forward

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/metadata"
)

func (l *fakeLocal) ReportOfflineReplicas(context.Context, int32, int64, []metadata.TopicIDPartition) error {
	l.calls++
	return fmt.Errorf("%w: the fake local controller is not active", controlplane.ErrNotController)
}

// A report goes to the controller as Fjord's ReportOfflineReplicas, the
// partitions grouped by topic in the order first named, with the broker
// and its epoch; NOT_CONTROLLER is retried; a success waits for the
// offset in the answer's body; a refusal (a stale epoch) comes back as
// the controller's error, waiting for nothing.
func TestReportOfflineReplicasForwarded(t *testing.T) {
	a, b := metadata.UUID{0xa}, metadata.UUID{0xb}
	var mu sync.Mutex
	n := 0
	f := newFakeController(t, func(req kmsg.Request) kmsg.Response {
		r := req.(*fjordmsg.ReportOfflineReplicasRequest)
		resp := r.ResponseKind().(*fjordmsg.ReportOfflineReplicasResponse)
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		switch {
		case first:
			resp.ErrorCode, resp.ErrorMessage = kerr.NotController.Code, kmsg.StringPtr("moved")
		case r.BrokerEpoch != 12:
			resp.ErrorCode, resp.ErrorMessage = kerr.StaleBrokerEpoch.Code, kmsg.StringPtr("its registration's is 12")
		default:
			resp.MetadataOffset = 77
		}
		return resp
	})
	c, images, local := newForwarder(t, f)
	parts := []metadata.TopicIDPartition{{TopicID: a, Partition: 3}, {TopicID: b, Partition: 0}, {TopicID: a, Partition: 1}}
	if err := c.ReportOfflineReplicas(context.Background(), 1, 12, parts); err != nil {
		t.Fatal(err)
	}
	if w := images.waitedFor(); !slices.Equal(w, []uint64{77}) {
		t.Fatalf("waited for offsets %v, want [77] (the answer's)", w)
	}
	if err := c.ReportOfflineReplicas(context.Background(), 1, 11, parts[:1]); !errors.Is(err, controlplane.ErrStaleBrokerEpoch) {
		t.Fatalf("a stale epoch: %v", err)
	}
	if w := images.waitedFor(); len(w) != 1 {
		t.Fatalf("a refused report waited for %v", w)
	}
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3 (one retried after NOT_CONTROLLER)", len(reqs))
	}
	r := reqs[1].(*fjordmsg.ReportOfflineReplicasRequest)
	want := []fjordmsg.ReportOfflineReplicasTopic{{TopicID: a, Partitions: []int32{3, 1}}, {TopicID: b, Partitions: []int32{0}}}
	if r.BrokerID != 1 || r.BrokerEpoch != 12 || len(r.Topics) != 2 ||
		r.Topics[0].TopicID != want[0].TopicID || !slices.Equal(r.Topics[0].Partitions, want[0].Partitions) ||
		r.Topics[1].TopicID != want[1].TopicID || !slices.Equal(r.Topics[1].Partitions, want[1].Partitions) {
		t.Fatalf("sent %+v, want broker 1 epoch 12 topics %+v", r, want)
	}
	if local.calls != 0 {
		t.Fatalf("the local controller, not active, was asked %d times", local.calls)
	}
}
