package metadata

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func allRecordKinds() []Record {
	return []Record{
		ClusterIDRecord{ClusterID: "abcdefghijklmnopqrstuv"},
		BrokerRecord{NodeID: 1, Host: "localhost", Port: 9092, Rack: "r1"},
		TopicRecord{Name: "orders", ID: idOrders},
		PartitionRecord{TopicID: idOrders, Partition: 3, Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 7, PartitionEpoch: 4},
		ConfigRecord{TopicID: idOrders, Name: "retention.ms", Value: strp("1000")},
		ConfigRecord{TopicID: idOrders, Name: "retention.ms"},
		RemoveTopicRecord{TopicID: idOrders},
		ProducerIDsRecord{NodeID: 1, NextProducerID: 2000},
		FenceBrokerRecord{NodeID: 1, Epoch: 12},
		UnfenceBrokerRecord{NodeID: 1, Epoch: 12},
		ControlledShutdownRecord{NodeID: 1, Epoch: 12},
		TopicKeyedRecord{TopicID: idOrders},
		OfflineReplicaRecord{NodeID: 2, Epoch: 12, TopicID: idOrders, Partition: 1},
		ClientQuotaRecord{Entity: QuotaEntity{User: Named("alice"), ClientID: DefaultName()}, Key: QuotaProducerByteRate, Value: 1048576},
		ClientQuotaRecord{Entity: QuotaEntity{IP: Named("10.0.0.7")}, Key: QuotaConnectionCreationRate, Remove: true},
	}
}

func TestEncodeDecodeEveryRecord(t *testing.T) {
	for _, r := range allRecordKinds() {
		b, err := Encode(r)
		if err != nil {
			t.Fatalf("Encode(%+v): %v", r, err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(%s): %v", b, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("round trip of %s: got %+v, want %+v", b, got, r)
		}
		// A pointer encodes as its value.
		pb, err := Encode(ptrTo(r))
		if err != nil || string(pb) != string(b) {
			t.Errorf("Encode(&%T) = %s, %v; want %s", r, pb, err, b)
		}
	}
}

func ptrTo(r Record) Record {
	switch v := r.(type) {
	case ClusterIDRecord:
		return &v
	case BrokerRecord:
		return &v
	case TopicRecord:
		return &v
	case PartitionRecord:
		return &v
	case ConfigRecord:
		return &v
	case RemoveTopicRecord:
		return &v
	case ProducerIDsRecord:
		return &v
	case FenceBrokerRecord:
		return &v
	case UnfenceBrokerRecord:
		return &v
	case ControlledShutdownRecord:
		return &v
	case TopicKeyedRecord:
		return &v
	case OfflineReplicaRecord:
		return &v
	case ClientQuotaRecord:
		return &v
	}
	panic(r)
}

func TestEncodeFormat(t *testing.T) {
	b, err := Encode(TopicRecord{Name: "orders", ID: idOrders})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"topic","data":{"name":"orders","id":"01020304-0506-0708-090a-0b0c0d0e0f10"}}`
	if string(b) != want {
		t.Fatalf("Encode = %s\nwant     %s", b, want)
	}
}

func TestDecodeForwardCompatible(t *testing.T) {
	// Unknown fields are ignored, missing ones are zero.
	r, err := Decode([]byte(`{"type":"broker","data":{"node_id":4,"host":"h","port":1,"incarnation":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r, BrokerRecord{NodeID: 4, Host: "h", Port: 1}) {
		t.Fatalf("%+v", r)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, in := range []string{
		``,
		`null`,
		`[]`,
		`{"type":"topics","data":{}}`,
		`{"type":"topic"}`,
		`{"type":"topic","data":{"name":1}}`,
		`{"type":"topic","data":{"id":"not-a-uuid"}}`,
		`{"type":"partition","data":{"partition":3000000000}}`,
		`{"type":"topic","data":{}}garbage`,
	} {
		if r, err := Decode([]byte(in)); err == nil || !errors.Is(err, ErrDecode) {
			t.Errorf("Decode(%q) = %+v, %v; want ErrDecode", in, r, err)
		}
	}
	if _, err := Encode(nil); err == nil {
		t.Error("Encode(nil) succeeded")
	}
	if _, err := Encode((*TopicRecord)(nil)); err == nil {
		t.Error("Encode(nil pointer) succeeded")
	}
}

func TestBatchRoundTrip(t *testing.T) {
	recs := allRecordKinds()
	b, err := EncodeBatch(recs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("batch round trip: got %+v", got)
	}
	for _, in := range []string{`null`, `{}`, `[{"type":"x","data":{}}]`, `[1]`} {
		if _, err := DecodeBatch([]byte(in)); !errors.Is(err, ErrDecode) {
			t.Errorf("DecodeBatch(%s) = %v, want ErrDecode", in, err)
		}
	}
	if got, err := DecodeBatch([]byte(`[]`)); err != nil || len(got) != 0 {
		t.Errorf("empty batch = %v, %v", got, err)
	}
}

// roundTrip encodes img as a snapshot and decodes it, failing unless
// the decoded image equals img; it returns both.
func roundTrip(t *testing.T, img *Image) (*Image, []byte) {
	t.Helper()
	b, err := EncodeImage(img)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeImage(b, testConfigs)
	if err != nil {
		t.Fatalf("DecodeImage: %v\n%s", err, b)
	}
	if !equalImages(got, img) {
		t.Fatalf("round trip:\ngot  %+v\nwant %+v", got, img)
	}
	return got, b
}

func TestImageRoundTrip(t *testing.T) {
	img, err := baseImage(t).Apply(12, ProducerIDsRecord{NodeID: 1, NextProducerID: 3000},
		// Partition epochs a creation record cannot carry: the
		// snapshot must keep them.
		PartitionRecord{TopicID: idOrders, Partition: 1, Replicas: []int32{2, 3}, ISR: []int32{2}, Leader: 2, PartitionEpoch: 1},
		PartitionRecord{TopicID: idOrders, Partition: 1, Replicas: []int32{2, 3}, ISR: []int32{2, 3}, Leader: 2, PartitionEpoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	got, b := roundTrip(t, img)
	if e := got.Topics["orders"].Partitions[1].PartitionEpoch; e != 2 {
		t.Fatalf("orders-1 partition epoch after a snapshot = %d, want 2", e)
	}
	if !strings.Contains(string(b), `"partition_epoch":2`) {
		t.Fatalf("snapshot lacks partition_epoch: %s", b)
	}
	// The next change after a restore from the snapshot must count on
	// from 2, as it would have without the snapshot.
	if _, err := got.Apply(13, PartitionRecord{TopicID: idOrders, Partition: 1, Replicas: []int32{2, 3}, ISR: []int32{2}, Leader: 2, PartitionEpoch: 3}); err != nil {
		t.Fatalf("change after a restored snapshot: %v", err)
	}
	b2, _ := EncodeImage(got)
	if string(b2) != string(b) {
		t.Fatalf("re-encoding differs:\n%s\n%s", b, b2)
	}
	// The empty image too.
	eb, _ := EncodeImage(Empty(testConfigs))
	e, err := DecodeImage(eb, testConfigs)
	if err != nil || !reflect.DeepEqual(e, Empty(testConfigs)) {
		t.Fatalf("empty image round trip: %+v, %v", e, err)
	}
}

// A fenced broker stays fenced through a snapshot, and an unfenced one
// unfenced, leader of its partitions.
func TestImageRoundTripKeepsFencing(t *testing.T) {
	img, err := Empty(testConfigs).Apply(3, MetadataVersionRecord{Version: FencingMetadataVersion},
		BrokerRecord{NodeID: 1, Host: "h1", Port: 9092}, BrokerRecord{NodeID: 2, Host: "h2", Port: 9092})
	if err != nil {
		t.Fatal(err)
	}
	if img, err = img.Apply(4, UnfenceBrokerRecord{NodeID: 1, Epoch: 3}, TopicRecord{Name: "orders", ID: idOrders},
		PartitionRecord{TopicID: idOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}); err != nil {
		t.Fatal(err)
	}
	got, _ := roundTrip(t, img)
	if got.Brokers[1].Fenced || !got.Brokers[2].Fenced {
		t.Fatalf("brokers after a snapshot: %+v", got.Brokers)
	}
}

// A broker in controlled shutdown stays in it through a snapshot, fenced
// or not.
func TestImageRoundTripKeepsControlledShutdown(t *testing.T) {
	img, err := Empty(testConfigs).Apply(3, MetadataVersionRecord{Version: ControlledShutdownMetadataVersion},
		BrokerRecord{NodeID: 1, Host: "h1", Port: 9092}, BrokerRecord{NodeID: 2, Host: "h2", Port: 9092},
		BrokerRecord{NodeID: 3, Host: "h3", Port: 9092})
	if err != nil {
		t.Fatal(err)
	}
	if img, err = img.Apply(4, UnfenceBrokerRecord{NodeID: 1, Epoch: 3}, UnfenceBrokerRecord{NodeID: 2, Epoch: 3},
		ControlledShutdownRecord{NodeID: 1, Epoch: 3}, ControlledShutdownRecord{NodeID: 3, Epoch: 3}); err != nil {
		t.Fatal(err)
	}
	got, _ := roundTrip(t, img)
	want := map[int32][2]bool{1: {false, true}, 2: {false, false}, 3: {true, true}} // fenced, shutting down
	for id, w := range want {
		if b := got.Brokers[id]; b.Fenced != w[0] || b.ShuttingDown != w[1] {
			t.Errorf("broker %d after a snapshot: fenced %v shutting down %v, want %v %v", id, b.Fenced, b.ShuttingDown, w[0], w[1])
		}
	}
}

// A snapshot written before partition epochs existed has no
// partition_epoch; its partitions were only ever created, so 0 is right.
func TestDecodeImageWithoutPartitionEpochs(t *testing.T) {
	in := `{"version":1,"offset":5,"brokers":[{"node_id":1,"host":"h","port":1,"epoch":2}],` +
		`"topics":[{"name":"t","id":"01020304-0506-0708-090a-0b0c0d0e0f10","partitions":[{"replicas":[1],"isr":[1],"leader":1,"leader_epoch":3}]}]}`
	img, err := DecodeImage([]byte(in), testConfigs)
	if err != nil {
		t.Fatal(err)
	}
	if p := img.Topics["t"].Partitions[0]; p.PartitionEpoch != 0 || p.LeaderEpoch != 3 {
		t.Fatalf("partition = %+v, want partition epoch 0 and leader epoch 3", p)
	}
}

func TestDecodeImageErrors(t *testing.T) {
	valid, _ := EncodeImage(baseImage(t))
	tests := []struct {
		name, in, want string
	}{
		{"not json", `{`, "image"},
		{"unknown version", `{"version":2}`, "version 2"},
		{"missing version", `{}`, "version 0"},
		{"negative producer id", `{"version":1,"next_producer_id":-1}`, "next producer id -1"},
		{"brokers unsorted", `{"version":1,"brokers":[{"node_id":2,"host":"h","port":1},{"node_id":1,"host":"h","port":1}]}`, "not sorted"},
		{"duplicate broker", `{"version":1,"brokers":[{"node_id":1,"host":"h","port":1},{"node_id":1,"host":"h","port":1}]}`, "not sorted"},
		{"topic without partitions", `{"version":1,"topics":[{"name":"t","id":"01020304-0506-0708-090a-0b0c0d0e0f10","partitions":[]}]}`, "without partitions"},
		{"replica not a broker", `{"version":1,"topics":[{"name":"t","id":"01020304-0506-0708-090a-0b0c0d0e0f10","partitions":[{"replicas":[1],"isr":[1],"leader":1}]}]}`, "not a registered broker"},
		{"negative partition epoch", strings.Replace(string(valid), `"partition_epoch":0`, `"partition_epoch":-1`, 1), "partition epoch -1 < 0"},
		{"duplicate topic", strings.Replace(string(valid), `"name":"events"`, `"name":"orders"`, 1), "already exists"},
		{"bad config", strings.Replace(string(valid), `"retention.ms":"1000"`, `"retention.ms":"x"`, 1), `retention.ms="x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img, err := DecodeImage([]byte(tc.in), testConfigs)
			if err == nil {
				t.Fatalf("accepted: %+v", img)
			}
			if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want ErrDecode containing %q", err, tc.want)
			}
		})
	}
}

func TestUUID(t *testing.T) {
	s := idOrders.String()
	if s != "01020304-0506-0708-090a-0b0c0d0e0f10" {
		t.Fatal(s)
	}
	u, err := ParseUUID(s)
	if err != nil || u != idOrders {
		t.Fatalf("ParseUUID(%s) = %v, %v", s, u, err)
	}
	if idOrders.Base64() != "AQIDBAUGBwgJCgsMDQ4PEA" {
		t.Fatal(idOrders.Base64())
	}
	if !(UUID{}).IsZero() || idOrders.IsZero() {
		t.Fatal("IsZero")
	}
	for _, bad := range []string{"", "01020304050607080910111213141516", "0102030-40506-0708-090a-0b0c0d0e0f10", "0102030g-0506-0708-090a-0b0c0d0e0f10"} {
		if _, err := ParseUUID(bad); !errors.Is(err, ErrDecode) {
			t.Errorf("ParseUUID(%q) = %v", bad, err)
		}
	}
}
