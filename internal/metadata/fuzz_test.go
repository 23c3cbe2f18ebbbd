package metadata

import (
	"reflect"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to Decode and DecodeBatch.
// Invariants: neither panics; a record Decode accepts re-encodes to bytes
// that decode to the same record, and that encoding is stable; a batch
// DecodeBatch accepts round-trips through EncodeBatch the same way.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"type":"","data":null}`))
	for _, r := range allRecordKinds() {
		b, _ := Encode(r)
		f.Add(b)
		f.Add(append(b, "garbage"...))
	}
	batch, _ := EncodeBatch(allRecordKinds())
	f.Add(batch)
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := Decode(b); err == nil {
			enc, err := Encode(r)
			if err != nil {
				t.Fatalf("Encode of a decoded record: %v", err)
			}
			r2, err := Decode(enc)
			if err != nil || !reflect.DeepEqual(r, r2) {
				t.Fatalf("re-decode: %+v, %v; want %+v", r2, err, r)
			}
			if enc2, _ := Encode(r2); string(enc2) != string(enc) {
				t.Fatalf("encoding not stable: %s vs %s", enc, enc2)
			}
		}
		if recs, err := DecodeBatch(b); err == nil {
			enc, err := EncodeBatch(recs)
			if err != nil {
				t.Fatalf("EncodeBatch of a decoded batch: %v", err)
			}
			recs2, err := DecodeBatch(enc)
			if err != nil || !reflect.DeepEqual(recs, recs2) {
				t.Fatalf("re-decode batch: %+v, %v; want %+v", recs2, err, recs)
			}
		}
	})
}

// FuzzDecodeImage feeds arbitrary bytes to DecodeImage. Invariants: it
// never panics; an accepted image re-encodes and re-decodes to an equal
// image with identical bytes, and accepts the empty batch on top (its maps
// are usable).
func FuzzDecodeImage(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"topics":null,"brokers":null}`))
	empty, _ := EncodeImage(Empty(testConfigs))
	f.Add(empty)
	img, err := Empty(testConfigs).Apply(3,
		ClusterIDRecord{ClusterID: "c"},
		BrokerRecord{NodeID: 1, Host: "h", Port: 1},
		TopicRecord{Name: "t", ID: idOrders},
		PartitionRecord{TopicID: idOrders, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		ConfigRecord{TopicID: idOrders, Name: "cleanup.policy", Value: strp("compact")},
		ProducerIDsRecord{NodeID: 1, NextProducerID: 1000},
	)
	if err != nil {
		f.Fatal(err)
	}
	full, _ := EncodeImage(img)
	f.Add(full)
	f.Add(append(full, '}'))
	keyed, err := img.Apply(4, MetadataVersionRecord{Version: KeyedTopicsMetadataVersion}, TopicKeyedRecord{TopicID: idOrders})
	if err != nil {
		f.Fatal(err)
	}
	b, _ := EncodeImage(keyed)
	f.Add(b)
	// A broker with an offline replica (its registration's epoch is the
	// image's offset, 3).
	offline, err := keyed.Apply(5, MetadataVersionRecord{Version: OfflineReplicasMetadataVersion},
		OfflineReplicaRecord{NodeID: 1, Epoch: 3, TopicID: idOrders, Partition: 0})
	if err != nil {
		f.Fatal(err)
	}
	b, _ = EncodeImage(offline)
	f.Add(b)
	quotas, err := offline.Apply(6, MetadataVersionRecord{Version: ClientQuotaMetadataVersion},
		ClientQuotaRecord{Entity: QuotaEntity{User: Named("alice"), ClientID: DefaultName()}, Key: QuotaProducerByteRate, Value: 1048576},
		ClientQuotaRecord{Entity: QuotaEntity{IP: DefaultName()}, Key: QuotaConnectionCreationRate, Value: 20})
	if err != nil {
		f.Fatal(err)
	}
	b, _ = EncodeImage(quotas)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		img, err := DecodeImage(b, testConfigs)
		if err != nil {
			return
		}
		enc, err := EncodeImage(img)
		if err != nil {
			t.Fatalf("EncodeImage of a decoded image: %v", err)
		}
		img2, err := DecodeImage(enc, testConfigs)
		if err != nil || !equalImages(img, img2) {
			t.Fatalf("re-decode: %+v, %v; want %+v", img2, err, img)
		}
		if enc2, _ := EncodeImage(img2); string(enc2) != string(enc) {
			t.Fatalf("encoding not stable")
		}
		if _, err := img.Apply(img.Offset+1, BrokerRecord{NodeID: 9, Host: "h", Port: 1}); err != nil {
			t.Fatalf("applying to a decoded image: %v", err)
		}
	})
}
