package kafkaserver

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
)

// Every expected error maps to the code clients act on, wrapped or not;
// anything else is UNKNOWN_SERVER_ERROR and flagged as unclassified.
func TestErrorCode(t *testing.T) {
	cases := []struct {
		err  error
		want *kerr.Error // nil: no error
	}{
		{nil, nil},
		{replica.ErrNotLeader, kerr.NotLeaderForPartition},
		{fmt.Errorf("%w: led by 3", replica.ErrNotLeader), kerr.NotLeaderForPartition},
		{replica.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
		{replica.ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
		{controlplane.ErrTopicExists, kerr.TopicAlreadyExists},
		{fmt.Errorf("read: %w", storage.ErrOffsetOutOfRange), kerr.OffsetOutOfRange},
		{storage.ErrBatchTooLarge, kerr.MessageTooLarge},
		{storage.ErrInvalidBatch, kerr.InvalidRecord},
		{fmt.Errorf("%w: crc", record.ErrCorruptCRC), kerr.CorruptMessage},
		{record.ErrInvalidMagic, kerr.CorruptMessage},
		{record.ErrCorruptLength, kerr.CorruptMessage},
		{record.ErrUnsupportedCodec, kerr.CorruptMessage},
		{record.ErrBatchTooLarge, kerr.MessageTooLarge},
		{record.ErrDecompressedTooLarge, kerr.MessageTooLarge},
		{record.ErrInvalidRecordBatch, kerr.InvalidRecord},
		{storage.ErrStorage, kerr.KafkaStorageError},
		{storage.ErrLogClosed, kerr.NotLeaderForPartition},
		{storage.ErrInvalidConfig, kerr.InvalidConfig},
		{fmt.Errorf("p0: %w", storage.ErrOutOfOrderSequence), kerr.OutOfOrderSequenceNumber},
		{storage.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
		{context.Canceled, kerr.RequestTimedOut},
		{errTransactionsUnsupported, kerr.TransactionalIDAuthorizationFailed},
	}
	for _, tc := range cases {
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if got := errorCode(tc.err); got != want {
			t.Errorf("%v: code %d (%v), want %d (%v)", tc.err, got, kerr.ErrorForCode(got), want, tc.want)
		}
		if _, known := classify(tc.err); !known {
			t.Errorf("%v: classified as unknown", tc.err)
		}
	}
	code, known := classify(errors.New("disk on fire"))
	if code != kerr.UnknownServerError.Code || known {
		t.Fatalf("unclassified error: code %d known %v", code, known)
	}
}

// An error response's message is Fjord's own words: the code's name and
// kerr's stock description come off the front, since clients print the
// name themselves and the description can be false of the case.
func TestClientMessage(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: 10001 partitions (at most 10000)", kerr.InvalidPartitions), "10001 partitions (at most 10000)"},
		{kerr.TopicAlreadyExists, kerr.TopicAlreadyExists.Description},
		{fmt.Errorf("%w: ", kerr.InvalidConfig), kerr.InvalidConfig.Error() + ": "},
		{fmt.Errorf("creating orders: %w", kerr.InvalidTopicException), "creating orders: " + kerr.InvalidTopicException.Error()},
		{errors.New("disk full"), "disk full"},
	} {
		if got := clientMessage(tc.err); got != tc.want {
			t.Errorf("clientMessage(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
