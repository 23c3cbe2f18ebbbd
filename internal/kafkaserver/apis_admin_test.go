package kafkaserver

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/replica"
)

// The admin APIs and the version ranges advertised for them (issue 3;
// each range checked against what the clients send, see
// shared/KAFKA-API.md).
var wantAdminVersions = map[int16][2]int16{
	2:  {0, 8}, // ListOffsets
	19: {0, 7}, // CreateTopics
	20: {0, 6}, // DeleteTopics
	21: {0, 2}, // DeleteRecords
	22: {0, 5}, // InitProducerId (v6 is KIP-939 two-phase commit)
	23: {0, 4}, // OffsetForLeaderEpoch (v2 is librdkafka's max)
	32: {0, 4}, // DescribeConfigs
	33: {0, 2}, // AlterConfigs
	35: {0, 4}, // DescribeLogDirs
	37: {0, 3}, // CreatePartitions
	43: {0, 2}, // ElectLeaders
	44: {0, 1}, // IncrementalAlterConfigs
	45: {0, 0}, // AlterPartitionReassignments (v1 is KIP-860's, Kafka 4.1)
	46: {0, 0}, // ListPartitionReassignments
	48: {0, 1}, // DescribeClientQuotas (KIP-546)
	49: {0, 1}, // AlterClientQuotas (KIP-546)
	50: {0, 0}, // DescribeUserScramCredentials (KIP-554)
	51: {0, 0}, // AlterUserScramCredentials (KIP-554)
	55: {0, 2}, // DescribeQuorum (v2 is KIP-853's)
	60: {0, 2}, // DescribeCluster (v2 is KIP-1073's)
	61: {0, 0}, // DescribeProducers (KIP-664)
	64: {0, 0}, // UnregisterBroker (the end of fjord cluster drain)
	80: {0, 1}, // AddRaftVoter (KIP-853)
	81: {0, 0}, // RemoveRaftVoter (KIP-853)
}

func TestAdminAPIVersionRanges(t *testing.T) {
	if len(adminAPIs) != len(wantAdminVersions) {
		t.Fatalf("%d admin APIs registered, want %d", len(adminAPIs), len(wantAdminVersions))
	}
	for _, a := range adminAPIs {
		want, ok := wantAdminVersions[a.key]
		if !ok {
			t.Fatalf("unexpected admin API %s", kmsg.NameForKey(a.key))
		}
		if a.minVersion != want[0] || a.maxVersion != want[1] {
			t.Fatalf("%s: v%d-%d, want v%d-%d", kmsg.NameForKey(a.key), a.minVersion, a.maxVersion, want[0], want[1])
		}
		if a.handle == nil {
			t.Fatalf("%s: no handler", kmsg.NameForKey(a.key))
		}
		if max := kmsg.RequestForKey(a.key).MaxVersion(); a.maxVersion > max {
			t.Fatalf("%s: v%d advertised, kmsg knows up to v%d", kmsg.NameForKey(a.key), a.maxVersion, max)
		}
	}
}

// Every version served decodes a request as kmsg encodes it, and the
// handler's answer to it encodes and decodes at that version: a field
// used at a version that lacks it would fail here (kmsg drops it on
// encode, or the decode reads past the end).
func TestAdminAPIVersionsRoundTrip(t *testing.T) {
	for _, a := range adminAPIs {
		for v := a.minVersion; v <= a.maxVersion; v++ {
			name := kmsg.NameForKey(a.key)
			sent := kmsg.RequestForKey(a.key)
			sent.SetVersion(v)
			wire := sent.AppendTo(nil)
			got := kmsg.RequestForKey(a.key)
			got.SetVersion(v)
			if err := got.ReadFrom(wire); err != nil {
				t.Fatalf("%s v%d: request does not decode: %v", name, v, err)
			}
			if again := got.AppendTo(nil); !bytes.Equal(again, wire) {
				t.Fatalf("%s v%d: request re-encodes differently", name, v)
			}

			f := newAdminFixture(t)
			resp, _, err := a.handle(context.Background(), f.s, &request{key: a.key, version: v, body: got})
			if err != nil {
				t.Fatalf("%s v%d: %v", name, v, err)
			}
			if resp.Key() != a.key || resp.GetVersion() != v {
				t.Fatalf("%s v%d: answered %s v%d", name, v, kmsg.NameForKey(resp.Key()), resp.GetVersion())
			}
			out := resp.AppendTo(nil)
			back := got.ResponseKind()
			back.SetVersion(v)
			if err := back.ReadFrom(out); err != nil {
				t.Fatalf("%s v%d: response does not decode: %v", name, v, err)
			}
			if again := back.AppendTo(nil); !bytes.Equal(again, out) {
				t.Fatalf("%s v%d: response re-encodes differently", name, v)
			}
		}
	}
}

// franz-go's admin client (kadm over kgo, negotiating versions from
// ApiVersions) drives every admin API over TCP against a Server with the
// fakes, so the versions a real client picks decode, and the answers read
// as it expects. The real node with the real services is tested end to
// end by the test engineer's suite.
func TestAdminAPIsWithFranzGo(t *testing.T) {
	f := newAdminFixture(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := int32(l.Addr().(*net.TCPAddr).Port)
	f.ctrl.mu.Lock()
	img := f.ctrl.cloneImageLocked()
	img.Brokers[adminTestNodeID] = metadata.Broker{NodeID: adminTestNodeID, Host: "127.0.0.1", Port: port}
	f.ctrl.img = img
	f.ctrl.mu.Unlock()
	served := make(chan error, 1)
	go func() { served <- f.s.Serve(l) }()
	defer func() {
		f.s.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	cl, err := kgo.NewClient(kgo.SeedBrokers(l.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	created, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": strp("60000")}, "smoke")
	if err != nil || created.Err != nil {
		t.Fatalf("CreateTopic: %v %v", err, created.Err)
	}
	if created.NumPartitions != 2 || [16]byte(created.ID) != [16]byte(f.ctrl.Image().Topics["smoke"].ID) {
		t.Fatalf("CreateTopic answered %+v", created)
	}

	described, err := adm.DescribeTopicConfigs(ctx, "smoke")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := described.On("smoke", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("DescribeTopicConfigs: %v %v", err, rc.Err)
	}
	var retention string
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			retention = c.MaybeValue()
		}
	}
	if retention != "60000" {
		t.Fatalf("retention.ms described as %q", retention)
	}

	altered, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("120000")}}, "smoke")
	if err != nil || altered[0].Err != nil {
		t.Fatalf("AlterTopicConfigs: %v %+v", err, altered)
	}
	if got := f.ctrl.Image().Topics["smoke"].Configs["retention.ms"]; got != "120000" {
		t.Fatalf("retention.ms is %q after the alter", got)
	}

	grown, err := adm.CreatePartitions(ctx, 1, "smoke")
	if err != nil || grown["smoke"].Err != nil {
		t.Fatalf("CreatePartitions: %v %+v", err, grown)
	}
	if n := len(f.ctrl.Image().Topics["smoke"].Partitions); n != 3 {
		t.Fatalf("%d partitions after adding one to 2", n)
	}

	for p := range int32(3) {
		f.reps.setLog("smoke", p, &adminFakeLog{logStart: 0, hw: 10 * int64(p+1), leo: 10 * int64(p+1), epochs: [][2]int64{{0, 0}}})
	}
	ends, err := adm.ListEndOffsets(ctx, "smoke")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		o, ok := ends.Lookup("smoke", p)
		if !ok || o.Err != nil || o.Offset != 10*int64(p+1) {
			t.Fatalf("end offset of partition %d: %+v", p, o)
		}
	}

	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: "smoke", Partition: 1, At: 5})
	deleted, err := adm.DeleteRecords(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := deleted.Lookup("smoke", 1); !ok || d.Err != nil || d.LowWatermark != 5 {
		t.Fatalf("DeleteRecords: %+v", d)
	}

	var epochs kadm.OffsetForLeaderEpochRequest
	epochs.Add("smoke", 2, 0)
	ends2, err := adm.OffsetForLeaderEpoch(ctx, epochs)
	if err != nil {
		t.Fatal(err)
	}
	if e := ends2["smoke"][2]; e.Err != nil || e.EndOffset != 30 || e.LeaderEpoch != 0 {
		t.Fatalf("OffsetForLeaderEpoch: %+v", e)
	}

	f.reps.infos = []replica.LogDirInfo{{Topic: "smoke", Partition: 0, Size: 4096}}
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := dirs[adminTestNodeID]["/data/fjord"]; !ok || d.Err != nil || d.Topics["smoke"][0].Size != 4096 {
		t.Fatalf("DescribeAllLogDirs: %+v", dirs)
	}

	cluster, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err != nil || cluster.ErrorCode != 0 || cluster.ClusterID != "fjord-test-cluster" || len(cluster.Brokers) != 1 {
		t.Fatalf("DescribeCluster: %v %+v", err, cluster)
	}

	pid, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil || pid.ErrorCode != 0 || pid.ProducerID != 1000 {
		t.Fatalf("InitProducerId: %v %+v", err, pid)
	}

	dropped, err := adm.DeleteTopics(ctx, "smoke")
	if err != nil || dropped["smoke"].Err != nil {
		t.Fatalf("DeleteTopics: %v %+v", err, dropped)
	}
	if _, ok := f.ctrl.Image().Topics["smoke"]; ok {
		t.Fatal("topic still there")
	}
}
