package fjordmsg

import (
	"errors"
	"reflect"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kversion"
)

func sampleReportOfflineReplicas() (*ReportOfflineReplicasRequest, *ReportOfflineReplicasResponse, *ReportOfflineReplicasResponse) {
	msg := "broker 2 reports offline replicas at epoch 9, its registration's is 12"
	return &ReportOfflineReplicasRequest{BrokerID: 2, BrokerEpoch: 1 << 33, Topics: []ReportOfflineReplicasTopic{
			{TopicID: [16]byte{1, 2, 3}, Partitions: []int32{0, 7, 1 << 20}},
			{TopicID: [16]byte{9}, Partitions: []int32{}},
		}},
		&ReportOfflineReplicasResponse{MetadataOffset: 1 << 40},
		&ReportOfflineReplicasResponse{ErrorCode: 77, ErrorMessage: &msg}
}

// The messages round-trip and refuse every prefix and a byte too many
// (as TestRoundTripAndTruncation does for the others); a body far longer
// than a message is refused; an array length that is negative, or far
// larger than the bytes that follow, is refused without allocating for
// it.
func TestReportOfflineReplicasMessages(t *testing.T) {
	req, ok, failed := sampleReportOfflineReplicas()
	for _, m := range []interface {
		AppendTo([]byte) []byte
		ReadFrom([]byte) error
	}{req, ok, failed} {
		b := m.AppendTo(nil)
		got := reflect.New(reflect.TypeOf(m).Elem()).Interface().(interface {
			AppendTo([]byte) []byte
			ReadFrom([]byte) error
		})
		if err := got.ReadFrom(b); err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("%T: decoded %+v, %v; want %+v", m, got, err, m)
		}
		for n := range len(b) {
			if err := got.ReadFrom(b[:n]); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%T: %d of %d bytes: %v, want ErrMalformed", m, n, len(b), err)
			}
		}
		for _, extra := range [][]byte{{0}, make([]byte, 1<<16)} {
			if err := got.ReadFrom(append(b, extra...)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%T: %d bytes left over: %v, want ErrMalformed", m, len(extra), err)
			}
		}
	}

	head := kbin.AppendInt64(kbin.AppendInt32(nil, 2), 9)
	for name, body := range map[string][]byte{
		"negative topics":           kbin.AppendArrayLen(head, -1),
		"negative partitions":       kbin.AppendArrayLen(kbin.AppendUuid(kbin.AppendArrayLen(head, 1), [16]byte{1}), -5),
		"2^31-1 topics, none there": kbin.AppendArrayLen(head, 1<<31-1),
		"2^31-1 partitions, one there": kbin.AppendInt32(kbin.AppendArrayLen(
			kbin.AppendUuid(kbin.AppendArrayLen(head, 1), [16]byte{1}), 1<<31-1), 4),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := new(ReportOfflineReplicasRequest).ReadFrom(body)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
			t.Errorf("%s: %d bytes allocated to refuse it", name, n)
		}
	}
}

// The key resolves to Fjord's message, which clients built with
// WithFjordKeys may send and Kafka clients are never shown.
func TestReportOfflineReplicasKey(t *testing.T) {
	if _, ok := RequestForKey(ReportOfflineReplicasKey).(*ReportOfflineReplicasRequest); !ok {
		t.Errorf("RequestForKey(%d) is not ReportOfflineReplicas", ReportOfflineReplicasKey)
	}
	if NameForKey(ReportOfflineReplicasKey) != "FjordReportOfflineReplicas" || !IsFjordKey(ReportOfflineReplicasKey) {
		t.Errorf("name %q, IsFjordKey %v", NameForKey(ReportOfflineReplicasKey), IsFjordKey(ReportOfflineReplicasKey))
	}
	if max, ok := WithFjordKeys(kversion.Stable()).LookupMaxKeyVersion(ReportOfflineReplicasKey); !ok || max != 0 {
		t.Errorf("WithFjordKeys: ReportOfflineReplicas v%d %v", max, ok)
	}
	if _, ok := new(ReportOfflineReplicasRequest).ResponseKind().(*ReportOfflineReplicasResponse); !ok {
		t.Error("ResponseKind")
	}
	if _, ok := new(ReportOfflineReplicasResponse).RequestKind().(*ReportOfflineReplicasRequest); !ok {
		t.Error("RequestKind")
	}
}

// FuzzReportOfflineReplicas: hostile bytes never panic either message's
// decoder; what decodes encodes back to the same bytes, so a decoded
// message used every byte and nothing was invented. Seeds: empty, the
// messages, each a byte short and a byte long, and huge array lengths.
func FuzzReportOfflineReplicas(f *testing.F) {
	req, ok, failed := sampleReportOfflineReplicas()
	f.Add([]byte{}, false)
	for _, b := range [][]byte{req.AppendTo(nil)} {
		f.Add(b, false)
		f.Add(b[:len(b)-1], false)
		f.Add(append(b, 0), false)
	}
	f.Add(kbin.AppendArrayLen(kbin.AppendInt64(kbin.AppendInt32(nil, 1), 1), 1<<31-1), false)
	for _, b := range [][]byte{ok.AppendTo(nil), failed.AppendTo(nil)} {
		f.Add(b, true)
		f.Add(append(b, 0), true)
	}
	f.Add([]byte{0, 0, 0x7f, 0xff}, true)
	f.Fuzz(func(t *testing.T, b []byte, isResp bool) {
		var m interface {
			AppendTo([]byte) []byte
			ReadFrom([]byte) error
		} = new(ReportOfflineReplicasRequest)
		if isResp {
			m = new(ReportOfflineReplicasResponse)
		}
		if m.ReadFrom(b) != nil {
			return
		}
		if again := m.AppendTo(nil); string(again) != string(b) {
			t.Fatalf("decoded %x, encoded back %x", b, again)
		}
	})
}
