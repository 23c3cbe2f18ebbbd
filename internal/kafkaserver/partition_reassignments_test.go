package kafkaserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// Reference: KIP-455 (AlterPartitionReassignments and
// ListPartitionReassignments), and what Kafka's controller answers
// (ReplicationControlManager.alterPartitionReassignments and
// listPartitionReassignments).

// newReassignFixture is the admin fixture with brokers 1 to 4
// registered, topic "a" of three partitions on brokers 1 to 3 (each
// led by its first replica) and topic "b" of one partition on 1 and 2.
func newReassignFixture(t *testing.T) *adminFixture {
	t.Helper()
	f := newAdminFixture(t)
	f.ctrl.mu.Lock()
	img := f.ctrl.cloneImageLocked()
	for id := int32(2); id <= 4; id++ {
		img.Brokers[id] = metadata.Broker{NodeID: id, Host: "127.0.0.1", Port: 1} // never dialled
	}
	f.ctrl.img = img
	f.ctrl.mu.Unlock()
	var a []metadata.Partition
	for _, r := range [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}} {
		a = append(a, metadata.Partition{Replicas: r, ISR: r, Leader: r[0]})
	}
	f.ctrl.addTopic("a", a, map[string]string{})
	f.ctrl.addTopic("b", []metadata.Partition{{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}}, map[string]string{})
	return f
}

// reassignTarget is one partition of a request: nil replicas cancel.
type reassignTarget struct {
	topic     string
	partition int32
	replicas  []int32
}

// reassignReq builds a request with one topic entry per run of targets of
// the same topic, in order (so a topic can be named in two entries).
func reassignReq(targets ...reassignTarget) *kmsg.AlterPartitionAssignmentsRequest {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = 5000
	for _, tg := range targets {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tg.topic {
			t := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			t.Topic = tg.topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		p.Partition, p.Replicas = tg.partition, tg.replicas
		last := &req.Topics[len(req.Topics)-1]
		last.Partitions = append(last.Partitions, p)
	}
	return req
}

// overTheWire returns req as the handler gets it from a connection:
// encoded at version and decoded again, so a null list and an empty one
// are what kmsg's decoder makes of them.
func overTheWire[R kmsg.Request](t *testing.T, req R, version int16) R {
	t.Helper()
	req.SetVersion(version)
	back := kmsg.RequestForKey(req.Key())
	back.SetVersion(version)
	if err := back.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatalf("%s v%d does not decode: %v", kmsg.NameForKey(req.Key()), version, err)
	}
	return back.(R)
}

// reassignAnswers flattens a response to "topic-partition=CODE", in order.
func reassignAnswers(resp *kmsg.AlterPartitionAssignmentsResponse) []string {
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s-%d=%s", t.Topic, p.Partition, codeName(p.ErrorCode)))
		}
	}
	return out
}

func codeName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		return err.(*kerr.Error).Message
	}
	return "OK"
}

// imagePartitions returns a copy of topic's partitions in the fake's image.
func imagePartitions(f *adminFixture, topic string) []metadata.Partition {
	var out []metadata.Partition
	for _, p := range f.ctrl.Image().Topics[topic].Partitions {
		p.Replicas, p.ISR = slices.Clone(p.Replicas), slices.Clone(p.ISR)
		p.Adding, p.Removing = slices.Clone(p.Adding), slices.Clone(p.Removing)
		out = append(out, p)
	}
	return out
}

func samePartitions(a, b []metadata.Partition) bool {
	return slices.EqualFunc(a, b, func(x, y metadata.Partition) bool {
		return slices.Equal(x.Replicas, y.Replicas) && slices.Equal(x.ISR, y.ISR) && x.Leader == y.Leader &&
			x.PartitionEpoch == y.PartitionEpoch && slices.Equal(x.Adding, y.Adding) && slices.Equal(x.Removing, y.Removing)
	})
}

// The edge passes every valid partition to the controller once, in
// request order, with its target (a null one as nil: a cancel), and
// answers each with the controller's outcome.
func TestAlterPartitionReassignmentsRequestToController(t *testing.T) {
	f := newReassignFixture(t)
	req := overTheWire(t, reassignReq(
		reassignTarget{"a", 0, []int32{4, 2, 3}},
		reassignTarget{"a", 2, []int32{1, 2, 3}}, // a reorder
		reassignTarget{"b", 0, []int32{2, 3}},
	), 0)
	resp := adminCall[*kmsg.AlterPartitionAssignmentsResponse](t, f, req, 0)
	if resp.ErrorCode != 0 || resp.ErrorMessage != nil {
		t.Fatalf("top-level error %s %s", codeName(resp.ErrorCode), adminMsg(resp.ErrorMessage))
	}
	if got, want := reassignAnswers(resp), []string{"a-0=OK", "a-2=OK", "b-0=OK"}; !slices.Equal(got, want) {
		t.Fatalf("answers %v, want %v", got, want)
	}
	f.ctrl.mu.Lock()
	asked := f.ctrl.reassignments
	f.ctrl.mu.Unlock()
	want := []controlplane.Reassignment{
		{TopicPartition: controlplane.TopicPartition{Topic: "a", Partition: 0}, Replicas: []int32{4, 2, 3}},
		{TopicPartition: controlplane.TopicPartition{Topic: "a", Partition: 2}, Replicas: []int32{1, 2, 3}},
		{TopicPartition: controlplane.TopicPartition{Topic: "b", Partition: 0}, Replicas: []int32{2, 3}},
	}
	if len(asked) != 1 || !slices.EqualFunc(asked[0], want, sameReassignment) {
		t.Fatalf("the controller was asked %+v, want once %+v", asked, want)
	}

	// The reassignments in progress are listed from this node's image:
	// the replicas in Kafka's order (target, then removed ones).
	list := adminCall[*kmsg.ListPartitionReassignmentsResponse](t, f, kmsg.NewPtrListPartitionReassignmentsRequest(), 0)
	if got, want := listedReassignments(list), []string{"a-0 replicas=[4 2 3 1] adding=[4] removing=[1]", "b-0 replicas=[2 3 1] adding=[3] removing=[1]"}; !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}

	// A cancel (null replicas) reaches the controller as nil, and a
	// second cancel of the same partition is the controller's
	// NO_REASSIGNMENT_IN_PROGRESS, with its message.
	resp = adminCall[*kmsg.AlterPartitionAssignmentsResponse](t, f, overTheWire(t, reassignReq(reassignTarget{"b", 0, nil}), 0), 0)
	if got := reassignAnswers(resp); !slices.Equal(got, []string{"b-0=OK"}) {
		t.Fatalf("cancel: %v", got)
	}
	f.ctrl.mu.Lock()
	cancel := f.ctrl.reassignments[1][0]
	f.ctrl.mu.Unlock()
	if cancel.Replicas != nil {
		t.Fatalf("a null replica list reached the controller as %#v, want nil", cancel.Replicas)
	}
	// Back to the original replicas, in the order the reassignment kept
	// (Kafka's revert): 2 first, as the target had it.
	if p := imagePartitions(f, "b")[0]; p.Reassigning() || !slices.Equal(p.Replicas, []int32{2, 1}) {
		t.Fatalf("b-0 after the cancel: %+v", p)
	}
	resp = adminCall[*kmsg.AlterPartitionAssignmentsResponse](t, f, overTheWire(t, reassignReq(reassignTarget{"b", 0, nil}), 0), 0)
	if got := reassignAnswers(resp); !slices.Equal(got, []string{"b-0=NO_REASSIGNMENT_IN_PROGRESS"}) {
		t.Fatalf("cancel with none in progress: %v", got)
	}
	if m := resp.Topics[0].Partitions[0].ErrorMessage; m == nil || !strings.Contains(*m, "b-0") {
		t.Errorf("cancel with none in progress: message %s", adminMsg(m))
	}
}

func sameReassignment(a, b controlplane.Reassignment) bool {
	return a.TopicPartition == b.TopicPartition && slices.Equal(a.Replicas, b.Replicas) && (a.Replicas == nil) == (b.Replicas == nil)
}

// Hostile and malformed requests, each sent over the wire codec at v0:
// every refused partition gets its code and a message naming it, the
// controller is asked only for the valid ones, and the partitions do
// not change.
func TestAlterPartitionReassignmentsBadInput(t *testing.T) {
	many := make([]int32, 1<<20)
	for i := range many {
		many[i] = int32(i) + 1
	}
	sameMany := slices.Repeat([]int32{1}, 1<<20)
	manyPartitions := make([]reassignTarget, 100_000)
	for i := range manyPartitions {
		manyPartitions[i] = reassignTarget{"a", int32(i) + 3, []int32{1, 2, 3}}
	}
	for _, tc := range []struct {
		name    string
		req     *kmsg.AlterPartitionAssignmentsRequest
		answers []string
		asked   int // partitions the controller is asked
	}{
		{"empty replica list", reassignReq(reassignTarget{"a", 0, []int32{}}),
			[]string{"a-0=INVALID_REPLICA_ASSIGNMENT"}, 0},
		{"a negative broker id", reassignReq(reassignTarget{"a", 0, []int32{1, -1, 2}}),
			[]string{"a-0=INVALID_REPLICA_ASSIGNMENT"}, 0},
		{"a broker twice", reassignReq(reassignTarget{"a", 0, []int32{1, 2, 1}}),
			[]string{"a-0=INVALID_REPLICA_ASSIGNMENT"}, 0},
		{"an unregistered broker", reassignReq(reassignTarget{"a", 0, []int32{1, 2, 9}}),
			[]string{"a-0=INVALID_REPLICA_ASSIGNMENT"}, 0},
		{"a million brokers", reassignReq(reassignTarget{"a", 0, many}),
			[]string{"a-0=INVALID_REPLICA_ASSIGNMENT"}, 0},
		{"a million times broker 1", reassignReq(reassignTarget{"a", 0, sameMany}),
			[]string{"a-0=INVALID_REPLICA_ASSIGNMENT"}, 0},
		{"a negative partition", reassignReq(reassignTarget{"a", -1, []int32{1, 2, 3}}),
			[]string{"a--1=UNKNOWN_TOPIC_OR_PARTITION"}, 0},
		{"a partition the topic lacks", reassignReq(reassignTarget{"a", 3, []int32{1, 2, 3}}),
			[]string{"a-3=UNKNOWN_TOPIC_OR_PARTITION"}, 0},
		{"a cancel of a partition the topic lacks", reassignReq(reassignTarget{"a", 3, nil}),
			[]string{"a-3=UNKNOWN_TOPIC_OR_PARTITION"}, 0},
		{"an unknown topic", reassignReq(reassignTarget{"nope", 0, []int32{1}}),
			[]string{"nope-0=UNKNOWN_TOPIC_OR_PARTITION"}, 0},
		{"an empty topic name", reassignReq(reassignTarget{"", 0, []int32{1}}),
			[]string{"-0=UNKNOWN_TOPIC_OR_PARTITION"}, 0},
		{"a partition twice: the repeat", reassignReq(reassignTarget{"a", 0, []int32{1, 2, 4}}, reassignTarget{"a", 0, []int32{4, 2, 3}}),
			[]string{"a-0=OK", "a-0=INVALID_REQUEST"}, 1},
		{"a topic twice: the repeated entry", reassignReq(reassignTarget{"a", 0, []int32{1, 2, 4}}, reassignTarget{"b", 0, []int32{1, 2}}, reassignTarget{"a", 1, []int32{2, 3, 4}}),
			[]string{"a-0=OK", "b-0=OK", "a-1=INVALID_REQUEST"}, 2},
		{"a bad partition among good ones", reassignReq(reassignTarget{"a", 0, []int32{1, 2, 4}}, reassignTarget{"a", 1, []int32{}}, reassignTarget{"a", 2, []int32{3, 1, 4}}),
			[]string{"a-0=OK", "a-1=INVALID_REPLICA_ASSIGNMENT", "a-2=OK"}, 2},
		{"a cancel with none in progress", reassignReq(reassignTarget{"a", 1, nil}),
			[]string{"a-1=NO_REASSIGNMENT_IN_PROGRESS"}, 1},
		{"a hundred thousand partitions the topic lacks", reassignReq(manyPartitions...), nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newReassignFixture(t)
			before := imagePartitions(f, "a")
			resp := adminCall[*kmsg.AlterPartitionAssignmentsResponse](t, f, overTheWire(t, tc.req, 0), 0)
			if resp.ErrorCode != 0 {
				t.Errorf("top-level %s, want none: the request's error is per partition", codeName(resp.ErrorCode))
			}
			got := reassignAnswers(resp)
			if tc.answers == nil { // every one refused alike
				for _, a := range got {
					if !strings.HasSuffix(a, "=UNKNOWN_TOPIC_OR_PARTITION") {
						t.Fatalf("answer %s", a)
					}
				}
				if len(got) != len(manyPartitions) {
					t.Fatalf("%d answers for %d partitions", len(got), len(manyPartitions))
				}
			} else if !slices.Equal(got, tc.answers) {
				t.Fatalf("answers %v, want %v", got, tc.answers)
			}
			for _, rt := range resp.Topics {
				for _, p := range rt.Partitions {
					if p.ErrorCode == 0 {
						continue
					}
					if m := p.ErrorMessage; m == nil || *m == "" || !strings.Contains(*m, rt.Topic) || len(*m) > 300 {
						t.Errorf("%s-%d: message %s: want a short one naming the topic", rt.Topic, p.Partition, adminMsg(m))
					}
				}
			}
			f.ctrl.mu.Lock()
			asked := 0
			for _, r := range f.ctrl.reassignments {
				asked += len(r)
			}
			f.ctrl.mu.Unlock()
			if asked != tc.asked {
				t.Errorf("the controller was asked for %d partitions, want %d", asked, tc.asked)
			}
			if tc.asked == 0 || tc.name == "a cancel with none in progress" {
				if after := imagePartitions(f, "a"); !samePartitions(before, after) {
					t.Errorf("topic a changed: %+v -> %+v", before, after)
				}
			}
		})
	}
}

// A request with no topics, or a topic with no partitions, asks the
// controller nothing and answers nothing (a topic entry with none).
func TestAlterPartitionReassignmentsEmpty(t *testing.T) {
	f := newReassignFixture(t)
	resp := adminCall[*kmsg.AlterPartitionAssignmentsResponse](t, f, overTheWire(t, reassignReq(), 0), 0)
	if resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Errorf("no topics: %+v", resp)
	}
	req := reassignReq()
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = "a"
	req.Topics = append(req.Topics, rt)
	resp = adminCall[*kmsg.AlterPartitionAssignmentsResponse](t, f, overTheWire(t, req, 0), 0)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Topic != "a" || len(resp.Topics[0].Partitions) != 0 {
		t.Errorf("a topic with no partitions: %+v", resp)
	}
	if calls := f.ctrl.callLog(); slices.Contains(calls, "AlterPartitionReassignments") {
		t.Errorf("the controller was asked: %v", calls)
	}
}

// A failure of the whole request (NOT_CONTROLLER after the forwarder's
// retries, the request's timeout) is the top-level error and every sent
// partition's; a partition refused before sending keeps its own code.
func TestAlterPartitionReassignmentsRequestFails(t *testing.T) {
	f := newReassignFixture(t)
	f.ctrl.mu.Lock()
	f.ctrl.fail = fmt.Errorf("%w: fake: no controller", controlplane.ErrNotController)
	f.ctrl.mu.Unlock()
	req := reassignReq(reassignTarget{"a", 0, []int32{4, 2, 3}}, reassignTarget{"a", 1, []int32{}}, reassignTarget{"b", 0, nil})
	resp := adminCall[*kmsg.AlterPartitionAssignmentsResponse](t, f, overTheWire(t, req, 0), 0)
	if resp.ErrorCode != kerr.NotController.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "no controller") {
		t.Errorf("top-level %s %s, want NOT_CONTROLLER with the message", codeName(resp.ErrorCode), adminMsg(resp.ErrorMessage))
	}
	if got, want := reassignAnswers(resp), []string{"a-0=NOT_CONTROLLER", "a-1=INVALID_REPLICA_ASSIGNMENT", "b-0=NOT_CONTROLLER"}; !slices.Equal(got, want) {
		t.Errorf("answers %v, want %v", got, want)
	}

	// The request's own timeout bounds the wait for a commit that does
	// not come.
	f.ctrl.mu.Lock()
	f.ctrl.fail, f.ctrl.blockUntilDone = nil, true
	f.ctrl.mu.Unlock()
	req = reassignReq(reassignTarget{"a", 0, []int32{4, 2, 3}})
	req.TimeoutMillis = 50
	start := time.Now()
	resp = adminCall[*kmsg.AlterPartitionAssignmentsResponse](t, f, overTheWire(t, req, 0), 0)
	if resp.ErrorCode != kerr.RequestTimedOut.Code || !slices.Equal(reassignAnswers(resp), []string{"a-0=REQUEST_TIMED_OUT"}) {
		t.Errorf("a commit that never comes: %s %v, want REQUEST_TIMED_OUT", codeName(resp.ErrorCode), reassignAnswers(resp))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("answered after %v, the request's timeout is 50ms", d)
	}
}

// listedReassignments flattens a response to "topic-partition replicas=[...]
// adding=[...] removing=[...]", in order.
func listedReassignments(resp *kmsg.ListPartitionReassignmentsResponse) []string {
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s-%d replicas=%v adding=%v removing=%v", t.Topic, p.Partition, p.Replicas, p.AddingReplicas, p.RemovingReplicas))
		}
	}
	return out
}

func listReassignReq(topics map[string][]int32, order ...string) *kmsg.ListPartitionReassignmentsRequest {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	if topics != nil {
		req.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{}
		for _, name := range order {
			t := kmsg.NewListPartitionReassignmentsRequestTopic()
			t.Topic, t.Partitions = name, topics[name]
			req.Topics = append(req.Topics, t)
		}
	}
	return req
}

// ListPartitionReassignments answers from the image: null is every
// partition being reassigned, by topic and partition; named partitions
// that exist and are being reassigned, once each; the rest, unknown
// ones included, left out without an error, as Kafka's controller
// does. An empty list is no partitions, not all of them.
func TestListPartitionReassignments(t *testing.T) {
	f := newReassignFixture(t)
	// a-2 and b-0 are being reassigned; a-0 and a-1 are not.
	resp := adminCall[*kmsg.AlterPartitionAssignmentsResponse](t, f, reassignReq(reassignTarget{"b", 0, []int32{3, 2}}, reassignTarget{"a", 2, []int32{4, 1, 2}}), 0)
	if got := reassignAnswers(resp); !slices.Equal(got, []string{"b-0=OK", "a-2=OK"}) {
		t.Fatalf("setup: %v", got)
	}
	a2 := "a-2 replicas=[4 1 2 3] adding=[4] removing=[3]"
	b0 := "b-0 replicas=[3 2 1] adding=[3] removing=[1]"
	for _, tc := range []struct {
		name string
		req  *kmsg.ListPartitionReassignmentsRequest
		want []string
	}{
		{"null: all, by topic and partition", listReassignReq(nil), []string{a2, b0}},
		{"empty list: none", listReassignReq(map[string][]int32{}), nil},
		{"named", listReassignReq(map[string][]int32{"b": {0}, "a": {0, 1, 2}}, "b", "a"), []string{b0, a2}},
		{"a topic with no partitions named", listReassignReq(map[string][]int32{"a": {}}, "a"), nil},
		{"unknown topic and partitions left out", listReassignReq(map[string][]int32{"nope": {0}, "a": {-1, 7, 2, 2}}, "nope", "a"), []string{a2}},
		{"a topic named twice: answered once", listReassignReq(map[string][]int32{"a": {2}}, "a", "a"), []string{a2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := adminCall[*kmsg.ListPartitionReassignmentsResponse](t, f, overTheWire(t, tc.req, 0), 0)
			if resp.ErrorCode != 0 {
				t.Errorf("error %s", codeName(resp.ErrorCode))
			}
			if got := listedReassignments(resp); !slices.Equal(got, tc.want) {
				t.Errorf("listed %v, want %v", got, tc.want)
			}
			if tc.want == nil && len(resp.Topics) != 0 {
				t.Errorf("topics with nothing to list are answered: %+v", resp.Topics)
			}
		})
	}
	// Once none is in progress, null lists none.
	resp = adminCall[*kmsg.AlterPartitionAssignmentsResponse](t, f, reassignReq(reassignTarget{"a", 2, nil}, reassignTarget{"b", 0, nil}), 0)
	if got := reassignAnswers(resp); !slices.Equal(got, []string{"a-2=OK", "b-0=OK"}) {
		t.Fatalf("cancels: %v", got)
	}
	list := adminCall[*kmsg.ListPartitionReassignmentsResponse](t, f, listReassignReq(nil), 0)
	if len(list.Topics) != 0 {
		t.Errorf("after the cancels: %v", listedReassignments(list))
	}
}

// serveAdminFixture serves f on a local listener, registered in the
// image as node 1's, and returns its address.
func serveAdminFixture(t *testing.T, f *adminFixture) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.ctrl.mu.Lock()
	img := f.ctrl.cloneImageLocked()
	img.Brokers[adminTestNodeID] = metadata.Broker{NodeID: adminTestNodeID, Host: "127.0.0.1", Port: int32(l.Addr().(*net.TCPAddr).Port)}
	f.ctrl.img = img
	f.ctrl.mu.Unlock()
	served := make(chan error, 1)
	go func() { served <- f.s.Serve(l) }()
	t.Cleanup(func() {
		f.s.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String()
}

// franz-go's kadm (as the cluster tests and `fjord topic reassign` use
// it) negotiates v0 of both APIs, reads the per-partition answers, and
// a cancel as kadm spells it reaches the controller as one.
func TestPartitionReassignmentsWithFranzGo(t *testing.T) {
	f := newReassignFixture(t)
	addr := serveAdminFixture(t, f)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("a", 0, []int32{4, 2, 3})
	req.Assign("a", 1, []int32{2, 2, 3})
	req.Assign("a", 2, []int32{})
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]error{0: nil, 1: kerr.InvalidReplicaAssignment, 2: kerr.InvalidReplicaAssignment} {
		if got := resp["a"][p]; !errors.Is(got.Err, want) || (want != nil && got.ErrMessage == "") {
			t.Errorf("a-%d: %v %q, want %v with a message", p, got.Err, got.ErrMessage, want)
		}
	}
	listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"a": {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := listed.Sorted(); len(got) != 1 || got[0].Partition != 0 || !slices.Equal(got[0].Replicas, []int32{4, 2, 3, 1}) ||
		!slices.Equal(got[0].AddingReplicas, []int32{4}) || !slices.Equal(got[0].RemovingReplicas, []int32{1}) {
		t.Errorf("listed %+v", got)
	}
	// kadm sends nothing for no topics; every reassignment is the raw
	// request with null topics.
	all, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(ctx, cl)
	if err != nil || all.ErrorCode != 0 || len(listedReassignments(all)) != 1 {
		t.Errorf("null topics: %v %+v", err, all)
	}

	var undo kadm.AlterPartitionAssignmentsReq
	undo.CancelAssign("a", 0)
	undo.CancelAssign("a", 1)
	resp, err = adm.AlterPartitionAssignments(ctx, undo)
	if err != nil {
		t.Fatal(err)
	}
	if a0, a1 := resp["a"][0], resp["a"][1]; a0.Err != nil || !errors.Is(a1.Err, kerr.NoReassignmentInProgress) {
		t.Errorf("cancels: a-0 %v, a-1 %v (want none, NO_REASSIGNMENT_IN_PROGRESS)", a0.Err, a1.Err)
	}
	if p := imagePartitions(f, "a")[0]; p.Reassigning() || !slices.Equal(p.Replicas, []int32{2, 3, 1}) {
		t.Errorf("a-0 after the cancel: %+v", p)
	}
}

// Sarama's ClusterAdmin (v0 of both, from its Config.Version 2.4+)
// against the same fixture: per-partition errors come back as its
// ErrReassignPartitions wrapping each, and a nil list is a cancel.
func TestPartitionReassignmentsWithSarama(t *testing.T) {
	f := newReassignFixture(t)
	addr := serveAdminFixture(t, f)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_4_0_0
	cfg.Metadata.Retry.Backoff = 10 * time.Millisecond
	admin, err := sarama.NewClusterAdmin([]string{addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	// Sarama names partitions 0..n-1 of one topic.
	if err := admin.AlterPartitionReassignments("a", [][]int32{{4, 2, 3}}); err != nil {
		t.Fatalf("AlterPartitionReassignments: %v", err)
	}
	status, err := admin.ListPartitionReassignments("a", []int32{0, 1, 2})
	if err != nil {
		t.Fatalf("ListPartitionReassignments: %v", err)
	}
	if s := status["a"][0]; len(status["a"]) != 1 || s == nil || !slices.Equal(s.Replicas, []int32{4, 2, 3, 1}) ||
		!slices.Equal(s.AddingReplicas, []int32{4}) || !slices.Equal(s.RemovingReplicas, []int32{1}) {
		t.Errorf("listed %+v", status)
	}
	err = admin.AlterPartitionReassignments("a", [][]int32{nil, {1, 9, 2}})
	if !errors.Is(err, sarama.ErrReassignPartitions) || !errors.Is(err, sarama.ErrInvalidReplicaAssignment) {
		t.Errorf("a cancel and an unregistered broker: %v, want ErrReassignPartitions wrapping INVALID_REPLICA_ASSIGNMENT", err)
	}
	if p := imagePartitions(f, "a"); p[0].Reassigning() || p[1].Reassigning() || !slices.Equal(p[1].Replicas, []int32{2, 3, 1}) {
		t.Errorf("after the cancel and the refusal: a-0 %+v, a-1 %+v", p[0], p[1])
	}
}
