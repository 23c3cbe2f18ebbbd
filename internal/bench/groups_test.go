package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// fakeGroupDriver is fakeDriver with consumer groups: the k-th member of
// a group reads partitions k, k+n, ... of its topic, n being the members
// the test says each group gets (a static stand-in for the system's
// assignment).
type fakeGroupDriver struct {
	*fakeDriver
	partitions, membersPerGroup int

	mu     sync.Mutex
	joined map[string][]string // group -> topics of its members, in join order
}

func (d *fakeGroupDriver) NewGroupConsumer(ctx context.Context, topic, group string) (Consumer, error) {
	d.mu.Lock()
	k := len(d.joined[group])
	d.joined[group] = append(d.joined[group], topic)
	d.mu.Unlock()
	var parts []int32
	for p := k; p < d.partitions; p += d.membersPerGroup {
		parts = append(parts, int32(p))
	}
	return d.NewConsumer(ctx, topic, parts)
}

// With Groups, each subscription's consumers join one group of their
// own, named after the topic and subscription, and the run's checks hold
// as without.
func TestRunWithGroups(t *testing.T) {
	w := tinyWorkload()
	w.Topics, w.SubscriptionsPerTopic = 2, 2
	d := &fakeGroupDriver{fakeDriver: newFakeDriver(), partitions: w.PartitionsPerTopic, membersPerGroup: w.ConsumerPerSubscription, joined: map[string][]string{}}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, w, d, RunOptions{Groups: true, DrainTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed {
		t.Fatalf("checks failed: %+v", res.Checks)
	}
	var groups []string
	for g, topics := range d.joined {
		groups = append(groups, g)
		if len(topics) != w.ConsumerPerSubscription || topics[0] != topics[1] || !strings.HasPrefix(g, topics[0]+"-sub") {
			t.Errorf("group %s: members on topics %v, want %d on its own topic", g, topics, w.ConsumerPerSubscription)
		}
	}
	slices.Sort(groups)
	if len(groups) != w.Topics*w.SubscriptionsPerTopic {
		t.Fatalf("groups %v, want one per topic and subscription (%d)", groups, w.Topics*w.SubscriptionsPerTopic)
	}
	// Over the whole run every subscription read every record once. (The
	// measured window's counts need not agree: a record acknowledged just
	// before the window closes may be received just after.)
	if res.Consume.Records == 0 || res.Consume.TotalRecords != int64(w.SubscriptionsPerTopic)*res.Produce.TotalRecords {
		t.Errorf("consumed %d records (%d in the window) for %d produced over %d subscriptions",
			res.Consume.TotalRecords, res.Consume.Records, res.Produce.TotalRecords, w.SubscriptionsPerTopic)
	}
}

// A driver without groups refuses Groups before anything starts.
func TestRunWithGroupsNeedsAGroupDriver(t *testing.T) {
	_, err := runFake(t, tinyWorkload(), newFakeDriver(), RunOptions{Groups: true})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%s's driver has no consumer groups", "fake")) {
		t.Fatalf("err %v", err)
	}
}
