package fjordmsg

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Keyed topics (DESIGN.md section 24): adding partitions to a topic
// moves its keys (murmur2 modulo the count), so Fjord remembers which
// topics have keyed records (metadata.TopicKeyedRecord) and its CLI asks
// CreatePartitions to refuse on them. Two pieces of wire travel for it:
//
//   - MarkTopicKeyedRequest, sent by the node leading a partition that
//     appended its first keyed record, to the active controller;
//   - RefuseKeyedTag, a tagged field of Fjord's on a CreatePartitions
//     request's topic entry (flexible versions, v2+), sent by `fjord topic
//     alter --partitions` unless --allow-key-remap.

// MarkTopicKeyedRequest asks the active controller to commit that a
// topic has keyed records. Only Fjord nodes send it (their internal
// client ids); the controller answers nil for a topic marked already, so
// a repeat is harmless.
type MarkTopicKeyedRequest struct {
	Version int16
	TopicID [16]byte
}

// MarkTopicKeyedResponse answers MarkTopicKeyedRequest. ErrorCode is
// NOT_CONTROLLER from a node that is not the active controller (the
// sender looks for it again), UNKNOWN_TOPIC_ID for an id no live topic
// has, CLUSTER_AUTHORIZATION_FAILED for a sender that is not a Fjord
// node. MetadataOffset is, on success, the offset of an image that
// includes the mark, for the sender to wait for (read your writes, as
// controlplane.MetadataOffsetTag gives the Kafka APIs); 0 otherwise.
type MarkTopicKeyedResponse struct {
	Version        int16
	ErrorCode      int16
	ErrorMessage   *string
	MetadataOffset int64
}

func (*MarkTopicKeyedRequest) Key() int16           { return MarkTopicKeyedKey }
func (*MarkTopicKeyedRequest) MaxVersion() int16    { return 0 }
func (r *MarkTopicKeyedRequest) SetVersion(v int16) { r.Version = v }
func (r *MarkTopicKeyedRequest) GetVersion() int16  { return r.Version }
func (*MarkTopicKeyedRequest) IsFlexible() bool     { return false }
func (r *MarkTopicKeyedRequest) ResponseKind() kmsg.Response {
	return &MarkTopicKeyedResponse{Version: r.Version}
}

func (r *MarkTopicKeyedRequest) AppendTo(dst []byte) []byte {
	return kbin.AppendUuid(dst, r.TopicID)
}

func (r *MarkTopicKeyedRequest) ReadFrom(src []byte) error {
	rd := reader{Reader: kbin.Reader{Src: src}}
	r.TopicID = rd.Uuid()
	return rd.done("MarkTopicKeyed request")
}

func (*MarkTopicKeyedResponse) Key() int16           { return MarkTopicKeyedKey }
func (*MarkTopicKeyedResponse) MaxVersion() int16    { return 0 }
func (r *MarkTopicKeyedResponse) SetVersion(v int16) { r.Version = v }
func (r *MarkTopicKeyedResponse) GetVersion() int16  { return r.Version }
func (*MarkTopicKeyedResponse) IsFlexible() bool     { return false }
func (r *MarkTopicKeyedResponse) RequestKind() kmsg.Request {
	return &MarkTopicKeyedRequest{Version: r.Version}
}

func (r *MarkTopicKeyedResponse) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, r.ErrorCode)
	dst = kbin.AppendNullableString(dst, r.ErrorMessage)
	return kbin.AppendInt64(dst, r.MetadataOffset)
}

func (r *MarkTopicKeyedResponse) ReadFrom(src []byte) error {
	rd := reader{Reader: kbin.Reader{Src: src}}
	*r = MarkTopicKeyedResponse{Version: r.Version, ErrorCode: rd.Int16()}
	// kbin reads every negative length as null, which would encode back
	// as -1: only -1 is null (a fuzz-found case, testdata/fuzz).
	if len(rd.Src) >= 2 {
		if n := int16(binary.BigEndian.Uint16(rd.Src)); n < -1 {
			return fmt.Errorf("%w: MarkTopicKeyed response: error message length %d", ErrMalformed, n)
		}
	}
	r.ErrorMessage = rd.NullableString()
	r.MetadataOffset = rd.Int64()
	return rd.done("MarkTopicKeyed response")
}

// RefuseKeyedTag is Fjord's tagged field on a CreatePartitions request's
// topic entry (kmsg.CreatePartitionsRequestTopic.UnknownTags): with the
// value RefuseKeyed, a Fjord node answers that topic INVALID_PARTITIONS,
// nothing changed, when its image says the topic has keyed records.
// Without it a Fjord node grows the topic as Kafka does. The number is
// far above the tags Kafka's schemas use (0 to a few) and apart from
// controlplane.MetadataOffsetTag. A Kafka broker skips the tag, as it
// skips every tag it does not know, and grows the topic.
const RefuseKeyedTag uint32 = 10000

// RefuseKeyed is RefuseKeyedTag's one-byte value: refuse if the topic
// has keyed records. Every other value is reserved and refused
// (INVALID_REQUEST), so a later meaning cannot be taken for this one by
// a node that does not know it.
const RefuseKeyed byte = 1

// The same tag, with the same value, on the response's topic entry
// (kmsg.CreatePartitionsResponseTopic.UnknownTags) says that the topic
// was refused because it has keyed records, so the CLI tells that
// INVALID_PARTITIONS from the others (a count too large) without reading
// the message.

// SetRefuseKeyed asks, on t, that the topic be refused if it has keyed
// records.
func SetRefuseKeyed(t *kmsg.CreatePartitionsRequestTopic) {
	t.UnknownTags.Set(RefuseKeyedTag, []byte{RefuseKeyed})
}

// RefuseKeyedAsked reads RefuseKeyedTag from t: whether the sender asked
// for the refusal, or an error (wrapping ErrMalformed) for a value that
// is not exactly the one byte RefuseKeyed.
func RefuseKeyedAsked(t *kmsg.CreatePartitionsRequestTopic) (bool, error) {
	var asked bool
	var err error
	t.UnknownTags.Each(func(key uint32, val []byte) {
		if key != RefuseKeyedTag {
			return
		}
		if len(val) != 1 || val[0] != RefuseKeyed {
			shown := val[:min(len(val), 8)] // a hostile value may be long
			err = fmt.Errorf("%w: Fjord's CreatePartitions tag %d (refuse if the topic has keyed records) holds %d bytes (%x), want the one byte %02x",
				ErrMalformed, RefuseKeyedTag, len(val), shown, RefuseKeyed)
			return
		}
		asked = true
	})
	return asked && err == nil, err
}

// SetRefusedKeyed marks t, a CreatePartitions answer, as refused because
// its topic has keyed records.
func SetRefusedKeyed(t *kmsg.CreatePartitionsResponseTopic) {
	t.UnknownTags.Set(RefuseKeyedTag, []byte{RefuseKeyed})
}

// RefusedKeyed reports whether t, a CreatePartitions answer, says its
// topic was refused because it has keyed records.
func RefusedKeyed(t *kmsg.CreatePartitionsResponseTopic) bool {
	refused := false
	t.UnknownTags.Each(func(key uint32, val []byte) {
		refused = refused || key == RefuseKeyedTag && len(val) == 1 && val[0] == RefuseKeyed
	})
	return refused
}

// ErrKeyedTopic: a Fjord node refused to grow a topic because it has
// keyed records (RefusedKeyed on its answer).
var ErrKeyedTopic = errors.New("topic has keyed records")

// GrowPartitions grows topic to count partitions with CreatePartitions
// (timeout bounds the node's wait for the commit), built here rather
// than through kadm.UpdatePartitions, which cannot carry tagged fields:
// unless allowKeyRemap, the topic's entry carries RefuseKeyedTag, and a
// Fjord node that knows the topic has keyed records refuses
// (ErrKeyedTopic, nothing changed). franz-go sends v3, flexible, which
// every Fjord node serves; a Kafka broker skips the tag and grows the
// topic. Another refusal is its kerr error, and the node's message.
// Fjord's CLI (`topic alter`) and the HTTP API (PATCH of a topic) grow
// topics through it.
func GrowPartitions(ctx context.Context, cl *kgo.Client, topic string, count int32, timeout time.Duration, allowKeyRemap, validateOnly bool) (message string, err error) {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = int32(timeout.Milliseconds())
	req.ValidateOnly = validateOnly
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, count
	if !allowKeyRemap {
		SetRefuseKeyed(&rt)
	}
	req.Topics = []kmsg.CreatePartitionsRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "", err
	}
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != topic {
		return "", fmt.Errorf("the node answered %d topics for %q", len(resp.Topics), topic)
	}
	t := &resp.Topics[0]
	if t.ErrorMessage != nil {
		message = *t.ErrorMessage
	}
	if RefusedKeyed(t) {
		return message, ErrKeyedTopic
	}
	return message, kerr.ErrorForCode(t.ErrorCode)
}
