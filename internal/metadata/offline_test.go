package metadata

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// offlineBase is baseImage raised to OfflineReplicasMetadataVersion; its
// brokers (registered at offset 10, before fencing) stay unfenced.
func offlineBase(t *testing.T) *Image {
	t.Helper()
	img, err := baseImage(t).Apply(11, MetadataVersionRecord{Version: OfflineReplicasMetadataVersion})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// OfflineReplicaRecord, from metadata version 7: a registered broker at
// its epoch, a live topic's partition; a repeat changes nothing; the
// broker is then never made the partition's leader nor added to its ISR,
// but may stay where it is; the entry survives snapshots and a
// registration of the same process, and goes with a registration of
// another, an unregistration and the topic's deletion.
func TestApplyOfflineReplica(t *testing.T) {
	rec := OfflineReplicaRecord{NodeID: 2, Epoch: 10, TopicID: idOrders, Partition: 0}
	if _, err := baseImage(t).Apply(11, rec); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "metadata version 7") {
		t.Fatalf("offline replica in a version-1 log: %v, want ErrBadRecord naming version 7", err)
	}
	base := offlineBase(t)
	for _, tc := range []struct {
		name string
		rec  Record
		msg  string
	}{
		{"unregistered broker", OfflineReplicaRecord{NodeID: 9, Epoch: 10, TopicID: idOrders}, "not registered"},
		{"stale epoch", OfflineReplicaRecord{NodeID: 2, Epoch: 9, TopicID: idOrders}, "epoch 9"},
		{"unknown topic", OfflineReplicaRecord{NodeID: 2, Epoch: 10, TopicID: UUID{9}}, "unknown topic id"},
		{"zero topic id", OfflineReplicaRecord{NodeID: 2, Epoch: 10}, "unknown topic id"},
		{"partition past the end", OfflineReplicaRecord{NodeID: 2, Epoch: 10, TopicID: idOrders, Partition: 2}, "partition 2"},
		{"negative partition", OfflineReplicaRecord{NodeID: 2, Epoch: 10, TopicID: idOrders, Partition: -1}, "partition -1"},
		{"nil pointer", (*OfflineReplicaRecord)(nil), "nil"},
	} {
		if _, err := base.Apply(12, tc.rec); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want ErrBadRecord naming %q", tc.name, err, tc.msg)
		}
	}
	if base.ReplicaOffline(2, idOrders, 0) || base.OfflineReplicas != nil {
		t.Fatal("a new image has offline replicas")
	}

	// Broker 2 follows orders-0 (leader 1, ISR 1,2) and leads orders-1
	// (ISR 2,3). The controller's batch: the record, then the partition
	// change that takes it out of the ISR.
	off, err := base.Apply(12, &rec,
		PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !off.ReplicaOffline(2, idOrders, 0) || off.ReplicaOffline(2, idOrders, 1) || off.ReplicaOffline(1, idOrders, 0) {
		t.Fatalf("offline replicas %v", off.OfflineReplicas)
	}
	if base.OfflineReplicas != nil {
		t.Fatal("the record changed the image before it")
	}
	again, err := off.Apply(13, rec)
	if err != nil || !maps.EqualFunc(again.OfflineReplicas, off.OfflineReplicas, maps.Equal) {
		t.Fatalf("a repeat: %v, %v", err, again.OfflineReplicas)
	}

	// Never back into the ISR, never elected; a change elsewhere in the
	// partition is fine.
	for _, tc := range []struct {
		name string
		rec  PartitionRecord
		msg  string
	}{
		{"added to the ISR", PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 2}, "ISR member 2"},
		{"elected", PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 6, PartitionEpoch: 2}, "leader 2"},
	} {
		if _, err := off.Apply(13, tc.rec); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "offline") {
			t.Errorf("%s: %v, want ErrBadRecord naming %q", tc.name, err, tc.msg)
		}
	}
	// Its own last ISR place and leadership it may keep while the same
	// batch moves them (the controller's order: record first).
	led, err := off.Apply(13,
		OfflineReplicaRecord{NodeID: 2, Epoch: 10, TopicID: idOrders, Partition: 1},
		PartitionRecord{TopicID: idOrders, Partition: 1, Replicas: []int32{2, 3}, ISR: []int32{2, 3}, Leader: 2, LeaderEpoch: 0, PartitionEpoch: 0},
		PartitionRecord{TopicID: idOrders, Partition: 1, Replicas: []int32{2, 3}, ISR: []int32{3}, Leader: 3, LeaderEpoch: 1, PartitionEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, b := roundTrip(t, led)
	if !got.ReplicaOffline(2, idOrders, 0) || !got.ReplicaOffline(2, idOrders, 1) || !strings.Contains(string(b), `"offline_replicas":{"2":[`) {
		t.Fatalf("snapshot lost the offline replicas: %v\n%s", got.OfflineReplicas, b)
	}
	if plain, _ := EncodeImage(base); strings.Contains(string(plain), "offline") {
		t.Fatalf("a snapshot without offline replicas names them: %s", plain)
	}

	// The same process registering again keeps them; another clears
	// them; so does unregistering.
	inc1, inc2 := UUID{0x11}, UUID{0x22}
	reg, err := off.Apply(14, BrokerRecord{NodeID: 2, Host: "h2", Port: 9092, IncarnationID: inc1})
	if err != nil {
		t.Fatal(err)
	}
	if reg.ReplicaOffline(2, idOrders, 0) {
		t.Fatal("a registration of another process kept the offline replica")
	}
	reg, err = reg.Apply(15, OfflineReplicaRecord{NodeID: 2, Epoch: 14, TopicID: idOrders, Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	same, err := reg.Apply(16, BrokerRecord{NodeID: 2, Host: "h2", Port: 9092, IncarnationID: inc1})
	if err != nil || !same.ReplicaOffline(2, idOrders, 0) || same.Brokers[2].Epoch != 16 {
		t.Fatalf("a retry of the same process's registration: %v, offline %v", err, same.OfflineReplicas)
	}
	other, err := same.Apply(17, BrokerRecord{NodeID: 2, Host: "h2", Port: 9092, IncarnationID: inc2})
	if err != nil || other.ReplicaOffline(2, idOrders, 0) || other.OfflineReplicas != nil {
		t.Fatalf("a new process's registration: %v, offline %v", err, other.OfflineReplicas)
	}

	// A deleted topic takes its entries with it, and the map is nil
	// again when nothing is left.
	gone, err := led.Apply(14, RemoveTopicRecord{TopicID: idOrders})
	if err != nil || gone.OfflineReplicas != nil {
		t.Fatalf("after deleting the topic: %v, offline %v", err, gone.OfflineReplicas)
	}
	mixed, err := led.Apply(14, OfflineReplicaRecord{NodeID: 3, Epoch: 10, TopicID: idEvents, Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	mixed, err = mixed.Apply(15, RemoveTopicRecord{TopicID: idOrders})
	if err != nil || len(mixed.OfflineReplicas) != 1 || !mixed.ReplicaOffline(3, idEvents, 0) {
		t.Fatalf("deleting one topic: %v, offline %v", err, mixed.OfflineReplicas)
	}
	if !led.ReplicaOffline(2, idOrders, 1) {
		t.Fatal("deleting the topic changed the image before it")
	}
}

// A snapshot holds offline replicas to Apply's rules: below version 7,
// for an unregistered broker, or of an unknown topic, it is refused.
func TestDecodeImageOfflineReplicasChecked(t *testing.T) {
	b, err := EncodeImage(baseImage(t))
	if err != nil {
		t.Fatal(err)
	}
	entry := func(broker string, id UUID) string {
		return `,"offline_replicas":{"` + broker + `":[{"topic_id":"` + id.String() + `","partition":0}]}}`
	}
	for _, tc := range []struct {
		name, in, msg string
	}{
		{"version 1", strings.TrimSuffix(strings.TrimSpace(string(b)), "}") + entry("2", idOrders), "metadata version 7"},
	} {
		if _, err := DecodeImage([]byte(tc.in), testConfigs); !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want ErrDecode naming %q", tc.name, err, tc.msg)
		}
	}
	b, err = EncodeImage(offlineBase(t))
	if err != nil {
		t.Fatal(err)
	}
	head := strings.TrimSuffix(strings.TrimSpace(string(b)), "}")
	for _, tc := range []struct {
		name, in, msg string
	}{
		{"unregistered broker", head + entry("9", idOrders), "not registered"},
		{"unknown topic", head + entry("2", UUID{9}), "unknown topic id"},
	} {
		if _, err := DecodeImage([]byte(tc.in), testConfigs); !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want ErrDecode naming %q", tc.name, err, tc.msg)
		}
	}
	got, err := DecodeImage([]byte(head+entry("2", idOrders)), testConfigs)
	if err != nil || !got.ReplicaOffline(2, idOrders, 0) || got.Brokers[2].Epoch != 10 {
		t.Fatalf("a good entry: %v, %v", err, got)
	}
}

// TestOfflineReplicaProperties: on random sequences of offline marks
// (of live, deleted and unknown partitions, at current and stale
// epochs), registrations (the same process and another), leader and ISR
// changes, creations and deletions in a version-7 log, a broker's
// replica is offline exactly when a mark of it was applied since its
// registration by another process and the topic's creation; no applied
// record makes an offline replica a leader or an ISR member it was not;
// a refused batch changes nothing; every image survives a snapshot.
func TestOfflineReplicaProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		img, err := Empty(testConfigs).Apply(1, ClusterIDRecord{ClusterID: "c"},
			MetadataVersionRecord{Version: OfflineReplicasMetadataVersion})
		if err != nil {
			t.Fatal(err)
		}
		brokers := []int32{1, 2, 3}
		incarnation := map[int32]UUID{}
		register := func(b int32, inc UUID) Record {
			return BrokerRecord{NodeID: b, Host: "h", Port: 1, IncarnationID: inc}
		}
		var recs []Record
		for _, b := range brokers {
			incarnation[b] = UUID{byte(b)}
			recs = append(recs, register(b, incarnation[b]), UnfenceBrokerRecord{NodeID: b, Epoch: 2})
		}
		if img, err = img.Apply(2, recs...); err != nil {
			t.Fatal(err)
		}
		ids := []UUID{{1}, {2}}
		type key struct {
			broker int32
			TopicIDPartition
		}
		model := map[key]bool{}
		for i := range rapid.IntRange(1, 30).Draw(t, "steps") {
			id := rapid.SampledFrom(ids).Draw(t, "topic")
			b := rapid.SampledFrom(brokers).Draw(t, "broker")
			p := rapid.Int32Range(0, 1).Draw(t, "partition")
			live, exists := img.TopicsByID[id]
			var recs []Record
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0: // create, two partitions on every broker
				recs = []Record{TopicRecord{Name: "t" + id.String()[:2], ID: id}}
				for q := range int32(2) {
					recs = append(recs, PartitionRecord{TopicID: id, Partition: q, Replicas: brokers, ISR: brokers, Leader: 1})
				}
			case 1, 2: // mark, at the current epoch or a stale one
				epoch := img.Brokers[b].Epoch
				if rapid.IntRange(0, 4).Draw(t, "stale") == 0 {
					epoch--
				}
				recs = []Record{OfflineReplicaRecord{NodeID: b, Epoch: epoch, TopicID: id, Partition: p}}
			case 3: // register: the same process again, or another
				if rapid.Bool().Draw(t, "newProcess") {
					incarnation[b] = UUID{byte(b), byte(i + 1)}
				}
				// Unfenced at once: a snapshot cannot hold a fenced
				// leader, which the controller never leaves (the
				// registration's batch moves its leaderships).
				recs = []Record{register(b, incarnation[b]), UnfenceBrokerRecord{NodeID: b, Epoch: int64(img.Offset + 1)}}
			case 4: // elect b, or give it an ISR place, or take it out
				if !exists || int(p) >= len(live.Partitions) {
					continue
				}
				old := live.Partitions[p]
				isr := slices.DeleteFunc(slices.Clone(old.ISR), func(x int32) bool { return x == b })
				leader, epoch := old.Leader, old.LeaderEpoch
				switch rapid.IntRange(0, 2).Draw(t, "change") {
				case 0:
					isr = append(isr, b)
					leader, epoch = b, epoch+1
				case 1:
					isr = append(isr, b)
				}
				if leader != -1 && !slices.Contains(isr, leader) {
					leader, epoch = -1, epoch+1
				}
				recs = []Record{PartitionRecord{TopicID: id, Partition: p, Replicas: old.Replicas, ISR: isr,
					Leader: leader, LeaderEpoch: epoch, PartitionEpoch: old.PartitionEpoch + 1}}
			default:
				recs = []Record{RemoveTopicRecord{TopicID: id}}
			}
			next, ok := applyChecked(t, img, img.Offset+1, recs)
			if !ok {
				continue
			}
			for _, r := range recs {
				switch r := r.(type) {
				case OfflineReplicaRecord:
					model[key{r.NodeID, TopicIDPartition{r.TopicID, r.Partition}}] = true
				case BrokerRecord:
					if img.Brokers[r.NodeID].IncarnationID != r.IncarnationID {
						for k := range model {
							if k.broker == r.NodeID {
								delete(model, k)
							}
						}
					}
				case RemoveTopicRecord:
					for k := range model {
						if k.TopicID == r.TopicID {
							delete(model, k)
						}
					}
				case PartitionRecord:
					before, ok := img.TopicsByID[r.TopicID]
					if !ok {
						continue // a creation
					}
					old := before.Partitions[r.Partition]
					if r.Leader != -1 && img.ReplicaOffline(r.Leader, r.TopicID, r.Partition) && (r.Leader != old.Leader || r.LeaderEpoch != old.LeaderEpoch) {
						t.Fatalf("%+v made offline replica %d leader", r, r.Leader)
					}
					for _, m := range r.ISR {
						if img.ReplicaOffline(m, r.TopicID, r.Partition) && !slices.Contains(old.ISR, m) {
							t.Fatalf("%+v added offline replica %d to the ISR %v", r, m, old.ISR)
						}
					}
				}
			}
			for _, b := range brokers {
				for _, id := range ids {
					for p := range int32(2) {
						want := model[key{b, TopicIDPartition{id, p}}]
						if got := next.ReplicaOffline(b, id, p); got != want {
							t.Fatalf("after %+v: broker %d %v-%d offline %v, want %v", recs, b, id, p, got, want)
						}
					}
				}
			}
			if len(model) == 0 && next.OfflineReplicas != nil {
				t.Fatalf("no offline replica, map %v", next.OfflineReplicas)
			}
			checkSnapshot(t, next)
			img = next
		}
	})
}
