package kafkaserver

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The error -> Kafka error code mapping, shared by every handler.
//
// The services below this package return their expected errors as
// sentinels that ARE kerr values (replica.ErrNotLeader =
// kerr.NotLeaderForPartition, controlplane.ErrTopicExists, group's, ...),
// possibly wrapped with detail, so each maps to its own code. The replica
// manager is the data path's error boundary: it turns storage's and
// record's errors into its own sentinels, so this package knows nothing of
// the storage layer's errors. Context errors are the only others mapped
// here. Anything else is a bug or an I/O failure nobody classified: it is
// answered UNKNOWN_SERVER_ERROR and logged, because the client learns
// nothing from that code and the operator must see why.

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
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code, true
	case errors.Is(err, context.Canceled):
		// The connection closed or the server is shutting down; nobody
		// will read the answer, but a retriable code is the honest one.
		return kerr.RequestTimedOut.Code, true
	}
	return kerr.UnknownServerError.Code, false
}
