package poison

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
)

// The records of Topic; the package doc draws the format. Decoding never
// panics, whatever the bytes, and parses no key over maxKeyBytes and no
// value over maxValueBytes (FuzzDecodeKey, FuzzDecodeValue).

const (
	keyVersion byte = 1

	kindPolicy byte = 1
	kindPause  byte = 2

	valueVersion = 1

	// maxKeyBytes is the longest key a valid record has: a pause's, with
	// the longest group and topic.
	maxKeyBytes = 1 + 1 + 2 + maxGroupBytes + 2 + metadata.MaxTopicNameLength + 4
	// maxValueBytes bounds a value before it is parsed. The largest valid
	// one is a pause whose 1024-byte reason is all characters JSON
	// escapes as \u00XX (6 bytes each), with room for the other fields.
	maxValueBytes = 16 << 10
	// maxMessageBytes is the topic's max.message.bytes, and its
	// producer's batch size: one largest key and value fit with room to
	// spare, and nothing a writer sends can cost more per batch.
	maxMessageBytes = 64 << 10
)

// errRecord is the cause of every record decoding error, so tests and
// Store.apply tell a bad record from anything else.
var errRecord = errors.New("undecodable record")

// recordKey identifies one policy (kindPolicy) or one pause (kindPause).
// Invariant, for a key that was decoded: group and topic pass validateID,
// partition >= 0, and partition is 0 for a policy.
type recordKey struct {
	kind      byte
	group     string
	topic     string
	partition int32
}

func policyKey(group, topic string) recordKey {
	return recordKey{kind: kindPolicy, group: group, topic: topic}
}

func pauseKey(group, topic string, partition int32) recordKey {
	return recordKey{kind: kindPause, group: group, topic: topic, partition: partition}
}

// encode is k's record key. REQUIRES: validateID(k.group, k.topic) == ""
// (the length prefixes would not hold the lengths otherwise).
func (k recordKey) encode() []byte {
	b := make([]byte, 0, 2+2+len(k.group)+2+len(k.topic)+4)
	b = append(b, keyVersion, k.kind)
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.group)))
	b = append(b, k.group...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.topic)))
	b = append(b, k.topic...)
	if k.kind == kindPause {
		b = binary.BigEndian.AppendUint32(b, uint32(k.partition))
	}
	return b
}

// decodeKey reads a record key. Anything but exactly the bytes encode
// writes for a valid key is an error wrapping errRecord: so a key decodes
// to one recordKey and back to the same bytes.
func decodeKey(b []byte) (recordKey, error) {
	var k recordKey
	if len(b) > maxKeyBytes {
		return k, fmt.Errorf("%w: key of %d bytes (at most %d)", errRecord, len(b), maxKeyBytes)
	}
	if len(b) < 2 {
		return k, fmt.Errorf("%w: key of %d bytes", errRecord, len(b))
	}
	if b[0] != keyVersion {
		return k, fmt.Errorf("%w: key version %d (known: %d)", errRecord, b[0], keyVersion)
	}
	k.kind, b = b[1], b[2:]
	if k.kind != kindPolicy && k.kind != kindPause {
		return k, fmt.Errorf("%w: key kind %d (known: %d policy, %d pause)", errRecord, k.kind, kindPolicy, kindPause)
	}
	var ok bool
	if k.group, b, ok = cutString(b); !ok {
		return k, fmt.Errorf("%w: key's group is cut short", errRecord)
	}
	if k.topic, b, ok = cutString(b); !ok {
		return k, fmt.Errorf("%w: key's topic is cut short", errRecord)
	}
	if problem := validateID(k.group, k.topic); problem != "" {
		return k, fmt.Errorf("%w: key: %s", errRecord, problem)
	}
	if k.kind == kindPause {
		if len(b) < 4 {
			return k, fmt.Errorf("%w: pause key's partition is cut short", errRecord)
		}
		k.partition, b = int32(binary.BigEndian.Uint32(b)), b[4:]
		if k.partition < 0 {
			return k, fmt.Errorf("%w: pause key's partition %d is negative", errRecord, k.partition)
		}
	}
	if len(b) != 0 {
		return k, fmt.Errorf("%w: %d bytes after the key", errRecord, len(b))
	}
	return k, nil
}

// cutString reads a uint16-length-prefixed string off b.
func cutString(b []byte) (s string, rest []byte, ok bool) {
	if len(b) < 2 {
		return "", b, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b)-2 < n {
		return "", b, false
	}
	return string(b[2 : 2+n]), b[2+n:], true
}

// policyValue is a policy's value. The names are the key's.
type policyValue struct {
	Version     int    `json:"version"`
	Action      Action `json:"action"`
	MaxAttempts int32  `json:"max_attempts"`
	DLQTopic    string `json:"dlq_topic,omitempty"`
}

// pauseValue is a pause's value. The names and partition are the key's.
type pauseValue struct {
	Version  int    `json:"version"`
	Offset   int64  `json:"offset"`
	Reason   string `json:"reason"`
	Attempts int32  `json:"attempts"`
	AtMs     int64  `json:"at_ms"`
	Skip     bool   `json:"skip,omitempty"`
}

// encodePolicy is p's value. REQUIRES: p.Validate() == nil.
func encodePolicy(p Policy) []byte {
	return mustJSON(policyValue{Version: valueVersion, Action: p.Action, MaxAttempts: p.MaxAttempts, DLQTopic: p.DLQTopic})
}

// encodePause is p's value. REQUIRES: p is normalized and valid.
func encodePause(p Pause) []byte {
	return mustJSON(pauseValue{Version: valueVersion, Offset: p.Offset, Reason: p.Reason, Attempts: p.Attempts, AtMs: p.At.UnixMilli(), Skip: p.Skip})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Strings and integers only: Marshal cannot fail.
		panic(fmt.Sprintf("poison: encoding %T: %v", v, err))
	}
	return b
}

// decodePolicy reads the value of policy key k. A value that is too
// large, not JSON of the known version, or a policy Validate refuses is
// an error wrapping errRecord.
func decodePolicy(k recordKey, b []byte) (Policy, error) {
	var v policyValue
	if err := decodeValue(b, &v, &v.Version); err != nil {
		return Policy{}, err
	}
	p := Policy{Group: k.group, Topic: k.topic, Action: v.Action, MaxAttempts: v.MaxAttempts, DLQTopic: v.DLQTopic}
	if err := p.Validate(); err != nil {
		return Policy{}, fmt.Errorf("%w: %w", errRecord, err)
	}
	return p, nil
}

// decodePause reads the value of pause key k, as decodePolicy does. A
// reason too long, or not UTF-8, is an error, not cut: it was not
// written by a Store.
func decodePause(k recordKey, b []byte) (Pause, error) {
	var v pauseValue
	if err := decodeValue(b, &v, &v.Version); err != nil {
		return Pause{}, err
	}
	p := Pause{Group: k.group, Topic: k.topic, Partition: k.partition, Offset: v.Offset, Reason: v.Reason, Attempts: v.Attempts, At: time.UnixMilli(v.AtMs), Skip: v.Skip}
	if err := p.validate(); err != nil {
		return Pause{}, fmt.Errorf("%w: %w", errRecord, err)
	}
	if p.normalized().Reason != p.Reason {
		return Pause{}, fmt.Errorf("%w: pause reason of %d bytes, or not UTF-8 (at most %d)", errRecord, len(p.Reason), MaxReasonBytes)
	}
	return p, nil
}

// decodeValue parses b, at most maxValueBytes of JSON, into v, whose
// version field is version.
func decodeValue(b []byte, v any, version *int) error {
	if len(b) > maxValueBytes {
		return fmt.Errorf("%w: value of %d bytes (at most %d)", errRecord, len(b), maxValueBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: value: %v", errRecord, err)
	}
	if *version != valueVersion {
		return fmt.Errorf("%w: value version %d (known: %d)", errRecord, *version, valueVersion)
	}
	return nil
}
