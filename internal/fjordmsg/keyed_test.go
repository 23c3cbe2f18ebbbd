package fjordmsg

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func sampleMarkTopicKeyed() (*MarkTopicKeyedRequest, *MarkTopicKeyedResponse, *MarkTopicKeyedResponse) {
	msg := "topic id 0102... is not a live topic"
	return &MarkTopicKeyedRequest{TopicID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
		&MarkTopicKeyedResponse{MetadataOffset: 1 << 40},
		&MarkTopicKeyedResponse{ErrorCode: 100, ErrorMessage: &msg}
}

// MarkTopicKeyed's messages round-trip and refuse every prefix in
// TestRoundTripAndTruncation; here, bodies longer than a message, up to
// far longer, are refused too, and a request is the 16 bytes of a topic
// id.
func TestMarkTopicKeyedOversized(t *testing.T) {
	req, ok, failed := sampleMarkTopicKeyed()
	for _, m := range []interface {
		AppendTo([]byte) []byte
		ReadFrom([]byte) error
	}{req, ok, failed} {
		b := m.AppendTo(nil)
		for _, extra := range [][]byte{{0}, make([]byte, 1<<16)} {
			if err := m.ReadFrom(append(b, extra...)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%T: %d bytes left over: %v, want ErrMalformed", m, len(extra), err)
			}
		}
	}
	if len(req.AppendTo(nil)) != 16 {
		t.Fatalf("request body %d bytes, want the 16 of a topic id", len(req.AppendTo(nil)))
	}
}

// The key resolves to Fjord's message; clients built with
// WithFjordKeys may send it; it is one of Fjord's keys, which Kafka
// clients are never shown.
func TestMarkTopicKeyedKey(t *testing.T) {
	if _, ok := RequestForKey(MarkTopicKeyedKey).(*MarkTopicKeyedRequest); !ok {
		t.Errorf("RequestForKey(%d) is not MarkTopicKeyed", MarkTopicKeyedKey)
	}
	if NameForKey(MarkTopicKeyedKey) != "FjordMarkTopicKeyed" || !IsFjordKey(MarkTopicKeyedKey) {
		t.Errorf("name %q, IsFjordKey %v", NameForKey(MarkTopicKeyedKey), IsFjordKey(MarkTopicKeyedKey))
	}
	if max, ok := WithFjordKeys(kversion.Stable()).LookupMaxKeyVersion(MarkTopicKeyedKey); !ok || max != 0 {
		t.Errorf("WithFjordKeys: MarkTopicKeyed v%d %v", max, ok)
	}
	if _, ok := new(MarkTopicKeyedRequest).ResponseKind().(*MarkTopicKeyedResponse); !ok {
		t.Error("ResponseKind")
	}
}

// RefuseKeyedTag travels on CreatePartitions' flexible versions and is
// read back; a wrong length or value is refused, never taken for the
// refusal nor ignored.
func TestRefuseKeyedTag(t *testing.T) {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.SetVersion(3)
	asked := kmsg.NewCreatePartitionsRequestTopic()
	asked.Topic, asked.Count = "keyed", 4
	SetRefuseKeyed(&asked)
	plain := kmsg.NewCreatePartitionsRequestTopic()
	plain.Topic, plain.Count = "plain", 4
	req.Topics = []kmsg.CreatePartitionsRequestTopic{asked, plain}

	back := kmsg.NewPtrCreatePartitionsRequest()
	back.SetVersion(3)
	if err := back.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if got, err := RefuseKeyedAsked(&back.Topics[0]); !got || err != nil {
		t.Fatalf("tagged topic: %v %v", got, err)
	}
	if got, err := RefuseKeyedAsked(&back.Topics[1]); got || err != nil {
		t.Fatalf("untagged topic: %v %v", got, err)
	}
	for _, val := range [][]byte{{}, {0}, {2}, {0xff}, {1, 1}, {1, 0}} {
		bad := kmsg.NewCreatePartitionsRequestTopic()
		bad.UnknownTags.Set(RefuseKeyedTag, val)
		if got, err := RefuseKeyedAsked(&bad); got || !errors.Is(err, ErrMalformed) {
			t.Errorf("value %x: %v %v, want ErrMalformed", val, got, err)
		}
	}
	// The answer's entry carries the refusal the same way.
	resp := kmsg.NewPtrCreatePartitionsResponse()
	resp.SetVersion(3)
	refused := kmsg.NewCreatePartitionsResponseTopic()
	refused.Topic = "keyed"
	SetRefusedKeyed(&refused)
	resp.Topics = []kmsg.CreatePartitionsResponseTopic{refused, kmsg.NewCreatePartitionsResponseTopic()}
	backResp := kmsg.NewPtrCreatePartitionsResponse()
	backResp.SetVersion(3)
	if err := backResp.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if !RefusedKeyed(&backResp.Topics[0]) || RefusedKeyed(&backResp.Topics[1]) {
		t.Fatalf("answer tags: %v %v", RefusedKeyed(&backResp.Topics[0]), RefusedKeyed(&backResp.Topics[1]))
	}
	wrong := kmsg.NewCreatePartitionsResponseTopic()
	wrong.UnknownTags.Set(RefuseKeyedTag, []byte{2})
	if RefusedKeyed(&wrong) {
		t.Fatal("another value read as a refusal")
	}

	other := kmsg.NewCreatePartitionsRequestTopic()
	other.UnknownTags.Set(RefuseKeyedTag+1, []byte{9})
	if got, err := RefuseKeyedAsked(&other); got || err != nil {
		t.Fatalf("another tag: %v %v", got, err)
	}
}

// FuzzMarkTopicKeyed: hostile bytes never panic either message's
// decoder; what decodes encodes back to the same bytes, so a decoded
// message used every byte and nothing was invented. Seeds: empty, one
// byte short of a request, a request, a response with and without a
// message, and each with a byte too many. testdata/fuzz keeps the input
// that found an error message length below -1 read as null (and encoded
// back as -1).
func FuzzMarkTopicKeyed(f *testing.F) {
	req, ok, failed := sampleMarkTopicKeyed()
	f.Add([]byte{}, false)
	f.Add(req.AppendTo(nil)[:15], false)
	f.Add(req.AppendTo(nil), false)
	f.Add(append(req.AppendTo(nil), 0), false)
	f.Add(ok.AppendTo(nil), true)
	f.Add(failed.AppendTo(nil), true)
	f.Add(append(failed.AppendTo(nil), 0), true)
	f.Add([]byte{0, 0, 0x7f, 0xff}, true) // a message length past the end
	f.Fuzz(func(t *testing.T, b []byte, isResp bool) {
		var m interface {
			AppendTo([]byte) []byte
			ReadFrom([]byte) error
		} = new(MarkTopicKeyedRequest)
		if isResp {
			m = new(MarkTopicKeyedResponse)
		}
		if m.ReadFrom(b) != nil {
			return
		}
		if again := m.AppendTo(nil); string(again) != string(b) {
			t.Fatalf("decoded %x, encoded back %x", b, again)
		}
	})
}
