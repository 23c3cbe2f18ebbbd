package kafkaserver

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/replica"
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
		// The storage layer's errors, as the replica manager turns them
		// into its own (its TestFromLog drives each storage and record
		// error to these).
		{fmt.Errorf("%w: read: offset 9", replica.ErrOffsetOutOfRange), kerr.OffsetOutOfRange},
		{replica.ErrMessageTooLarge, kerr.MessageTooLarge},
		{replica.ErrInvalidRecord, kerr.InvalidRecord},
		{fmt.Errorf("%w: crc", replica.ErrCorruptMessage), kerr.CorruptMessage},
		{replica.ErrStorage, kerr.KafkaStorageError},
		{replica.ErrInvalidConfig, kerr.InvalidConfig},
		{fmt.Errorf("%w: p0", replica.ErrOutOfOrderSequence), kerr.OutOfOrderSequenceNumber},
		{replica.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
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
