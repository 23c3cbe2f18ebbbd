package txn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// sampleTransits is one transit of every state a record holds, with
// every field away from its default somewhere.
func sampleTransits() []transit {
	empty := newTransit(42, 60_000, 1_700_000_000_000)
	empty.producerEpoch, empty.prevProducerID = 0, 41
	ong := ongoing()
	ong.clientTransactionVersion = 2
	ong.lastProducerEpoch = 2
	prep := ong.prepareAbortOrCommit(StatePrepareCommit, 2, endClient, 99, 32767, 5)
	abort := ong.prepareAbortOrCommit(StatePrepareAbort, 0, endClient, -1, 32767, 5)
	return []transit{empty, ong, prep, abort, prep.prepareComplete(6), abort.prepareComplete(6)}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, want := range sampleTransits() {
		got, err := decodeTxnValue(txnValue(want))
		if err != nil {
			t.Fatalf("%v: %v", want.state, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%v round trip:\n got %+v\nwant %+v", want.state, got, want)
		}
	}
	id, err := decodeTxnKey(txnKey("my-txn"))
	if err != nil || id != "my-txn" {
		t.Fatalf("key round trip: %q, %v", id, err)
	}
	if rec := txnTombstone("x"); rec.Value != nil || !bytes.Equal(rec.Key, txnKey("x")) {
		t.Fatalf("tombstone %+v", rec)
	}
}

// Reference: C§2.2, C§2.3. What Kafka's own readers see of Fjord's
// records: key v0, value v1, null partitions in Empty, a list otherwise,
// the previous and next producer ids and the client version in Kafka's
// tags, and the last epoch in a tag they skip.
func TestRecordIsKafkas(t *testing.T) {
	key := txnKey("t1")
	if !bytes.Equal(key, append([]byte{0, 0, 0, 2}, "t1"...)) {
		t.Fatalf("key bytes %x", key)
	}
	samples := sampleTransits()
	for _, s := range samples {
		v := kmsg.NewTxnMetadataValue()
		if err := v.ReadFrom(txnValue(s)); err != nil {
			t.Fatal(err)
		}
		if v.Version != 1 || v.ProducerID != s.producerID || v.ProducerEpoch != s.producerEpoch ||
			int8(v.State) != int8(s.state) || v.TimeoutMillis != s.timeoutMs || v.StartTimestamp != s.startMs ||
			v.LastUpdateTimestamp != s.lastUpdateMs || v.PreviousProducerID != s.prevProducerID ||
			v.NextProducerID != s.nextProducerID || v.ClientTransactionVersion != s.clientTransactionVersion {
			t.Fatalf("%v: kmsg reads %+v from %+v", s.state, v, s)
		}
		if (v.Topics == nil) != (s.state == StateEmpty) {
			t.Fatalf("%v: topics %v: Kafka writes null exactly in Empty", s.state, v.Topics)
		}
		if wantTags := s.lastProducerEpoch != -1; (v.UnknownTags.Len() == 1) != wantTags {
			t.Fatalf("%v: %d unknown tags, last epoch %d", s.state, v.UnknownTags.Len(), s.lastProducerEpoch)
		}
	}
	ong := kmsg.NewTxnMetadataValue()
	if err := ong.ReadFrom(txnValue(samples[1])); err != nil {
		t.Fatal(err)
	}
	if len(ong.Topics) != 2 || ong.Topics[0].Topic != "a" || ong.Topics[1].Topic != "b" || ong.Topics[1].Partitions[0] != 1 {
		t.Fatalf("partitions grouped by topic: %+v", ong.Topics)
	}
}

// A value v0 (Kafka before transaction.version 1) has no tagged fields:
// the ids and the version take their defaults.
func TestRecordReadsValueV0(t *testing.T) {
	v := kmsg.NewTxnMetadataValue()
	v.Version = 0
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = 5, 2, 1000
	v.State = kmsg.TransactionStateOngoing
	v.Topics = []kmsg.TxnMetadataValueTopic{{Topic: "t", Partitions: []int32{3, 1}}}
	v.StartTimestamp, v.LastUpdateTimestamp = 10, 20
	got, err := decodeTxnValue(v.AppendTo(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := transit{producerID: 5, prevProducerID: -1, nextProducerID: -1, producerEpoch: 2, lastProducerEpoch: -1,
		timeoutMs: 1000, state: StateOngoing, partitions: []TopicPartition{tp("t", 1), tp("t", 3)}, startMs: 10, lastUpdateMs: 20}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("v0:\n got %+v\nwant %+v", got, want)
	}
}

func TestRecordUnknownVersions(t *testing.T) {
	value := txnValue(sampleTransits()[0])
	for _, version := range []int16{2, 7, -1} {
		b := bytes.Clone(value)
		binary.BigEndian.PutUint16(b, uint16(version))
		_, err := decodeTxnValue(b)
		if !errors.Is(err, ErrUnknownRecordVersion) || !strings.Contains(err.Error(), "value version "+strconv.Itoa(int(version))) {
			t.Errorf("value version %d: %v", version, err)
		}
	}
	key := txnKey("x")
	binary.BigEndian.PutUint16(key, 1)
	if _, err := decodeTxnKey(key); !errors.Is(err, ErrUnknownRecordVersion) || !strings.Contains(err.Error(), "key version 1") {
		t.Errorf("key version 1: %v", err)
	}
}

// Values that decode as kmsg but hold what no coordinator writes.
func TestRecordRefusesImpossibleValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*kmsg.TxnMetadataValue)
	}{
		{"state Dead", func(v *kmsg.TxnMetadataValue) { v.State = kmsg.TransactionStateDead }},
		{"state PrepareEpochFence", func(v *kmsg.TxnMetadataValue) { v.State = kmsg.TransactionStatePrepareEpochFence }},
		{"state 9", func(v *kmsg.TxnMetadataValue) { v.State = 9 }},
		{"state -1", func(v *kmsg.TxnMetadataValue) { v.State = -1 }},
		{"Empty with partitions", func(v *kmsg.TxnMetadataValue) {
			v.State, v.Topics = kmsg.TransactionStateEmpty, []kmsg.TxnMetadataValueTopic{{Topic: "t", Partitions: []int32{0}}}
		}},
		{"CompleteCommit with partitions", func(v *kmsg.TxnMetadataValue) {
			v.State, v.Topics = kmsg.TransactionStateCompleteCommit, []kmsg.TxnMetadataValueTopic{{Topic: "t", Partitions: []int32{0}}}
		}},
		{"Ongoing with no start", func(v *kmsg.TxnMetadataValue) { v.StartTimestamp = -1 }},
		{"CompleteAbort with no start", func(v *kmsg.TxnMetadataValue) {
			v.State, v.Topics, v.StartTimestamp = kmsg.TransactionStateCompleteAbort, nil, -1
		}},
		{"negative producer id", func(v *kmsg.TxnMetadataValue) { v.ProducerID = -1 }},
		{"negative epoch", func(v *kmsg.TxnMetadataValue) { v.ProducerEpoch = -1 }},
		{"negative partition", func(v *kmsg.TxnMetadataValue) { v.Topics[0].Partitions = []int32{-2} }},
		{"no topic", func(v *kmsg.TxnMetadataValue) { v.Topics[0].Topic = "" }},
		{"client version 3", func(v *kmsg.TxnMetadataValue) { v.ClientTransactionVersion = 3 }},
		{"last epoch of 3 bytes", func(v *kmsg.TxnMetadataValue) { v.UnknownTags.Set(lastProducerEpochTag, []byte{0, 0, 1}) }},
		{"last epoch -2", func(v *kmsg.TxnMetadataValue) { v.UnknownTags.Set(lastProducerEpochTag, []byte{0xff, 0xfe}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := kmsg.NewTxnMetadataValue()
			if err := v.ReadFrom(txnValue(ongoing())); err != nil {
				t.Fatal(err)
			}
			tc.modify(&v)
			if got, err := decodeTxnValue(v.AppendTo(nil)); !errors.Is(err, ErrMalformedRecord) {
				t.Fatalf("decoded %+v, %v; want ErrMalformedRecord", got, err)
			}
		})
	}
	// A tag of a later Kafka is skipped.
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(txnValue(ongoing())); err != nil {
		t.Fatal(err)
	}
	v.UnknownTags.Set(4, []byte{1, 2, 3})
	if _, err := decodeTxnValue(v.AppendTo(nil)); err != nil {
		t.Fatalf("unknown tag: %v", err)
	}
}

func TestRecordNeverWritesDeadOrFence(t *testing.T) {
	for _, s := range []State{StateDead, StatePrepareEpochFence} {
		n := ongoing()
		n.state = s
		mustPanic(t, "writing "+s.String(), func() { txnValue(n) })
	}
}

// Every strict prefix of a valid key or value is refused, never with a
// panic.
func TestRecordTruncatedAndTrailing(t *testing.T) {
	for _, s := range sampleTransits() {
		value := txnValue(s)
		for n := range len(value) {
			if _, err := decodeTxnValue(value[:n]); err == nil {
				t.Fatalf("%v: a prefix of %d of %d bytes decoded", s.state, n, len(value))
			}
		}
		// Bytes after a whole value are ignored, as Kafka's reader
		// ignores them.
		if got, err := decodeTxnValue(append(bytes.Clone(value), 0xde, 0xad)); err != nil || !reflect.DeepEqual(got, s) {
			t.Fatalf("%v with trailing bytes: %+v, %v", s.state, got, err)
		}
	}
	key := txnKey("abc")
	for n := range len(key) {
		if _, err := decodeTxnKey(key[:n]); err == nil {
			t.Fatalf("a key prefix of %d bytes decoded", n)
		}
	}
}

// FuzzDecodeTxnValue checks the value decoder's invariants on any bytes:
// it never panics; a value it accepts holds only what a record may hold
// (state Empty to CompleteAbort, no partitions in Empty or Complete*, a
// start time unless Empty, non-negative ids and epochs); and re-encoding it decodes to the same
// values (the encoding is stable); and a Prepare* value it accepts
// completes with a legal transition, so no record can make a load panic.
func FuzzDecodeTxnValue(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add([]byte{0, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	big := ongoing()
	for i := range 1000 {
		big.partitions = append(big.partitions, tp(fmt.Sprintf("topic-%03d", i/10), int32(i%10)))
	}
	big.partitions = partitionSet(big.partitions)
	for _, s := range append(sampleTransits(), big) {
		v := txnValue(s)
		f.Add(v)
		f.Add(append(bytes.Clone(v), 0, 0, 0))
		f.Add(v[:len(v)/2])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeTxnValue(b)
		if err != nil {
			return
		}
		if got.state < StateEmpty || got.state > StateCompleteAbort || got.producerID < 0 || got.producerEpoch < 0 ||
			(len(got.partitions) > 0 && (got.state == StateEmpty || got.state.isComplete())) ||
			(got.state != StateEmpty && got.startMs < 0) {
			t.Fatalf("accepted %+v", got)
		}
		if got.state.isPrepare() {
			// A load completes what it finds in Prepare*: that must
			// never be an illegal transition (checkTransition panics).
			checkTransition("fuzz", got, got.prepareComplete(0))
		}
		again, err := decodeTxnValue(txnValue(got))
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("re-encoding is not stable: %+v, %v; was %+v", again, err, got)
		}
	})
}

// FuzzDecodeTxnKey: never panics; an accepted key re-encodes to a key of
// the same id.
func FuzzDecodeTxnKey(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0})
	f.Add([]byte{0, 0, 0xff, 0xff})
	f.Add(txnKey("id"))
	f.Add(append(txnKey("id"), 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := decodeTxnKey(b)
		if err != nil {
			return
		}
		if again, err := decodeTxnKey(txnKey(id)); err != nil || again != id {
			t.Fatalf("re-encoding %q: %q, %v", id, again, err)
		}
	})
}
