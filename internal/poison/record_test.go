package poison

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Names Kafka allows in a group id (almost anything) and in a topic
// (letters, digits, '.', '_', '-') that a separator-based key would
// confuse: each pair of inputs below must encode to two different keys,
// and each key must decode to its input.
func TestKeyEncodingTrickyNames(t *testing.T) {
	longGroup := strings.Repeat("g", maxGroupBytes)
	longTopic := strings.Repeat("t", 249)
	keys := []recordKey{
		policyKey("a", "b.c"),
		policyKey("a.b", "c"), // "a.b" + "." + "c" under a '.' separator
		policyKey("a\x00b", "c"),
		policyKey("a", "b"),
		policyKey("a\x00", "b"),
		policyKey("a/b:c|d", "t"),
		policyKey("\x00\x01\x00\x01t", "t"), // looks like a length prefix
		policyKey("\xff\xfe not UTF-8", "t"),
		policyKey("grüße 🎉", "t"),
		policyKey(" ", "t"), // groups are not trimmed
		policyKey(longGroup, longTopic),
		pauseKey("a", "b", 0),
		pauseKey("a", "b", 1),
		pauseKey("a", "b", 1<<31-1),
		pauseKey("a.b", "c", 0),
		pauseKey(longGroup, longTopic, 7),
	}
	seen := map[string]recordKey{}
	for _, k := range keys {
		b := k.encode()
		if other, dup := seen[string(b)]; dup {
			t.Fatalf("%+v and %+v share the key %x", k, other, b)
		}
		seen[string(b)] = k
		got, err := decodeKey(b)
		if err != nil {
			t.Fatalf("decodeKey(%+v's key): %v", k, err)
		}
		if got != k {
			t.Fatalf("decodeKey(%+v's key) = %+v", k, got)
		}
	}
	// The kind byte, not the length, tells a policy from a pause: a
	// reader that looked at the length alone would take a policy key
	// with four trailing bytes for a pause.
	if policyKey("a", "b").encode()[1] == pauseKey("a", "b", 0).encode()[1] {
		t.Fatal("a policy key and a pause key have the same kind byte")
	}
}

// The layout the package doc draws, pinned byte for byte: another
// version of Fjord reads what this one wrote.
func TestKeyLayout(t *testing.T) {
	for _, c := range []struct {
		key  recordKey
		want []byte
	}{
		{policyKey("g1", "t1"), []byte{1, 1, 0, 2, 'g', '1', 0, 2, 't', '1'}},
		{pauseKey("g", "t", 258), []byte{1, 2, 0, 1, 'g', 0, 1, 't', 0, 0, 1, 2}},
	} {
		if got := c.key.encode(); !bytes.Equal(got, c.want) {
			t.Errorf("%+v: key %v, want %v", c.key, got, c.want)
		}
	}
}

// Keys that are not exactly what encode writes for a valid (group,
// topic[, partition]) are refused, each for its own reason.
func TestDecodeKeyRefuses(t *testing.T) {
	valid := policyKey("g", "t").encode()
	for _, c := range []struct {
		name string
		key  []byte
		want string
	}{
		{"nil", nil, "key of 0 bytes"},
		{"version only", []byte{1}, "key of 1 bytes"},
		{"unknown version", []byte{2, 1, 0, 1, 'g', 0, 1, 't'}, "key version 2"},
		{"version zero", []byte{0, 1, 0, 1, 'g', 0, 1, 't'}, "key version 0"},
		{"unknown kind", []byte{1, 3, 0, 1, 'g', 0, 1, 't'}, "key kind 3"},
		{"empty group", []byte{1, 1, 0, 0, 0, 1, 't'}, "the group is empty"},
		{"empty topic", []byte{1, 1, 0, 1, 'g', 0, 0}, "topic name is empty"},
		{"topic with a separator", []byte{1, 1, 0, 1, 'g', 0, 3, 'a', 0, 'b'}, "topic name"},
		{"topic dot", []byte{1, 1, 0, 1, 'g', 0, 1, '.'}, "not allowed"},
		{"group cut short", []byte{1, 1, 0, 5, 'g'}, "group is cut short"},
		{"no topic", []byte{1, 1, 0, 1, 'g'}, "topic is cut short"},
		{"topic cut short", []byte{1, 1, 0, 1, 'g', 0, 9, 't'}, "topic is cut short"},
		{"trailing byte", append(append([]byte{}, valid...), 0), "1 bytes after the key"},
		{"policy with a partition", append(append([]byte{}, valid...), 0, 0, 0, 1), "4 bytes after the key"},
		{"pause without partition", []byte{1, 2, 0, 1, 'g', 0, 1, 't'}, "partition is cut short"},
		{"pause partition cut short", []byte{1, 2, 0, 1, 'g', 0, 1, 't', 0, 0}, "partition is cut short"},
		{"negative partition", []byte{1, 2, 0, 1, 'g', 0, 1, 't', 0xff, 0xff, 0xff, 0xff}, "partition -1 is negative"},
		{"group over a Kafka string", append(append([]byte{1, 1, 0x80, 0x00}, make([]byte, 1<<15)...), 0, 1, 't'), "bytes long"},
		{"over the size bound", make([]byte, maxKeyBytes+1), "at most"},
	} {
		_, err := decodeKey(c.key)
		if !errors.Is(err, errRecord) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: decodeKey = %v, want errRecord saying %q", c.name, err, c.want)
		}
	}
}

// FuzzDecodeKey: whatever the bytes, decodeKey never panics, and a key it
// accepts is exactly what encode writes for the result (so one key means
// one (kind, group, topic, partition), and re-decoding is stable). The
// longest key (a 32767-byte group) is TestKeyEncodingTrickyNames's: as a
// seed it slows the fuzzer seventy times, so the long seed here has the
// longest topic and a group past 255 bytes (a one-byte length would
// break on it).
func FuzzDecodeKey(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add(policyKey("g", "t").encode())
	f.Add(pauseKey("g\x00", "t.t", 3).encode())
	f.Add(pauseKey(strings.Repeat("g", 300), strings.Repeat("t", 249), 1<<31-1).encode())
	f.Add(append(policyKey("g", "t").encode(), "garbage"...))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := decodeKey(b)
		if err != nil {
			if !errors.Is(err, errRecord) {
				t.Fatalf("error %v does not wrap errRecord", err)
			}
			return
		}
		if again := k.encode(); !bytes.Equal(again, b) {
			t.Fatalf("decoded %+v from %x, which encodes to %x", k, b, again)
		}
	})
}

// Values that do not decode to a valid policy or pause are refused; the
// ones a Store writes decode to what was written.
func TestDecodeValue(t *testing.T) {
	pk := policyKey("g", "orders")
	p := Policy{Group: "g", Topic: "orders", Action: ActionDLQ, MaxAttempts: 3, DLQTopic: "quarantine"}
	if got, err := decodePolicy(pk, encodePolicy(p)); err != nil || got != p {
		t.Fatalf("policy round trip: %+v, %v", got, err)
	}
	if got := string(encodePolicy(p)); got != `{"version":1,"action":"dlq","max_attempts":3,"dlq_topic":"quarantine"}` {
		t.Fatalf("policy value %s", got)
	}
	qk := pauseKey("g", "orders", 4)
	at := time.UnixMilli(1_700_000_000_123)
	q := Pause{Group: "g", Topic: "orders", Partition: 4, Offset: 42, Reason: "boom", Attempts: 5, At: at}
	if got, err := decodePause(qk, encodePause(q)); err != nil || got != q {
		t.Fatalf("pause round trip: %+v, %v", got, err)
	}
	if got := string(encodePause(q)); got != `{"version":1,"offset":42,"reason":"boom","attempts":5,"at_ms":1700000000123}` {
		t.Fatalf("pause value %s", got)
	}
	q.Skip = true
	if got, err := decodePause(qk, encodePause(q)); err != nil || got != q {
		t.Fatalf("skipped pause round trip: %+v, %v", got, err)
	}
	for _, c := range []struct {
		name  string
		pause bool
		value string
		want  string
	}{
		{"not JSON", false, `not json`, "value:"},
		{"empty", false, ``, "value:"},
		{"JSON null", false, `null`, "value version 0"},
		{"no version", false, `{"action":"pause","max_attempts":1}`, "value version 0"},
		{"newer version", false, `{"version":2,"action":"pause","max_attempts":1}`, "value version 2"},
		{"unknown action", false, `{"version":1,"action":"drop","max_attempts":1}`, `action "drop" is unknown`},
		{"zero attempts", false, `{"version":1,"action":"pause","max_attempts":0}`, "max attempts is 0"},
		{"attempts past int32", false, `{"version":1,"action":"pause","max_attempts":4294967296}`, "value:"},
		{"DLQ the source", false, `{"version":1,"action":"dlq","max_attempts":1,"dlq_topic":"orders"}`, "is the source topic"},
		{"wrong type", false, `{"version":"1"}`, "value:"},
		{"too large", false, `{"version":1,"action":"pause","max_attempts":1,"x":"` + strings.Repeat("x", maxValueBytes) + `"}`, "at most"},
		{"negative offset", true, `{"version":1,"offset":-1}`, "offset -1 is negative"},
		{"negative attempts", true, `{"version":1,"offset":0,"attempts":-2}`, "attempts -2 is negative"},
		{"reason too long", true, `{"version":1,"offset":0,"reason":"` + strings.Repeat("r", MaxReasonBytes+1) + `"}`, "pause reason"},
	} {
		var err error
		if c.pause {
			_, err = decodePause(qk, []byte(c.value))
		} else {
			_, err = decodePolicy(pk, []byte(c.value))
		}
		if !errors.Is(err, errRecord) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want errRecord saying %q", c.name, err, c.want)
		}
	}
}

// FuzzDecodeValue: whatever the bytes, decoding a value never panics; a
// policy it accepts is valid and encodes to a value that decodes to it
// again, and a pause it accepts is already normalized.
func FuzzDecodeValue(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte(`{"version":1,"action":"pause","max_attempts":3}`))
	f.Add([]byte(`{"version":1,"action":"dlq","max_attempts":1000,"dlq_topic":"x"}`))
	f.Add([]byte(`{"version":1,"offset":9,"reason":"\u00ff\ud800","attempts":1,"at_ms":-5}`))
	f.Add([]byte(`{"version":1,"action":"pause","max_attempts":3}garbage`))
	pk, qk := policyKey("g", "orders"), pauseKey("g", "orders", 0)
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecoded(t, "policy", b, func(b []byte) (Policy, error) { return decodePolicy(pk, b) }, encodePolicy, Policy.Validate)
		checkDecoded(t, "pause", b, func(b []byte) (Pause, error) { return decodePause(qk, b) }, encodePause, func(q Pause) error {
			if n := q.normalized(); n != q {
				return fmt.Errorf("not normalized (%+v)", n)
			}
			return q.validate()
		})
	})
}

// checkDecoded holds FuzzDecodeValue's invariants for one kind of value:
// an error wraps errRecord; a value decoded is valid, and encodes to one
// that decodes to it again.
func checkDecoded[T comparable](t *testing.T, kind string, b []byte, decode func([]byte) (T, error), encode func(T) []byte, valid func(T) error) {
	t.Helper()
	v, err := decode(b)
	if err != nil {
		if !errors.Is(err, errRecord) {
			t.Fatalf("%s error %v does not wrap errRecord", kind, err)
		}
		return
	}
	if err := valid(v); err != nil {
		t.Fatalf("decoded an invalid %s %+v: %v", kind, v, err)
	}
	if again, err := decode(encode(v)); err != nil || again != v {
		t.Fatalf("%s %+v re-decodes to %+v, %v", kind, v, again, err)
	}
}

// A reason is kept as valid UTF-8 of at most MaxReasonBytes, never cut
// inside a character.
func TestPauseReasonNormalized(t *testing.T) {
	for _, c := range []struct {
		name, reason string
		wantLen      int
	}{
		{"short", "boom", 4},
		{"exactly the bound", strings.Repeat("r", MaxReasonBytes), MaxReasonBytes},
		{"over the bound", strings.Repeat("r", 5000), MaxReasonBytes},
		// 1023 ASCII bytes then a 4-byte character: cut before it.
		{"character across the bound", strings.Repeat("r", MaxReasonBytes-1) + "🎉", MaxReasonBytes - 1},
		{"invalid UTF-8", "bad \xff byte", len("bad \uFFFD byte")},
	} {
		got := Pause{Reason: c.reason}.normalized().Reason
		if len(got) != c.wantLen || !utf8.ValidString(got) || !strings.HasPrefix(c.reason, got[:min(len(got), 4)]) {
			t.Errorf("%s: reason of %d bytes (valid UTF-8 %v), want %d", c.name, len(got), utf8.ValidString(got), c.wantLen)
		}
	}
}
