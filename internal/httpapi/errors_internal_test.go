package httpapi

import (
	"context"
	"fmt"
	"io"
	"testing"
)

// Errors from the network reach a client said in the API's words, never
// as a bare "EOF" (issue 12), with what wrapped them kept.
func TestErrText(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		msg    string
	}{
		{io.EOF, 503, "the connection to the cluster closed before it answered"},
		{io.ErrUnexpectedEOF, 503, "the connection to the cluster closed before it answered"},
		{fmt.Errorf("idempotency keys are unavailable: %w", io.EOF), 503,
			"the connection to the cluster closed before it answered (idempotency keys are unavailable: EOF)"},
		{context.DeadlineExceeded, 503, "the cluster did not answer in time"},
		{context.Canceled, 500, "the request was canceled"},
		{fmt.Errorf("dial tcp: refused"), 500, "dial tcp: refused"},
	} {
		ae := kafkaError(tc.err)
		if ae.status != tc.status || ae.msg != tc.msg {
			t.Errorf("%v: %d %q, want %d %q", tc.err, ae.status, ae.msg, tc.status, tc.msg)
		}
		if u := unavailable(tc.err); u.msg != tc.msg {
			t.Errorf("unavailable(%v): %q, want %q", tc.err, u.msg, tc.msg)
		}
	}
}
