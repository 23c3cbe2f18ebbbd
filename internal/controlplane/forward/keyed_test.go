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

func (l *fakeLocal) MarkTopicKeyed(context.Context, metadata.UUID) error {
	l.calls++
	return fmt.Errorf("%w: the fake local controller is not active", controlplane.ErrNotController)
}

// A mark goes to the controller as Fjord's MarkTopicKeyed with the topic
// id; NOT_CONTROLLER is retried; a success waits for the offset in the
// answer's body; the controller's error (an unknown id) comes back with
// its message, waiting for nothing.
func TestMarkTopicKeyedForwarded(t *testing.T) {
	known := metadata.UUID{1, 2, 3}
	var mu sync.Mutex
	n := 0
	f := newFakeController(t, func(req kmsg.Request) kmsg.Response {
		r := req.(*fjordmsg.MarkTopicKeyedRequest)
		resp := r.ResponseKind().(*fjordmsg.MarkTopicKeyedResponse)
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		switch {
		case first:
			resp.ErrorCode, resp.ErrorMessage = kerr.NotController.Code, kmsg.StringPtr("moved")
		case r.TopicID != known:
			resp.ErrorCode, resp.ErrorMessage = kerr.UnknownTopicID.Code, kmsg.StringPtr("no topic with that id")
		default:
			resp.MetadataOffset = 99
		}
		return resp
	})
	c, images, local := newForwarder(t, f)
	if err := c.MarkTopicKeyed(context.Background(), known); err != nil {
		t.Fatal(err)
	}
	if w := images.waitedFor(); !slices.Equal(w, []uint64{99}) {
		t.Fatalf("waited for offsets %v, want [99] (the answer's)", w)
	}
	err := c.MarkTopicKeyed(context.Background(), metadata.UUID{9})
	if !errors.Is(err, controlplane.ErrUnknownTopicID) || err.Error() != "UNKNOWN_TOPIC_ID: "+kerr.UnknownTopicID.Description+": no topic with that id" {
		t.Fatalf("unknown id: %v", err)
	}
	if w := images.waitedFor(); len(w) != 1 {
		t.Fatalf("a refused mark waited for %v", w)
	}
	var sent []metadata.UUID
	for _, r := range f.requests() {
		sent = append(sent, r.(*fjordmsg.MarkTopicKeyedRequest).TopicID)
	}
	if want := []metadata.UUID{known, known, {9}}; !slices.Equal(sent, want) {
		t.Fatalf("sent %v, want %v", sent, want)
	}
	if local.calls != 0 {
		t.Fatalf("the local controller, not active, was asked %d times", local.calls)
	}
}
