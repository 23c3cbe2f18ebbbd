package kafkaserver

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage"
)

// The error -> Kafka error code mapping, shared by every handler.
//
// The services below this package return two kinds of expected error:
// sentinels that ARE kerr values (replica.ErrNotLeader =
// kerr.NotLeaderForPartition, controlplane.ErrTopicExists, ...), possibly
// wrapped with detail, and storage's own sentinels (and record's, which
// storage passes through), which know nothing of the wire. The first kind
// maps to its own code; the others through the table below. Anything else is a bug or an I/O failure we did not
// classify: it is answered UNKNOWN_SERVER_ERROR and logged, because the
// client learns nothing from that code and the operator must see why.

// errorCode returns the Kafka error code for err (0 for nil). It never
// logs; use errorCodeLogged where an unclassified error should reach the
// log.
func errorCode(err error) int16 {
	code, _ := classify(err)
	return code
}

// errorCodeLogged is errorCode, logging the cause at warn when err maps
// to UNKNOWN_SERVER_ERROR (what names the API and partition).
func (s *Server) errorCodeLogged(err error, what string, attrs ...any) int16 {
	code, known := classify(err)
	if !known {
		s.log.Warn("kafkaserver: unclassified error answered UNKNOWN_SERVER_ERROR",
			append([]any{slog.String("where", what), slog.Any("err", err)}, attrs...)...)
	}
	return code
}

// clientMessage is the text an error response carries for err: what
// Fjord says of the condition, without the code's name and kerr's stock
// description in front of it. Clients print the code's name beside the
// message themselves, and the stock description can be false for the
// case at hand: INVALID_PARTITIONS' reads "Number of partitions is below
// 1." for a count above the maximum too. An error that is a kerr value
// alone keeps the description: it is all there is to say.
func clientMessage(err error) string {
	msg := err.Error()
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return msg
	}
	if msg == ke.Error() {
		return ke.Description
	}
	if rest, ok := strings.CutPrefix(msg, ke.Error()+": "); ok && rest != "" {
		return rest
	}
	return msg
}

// classify maps err to a code and says whether the mapping was a known
// one (false only for UNKNOWN_SERVER_ERROR from an unclassified error).
func classify(err error) (code int16, known bool) {
	if err == nil {
		return 0, true
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code, true
	}
	switch {
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code, true
	case errors.Is(err, storage.ErrBatchTooLarge):
		return kerr.MessageTooLarge.Code, true
	case errors.Is(err, storage.ErrInvalidBatch):
		return kerr.InvalidRecord.Code, true
	case storage.IsCorruption(err), errors.Is(err, record.ErrUnsupportedCodec):
		// An unknown codec id is damage too: no client writes one.
		return kerr.CorruptMessage.Code, true
	case errors.Is(err, record.ErrBatchTooLarge), errors.Is(err, record.ErrDecompressedTooLarge):
		return kerr.MessageTooLarge.Code, true
	case errors.Is(err, record.ErrInvalidRecordBatch):
		return kerr.InvalidRecord.Code, true
	case errors.Is(err, storage.ErrStorage):
		return kerr.KafkaStorageError.Code, true
	case errors.Is(err, storage.ErrLogClosed):
		// The log went away under the request: the partition was deleted
		// or is moving. The client refreshes metadata and retries,
		// which is right for both.
		return kerr.NotLeaderForPartition.Code, true
	case errors.Is(err, storage.ErrInvalidConfig):
		return kerr.InvalidConfig.Code, true
	case errors.Is(err, storage.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code, true
	case errors.Is(err, storage.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code, true
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code, true
	case errors.Is(err, context.Canceled):
		// The connection closed or the server is shutting down; nobody
		// will read the answer, but a retriable code is the honest one.
		return kerr.RequestTimedOut.Code, true
	}
	return kerr.UnknownServerError.Code, false
}
