package txn

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// __transaction_state records, in Kafka's own schemas (kmsg's types;
// never encoded by hand; C§2.2, C§2.3):
//
//	key    int16 version (0)  TransactionalID string
//	value  int16 version (1)  ProducerID int64, ProducerEpoch int16,
//	       TimeoutMillis int32, State int8 (State's numbering),
//	       Topics nullable [ {Topic, Partitions []int32} ] (null in Empty),
//	       LastUpdateTimestamp int64, StartTimestamp int64 (-1: none),
//	       tagged: 0 PreviousProducerID int64 (-1), 1 NextProducerID int64 (-1),
//	               2 ClientTransactionVersion int16 (0),
//	               lastProducerEpochTag LastProducerEpoch int16 (-1; Fjord's)
//	tombstone: the key with a null value, for an expired id
//
// Written: key v0 and value v1, the versions Kafka 4 writes (v1, the
// flexible one, once transaction.version >= 1; v0 has no tagged fields),
// with the previous and next producer ids as Kafka writes them since
// KAFKA-20310. A tagged field is written only when it is not its default.
// Read: value v0 and v1; another value version is ErrUnknownRecordVersion,
// as is a key version other than 0 (Load skips those keys).
//
// Invariants of a record that decodes: producer id and epoch >= 0; state
// one a record can hold (not Dead or PrepareEpochFence, never written);
// no partitions in Empty or Complete*; a start time in every state but
// Empty; partition indexes >= 0; client transaction version 0 to 2. Decoding never panics, whatever the bytes
// (FuzzDecodeTxnValue).
const (
	txnKeyVersion   int16 = 0
	txnValueVersion int16 = 1

	// lastProducerEpochTag is the tagged field of TxnMetadataValue v1
	// in which Fjord keeps the last producer epoch, which Kafka's schema
	// lacks (it keeps it only in memory, so KIP-360 retries across a
	// failover are fenced). Kafka's readers skip unknown tags, so the
	// records stay Kafka's; the number is far above Kafka's own (0-3)
	// so a future Kafka field will not collide with it.
	lastProducerEpochTag uint32 = 1000
)

// txnKey is id's record key.
func txnKey(id string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version = txnKeyVersion
	k.TransactionalID = id
	return k.AppendTo(nil)
}

// txnRecord is the record of id moving to t.
func txnRecord(id string, t transit) Record {
	return Record{Key: txnKey(id), Value: txnValue(t)}
}

// txnTombstone is the record of id's expiry.
func txnTombstone(id string) Record { return Record{Key: txnKey(id)} }

// txnValue encodes t as a value v1. It panics on a state no record may
// hold: that is a bug in the caller.
func txnValue(t transit) []byte {
	if t.state == StateDead || t.state == StatePrepareEpochFence {
		panic(fmt.Sprintf("txn: a %v transit is never written", t.state))
	}
	v := kmsg.NewTxnMetadataValue()
	v.Version = txnValueVersion
	v.ProducerID = t.producerID
	v.ProducerEpoch = t.producerEpoch
	v.TimeoutMillis = t.timeoutMs
	v.State = kmsg.TransactionState(t.state)
	if t.state != StateEmpty {
		// Kafka writes null partitions in Empty, a (maybe empty) list
		// otherwise.
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, tp := range t.partitions {
			if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
				vt := kmsg.NewTxnMetadataValueTopic()
				vt.Topic = tp.Topic
				v.Topics = append(v.Topics, vt)
			}
			last := &v.Topics[len(v.Topics)-1]
			last.Partitions = append(last.Partitions, tp.Partition)
		}
	}
	v.LastUpdateTimestamp = t.lastUpdateMs
	v.StartTimestamp = t.startMs
	v.PreviousProducerID = t.prevProducerID
	v.NextProducerID = t.nextProducerID
	v.ClientTransactionVersion = t.clientTransactionVersion
	if t.lastProducerEpoch != -1 {
		v.UnknownTags.Set(lastProducerEpochTag, binary.BigEndian.AppendUint16(nil, uint16(t.lastProducerEpoch)))
	}
	return v.AppendTo(nil)
}

// decodeTxnKey returns the transactional id of a record key.
func decodeTxnKey(b []byte) (string, error) {
	if len(b) < 2 {
		return "", fmt.Errorf("%w: key of %d bytes", ErrMalformedRecord, len(b))
	}
	if version := int16(binary.BigEndian.Uint16(b)); version != txnKeyVersion {
		return "", fmt.Errorf("%w: key version %d (this coordinator reads %d)", ErrUnknownRecordVersion, version, txnKeyVersion)
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(b); err != nil {
		return "", fmt.Errorf("%w: key: %v", ErrMalformedRecord, err)
	}
	return k.TransactionalID, nil
}

// decodeTxnValue decodes a (non-null) record value, checking the
// invariants listed at the top of this file.
func decodeTxnValue(b []byte) (transit, error) {
	if len(b) < 2 {
		return transit{}, fmt.Errorf("%w: value of %d bytes", ErrMalformedRecord, len(b))
	}
	if version := int16(binary.BigEndian.Uint16(b)); version < 0 || version > txnValueVersion {
		return transit{}, fmt.Errorf("%w: value version %d (this coordinator reads 0 to %d)", ErrUnknownRecordVersion, version, txnValueVersion)
	}
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(b); err != nil {
		return transit{}, fmt.Errorf("%w: value: %v", ErrMalformedRecord, err)
	}
	t := transit{
		producerID:               v.ProducerID,
		prevProducerID:           v.PreviousProducerID,
		nextProducerID:           v.NextProducerID,
		producerEpoch:            v.ProducerEpoch,
		lastProducerEpoch:        -1,
		timeoutMs:                v.TimeoutMillis,
		state:                    State(v.State),
		startMs:                  v.StartTimestamp,
		lastUpdateMs:             v.LastUpdateTimestamp,
		clientTransactionVersion: v.ClientTransactionVersion,
	}
	var tagErr error
	v.UnknownTags.Each(func(tag uint32, val []byte) {
		if tag != lastProducerEpochTag {
			return // a field of a later Kafka: skipped, as Kafka does
		}
		if len(val) != 2 {
			tagErr = fmt.Errorf("%w: last producer epoch of %d bytes", ErrMalformedRecord, len(val))
			return
		}
		t.lastProducerEpoch = int16(binary.BigEndian.Uint16(val))
	})
	if tagErr != nil {
		return transit{}, tagErr
	}
	var tps []TopicPartition
	for _, vt := range v.Topics {
		if vt.Topic == "" {
			return transit{}, fmt.Errorf("%w: a partition with no topic", ErrMalformedRecord)
		}
		for _, p := range vt.Partitions {
			if p < 0 {
				return transit{}, fmt.Errorf("%w: partition %s-%d", ErrMalformedRecord, vt.Topic, p)
			}
			tps = append(tps, TopicPartition{Topic: vt.Topic, Partition: p})
		}
	}
	t.partitions = partitionSet(tps)
	switch {
	case t.producerID < 0 || t.producerEpoch < 0:
		return transit{}, fmt.Errorf("%w: producer id %d epoch %d", ErrMalformedRecord, t.producerID, t.producerEpoch)
	case t.state < StateEmpty || t.state > StateCompleteAbort:
		// Dead and PrepareEpochFence are never written; anything above
		// is no state at all.
		return transit{}, fmt.Errorf("%w: state %d (%v)", ErrMalformedRecord, int8(t.state), t.state)
	case len(t.partitions) > 0 && (t.state == StateEmpty || t.state.isComplete()):
		return transit{}, fmt.Errorf("%w: %v with %d partitions", ErrMalformedRecord, t.state, len(t.partitions))
	case t.state != StateEmpty && t.startMs < 0:
		// Every transaction starts at its first add (or a V2 empty
		// abort), and Complete* keeps that start.
		return transit{}, fmt.Errorf("%w: %v with no start time", ErrMalformedRecord, t.state)
	case t.clientTransactionVersion < 0 || t.clientTransactionVersion > transactionV2:
		return transit{}, fmt.Errorf("%w: client transaction version %d", ErrMalformedRecord, t.clientTransactionVersion)
	case t.lastProducerEpoch < -1:
		return transit{}, fmt.Errorf("%w: last producer epoch %d", ErrMalformedRecord, t.lastProducerEpoch)
	}
	return t, nil
}
