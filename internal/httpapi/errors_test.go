package httpapi_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/node"
)

// goInternals matches what an answer must never show a client: the
// decoder's own wording, Go type and package names, and an EOF with
// nothing said of it.
var goInternals = regexp.MustCompile(`Go struct|Go value|json:|reflect|httpapi\.|kgo\.|kmsg\.|produceRequest|produceRecord|headerJSON|produceHeaders|` +
	`\b(u?int(8|16|32|64)|float(32|64)|map\[|\[\]byte|\*string)\b|^(unexpected )?EOF$|: (unexpected )?EOF$`)

// Regression (issue 12): an empty or truncated body was answered "EOF"
// or "unexpected EOF", a wrong type "json: cannot unmarshal string into
// Go struct field produceRequest.produceRecord.partition of type int32".
// Every produce-side answer says what is wrong in the API's words.
func TestErrorsSayNoGoInternals(t *testing.T) {
	e := newEnvHTTP(t, false, node.HTTPConfig{MaxBodyBytes: 4096})
	e.createTopic("t", 2)
	const produce = "/v1/topics/t/produce"
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, want               string // want: a part of the message
	}{
		{"empty body", "POST", produce, ``, 400, "malformed_json", "request body is empty"},
		{"blank body", "POST", produce, "  \n", 400, "malformed_json", "request body is empty"},
		{"truncated", "POST", produce, `{"value": "YQ=="`, 400, "malformed_json", "ends before"},
		{"truncated string", "POST", produce, `{"value": "YQ`, 400, "malformed_json", "ends before"},
		{"truncated batch", "POST", produce, `{"records": [{"value": "YQ=="},`, 400, "malformed_json", "ends before"},
		{"not JSON", "POST", produce, `value=YQ==`, 400, "malformed_json", "not valid JSON"},
		{"bad character", "POST", produce, `{"value": 'YQ=='}`, 400, "malformed_json", "not valid JSON"},
		{"trailing garbage", "POST", produce, `{"value": "YQ=="} x`, 400, "malformed_json", "more than one JSON value"},
		{"a string", "POST", produce, `"YQ=="`, 400, "malformed_json", "must be a JSON object"},
		{"a list", "POST", produce, `[{"value": "YQ=="}]`, 400, "malformed_json", "must be a JSON object"},
		{"null", "POST", produce, `null`, 400, "malformed_request", "no record"},
		{"unknown field", "POST", produce, `{"valu": "YQ=="}`, 400, "malformed_json", `unknown field "valu"`},
		{"unknown field in a batch", "POST", produce, `{"records": [{"value": "YQ==", "x": 1}]}`, 400, "malformed_json", `unknown field "x"`},
		{"partition a string", "POST", produce, `{"value": "YQ==", "partition": "1"}`, 400, "malformed_json", `field "partition" must be an integer`},
		{"partition a fraction", "POST", produce, `{"value": "YQ==", "partition": 1.5}`, 400, "bad_partition", `field "partition" must be an integer`},
		{"partition too large", "POST", produce, `{"value": "YQ==", "partition": 99999999999}`, 400, "bad_partition", `field "partition" must be an integer from`},
		{"partition a bool", "POST", produce, `{"value": "YQ==", "partition": true}`, 400, "malformed_json", `field "partition" must be an integer`},
		{"value a number", "POST", produce, `{"value": 7}`, 400, "malformed_json", `field "value" must be a string`},
		{"value an object", "POST", produce, `{"value": {}}`, 400, "malformed_json", `field "value" must be a string`},
		{"key a number", "POST", produce, `{"key": 7, "value": "YQ=="}`, 400, "malformed_json", `field "key" must be a string`},
		{"key_b64 a list", "POST", produce, `{"key_b64": [], "value": "YQ=="}`, 400, "malformed_json", `field "key_b64" must be a string`},
		{"acks a number", "POST", produce, `{"value": "YQ==", "acks": 1}`, 400, "malformed_json", `field "acks" must be a string`},
		{"records an object", "POST", produce, `{"records": {"value": "YQ=="}}`, 400, "malformed_json", `field "records" must be a list`},
		{"record a string", "POST", produce, `{"records": ["YQ=="]}`, 400, "malformed_json", `must be an object`},
		{"record value a number", "POST", produce, `{"records": [{"value": 1}]}`, 400, "malformed_json", `field "records.value" must be a string`},
		{"headers a string", "POST", produce, `{"value": "YQ==", "headers": "h"}`, 400, "malformed_json", `"headers" is an object`},
		{"header value a number", "POST", produce, `{"value": "YQ==", "headers": {"h": 1}}`, 400, "malformed_json", `"headers" is an object`},
		{"idempotency key a number", "POST", produce, `{"value": "YQ==", "idempotency_key": 5}`, 400, "malformed_json", `field "idempotency_key" must be a string`},
		{"bad base64", "POST", produce, `{"value": "%%%"}`, 400, "bad_base64", "value"},
		{"oversized", "POST", produce, `{"value": "` + strings.Repeat("A", 8192) + `"}`, 413, "body_too_large", "4096 bytes"},
		{"oversized garbage", "POST", produce, strings.Repeat("[", 8192), 413, "body_too_large", "4096 bytes"},
		{"deep nesting", "POST", produce, `{"value": "YQ==", "headers": ` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`, 400, "malformed_json", ""},
		{"records: bad partition", "GET", "/v1/topics/t/partitions/x/records", "", 400, "bad_partition", "partition"},
		{"records: bad offset", "GET", "/v1/topics/t/partitions/0/records?offset=x", "", 400, "bad_offset", "offset"},
		{"records: bad max_bytes", "GET", "/v1/topics/t/partitions/0/records?max_bytes=-1", "", 400, "bad_max_bytes", "max_bytes"},
		{"records: bad timeout", "GET", "/v1/topics/t/partitions/0/records?timeout_ms=1.5", "", 400, "bad_timeout", "timeout_ms"},
		{"records: unknown topic", "GET", "/v1/topics/nope/partitions/0/records", "", 404, "unknown_topic", "nope"},
		{"wrong method", "DELETE", produce, "", 405, "method_not_allowed", "allowed: POST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var raw json.RawMessage
			st := e.do(tc.method, tc.path, tc.body, &raw)
			var res result
			if err := json.Unmarshal(raw, &res); err != nil {
				t.Fatal(err)
			}
			if st != tc.status || res.Error != tc.code || !strings.Contains(res.Message, tc.want) || res.Message == "" {
				t.Errorf("%d %s, want %d %s saying %q", st, raw, tc.status, tc.code, tc.want)
			}
			if m := goInternals.FindString(res.Message); m != "" {
				t.Errorf("the answer shows %q: %s", m, raw)
			}
		})
	}
}
