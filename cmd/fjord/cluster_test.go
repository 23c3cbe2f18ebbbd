package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/kafkaserver"
	"github.com/fjordmq/fjord/internal/testutil"
)

// `cluster describe` against a fake node: a real node cannot be made to
// hold a fenced broker without a second node and a lapsed session, so
// fakeNode answers the four APIs the command sends (ApiVersions,
// Metadata, DescribeCluster, DescribeQuorum) from a fixed cluster of
// three registered brokers, the third fenced, and serves DescribeCluster
// up to a version the test picks. It answers DescribeCluster as Kafka's
// broker does (KIP-1073): fenced brokers only at v2 with
// IncludeFencedBrokers.

// fakeBrokers is the fake cluster: node 1 is the fake itself (its host
// and port filled in by newFakeNode), 3 is fenced.
var fakeBrokers = []kmsg.DescribeClusterResponseBroker{
	{NodeID: 1},
	{NodeID: 2, Host: "b2.example", Port: 9094},
	{NodeID: 3, Host: "b3.example", Port: 9095, Rack: strPtr("r1"), IsFenced: true},
}

// fakePartitions is the fake cluster's one topic: partition 0 healthy
// (and being reassigned), 1 under-replicated, 2 offline with one
// replica in sync, below min.insync.replicas (2).
var fakePartitions = []kmsg.MetadataResponseTopicPartition{
	{Partition: 0, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}},
	{Partition: 1, Leader: 2, Replicas: []int32{2, 3, 1}, ISR: []int32{2, 1}},
	{Partition: 2, Leader: -1, Replicas: []int32{3, 1, 2}, ISR: []int32{3}},
}

func strPtr(s string) *string { return &s }

type fakeNode struct {
	t                  *testing.T
	ln                 net.Listener
	host               string
	port               int32
	describeClusterMax int16

	mu sync.Mutex
	// describeClusterAsked is every DescribeCluster request received.
	describeClusterAsked []kmsg.DescribeClusterRequest
}

func newFakeNode(t *testing.T, describeClusterMax int16) *fakeNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	f := &fakeNode{t: t, ln: ln, host: host, port: int32(p), describeClusterMax: describeClusterMax}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				if err := f.serve(nc); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
					t.Errorf("fake node: %v", err)
				}
			}()
		}
	}()
	return f
}

func (f *fakeNode) addr() string { return f.ln.Addr().String() }

// serve answers one connection's requests in order until it closes.
func (f *fakeNode) serve(nc net.Conn) error { return testutil.ServeKafka(nc, f.answer) }

func (f *fakeNode) answer(req kmsg.Request) (kmsg.Response, error) {
	switch req := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := kmsg.NewPtrApiVersionsResponse()
		for _, k := range []struct{ key, max int16 }{{18, 3}, {3, 12}, {60, f.describeClusterMax}, {55, 2}, {32, 4}, {46, 0}} {
			resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k.key, MaxVersion: k.max})
		}
		return resp, nil
	case *kmsg.MetadataRequest:
		// Only this node: every request the client sends comes here.
		resp := kmsg.NewPtrMetadataResponse()
		resp.ClusterID, resp.ControllerID = strPtr("fake-cluster"), 1
		resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: f.host, Port: f.port}}
		if req.Topics == nil { // every topic: cluster describe's partitions
			resp.Topics = []kmsg.MetadataResponseTopic{{Topic: strPtr("t"), Partitions: fakePartitions}}
		}
		return resp, nil
	case *kmsg.DescribeConfigsRequest:
		resp := kmsg.NewPtrDescribeConfigsResponse()
		for _, r := range req.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			rr.Configs = []kmsg.DescribeConfigsResponseResourceConfig{{Name: "min.insync.replicas", Value: strPtr("2")}}
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil
	case *kmsg.ListPartitionReassignmentsRequest:
		resp := kmsg.NewPtrListPartitionReassignmentsResponse()
		resp.Topics = []kmsg.ListPartitionReassignmentsResponseTopic{{Topic: "t", Partitions: []kmsg.ListPartitionReassignmentsResponseTopicPartition{
			{Partition: 0, Replicas: []int32{1, 2, 3}, AddingReplicas: []int32{3}, RemovingReplicas: []int32{}}}}}
		return resp, nil
	case *kmsg.DescribeClusterRequest:
		f.mu.Lock()
		f.describeClusterAsked = append(f.describeClusterAsked, *req)
		f.mu.Unlock()
		resp := kmsg.NewPtrDescribeClusterResponse()
		resp.ClusterID, resp.ControllerID = "fake-cluster", 1
		for _, b := range fakeBrokers {
			if b.IsFenced && !(req.Version >= 2 && req.IncludeFencedBrokers) {
				continue
			}
			if b.NodeID == 1 {
				b.Host, b.Port = f.host, f.port
			}
			if b.NodeID == 2 { // in controlled shutdown: Fjord's tag
				b.UnknownTags.Set(kafkaserver.ShuttingDownTag, []byte{1})
			}
			resp.Brokers = append(resp.Brokers, b)
		}
		return resp, nil
	case *kmsg.DescribeQuorumRequest:
		resp := kmsg.NewPtrDescribeQuorumResponse()
		p := kmsg.NewDescribeQuorumResponseTopicPartition()
		p.LeaderID, p.LeaderEpoch, p.HighWatermark = 1, 4, 17
		p.CurrentVoters = []kmsg.DescribeQuorumResponseTopicPartitionReplicaState{{ReplicaID: 1, LogEndOffset: 17}}
		p.Observers = []kmsg.DescribeQuorumResponseTopicPartitionReplicaState{{ReplicaID: 3, LogEndOffset: 15}} // broker-only, 2 behind
		resp.Topics = []kmsg.DescribeQuorumResponseTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumResponseTopicPartition{p}}}
		return resp, nil
	}
	return nil, fmt.Errorf("the fake does not serve %s", kmsg.NameForKey(req.Key()))
}

// asked returns the DescribeCluster requests received, checking there
// was at least one.
func (f *fakeNode) asked(t *testing.T) []kmsg.DescribeClusterRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.describeClusterAsked) == 0 {
		t.Fatal("no DescribeCluster request reached the fake node")
	}
	return append([]kmsg.DescribeClusterRequest(nil), f.describeClusterAsked...)
}

// Reference: KIP-1073. A node that serves DescribeCluster v2 is asked
// for its fenced brokers, and the command shows them: STATE in the
// table, "fenced" in the JSON.
func TestClusterDescribeShowsFencedBrokers(t *testing.T) {
	f := newFakeNode(t, 2)
	r := fjord(t, "", "cluster", "describe", "--brokers", f.addr())
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, req := range f.asked(t) {
		if req.Version != 2 || !req.IncludeFencedBrokers {
			t.Errorf("DescribeCluster v%d IncludeFencedBrokers=%v, want v2 asking for fenced brokers", req.Version, req.IncludeFencedBrokers)
		}
	}
	for _, want := range []string{
		"Cluster ID: fake-cluster\n",
		"Controller: 1\n",
		"Controller quorum: voters 1, observers 3, epoch 4, high watermark 17\n",
		"Brokers: 3 (1 fenced)\n",
		"Metadata log lag (records behind the high watermark): 1: 0, 3: 2\n",
		"Partitions: 3; offline 1, under min ISR 1, under-replicated 2; reassignments in progress 1\n",
		"Partitions in trouble:\n",
	} {
		if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(r.stdout) {
			t.Errorf("text output does not say %q:\n%s", want, r.stdout)
		}
	}
	for _, row := range []string{
		`^ID\s+HOST\s+PORT\s+RACK\s+STATE\s*$`,
		`^1\s+` + regexp.QuoteMeta(f.host) + `\s+` + strconv.Itoa(int(f.port)) + `\s+-\s+unfenced\s*$`,
		`^2\s+b2\.example\s+9094\s+-\s+shutting down\s*$`,
		`^3\s+b3\.example\s+9095\s+r1\s+fenced\s*$`,
		`^TOPIC\s+PARTITION\s+LEADER\s+REPLICAS\s+ISR\s+STATUS\s*$`,
		`^t\s+2\s+-1\s+3,1,2\s+3\s+offline,under-min-isr,under-replicated\s*$`,
		`^t\s+1\s+2\s+2,3,1\s+2,1\s+under-replicated\s*$`,
	} {
		if !regexp.MustCompile(`(?m)` + row).MatchString(r.stdout) {
			t.Errorf("text output has no line matching %s:\n%s", row, r.stdout)
		}
	}

	r = fjord(t, "", "cluster", "describe", "-o", "json", "--brokers", f.addr())
	if r.code != 0 {
		t.Fatalf("-o json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	doc := decodeJSON(t, r.stdout)
	wantKeys(t, "cluster describe", doc, "cluster_id", "controller", "brokers", "quorum", "partitions")
	health := wantKeys(t, "partitions", doc["partitions"], "partitions", "offline", "under_min_isr", "under_replicated",
		"reassignments_in_progress", "troubled")
	if number(t, health["under_replicated"]) != 2 || number(t, health["reassignments_in_progress"]) != 1 || len(list(t, health["troubled"])) != 2 {
		t.Errorf("cluster describe partitions: %v", health)
	}
	quorum := wantKeys(t, "quorum", doc["quorum"], "leader", "epoch", "high_watermark", "voters", "observers", "replicas")
	if r := list(t, quorum["replicas"]); len(r) != 2 || number(t, r[1].(map[string]any)["lag"]) != 2 {
		t.Errorf("cluster describe quorum replicas: %v", quorum["replicas"])
	}
	if doc["cluster_id"] != "fake-cluster" || number(t, doc["controller"]) != 1 {
		t.Errorf("cluster describe: %v", doc)
	}
	brokers := list(t, doc["brokers"])
	if len(brokers) != 3 {
		t.Fatalf("%d brokers, want 3: %v", len(brokers), brokers)
	}
	for i, want := range []struct {
		id     int64
		host   string
		rack   any
		fenced bool
	}{{1, f.host, nil, false}, {2, "b2.example", nil, false}, {3, "b3.example", "r1", true}} {
		b := wantKeys(t, "broker", brokers[i], "node_id", "host", "port", "rack", "fenced", "shutting_down")
		if number(t, b["node_id"]) != want.id || b["host"] != want.host || b["rack"] != want.rack || b["fenced"] != want.fenced {
			t.Errorf("broker %d: %v, want %+v", i, b, want)
		}
	}
}

// A node serving DescribeCluster only up to v1 gets a request without
// IncludeFencedBrokers (the field does not exist there) and lists its
// unfenced brokers; the text says fenced ones could not be listed.
func TestClusterDescribeBeforeDescribeClusterV2(t *testing.T) {
	f := newFakeNode(t, 1)
	r := fjord(t, "", "cluster", "describe", "--brokers", f.addr())
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, req := range f.asked(t) {
		if req.Version != 1 {
			t.Errorf("DescribeCluster v%d to a node serving v0-1", req.Version)
		}
	}
	want := "Brokers: 2 (fenced brokers not listed: the node answers DescribeCluster v1, which cannot)\n"
	if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(r.stdout) {
		t.Errorf("text output does not say %q:\n%s", want, r.stdout)
	}
	if regexp.MustCompile(`(?m)^3\s`).MatchString(r.stdout) {
		t.Errorf("fenced broker 3 listed by a v1 answer:\n%s", r.stdout)
	}

	doc := decodeJSON(t, fjord(t, "", "cluster", "describe", "-o", "json", "--brokers", f.addr()).stdout)
	brokers := list(t, doc["brokers"])
	if len(brokers) != 2 {
		t.Fatalf("%d brokers, want 2: %v", len(brokers), brokers)
	}
	for i, b := range brokers {
		if m := wantKeys(t, "broker", b, "node_id", "host", "port", "rack", "fenced", "shutting_down"); m["fenced"] != false {
			t.Errorf("broker %d: %v, want unfenced", i, m)
		}
	}
}
