package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// apiError is an error answer: an HTTP status, a stable code programs
// can switch on, and a message for people.
type apiError struct {
	status int
	code   string
	msg    string
	// retryAfter, when set, is sent as the Retry-After header.
	retryAfter time.Duration
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func badRequest(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, msg: fmt.Sprintf(format, args...)}
}

func unavailable(err error) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: "unavailable", msg: errText(err)}
}

// errText is err's text for a client, with the network's bare words
// ("EOF", "context deadline exceeded") said in the API's.
func errText(err error) string {
	var plain string
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		plain = "the connection to the cluster closed before it answered"
	case errors.Is(err, context.DeadlineExceeded):
		plain = "the cluster did not answer in time"
	case errors.Is(err, context.Canceled):
		plain = "the request was canceled"
	default:
		return err.Error()
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF || err == context.DeadlineExceeded || err == context.Canceled {
		return plain
	}
	return plain + " (" + err.Error() + ")"
}

// bodyTooLarge is the answer to a body over the limit.
func bodyTooLarge(limit int64) *apiError {
	return &apiError{status: http.StatusRequestEntityTooLarge, code: "body_too_large",
		msg: fmt.Sprintf("the request body is over this node's limit of %d bytes (fjord serve --http-max-body-bytes)", limit)}
}

// decodeError is the answer to a body the JSON decoder refused, in the
// API's words. The decoder's own name Go's types ("json: cannot
// unmarshal string into Go struct field produceRequest.produceRecord.
// partition of type int32"), and an empty or cut-short body is a bare
// "EOF" or "unexpected EOF".
func decodeError(err error, limit int64) *apiError {
	var tooBig *http.MaxBytesError
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		return bodyTooLarge(limit)
	case errors.Is(err, io.EOF):
		return badRequest("malformed_json", "the request body is empty: send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed_json", "the request body ends before its JSON value does (cut short?)")
	case errors.As(err, &syntax):
		return badRequest("malformed_json", "the request body is not valid JSON: %s (at byte %d)", syntax.Error(), syntax.Offset)
	case errors.As(err, &typeErr):
		return typeError(typeErr)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("malformed_json", "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	// What is left comes from the API's own decoders (headers), whose
	// messages are its own, or from reading the body.
	return badRequest("malformed_json", "%s", strings.TrimPrefix(err.Error(), "json: "))
}

// typeError says which field has a value of the wrong type and what it
// should be. A number too large for its field, or a fraction, is a bad
// value rather than bad JSON: it answers the field's own code, as a
// negative one does (outOfRangeCodes).
func typeError(e *json.UnmarshalTypeError) *apiError {
	var path []string
	// Field is the path of JSON names from the root, with the Go names
	// of embedded structs among them (produceRecord): the API's JSON
	// names are lower snake case, Go's have capitals.
	for _, f := range strings.Split(e.Field, ".") {
		if f != "" && strings.ToLower(f) == f {
			path = append(path, f)
		}
	}
	field := strings.Join(path, ".")
	t := e.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	got := map[string]string{"string": "a string", "number": "a number", "object": "an object", "array": "a list", "bool": "a boolean"}[e.Value]
	if got == "" {
		got = strings.TrimPrefix(e.Value, "number ")
	}
	if field == "" {
		return badRequest("malformed_json", "the request body must be a JSON object, not %s", got)
	}
	var want string
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		want = "an integer"
		if strings.HasPrefix(e.Value, "number") {
			// Partitions, offsets and timestamps are never negative.
			code, lowest := "malformed_json", -(int64(1) << (t.Bits() - 1))
			if c, ok := outOfRangeCodes[path[len(path)-1]]; ok {
				code, lowest = c, 0
			}
			return badRequest(code, "field %q must be an integer from %d to %d, not %s", field,
				lowest, int64(uint64(1)<<(t.Bits()-1)-1), got)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "an integer, 0 or more"
	case reflect.Float32, reflect.Float64:
		want = "a number"
	case reflect.String:
		want = "a string"
	case reflect.Bool:
		want = "true or false"
	case reflect.Slice, reflect.Array:
		want = "a list"
	default:
		want = "an object"
	}
	return badRequest("malformed_json", "field %q must be %s, not %s", field, want, got)
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
	case errors.As(err, &ke) && ke.Retriable, errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, kgo.ErrRecordRetries),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// Not enough in-sync replicas, no leader, timeouts, a
		// connection lost: try again.
		return unavailable(err)
	}
	return &apiError{status: http.StatusInternalServerError, code: "internal", msg: errText(err)}
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
	if ae.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(ae.retryAfter.Seconds()))))
	}
	writeJSON(w, ae.status, errorBody{Error: ae.code, Message: ae.msg})
}
