package metadata

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// keyedBase is baseImage raised to KeyedTopicsMetadataVersion; its
// brokers, registered before fencing, stay unfenced.
func keyedBase(t *testing.T) *Image {
	t.Helper()
	img, err := baseImage(t).Apply(11, MetadataVersionRecord{Version: KeyedTopicsMetadataVersion})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TopicKeyedRecord, from metadata version 6: only a live topic; marked
// once and kept across partition growth, config changes and snapshots;
// a repeat changes nothing; gone with the topic, so a topic created
// again under the name starts unmarked.
func TestApplyTopicKeyed(t *testing.T) {
	if _, err := baseImage(t).Apply(11, TopicKeyedRecord{TopicID: idOrders}); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "metadata version 6") {
		t.Fatalf("mark in a version-1 log: %v, want ErrBadRecord naming version 6", err)
	}
	base := keyedBase(t)
	for _, tc := range []struct {
		name string
		rec  Record
		msg  string
	}{
		{"unknown topic", TopicKeyedRecord{TopicID: UUID{9}}, "unknown topic id"},
		{"zero topic id", TopicKeyedRecord{}, "unknown topic id"},
		{"nil pointer", (*TopicKeyedRecord)(nil), "nil"},
	} {
		if _, err := base.Apply(12, tc.rec); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want ErrBadRecord naming %q", tc.name, err, tc.msg)
		}
	}
	if base.Topics["orders"].Keyed {
		t.Fatal("a new topic is keyed")
	}

	marked, err := base.Apply(12, &TopicKeyedRecord{TopicID: idOrders})
	if err != nil {
		t.Fatal(err)
	}
	if !marked.Topics["orders"].Keyed || !marked.TopicsByID[idOrders].Keyed || marked.Topics["events"].Keyed {
		t.Fatalf("after marking orders: orders %v, events %v", marked.Topics["orders"].Keyed, marked.Topics["events"].Keyed)
	}
	if base.Topics["orders"].Keyed {
		t.Fatal("marking changed the image before it")
	}
	if marked.Topics["events"] != base.Topics["events"] {
		t.Fatal("marking orders copied events")
	}
	again, err := marked.Apply(13, TopicKeyedRecord{TopicID: idOrders})
	if err != nil || !again.Topics["orders"].Keyed {
		t.Fatalf("marking again: %v", err)
	}

	v := "2000"
	grown, err := again.Apply(14,
		PartitionRecord{TopicID: idOrders, Partition: 2, Replicas: []int32{3, 1}, ISR: []int32{3, 1}, Leader: 3},
		ConfigRecord{TopicID: idOrders, Name: "retention.ms", Value: &v})
	if err != nil {
		t.Fatal(err)
	}
	if o := grown.Topics["orders"]; !o.Keyed || len(o.Partitions) != 3 {
		t.Fatalf("after growth and a config change: keyed %v, %d partitions", o.Keyed, len(o.Partitions))
	}
	got, b := roundTrip(t, grown)
	if !got.Topics["orders"].Keyed || got.Topics["events"].Keyed || !strings.Contains(string(b), `"keyed":true`) {
		t.Fatalf("snapshot: orders keyed %v, events keyed %v\n%s", got.Topics["orders"].Keyed, got.Topics["events"].Keyed, b)
	}
	if strings.Count(string(b), `"keyed"`) != 1 {
		t.Fatalf("an unkeyed topic's snapshot names keyed: %s", b)
	}

	gone, err := grown.Apply(15, RemoveTopicRecord{TopicID: idOrders})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gone.Apply(16, TopicKeyedRecord{TopicID: idOrders}); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("marking a deleted topic: %v, want ErrBadRecord", err)
	}
	recreated, err := gone.Apply(16, TopicRecord{Name: "orders", ID: UUID{7}},
		PartitionRecord{TopicID: UUID{7}, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
	if err != nil {
		t.Fatal(err)
	}
	if recreated.Topics["orders"].Keyed {
		t.Fatal("a topic created again under a keyed topic's name is keyed")
	}
}

// A keyed snapshot of a log below version 6 cannot be: DecodeImage holds
// snapshots to Apply's rules.
func TestDecodeImageKeyedNeedsVersion(t *testing.T) {
	b, err := EncodeImage(baseImage(t))
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Replace(string(b), `"name":"orders",`, `"name":"orders","keyed":true,`, 1)
	if in == string(b) {
		t.Fatalf("no orders topic in %s", b)
	}
	if _, err := DecodeImage([]byte(in), testConfigs); !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "metadata version 6") {
		t.Fatalf("keyed topic in a version-1 snapshot: %v", err)
	}
}

// TestTopicKeyedProperties: on random sequences of creations, growth,
// config changes, marks (of live, deleted and unknown ids) and deletions
// in a version-6 log, a topic is keyed exactly when a mark of its id was
// applied since its creation; a refused batch changes nothing; every
// image survives a snapshot.
func TestTopicKeyedProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		img, err := Empty(testConfigs).Apply(1, ClusterIDRecord{ClusterID: "c"},
			BrokerRecord{NodeID: 1, Host: "h", Port: 1}, BrokerRecord{NodeID: 2, Host: "h", Port: 1})
		if err != nil {
			t.Fatal(err)
		}
		if img, err = img.Apply(2, MetadataVersionRecord{Version: KeyedTopicsMetadataVersion}); err != nil {
			t.Fatal(err)
		}
		ids := []UUID{{1}, {2}, {3}, {4}}
		names := []string{"a", "b", "c", "d"}
		keyed := map[UUID]bool{} // the model: marked since created
		for i := range rapid.IntRange(1, 25).Draw(t, "steps") {
			n := rapid.IntRange(0, len(ids)-1).Draw(t, "topic")
			id := ids[n]
			live, exists := img.TopicsByID[id]
			var recs []Record
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0: // create (refused when it exists)
				recs = []Record{TopicRecord{Name: names[n], ID: id},
					PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}
			case 1: // grow
				p := int32(0)
				if exists {
					p = int32(len(live.Partitions))
				}
				recs = []Record{PartitionRecord{TopicID: id, Partition: p, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2}}
			case 2: // config
				v := fmt.Sprint(1000 + i)
				recs = []Record{ConfigRecord{TopicID: id, Name: "retention.ms", Value: &v}}
			case 3: // mark, maybe twice in one batch
				recs = []Record{TopicKeyedRecord{TopicID: id}}
				if rapid.Bool().Draw(t, "twice") {
					recs = append(recs, TopicKeyedRecord{TopicID: id})
				}
			default: // delete
				recs = []Record{RemoveTopicRecord{TopicID: id}}
			}
			next, ok := applyChecked(t, img, img.Offset+1, recs)
			if !ok {
				continue
			}
			for _, r := range recs {
				switch r := r.(type) {
				case TopicRecord:
					keyed[r.ID] = false
				case TopicKeyedRecord:
					keyed[r.TopicID] = true
				case RemoveTopicRecord:
					delete(keyed, r.TopicID)
				}
			}
			for _, id := range ids {
				tp, ok := next.TopicsByID[id]
				want, live := keyed[id]
				if ok != live || ok && tp.Keyed != want {
					t.Fatalf("after %+v: topic %v live %v keyed %v, want live %v keyed %v", recs, id, ok, ok && tp.Keyed, live, want)
				}
				if ok && next.Topics[tp.Name] != tp {
					t.Fatalf("topic %v by name and by id differ", id)
				}
			}
			checkSnapshot(t, next)
			img = next
		}
	})
}
