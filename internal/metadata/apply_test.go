package metadata

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var (
	idOrders = UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	idEvents = UUID{0xaa, 1}
)

func strp(s string) *string { return &s }

func withEpoch(r PartitionRecord, partitionEpoch int32) PartitionRecord {
	r.PartitionEpoch = partitionEpoch
	return r
}

// baseImage: cluster "c1", brokers 1..3, topic "orders" (2 partitions,
// replicas [1 2] and [2 3], leader epoch 5 on partition 0), topic "events"
// (1 partition on broker 3, retention.ms=1000).
func baseImage(t *testing.T) *Image {
	t.Helper()
	img, err := Empty(testConfigs).Apply(10,
		ClusterIDRecord{ClusterID: "c1"},
		BrokerRecord{NodeID: 1, Host: "h1", Port: 9092},
		BrokerRecord{NodeID: 2, Host: "h2", Port: 9092},
		BrokerRecord{NodeID: 3, Host: "h3", Port: 9092, Rack: "r3"},
		TopicRecord{Name: "orders", ID: idOrders},
		PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 5},
		PartitionRecord{TopicID: idOrders, Partition: 1, Replicas: []int32{2, 3}, ISR: []int32{2, 3}, Leader: 2},
		TopicRecord{Name: "events", ID: idEvents},
		PartitionRecord{TopicID: idEvents, Partition: 0, Replicas: []int32{3}, ISR: []int32{3}, Leader: 3},
		ConfigRecord{TopicID: idEvents, Name: "retention.ms", Value: strp("1000")},
	)
	if err != nil {
		t.Fatalf("base image: %v", err)
	}
	return img
}

// Fencing, from metadata version 2: a registration starts fenced; fence
// and unfence name a registered broker at its current epoch; a fenced
// broker is not made leader; a log at version 1 has no fencing.
func TestApplyFencing(t *testing.T) {
	v1 := baseImage(t)
	if v1.Brokers[1].Fenced {
		t.Fatal("a registration in a log without fencing is fenced")
	}
	if _, err := v1.Apply(11, FenceBrokerRecord{NodeID: 1, Epoch: 10}); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("fence in a version-1 log: %v, want ErrBadRecord", err)
	}
	img, err := v1.Apply(11, MetadataVersionRecord{Version: FencingMetadataVersion}, BrokerRecord{NodeID: 4, Host: "h4", Port: 9092})
	if err != nil {
		t.Fatal(err)
	}
	if !img.Brokers[4].Fenced || img.Brokers[1].Fenced {
		t.Fatalf("after the upgrade: a new registration fenced %v, an old one fenced %v", img.Brokers[4].Fenced, img.Brokers[1].Fenced)
	}
	for _, tc := range []struct {
		name string
		recs []Record
		msg  string
	}{
		{"unknown broker", []Record{UnfenceBrokerRecord{NodeID: 9, Epoch: 11}}, "not registered"},
		{"old epoch", []Record{UnfenceBrokerRecord{NodeID: 4, Epoch: 10}}, "epoch 10"},
		{"fenced leader elected", []Record{PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2, LeaderEpoch: 6, PartitionEpoch: 1},
			FenceBrokerRecord{NodeID: 1, Epoch: 10},
			PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 7, PartitionEpoch: 2}}, "leader 1 is fenced"},
		{"new partition led by a fenced broker", []Record{PartitionRecord{TopicID: idOrders, Partition: 2, Replicas: []int32{4}, ISR: []int32{4}, Leader: 4}}, "leader 4 is fenced"},
	} {
		if _, err := img.Apply(12, tc.recs...); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want ErrBadRecord naming %q", tc.name, err, tc.msg)
		}
	}
	next, err := img.Apply(12, UnfenceBrokerRecord{NodeID: 4, Epoch: 11},
		PartitionRecord{TopicID: idOrders, Partition: 2, Replicas: []int32{4}, ISR: []int32{4}, Leader: 4},
		FenceBrokerRecord{NodeID: 1, Epoch: 10},
		PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 6, PartitionEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if next.Brokers[4].Fenced || !next.Brokers[1].Fenced {
		t.Fatalf("brokers: %+v", next.Brokers)
	}
}

// Controlled shutdown, from metadata version 3: it names a registered
// broker at its current epoch; such a broker is not made leader (it may
// stay one in a batch that changes something else, as the controller's
// own shutdown batch does before it moves the leadership); a new
// registration of the broker (a new process) ends it.
func TestApplyControlledShutdown(t *testing.T) {
	v2, err := baseImage(t).Apply(11, MetadataVersionRecord{Version: FencingMetadataVersion})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v2.Apply(12, ControlledShutdownRecord{NodeID: 1, Epoch: 10}); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "metadata version 3") {
		t.Fatalf("controlled shutdown in a version-2 log: %v, want ErrBadRecord naming version 3", err)
	}
	img, err := v2.Apply(12, MetadataVersionRecord{Version: ControlledShutdownMetadataVersion})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		recs []Record
		msg  string
	}{
		{"unknown broker", []Record{ControlledShutdownRecord{NodeID: 9, Epoch: 10}}, "not registered"},
		{"old epoch", []Record{ControlledShutdownRecord{NodeID: 1, Epoch: 9}}, "epoch 9"},
		{"leader elected while shutting down", []Record{ControlledShutdownRecord{NodeID: 2, Epoch: 10},
			PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2, LeaderEpoch: 6, PartitionEpoch: 1}},
			"leader 2 is in controlled shutdown"},
		{"new partition led by a broker shutting down", []Record{ControlledShutdownRecord{NodeID: 3, Epoch: 10},
			PartitionRecord{TopicID: idOrders, Partition: 2, Replicas: []int32{3}, ISR: []int32{3}, Leader: 3}},
			"leader 3 is in controlled shutdown"},
	} {
		if _, err := img.Apply(13, tc.recs...); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want ErrBadRecord naming %q", tc.name, err, tc.msg)
		}
	}
	// The controller's batch: the broker's state first, then its
	// leadership moved and its ISR place given up.
	next, err := img.Apply(13, ControlledShutdownRecord{NodeID: 1, Epoch: 10},
		PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 6, PartitionEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if b := next.Brokers[1]; !b.ShuttingDown || b.Fenced || b.Active() {
		t.Fatalf("broker 1 after its controlled shutdown: %+v (active %v)", b, b.Active())
	}
	if b := next.Brokers[2]; b.ShuttingDown || !b.Active() {
		t.Fatalf("broker 2: %+v", b)
	}
	again, err := next.Apply(14, BrokerRecord{NodeID: 1, Host: "h1", Port: 9092})
	if err != nil {
		t.Fatal(err)
	}
	if b := again.Brokers[1]; b.ShuttingDown {
		t.Fatalf("broker 1 registered again is still shutting down: %+v", b)
	}
}

func TestApplyBaseImage(t *testing.T) {
	img := baseImage(t)
	if img.Offset != 10 || img.ClusterID != "c1" || len(img.Brokers) != 3 {
		t.Fatalf("image = offset %d cluster %q brokers %d", img.Offset, img.ClusterID, len(img.Brokers))
	}
	if b, _ := img.Broker(3); !reflect.DeepEqual(b, Broker{NodeID: 3, Host: "h3", Port: 9092, Rack: "r3", Epoch: 10}) {
		t.Fatalf("broker 3 = %+v", b)
	}
	orders, ok := img.Topic("orders")
	if !ok || orders.ID != idOrders || len(orders.Partitions) != 2 {
		t.Fatalf("orders = %+v, %v", orders, ok)
	}
	if byID, _ := img.TopicByID(idOrders); byID != orders {
		t.Fatal("Topics and TopicsByID disagree")
	}
	p1, ok := orders.Partition(1)
	if !ok || !reflect.DeepEqual(p1.Replicas, []int32{2, 3}) || p1.Leader != 2 {
		t.Fatalf("orders-1 = %+v", p1)
	}
	if _, ok := orders.Partition(2); ok {
		t.Fatal("partition 2 exists")
	}
	if _, ok := orders.Partition(-1); ok {
		t.Fatal("partition -1 exists")
	}
	events, _ := img.Topic("events")
	if got := img.TopicConfig(events, "retention.ms"); got != "1000" {
		t.Fatalf("events retention.ms = %q", got)
	}
	if got := img.TopicConfig(events, "cleanup.policy"); got != "delete" {
		t.Fatalf("events cleanup.policy = %q, want the default", got)
	}
	if got := img.TopicConfig(events, "no.such.config"); got != "" {
		t.Fatalf("unknown config = %q", got)
	}
	if got := img.TopicNames(); !reflect.DeepEqual(got, []string{"events", "orders"}) {
		t.Fatalf("TopicNames = %v", got)
	}
	if got := img.BrokerIDs(); !reflect.DeepEqual(got, []int32{1, 2, 3}) {
		t.Fatalf("BrokerIDs = %v", got)
	}
}

// TestApplyRejects has one case per rule in Apply's doc.
func TestApplyRejects(t *testing.T) {
	pr := func(p, leader, epoch int32, replicas, isr []int32) PartitionRecord {
		return PartitionRecord{TopicID: idOrders, Partition: p, Replicas: replicas, ISR: isr, Leader: leader, LeaderEpoch: epoch}
	}
	newTopic := UUID{0x77}
	tests := []struct {
		name   string
		offset uint64
		recs   []Record
		want   string // in the error
	}{
		{"offset not after image", 10, nil, "offset 10"},
		{"offset before image", 3, nil, "offset 3"},
		{"nil record", 11, []Record{nil}, "nil record"},
		{"nil pointer record", 11, []Record{(*TopicRecord)(nil)}, "nil"},
		{"empty cluster id", 11, []Record{ClusterIDRecord{}}, "empty cluster id"},
		{"cluster id changes", 11, []Record{ClusterIDRecord{ClusterID: "c2"}}, `cannot change to "c2"`},
		{"negative broker id", 11, []Record{BrokerRecord{NodeID: -1, Host: "h", Port: 1}}, "node id -1"},
		{"broker without host", 11, []Record{BrokerRecord{NodeID: 4, Port: 1}}, "empty host"},
		{"broker port 0", 11, []Record{BrokerRecord{NodeID: 4, Host: "h", Port: 0}}, "port 0"},
		{"broker port too big", 11, []Record{BrokerRecord{NodeID: 4, Host: "h", Port: 65536}}, "port 65536"},
		{"broker rack with a newline", 11, []Record{BrokerRecord{NodeID: 4, Host: "h", Port: 1, Rack: "r1\nr2"}}, "broker 4: " + ErrInvalidRack.Error()},
		{"broker rack too long", 11, []Record{BrokerRecord{NodeID: 4, Host: "h", Port: 1, Rack: strings.Repeat("r", MaxRackLength+1)}}, "256 bytes long"},
		{"bad topic name", 11, []Record{TopicRecord{Name: "a b", ID: newTopic}}, `" "`},
		{"zero topic id", 11, []Record{TopicRecord{Name: "t"}}, "zero topic id"},
		{"live topic name", 11, []Record{TopicRecord{Name: "orders", ID: newTopic}}, "already exists"},
		{"live topic id", 11, []Record{TopicRecord{Name: "t", ID: idOrders}}, "already belongs"},
		{"topic without partitions", 11, []Record{TopicRecord{Name: "t", ID: newTopic}}, "without partitions"},
		{"partition of unknown topic", 11, []Record{PartitionRecord{TopicID: newTopic, Replicas: []int32{1}}}, "unknown topic id"},
		{"partition gap", 11, []Record{pr(3, 1, 0, []int32{1}, []int32{1})}, "partition 3 is not in 0..2"},
		{"negative partition", 11, []Record{pr(-1, 1, 0, []int32{1}, []int32{1})}, "partition -1"},
		{"no replicas", 11, []Record{pr(2, -1, 0, nil, nil)}, "no replicas"},
		{"unregistered replica", 11, []Record{pr(2, 1, 0, []int32{1, 9}, []int32{1})}, "replica 9 is not a registered broker"},
		{"duplicate replica", 11, []Record{pr(2, 1, 0, []int32{1, 1}, []int32{1})}, "replica 1 listed twice"},
		{"ISR outside replicas", 11, []Record{pr(2, 1, 0, []int32{1}, []int32{1, 2})}, "ISR member 2 is not a replica"},
		{"duplicate ISR", 11, []Record{pr(2, 1, 0, []int32{1, 2}, []int32{1, 1})}, "ISR member 1 listed twice"},
		{"leader outside ISR", 11, []Record{pr(2, 2, 0, []int32{1, 2}, []int32{1})}, "leader 2 is not in the ISR"},
		{"negative leader epoch", 11, []Record{pr(2, 1, -1, []int32{1}, []int32{1})}, "leader epoch -1"},
		{"leader epoch decreases", 11, []Record{pr(0, 1, 4, []int32{1, 2}, []int32{1, 2})}, "leader epoch 4 is below 5"},
		{"leader change, same epoch", 11, []Record{pr(0, 2, 5, []int32{1, 2}, []int32{1, 2})}, "without a new leader epoch"},
		{"new partition at partition epoch 1", 11, []Record{withEpoch(pr(2, 1, 0, []int32{1}, []int32{1}), 1)}, "created with partition epoch 1, not 0"},
		{"ISR change keeps the partition epoch", 11, []Record{pr(0, 1, 5, []int32{1, 2}, []int32{1})}, "partition epoch 0 for a change, want 1"},
		{"ISR change skips a partition epoch", 11, []Record{withEpoch(pr(0, 1, 5, []int32{1, 2}, []int32{1}), 2)}, "partition epoch 2 for a change, want 1"},
		{"ISR reordered, same partition epoch", 11, []Record{pr(0, 1, 5, []int32{1, 2}, []int32{2, 1})}, "partition epoch 0 for a change"},
		{"replicas change, same partition epoch", 11, []Record{pr(1, 2, 0, []int32{2, 3, 1}, []int32{2, 3})}, "partition epoch 0 for a change"},
		{"leader change, same partition epoch", 11, []Record{pr(0, 2, 6, []int32{1, 2}, []int32{1, 2})}, "partition epoch 0 for a change"},
		{"leader epoch alone moves, same partition epoch", 11, []Record{pr(0, 1, 6, []int32{1, 2}, []int32{1, 2})}, "partition epoch 0 for a change"},
		{"nothing changes, partition epoch moves", 11, []Record{withEpoch(pr(0, 1, 5, []int32{1, 2}, []int32{1, 2}), 1)}, "partition epoch 1 for an unchanged state, want 0"},
		{"second change in a batch repeats the epoch", 11, []Record{
			withEpoch(pr(0, 1, 5, []int32{1, 2}, []int32{1}), 1),
			withEpoch(pr(0, 1, 5, []int32{1, 2}, []int32{1, 2}), 1),
		}, "record 1 (partition): topic \"orders\" partition 0: partition epoch 1 for a change, want 2"},
		{"config of unknown topic", 11, []Record{ConfigRecord{TopicID: newTopic, Name: "retention.ms", Value: strp("1")}}, "unknown topic id"},
		{"unknown config", 11, []Record{ConfigRecord{TopicID: idOrders, Name: "retention.mss", Value: strp("1")}}, `unknown topic config "retention.mss"`},
		{"unknown config reset", 11, []Record{ConfigRecord{TopicID: idOrders, Name: "retention.mss"}}, `unknown config "retention.mss"`},
		{"bad config value", 11, []Record{ConfigRecord{TopicID: idOrders, Name: "retention.ms", Value: strp("soon")}}, `retention.ms="soon"`},
		{"remove unknown topic", 11, []Record{RemoveTopicRecord{TopicID: newTopic}}, "unknown topic id"},
		{"producer ids for negative node", 11, []Record{ProducerIDsRecord{NodeID: -1, NextProducerID: 1000}}, "node id -1"},
		{"producer ids do not grow", 11, []Record{ProducerIDsRecord{NodeID: 1, NextProducerID: 1000}, ProducerIDsRecord{NodeID: 1, NextProducerID: 1000}}, "does not grow past 1000"},
		{"bad record after good ones", 11, []Record{
			TopicRecord{Name: "t", ID: newTopic},
			PartitionRecord{TopicID: newTopic, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
			RemoveTopicRecord{TopicID: UUID{0x99}},
		}, "record 2 (remove_topic)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := baseImage(t)
			before, err := EncodeImage(img)
			if err != nil {
				t.Fatal(err)
			}
			next, err := img.Apply(tc.offset, tc.recs...)
			if err == nil {
				t.Fatalf("Apply accepted it: %+v", next)
			}
			if !errors.Is(err, ErrBadRecord) {
				t.Errorf("error %v does not wrap ErrBadRecord", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if next != nil {
				t.Errorf("Apply returned an image with its error")
			}
			after, _ := EncodeImage(img)
			if string(before) != string(after) {
				t.Errorf("a refused batch changed the old image")
			}
		})
	}
}

func TestApplyAccepts(t *testing.T) {
	newTopic := UUID{0x77}
	tests := []struct {
		name  string
		recs  []Record
		check func(t *testing.T, img *Image)
	}{
		{"same cluster id again", []Record{ClusterIDRecord{ClusterID: "c1"}}, func(t *testing.T, img *Image) {
			if img.ClusterID != "c1" {
				t.Fatal(img.ClusterID)
			}
		}},
		{"broker re-registers", []Record{BrokerRecord{NodeID: 1, Host: "new", Port: 19092}}, func(t *testing.T, img *Image) {
			if b := img.Brokers[1]; b.Host != "new" || b.Port != 19092 {
				t.Fatal(b)
			}
		}},
		{"add a partition", []Record{PartitionRecord{TopicID: idOrders, Partition: 2, Replicas: []int32{3}, ISR: []int32{3}, Leader: 3}}, func(t *testing.T, img *Image) {
			if n := len(img.Topics["orders"].Partitions); n != 3 {
				t.Fatal(n)
			}
		}},
		{"new leader with higher epoch", []Record{PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 6, PartitionEpoch: 1}}, func(t *testing.T, img *Image) {
			if p := img.Topics["orders"].Partitions[0]; p.Leader != 2 || p.LeaderEpoch != 6 || len(p.ISR) != 1 || p.PartitionEpoch != 1 {
				t.Fatal(p)
			}
		}},
		{"ISR shrinks, same leader and epoch", []Record{PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 1}}, func(t *testing.T, img *Image) {
			if p := img.Topics["orders"].Partitions[0]; len(p.ISR) != 1 || p.LeaderEpoch != 5 || p.PartitionEpoch != 1 {
				t.Fatal(p)
			}
		}},
		{"no leader", []Record{PartitionRecord{TopicID: idOrders, Partition: 1, Replicas: []int32{2, 3}, ISR: nil, Leader: -1, LeaderEpoch: 1, PartitionEpoch: 1}}, func(t *testing.T, img *Image) {
			if p := img.Topics["orders"].Partitions[1]; p.Leader != -1 || p.PartitionEpoch != 1 {
				t.Fatal(p)
			}
		}},
		{"replicas grow, partition epoch moves", []Record{PartitionRecord{TopicID: idOrders, Partition: 1, Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3}, Leader: 2, PartitionEpoch: 1}}, func(t *testing.T, img *Image) {
			if p := img.Topics["orders"].Partitions[1]; len(p.Replicas) != 3 || p.PartitionEpoch != 1 {
				t.Fatal(p)
			}
		}},
		{"two changes in one batch, one step each", []Record{
			PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 1},
			PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 2},
		}, func(t *testing.T, img *Image) {
			if p := img.Topics["orders"].Partitions[0]; len(p.ISR) != 2 || p.PartitionEpoch != 2 {
				t.Fatal(p)
			}
		}},
		{"an unchanged state keeps its partition epoch", []Record{PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 5}}, func(t *testing.T, img *Image) {
			if p := img.Topics["orders"].Partitions[0]; p.PartitionEpoch != 0 {
				t.Fatal(p)
			}
		}},
		{"config set and reset", []Record{
			ConfigRecord{TopicID: idOrders, Name: "cleanup.policy", Value: strp("compact")},
			ConfigRecord{TopicID: idEvents, Name: "retention.ms"},
		}, func(t *testing.T, img *Image) {
			if v := img.Topics["orders"].Configs["cleanup.policy"]; v != "compact" {
				t.Fatal(v)
			}
			if _, ok := img.Topics["events"].Configs["retention.ms"]; ok {
				t.Fatal("retention.ms override survived its reset")
			}
		}},
		{"remove a topic", []Record{RemoveTopicRecord{TopicID: idOrders}}, func(t *testing.T, img *Image) {
			if _, ok := img.Topic("orders"); ok {
				t.Fatal("orders by name")
			}
			if _, ok := img.TopicByID(idOrders); ok {
				t.Fatal("orders by id")
			}
		}},
		{"delete and recreate a name in one batch", []Record{
			RemoveTopicRecord{TopicID: idOrders},
			TopicRecord{Name: "orders", ID: newTopic},
			PartitionRecord{TopicID: newTopic, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		}, func(t *testing.T, img *Image) {
			if o := img.Topics["orders"]; o.ID != newTopic || len(o.Partitions) != 1 {
				t.Fatal(o)
			}
		}},
		{"pointer records", []Record{
			&TopicRecord{Name: "t", ID: newTopic},
			&PartitionRecord{TopicID: newTopic, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
			&ProducerIDsRecord{NodeID: 1, NextProducerID: 1000},
		}, func(t *testing.T, img *Image) {
			if _, ok := img.Topic("t"); !ok || img.NextProducerID != 1000 {
				t.Fatal(img.NextProducerID)
			}
		}},
		{"empty batch moves the offset only", nil, func(t *testing.T, img *Image) {
			if len(img.Topics) != 2 {
				t.Fatal(len(img.Topics))
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := baseImage(t)
			before, _ := EncodeImage(img)
			next, err := img.Apply(11, tc.recs...)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if next.Offset != 11 {
				t.Errorf("offset = %d", next.Offset)
			}
			tc.check(t, next)
			after, _ := EncodeImage(img)
			if string(before) != string(after) {
				t.Errorf("Apply modified the old image")
			}
		})
	}
}

// TestApplySharesUntouchedTopics pins the copy-on-write contract: a topic
// the batch does not touch is the same *Topic in both images.
func TestApplySharesUntouchedTopics(t *testing.T) {
	img := baseImage(t)
	next, err := img.Apply(11, ConfigRecord{TopicID: idOrders, Name: "retention.ms", Value: strp("5")})
	if err != nil {
		t.Fatal(err)
	}
	if next.Topics["events"] != img.Topics["events"] {
		t.Error("untouched topic was copied")
	}
	if next.Topics["orders"] == img.Topics["orders"] {
		t.Error("changed topic is shared with the old image")
	}
	if _, ok := img.Topics["orders"].Configs["retention.ms"]; ok {
		t.Error("old image sees the new config")
	}
	if next.TopicsByID[idOrders] != next.Topics["orders"] {
		t.Error("by-id map points at the old copy")
	}
}

// TestApplyCopiesRecordSlices: the caller may reuse a record's slices.
func TestApplyCopiesRecordSlices(t *testing.T) {
	img := baseImage(t)
	replicas := []int32{3}
	next, err := img.Apply(11, PartitionRecord{TopicID: idOrders, Partition: 2, Replicas: replicas, ISR: replicas, Leader: 3})
	if err != nil {
		t.Fatal(err)
	}
	replicas[0] = 1
	if got := next.Topics["orders"].Partitions[2].Replicas[0]; got != 3 {
		t.Fatalf("image aliases the record's slice: replica = %d", got)
	}
}

func TestApplyOnZeroImage(t *testing.T) {
	// An Image literal (nil maps) must work as well as Empty(testConfigs).
	img, err := (&Image{}).Apply(1,
		BrokerRecord{NodeID: 0, Host: "h", Port: 1},
		TopicRecord{Name: "t", ID: idOrders},
		PartitionRecord{TopicID: idOrders, Replicas: []int32{0}, ISR: []int32{0}, Leader: 0},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(img.Topics) != 1 || len(img.Brokers) != 1 {
		t.Fatalf("%+v", img)
	}
}

// A broker's epoch is the offset of its latest registration, and an
// image snapshot keeps it (and the incarnation) rather than the
// snapshot's offset.
func TestBrokerEpochIsTheRegistrationOffset(t *testing.T) {
	img := baseImage(t)
	inc := UUID{7}
	next, err := img.Apply(20, BrokerRecord{NodeID: 2, Host: "h2b", Port: 9092, IncarnationID: inc, Epoch: 99})
	if err != nil {
		t.Fatal(err)
	}
	if b := next.Brokers[2]; b.Epoch != 20 || b.IncarnationID != inc || b.Host != "h2b" {
		t.Fatalf("re-registered broker 2 = %+v; want epoch 20 (the offset, not the record's 99) and its incarnation", b)
	}
	if b := next.Brokers[3]; b.Epoch != 10 {
		t.Fatalf("broker 3's epoch moved to %d with another broker's registration", b.Epoch)
	}
	b, err := EncodeImage(next)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeImage(b, next.TopicConfigs)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range next.Brokers {
		if !reflect.DeepEqual(got.Brokers[id], want) {
			t.Errorf("broker %d after a snapshot = %+v, want %+v", id, got.Brokers[id], want)
		}
	}
}

// The metadata version: 1 up to what this code knows, never back; a
// newer one is ErrUnknownVersion; snapshots keep it.
func TestMetadataVersion(t *testing.T) {
	img, err := Empty(testConfigs).Apply(1, ClusterIDRecord{ClusterID: "c"}, MetadataVersionRecord{Version: KnownMetadataVersion})
	if err != nil || img.MetadataVersion != KnownMetadataVersion {
		t.Fatalf("version %d: %v, image at %d", KnownMetadataVersion, err, img.MetadataVersion)
	}
	if _, err := img.Apply(2, MetadataVersionRecord{Version: KnownMetadataVersion + 1}); !errors.Is(err, ErrUnknownVersion) {
		t.Errorf("a newer version: %v, want ErrUnknownVersion", err)
	}
	for _, v := range []int32{0, -1} {
		if _, err := img.Apply(2, MetadataVersionRecord{Version: v}); !errors.Is(err, ErrBadRecord) {
			t.Errorf("version %d: %v, want ErrBadRecord", v, err)
		}
	}
	b, err := EncodeImage(img)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeImage(b, img.TopicConfigs)
	if err != nil || back.MetadataVersion != img.MetadataVersion {
		t.Fatalf("snapshot: %v, version %d", err, back.MetadataVersion)
	}
}

// Reassignment, from metadata version 4: a start names replicas of the
// partition, disjoint, not all of them removed; while one is in
// progress the replica set stays (ISR and leader changes go on, keeping
// the state); the end comes before the PartitionRecord that narrows the
// replicas; a snapshot keeps the state.
func TestApplyReassignment(t *testing.T) {
	base := baseImage(t)
	if _, err := base.Apply(11, ReassignmentRecord{TopicID: idOrders, Partition: 0, Adding: []int32{3}}); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "metadata version 4") {
		t.Fatalf("reassignment in a version-1 log: %v, want ErrBadRecord naming version 4", err)
	}
	v4, err := base.Apply(11, MetadataVersionRecord{Version: ReassignmentMetadataVersion})
	if err != nil {
		t.Fatal(err)
	}
	// orders-0 moves from [1 2] to [3 2]: replicas [3 2 1], adding 3, removing 1.
	widen := PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{3, 2, 1}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 1}
	start := ReassignmentRecord{TopicID: idOrders, Partition: 0, Adding: []int32{3}, Removing: []int32{1}}
	for _, tc := range []struct {
		name string
		recs []Record
		msg  string
	}{
		{"not a replica", []Record{ReassignmentRecord{TopicID: idOrders, Partition: 0, Adding: []int32{3}}}, "not among the replicas"},
		{"unknown partition", []Record{ReassignmentRecord{TopicID: idOrders, Partition: 7, Adding: []int32{1}}}, "partition 7"},
		{"unknown topic", []Record{ReassignmentRecord{TopicID: UUID{9}, Partition: 0, Adding: []int32{1}}}, "unknown topic id"},
		{"twice", []Record{widen, ReassignmentRecord{TopicID: idOrders, Partition: 0, Adding: []int32{3, 3}}}, "listed twice"},
		{"added and removed", []Record{widen, ReassignmentRecord{TopicID: idOrders, Partition: 0, Adding: []int32{3}, Removing: []int32{3}}}, "both added and removed"},
		{"all removed", []Record{widen, ReassignmentRecord{TopicID: idOrders, Partition: 0, Removing: []int32{3, 2, 1}}}, "every replica"},
		{"end without one", []Record{ReassignmentRecord{TopicID: idOrders, Partition: 0}}, "no reassignment in progress"},
		{"started twice", []Record{widen, start, start}, "in progress already"},
		{"replicas changed during one", []Record{widen, start,
			PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{3, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 6, PartitionEpoch: 2}},
			"while a reassignment is in progress"},
	} {
		if _, err := v4.Apply(12, tc.recs...); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want ErrBadRecord naming %q", tc.name, err, tc.msg)
		}
	}
	img, err := v4.Apply(12, widen, start)
	if err != nil {
		t.Fatal(err)
	}
	p := img.Topics["orders"].Partitions[0]
	if img.Reassignments != 1 {
		t.Errorf("Reassignments = %d during one, want 1", img.Reassignments)
	}
	if !p.Reassigning() || !slices.Equal(p.Target(), []int32{3, 2}) || !slices.Equal(p.Original(), []int32{2, 1}) {
		t.Fatalf("partition during the reassignment: %+v, target %v, original %v", p, p.Target(), p.Original())
	}
	// An ISR expansion keeps the state.
	img, err = img.Apply(13, PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{3, 2, 1}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if p := img.Topics["orders"].Partitions[0]; !slices.Equal(p.Adding, []int32{3}) || !slices.Equal(p.Removing, []int32{1}) {
		t.Fatalf("an ISR change dropped the reassignment: %+v", p)
	}
	got, _ := roundTrip(t, img)
	if p := got.Topics["orders"].Partitions[0]; !slices.Equal(p.Adding, []int32{3}) || !slices.Equal(p.Removing, []int32{1}) || got.Reassignments != 1 {
		t.Fatalf("a snapshot dropped the reassignment: %+v (Reassignments %d)", p, got.Reassignments)
	}
	if gone, err := img.Apply(14, RemoveTopicRecord{TopicID: idOrders}); err != nil || gone.Reassignments != 0 {
		t.Fatalf("deleting the topic: %v, Reassignments %d, want 0", err, gone.Reassignments)
	}
	// The end, then the narrowing, with a new leader from the target.
	done, err := img.Apply(14, ReassignmentRecord{TopicID: idOrders, Partition: 0},
		PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{3, 2}, ISR: []int32{2, 3}, Leader: 3, LeaderEpoch: 6, PartitionEpoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	if p := done.Topics["orders"].Partitions[0]; p.Reassigning() || !slices.Equal(p.Replicas, []int32{3, 2}) || done.Reassignments != 0 {
		t.Fatalf("partition after the reassignment: %+v", p)
	}
}

// Dynamic broker configs: a broker's own value wins over the cluster
// default (-1); only dynamic configs with valid values, for a registered
// broker or the default, from metadata version 5.
func TestApplyBrokerConfig(t *testing.T) {
	base := baseImage(t)
	set := func(broker int32, v string) BrokerConfigRecord {
		return BrokerConfigRecord{Broker: broker, Name: FollowerThrottleRateConfig, Value: &v}
	}
	if _, err := base.Apply(11, set(-1, "100")); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "metadata version 5") {
		t.Fatalf("broker config in a version-1 log: %v, want ErrBadRecord naming version 5", err)
	}
	v5, err := base.Apply(11, MetadataVersionRecord{Version: BrokerConfigMetadataVersion})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		rec  BrokerConfigRecord
		msg  string
	}{
		{"unregistered broker", set(7, "100"), "not registered"},
		{"below the default", set(-2, "100"), "not registered"},
		{"zero", set(1, "0"), "at least 1"},
		{"negative", set(1, "-5"), "at least 1"},
		{"not a number", set(1, "10MB"), "whole number"},
		{"overflow", set(1, "99999999999999999999"), "whole number"},
		{"static config", BrokerConfigRecord{Broker: 1, Name: "num.partitions", Value: strp("3")}, "not a dynamic broker config"},
		{"Kafka's leader-side rate", BrokerConfigRecord{Broker: 1, Name: "leader.replication.throttled.rate", Value: strp("3")}, "not a dynamic broker config"},
		{"delete of an unknown one", BrokerConfigRecord{Broker: 1, Name: "nope"}, "not a dynamic broker config"},
	} {
		if _, err := v5.Apply(12, tc.rec); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want ErrBadRecord naming %q", tc.name, err, tc.msg)
		}
	}
	img, err := v5.Apply(12, set(-1, "1000"), set(2, "50"))
	if err != nil {
		t.Fatal(err)
	}
	for broker, want := range map[int32]int64{1: 1000, 2: 50, 3: 1000} {
		if got := img.FollowerThrottleRate(broker); got != want {
			t.Errorf("broker %d rate %d, want %d", broker, got, want)
		}
	}
	if v, fromDefault, ok := img.BrokerConfig(2, FollowerThrottleRateConfig); v != "50" || fromDefault || !ok {
		t.Errorf("broker 2's own config: %q default %v ok %v", v, fromDefault, ok)
	}
	if v5.FollowerThrottleRate(1) != 0 || len(v5.BrokerConfigs) != 0 {
		t.Errorf("the image before the change moved: %v", v5.BrokerConfigs)
	}
	got, _ := roundTrip(t, img)
	if !reflect.DeepEqual(got.BrokerConfigs, img.BrokerConfigs) {
		t.Errorf("after a snapshot: %v, want %v", got.BrokerConfigs, img.BrokerConfigs)
	}
	img, err = img.Apply(13, BrokerConfigRecord{Broker: -1, Name: FollowerThrottleRateConfig}, BrokerConfigRecord{Broker: 2, Name: FollowerThrottleRateConfig})
	if err != nil {
		t.Fatal(err)
	}
	if img.FollowerThrottleRate(2) != 0 || len(img.BrokerConfigs) != 0 {
		t.Errorf("after deleting both: %v", img.BrokerConfigs)
	}
}

// Unregistering, from metadata version 5: only a registered broker at
// its epoch that no partition names; its dynamic configs go with it.
func TestApplyUnregisterBroker(t *testing.T) {
	base := baseImage(t)
	if _, err := base.Apply(11, UnregisterBrokerRecord{NodeID: 1, Epoch: 10}); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "metadata version 5") {
		t.Fatalf("unregister in a version-1 log: %v", err)
	}
	v := "100"
	img, err := base.Apply(11, MetadataVersionRecord{Version: BrokerConfigMetadataVersion},
		BrokerRecord{NodeID: 4, Host: "h4", Port: 9092},
		BrokerConfigRecord{Broker: 4, Name: FollowerThrottleRateConfig, Value: &v})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		rec  UnregisterBrokerRecord
		msg  string
	}{
		{"unknown", UnregisterBrokerRecord{NodeID: 9, Epoch: 10}, "broker 9 is not registered"},
		{"older epoch", UnregisterBrokerRecord{NodeID: 4, Epoch: 10}, "at epoch 11, not 10"},
		{"holds replicas", UnregisterBrokerRecord{NodeID: 2, Epoch: 10}, "still holds replicas of 2 partitions (orders-0 among them)"},
	} {
		if _, err := img.Apply(12, tc.rec); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want ErrBadRecord naming %q", tc.name, err, tc.msg)
		}
	}
	after, err := img.Apply(12, UnregisterBrokerRecord{NodeID: 4, Epoch: 11})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := after.Brokers[4]; ok || len(after.BrokerConfigs) != 0 {
		t.Fatalf("after unregistering 4: brokers %v, configs %v", after.BrokerIDs(), after.BrokerConfigs)
	}
	if _, ok := img.Brokers[4]; !ok || img.FollowerThrottleRate(4) != 100 {
		t.Fatal("the image before the change moved")
	}
}
