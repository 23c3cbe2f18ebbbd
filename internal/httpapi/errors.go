package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// apiError is an error answer: an HTTP status, a stable code programs
// can switch on, and a message for people.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func badRequest(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, msg: fmt.Sprintf(format, args...)}
}

func unavailable(err error) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: "unavailable", msg: err.Error()}
}

// bodyTooLarge is the answer to a body over the limit.
func bodyTooLarge(limit int64) *apiError {
	return &apiError{status: http.StatusRequestEntityTooLarge, code: "body_too_large",
		msg: fmt.Sprintf("the request body is over this node's limit of %d bytes (fjord serve --http-max-body-bytes)", limit)}
}

// kafkaError maps an error from the cluster to its answer.
func kafkaError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke) && (ke == kerr.UnknownTopicOrPartition || ke == kerr.UnknownTopicID):
		return &apiError{status: http.StatusNotFound, code: "unknown_topic", msg: err.Error()}
	case errors.As(err, &ke) && (ke == kerr.MessageTooLarge || ke == kerr.RecordListTooLarge):
		return &apiError{status: http.StatusRequestEntityTooLarge, code: "record_too_large", msg: err.Error()}
	case errors.As(err, &ke) && ke == kerr.OffsetOutOfRange:
		return &apiError{status: http.StatusRequestedRangeNotSatisfiable, code: "offset_out_of_range", msg: err.Error()}
	case errors.As(err, &ke) && (ke == kerr.InvalidRecord || ke == kerr.CorruptMessage || ke == kerr.InvalidTopicException):
		return &apiError{status: http.StatusBadRequest, code: "invalid_record", msg: err.Error()}
	case errors.As(err, &ke) && ke.Retriable, errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, kgo.ErrRecordRetries):
		// Not enough in-sync replicas, no leader, timeouts: try again.
		return &apiError{status: http.StatusServiceUnavailable, code: "unavailable", msg: err.Error()}
	}
	return &apiError{status: http.StatusInternalServerError, code: "internal", msg: err.Error()}
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// errorBody is the JSON of an error, alone or inside a batch's results.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, err error) {
	ae := kafkaError(err)
	writeJSON(w, ae.status, errorBody{Error: ae.code, Message: ae.msg})
}
