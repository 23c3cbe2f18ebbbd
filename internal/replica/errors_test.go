package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage"
)

// checkBoundary fails unless err is sentinel (wrapping cause, when given)
// and is answered code at the protocol edge, which takes the first kerr
// value in the chain; and unless the message a client reads (the edge
// cuts the code's name off the front) is cause's, as it was when the edge
// mapped storage's errors itself.
func checkBoundary(t *testing.T, what string, err, sentinel error, code *kerr.Error, cause error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Errorf("%s: %v, want %v", what, err, sentinel)
		return
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) || ke.Code != code.Code {
		t.Errorf("%s: %v is answered %v, want %v", what, err, ke, code)
	}
	if cause == nil {
		return
	}
	if !errors.Is(err, cause) {
		t.Errorf("%s: %v lost the storage error %v", what, err, cause)
	}
	if msg, _ := strings.CutPrefix(err.Error(), ke.Error()+": "); msg != cause.Error() {
		t.Errorf("%s: client message %q, want %q", what, msg, cause.Error())
	}
}

// Every error the storage layer returns is turned into a sentinel of this
// package with the Kafka code the protocol edge answered it with when it
// mapped storage's and record's errors itself; the storage error stays
// beneath it. The rows are that edge's table (kafkaserver's errorcode
// test before the boundary moved here), wrapped as storage wraps them.
func TestFromLog(t *testing.T) {
	cases := []struct {
		err      error
		sentinel error
		code     *kerr.Error
	}{
		{fmt.Errorf("read: %w", storage.ErrOffsetOutOfRange), ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
		{storage.ErrBatchTooLarge, ErrMessageTooLarge, kerr.MessageTooLarge},
		{fmt.Errorf("%w: %v", storage.ErrBatchTooLarge, record.ErrBatchTooLarge), ErrMessageTooLarge, kerr.MessageTooLarge},
		{storage.ErrInvalidBatch, ErrInvalidRecord, kerr.InvalidRecord},
		{fmt.Errorf("%w: %v", storage.ErrInvalidBatch, record.ErrInvalidRecordBatch), ErrInvalidRecord, kerr.InvalidRecord},
		{fmt.Errorf("%w: crc", record.ErrCorruptCRC), ErrCorruptMessage, kerr.CorruptMessage},
		{record.ErrInvalidMagic, ErrCorruptMessage, kerr.CorruptMessage},
		{record.ErrCorruptLength, ErrCorruptMessage, kerr.CorruptMessage},
		{record.ErrCorruptRecord, ErrCorruptMessage, kerr.CorruptMessage},
		{record.ErrRecordCountMismatch, ErrCorruptMessage, kerr.CorruptMessage},
		{fmt.Errorf("segment 0.log at position 0: %w", record.ErrInvalidMagic), ErrCorruptMessage, kerr.CorruptMessage},
		{record.ErrUnsupportedCodec, ErrCorruptMessage, kerr.CorruptMessage},
		{record.ErrBatchTooLarge, ErrMessageTooLarge, kerr.MessageTooLarge},
		{record.ErrDecompressedTooLarge, ErrMessageTooLarge, kerr.MessageTooLarge},
		{record.ErrInvalidRecordBatch, ErrInvalidRecord, kerr.InvalidRecord},
		{fmt.Errorf("%w: t-0: fsync: input/output error", storage.ErrStorage), ErrStorage, kerr.KafkaStorageError},
		{storage.ErrLogClosed, ErrNotLeader, kerr.NotLeaderForPartition},
		{storage.ErrInvalidConfig, ErrInvalidConfig, kerr.InvalidConfig},
		{fmt.Errorf("p0: %w", storage.ErrOutOfOrderSequence), ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
		{storage.ErrInvalidProducerEpoch, ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
		{fmt.Errorf("%w (log t-0)", storage.ErrInvalidTxnState), ErrInvalidTxnState, kerr.InvalidTxnState},
		{fmt.Errorf("%w (log t-0)", storage.ErrCoordinatorFenced), ErrCoordinatorFenced, kerr.TransactionCoordinatorFenced},
		{fmt.Errorf("%w: 0.txnindex: entry 0: version 7", storage.ErrCorruptTxnIndex), ErrStorage, kerr.KafkaStorageError},
	}
	for _, tc := range cases {
		checkBoundary(t, tc.err.Error(), fromLog(tc.err), tc.sentinel, tc.code, tc.err)
	}

	// This package's own errors, nil, and what storage did not classify
	// pass as they are: the last is UNKNOWN_SERVER_ERROR at the edge, and
	// logged there.
	own := fmt.Errorf("%w: t-0: leader is node 2", ErrNotLeader)
	unknown := errors.New("disk on fire")
	for _, err := range []error{nil, own, ErrFencedLeaderEpoch, unknown} {
		if got := fromLog(err); got != err {
			t.Errorf("fromLog(%v) = %v, want it unchanged", err, got)
		}
	}
}

// The same, through the replica manager's API: each failure the storage
// layer can be made to return from a test is answered with the sentinel
// and the code it always had.
func TestLogErrorsThroughTheAPI(t *testing.T) {
	e := newEnv(t, "")
	e.put(
		newTopic("t", 1, 1, nil),
		newTopic("small", 2, 1, map[string]string{"max.message.bytes": "1024"}),
		newTopic("compacted", 3, 1, map[string]string{"cleanup.policy": "compact"}),
	)
	appendErr := func(topic string, data []byte) error {
		_, err := e.m.Append(context.Background(), topic, 0, data, AcksLeader, time.Second)
		return err
	}
	build := func(opts record.BatchOptions, key []byte) []byte {
		b := record.NewBuilder(opts)
		b.Add(key, []byte("v"), nil, 0)
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	idempotent := func(epoch int16, seq int32) []byte {
		opts := record.DefaultBatchOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 7, epoch, seq
		return build(opts, nil)
	}
	badCRC := batch(t, "c", 1, 0)
	badCRC[len(badCRC)-1] ^= 0xff
	badCodec := batch(t, "z", 1, 0)
	badCodec[22] |= 7 // attributes' codec bits: 7 is no codec
	binary.BigEndian.PutUint32(badCodec[17:], crc32.Checksum(badCodec[21:], crc32.MakeTable(crc32.Castagnoli)))
	control := record.DefaultBatchOptions()
	control.Control = true
	if err := appendErr("t", idempotent(1, 0)); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		what     string
		err      error
		sentinel error
		code     *kerr.Error
	}{
		{"over max.message.bytes", appendErr("small", bigBatch(t, 1, 2048, 0)), ErrMessageTooLarge, kerr.MessageTooLarge},
		{"no batch", appendErr("t", nil), ErrInvalidRecord, kerr.InvalidRecord},
		{"control batch from a client", appendErr("t", build(control, []byte{0, 0, 0, 0})), ErrInvalidRecord, kerr.InvalidRecord},
		{"keyless record, compacted topic", appendErr("compacted", batch(t, "k", 1, 0)), ErrInvalidRecord, kerr.InvalidRecord},
		{"bad CRC", appendErr("t", badCRC), ErrCorruptMessage, kerr.CorruptMessage},
		{"truncated batch", appendErr("t", badCRC[:len(badCRC)-3]), ErrCorruptMessage, kerr.CorruptMessage},
		{"unknown codec", appendErr("t", badCodec), ErrCorruptMessage, kerr.CorruptMessage},
		{"sequence gap", appendErr("t", idempotent(1, 5)), ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
		{"fenced producer epoch", appendErr("t", idempotent(0, 1)), ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	}
	res := e.m.Fetch(context.Background(), consumerFetch(0, 0), []FetchPartition{part("t", 0, 99)})
	cases = append(cases, struct {
		what     string
		err      error
		sentinel error
		code     *kerr.Error
	}{"fetch past the log end", res.Partitions[0].Err, ErrOffsetOutOfRange, kerr.OffsetOutOfRange})
	res.Release()
	for _, tc := range cases {
		checkBoundary(t, tc.what, tc.err, tc.sentinel, tc.code, nil)
	}
	if l := e.log("t", 0); l.LogEndOffset() != 1 {
		t.Fatalf("a refused append was written: log end offset %d, want 1", l.LogEndOffset())
	}
}

// Damaged data on disk is marked ErrCorruptMessage, answered
// CORRUPT_MESSAGE, and never served: the fetch gets no records.
func TestDamagedLogIsNotServed(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 1, nil))
	e.append("t", 0, batch(t, "a", 3, 0), AcksLeader)
	f, err := os.OpenFile(filepath.Join(e.logDir("t", 0), "00000000000000000000.log"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{9}, 16); err != nil { // the first batch's magic
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	res := e.m.Fetch(context.Background(), consumerFetch(0, 0), []FetchPartition{part("t", 0, 0)})
	defer res.Release()
	r := res.Partitions[0]
	checkBoundary(t, "fetch of a damaged batch", r.Err, ErrCorruptMessage, kerr.CorruptMessage, nil)
	if r.Size() != 0 {
		t.Fatalf("served %d bytes of a damaged batch", r.Size())
	}
}
