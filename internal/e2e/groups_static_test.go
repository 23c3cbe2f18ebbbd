package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/testcluster"
)

// TestGroupStaticMemberRestart is issue 5's third acceptance test
// (KIP-345): three franz-go members with group.instance.ids s1, s2, s3
// share a topic. Each in turn is restarted: its client closes without
// leaving (a static member does not send LeaveGroup), and a new client
// with the same instance id joins well within the session timeout. The
// node must hand the new client the old member's assignment under the
// same generation without a rebalance: the other members send no
// JoinGroup or SyncGroup, get no callbacks, keep their member ids and
// generation, and DescribeGroups shows a Stable group with the instance's
// new member id. The replaced member id is fenced: a heartbeat with it
// and the instance id gets FENCED_INSTANCE_ID.
//
// Every member is restarted, so the group's leader is among them
// whichever member it is (a restarted static leader is KIP-814's case).
// The members use the range balancer, which orders members by instance
// id: a restarted leader that computes the plan again gets the same one
// (franz-go rejoins, forcing a rebalance, when its plan and the node's
// stored assignment differ).
func TestGroupStaticMemberRestart(t *testing.T) {
	t.Parallel()
	n := startGroupNode(t)
	ctx := testContext(t, 2*time.Minute)
	const topic, group, partitions = "static", "static-group", 6
	adm := newAdmin(t, n)
	createTopic(ctx, t, adm, topic, partitions)

	members := make([]*staticMember, 3)
	for i := range members {
		members[i] = startStaticMember(t, n, group, topic, fmt.Sprintf("s%d", i+1))
	}
	// The group has formed when every member has two partitions and the
	// same generation, and the node agrees.
	eventually(t, time.Minute, func() error {
		owner := make(map[int32]string)
		var gen int32 = -2
		for _, m := range members {
			owned := m.owned()
			if len(owned) != partitions/len(members) {
				return fmt.Errorf("%s owns %v", m.instance, owned)
			}
			for _, p := range owned {
				owner[p] = m.instance
			}
			_, g := m.cl.GroupMetadata()
			if gen != -2 && g != gen {
				return fmt.Errorf("members in generations %d and %d", gen, g)
			}
			gen = g
		}
		if len(owner) != partitions {
			return fmt.Errorf("partitions owned: %v", owner)
		}
		return checkStaticDescribed(ctx, adm, group, topic, expectStatic(members))
	})

	raw := newClient(t, n) // for requests as no member
	for _, i := range []int{1, 0, 2} {
		old := members[i]
		oldID, gen := old.cl.GroupMetadata()
		oldOwned := old.owned()
		type before struct {
			id          string
			gen         int32
			callbacks   int
			joins, sync int
		}
		others := make(map[*staticMember]before)
		for _, m := range members {
			if m != old {
				id, g := m.cl.GroupMetadata()
				others[m] = before{id, g, m.callbackCount(), m.requests.written(kmsg.JoinGroup), m.requests.written(kmsg.SyncGroup)}
			}
		}

		old.cl.Close()
		if c := old.requests.written(kmsg.LeaveGroup); c != 0 {
			t.Fatalf("%s: closing a static member sent %d LeaveGroup requests, want none", old.instance, c)
		}
		// Until a new client takes over, the instance is still a member,
		// with the assignment its closed client had.
		want := expectStatic(members)
		want[old.instance] = staticExpect{oldID, oldOwned}
		if err := checkStaticDescribed(ctx, adm, group, topic, want); err != nil {
			t.Fatalf("after %s's client closed without leaving: %v", old.instance, err)
		}

		nw := startStaticMember(t, n, group, topic, old.instance)
		members[i] = nw
		eventually(t, 30*time.Second, func() error {
			if nw.callbackCount() == 0 {
				return fmt.Errorf("restarted %s has no assignment yet", nw.instance)
			}
			return nil
		})
		newID, newGen := nw.cl.GroupMetadata()
		if got := nw.owned(); !slices.Equal(got, oldOwned) {
			t.Errorf("restarted %s was assigned %v; before the restart it owned %v", nw.instance, got, oldOwned)
		}
		if newGen != gen || newID == oldID {
			t.Errorf("restarted %s: member id %q generation %d; before: member id %q generation %d (want a new member id in the same generation)",
				nw.instance, newID, newGen, oldID, gen)
		}

		// A rebalance reaches the other members through their next
		// heartbeat; after three each, one would have shown.
		hb := make(map[*staticMember]int)
		for m := range others {
			hb[m] = m.requests.answered(kmsg.Heartbeat)
		}
		eventually(t, 30*time.Second, func() error {
			for m := range others {
				if got := m.requests.answered(kmsg.Heartbeat) - hb[m]; got < 3 {
					return fmt.Errorf("%s: %d heartbeats since %s rejoined", m.instance, got, nw.instance)
				}
			}
			return nil
		})
		for m, b := range others {
			id, g := m.cl.GroupMetadata()
			joins, syncs := m.requests.written(kmsg.JoinGroup)-b.joins, m.requests.written(kmsg.SyncGroup)-b.sync
			if id != b.id || g != b.gen || m.callbackCount() != b.callbacks || joins != 0 || syncs != 0 {
				t.Errorf("restarting %s disturbed %s: member id %q -> %q, generation %d -> %d, %d callbacks, %d JoinGroup and %d SyncGroup requests; want no change",
					nw.instance, m.instance, b.id, id, b.gen, g, m.callbackCount()-b.callbacks, joins, syncs)
			}
		}
		if err := checkStaticDescribed(ctx, adm, group, topic, expectStatic(members)); err != nil {
			t.Errorf("after restarting %s: %v", nw.instance, err)
		}

		// The replaced member id is fenced.
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.MemberID, req.InstanceID, req.Generation = group, oldID, kmsg.StringPtr(old.instance), gen
		resp, err := req.RequestWith(ctx, raw)
		if err != nil {
			t.Fatalf("heartbeat as the replaced member: %v", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != kerr.FencedInstanceID {
			t.Errorf("heartbeat with %s's replaced member id: %v, want FENCED_INSTANCE_ID", old.instance, err)
		}
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("restarted %s: member id %s -> %s, generation %d, partitions %v; the others undisturbed", nw.instance, oldID, newID, newGen, nw.owned())
	}
}

// staticExpect is what DescribeGroups should say of one instance.
type staticExpect struct {
	memberID string
	owned    []int32
}

// expectStatic is, per instance id, the member id and assignment its
// client has.
func expectStatic(members []*staticMember) map[string]staticExpect {
	want := make(map[string]staticExpect)
	for _, m := range members {
		id, _ := m.cl.GroupMetadata()
		want[m.instance] = staticExpect{id, m.owned()}
	}
	return want
}

// checkStaticDescribed checks DescribeGroups against want: a Stable group
// of exactly those instances, with those member ids and assignments.
func checkStaticDescribed(ctx context.Context, adm *kadm.Client, group, topic string, want map[string]staticExpect) error {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return err
	}
	d := described[group]
	if d.Err != nil {
		return d.Err
	}
	if d.State != "Stable" || len(d.Members) != len(want) {
		return fmt.Errorf("group %s is %s with %d members, want Stable with %d", group, d.State, len(d.Members), len(want))
	}
	byInstance := make(map[string]kadm.DescribedGroupMember)
	for _, m := range d.Members {
		if m.InstanceID == nil {
			return fmt.Errorf("member %s has no instance id", m.MemberID)
		}
		byInstance[*m.InstanceID] = m
	}
	for instance, w := range want {
		dm, ok := byInstance[instance]
		if !ok {
			return fmt.Errorf("no member with instance id %s", instance)
		}
		if dm.MemberID != w.memberID {
			return fmt.Errorf("instance %s: described member id %s, want %s", instance, dm.MemberID, w.memberID)
		}
		if got := memberAssignment(dm, topic); !slices.Equal(got, w.owned) {
			return fmt.Errorf("instance %s: described assignment %v, want %v", instance, got, w.owned)
		}
	}
	return nil
}

// staticMember is a franz-go group member with an instance id, counting
// its rebalance callbacks and its requests by API.
type staticMember struct {
	instance string
	cl       *kgo.Client
	requests *requestCounter

	mu struct {
		sync.Mutex
		owned     map[int32]bool
		callbacks int
	}
}

func startStaticMember(t *testing.T, n *testcluster.Node, group, topic, instance string) *staticMember {
	t.Helper()
	m := &staticMember{instance: instance, requests: newRequestCounter()}
	m.mu.owned = make(map[int32]bool)
	update := func(parts map[string][]int32, add bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.mu.callbacks++
		for _, p := range parts[topic] {
			if add {
				m.mu.owned[p] = true
			} else {
				delete(m.mu.owned, p)
			}
		}
	}
	m.cl = newClient(t, n,
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.InstanceID(instance),
		kgo.Balancers(kgo.RangeBalancer()),
		// Far longer than a restart takes: the restart must beat it.
		kgo.SessionTimeout(30*time.Second),
		kgo.HeartbeatInterval(250*time.Millisecond),
		kgo.DisableAutoCommit(),
		kgo.WithHooks(m.requests),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) { update(parts, true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) { update(parts, false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) { update(parts, false) }),
	)
	return m
}

func (m *staticMember) owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return sortedKeys(m.mu.owned)
}

func (m *staticMember) callbackCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.callbacks
}

// requestCounter counts a client's requests by API key
// (kgo.HookBrokerE2E): those written, and those answered.
type requestCounter struct {
	mu struct {
		sync.Mutex
		sent    map[int16]int
		answers map[int16]int
	}
}

func newRequestCounter() *requestCounter {
	c := &requestCounter{}
	c.mu.sent = make(map[int16]int)
	c.mu.answers = make(map[int16]int)
	return c
}

func (c *requestCounter) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e2e.WriteErr == nil {
		c.mu.sent[key]++
		if e2e.ReadErr == nil {
			c.mu.answers[key]++
		}
	}
}

// written counts the requests of key sent, answered or not: a
// LeaveGroup the node never answered was still sent.
func (c *requestCounter) written(key kmsg.Key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.sent[int16(key)]
}

// answered counts the requests of key the node answered.
func (c *requestCounter) answered(key kmsg.Key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.answers[int16(key)]
}
