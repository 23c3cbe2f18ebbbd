package fjordmsg

import (
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func samplePositions() (*DescribePositionsRequest, *DescribePositionsResponse) {
	req := &DescribePositionsRequest{Topics: []DescribePositionsTopic{
		{Topic: "a", Partitions: []DescribePositionsPartition{{Partition: 0, Offsets: []int64{0, 7}}, {Partition: 3, Offsets: []int64{}}}},
		{Topic: "b", Partitions: []DescribePositionsPartition{{Partition: 1, Offsets: []int64{1 << 40}}}},
	}}
	resp := &DescribePositionsResponse{Topics: []DescribePositionsResponseTopic{
		{Topic: "a", Partitions: []DescribePositionsResponsePartition{
			{Partition: 0, LogStartOffset: 1, HighWatermark: 9, LastStableOffset: 8,
				Positions: []Position{{Offset: 0, Bytes: 512, Timestamp: 1700000000000, DeleteAt: 1700600000000}, {Offset: 7, Bytes: 64, Timestamp: -1, DeleteAt: -1}}},
			{Partition: 3, ErrorCode: 6, Positions: []Position{}},
		}},
	}}
	return req, resp
}

// Each message decodes to what was encoded, and every shorter prefix of
// its encoding is refused (no partial message is taken for a whole one).
func TestRoundTripAndTruncation(t *testing.T) {
	req, resp := samplePositions()
	markReq, marked, markRefused := sampleMarkTopicKeyed()
	for _, m := range []interface {
		AppendTo([]byte) []byte
		ReadFrom([]byte) error
	}{req, resp, markReq, marked, markRefused} {
		b := m.AppendTo(nil)
		got := reflect.New(reflect.TypeOf(m).Elem()).Interface().(interface {
			AppendTo([]byte) []byte
			ReadFrom([]byte) error
		})
		if err := got.ReadFrom(b); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%T: decoded %+v, want %+v", m, got, m)
		}
		for n := range len(b) {
			if err := got.ReadFrom(b[:n]); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%T: %d of %d bytes: %v, want ErrMalformed", m, n, len(b), err)
			}
		}
		if err := got.ReadFrom(append(b, 0)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%T: a byte left over: %v, want ErrMalformed", m, err)
		}
	}
}

func TestNegativeArrayLength(t *testing.T) {
	b := kbin.AppendString(kbin.AppendArrayLen(nil, 1), "a")
	b = kbin.AppendArrayLen(b, -1)
	if err := new(DescribePositionsRequest).ReadFrom(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("negative partitions length: %v, want ErrMalformed", err)
	}
}

// The keys resolve to Fjord's messages, and Kafka's still to Kafka's.
func TestKeys(t *testing.T) {
	if _, ok := RequestForKey(DescribePositionsKey).(*DescribePositionsRequest); !ok {
		t.Errorf("RequestForKey(%d) is not DescribePositions", DescribePositionsKey)
	}
	if _, ok := RequestForKey(0).(*kmsg.ProduceRequest); !ok {
		t.Errorf("RequestForKey(0) is not Produce")
	}
	if RequestForKey(9999) != nil || NameForKey(9999) != "Unknown" {
		t.Errorf("an unknown key resolves")
	}
	if !IsFjordKey(DescribePositionsKey) || IsFjordKey(0) {
		t.Errorf("IsFjordKey")
	}
	v := WithFjordKeys(kversion.Stable())
	if max, ok := v.LookupMaxKeyVersion(DescribePositionsKey); !ok || max != 1 {
		t.Errorf("WithFjordKeys: DescribePositions v%d %v", max, ok)
	}
	if max, _ := v.LookupMaxKeyVersion(apiVersionsKey); max != ApiVersionsVersion {
		t.Errorf("WithFjordKeys: ApiVersions v%d, want v%d", max, ApiVersionsVersion)
	}
	if max, _ := v.LookupMaxKeyVersion(0); max != must(kversion.Stable().LookupMaxKeyVersion(0)) {
		t.Errorf("WithFjordKeys changed Produce's version")
	}
}

func TestSoftwareVersion(t *testing.T) {
	for in, want := range map[string]string{"(devel)": "devel", "v1.2.3": "v1.2.3", "v0.0.0-2026+dirty": "v0.0.0-2026-dirty", "": "unknown", "()": "unknown"} {
		if got := softwareVersion(in); got != want {
			t.Errorf("softwareVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

// Hostile bytes never panic, and a message that decodes encodes back to
// the same bytes.
func FuzzDescribePositions(f *testing.F) {
	req, resp := samplePositions()
	f.Add(req.AppendTo(nil), false)
	f.Add(resp.AppendTo(nil), true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, false)
	f.Fuzz(func(t *testing.T, b []byte, isResp bool) {
		var m interface {
			AppendTo([]byte) []byte
			ReadFrom([]byte) error
		} = new(DescribePositionsRequest)
		if isResp {
			m = new(DescribePositionsResponse)
		}
		if m.ReadFrom(b) != nil {
			return
		}
		if again := m.AppendTo(nil); string(again) != string(b) {
			t.Fatalf("decoded %x, encoded back %x", b, again)
		}
	})
}

func must(v int16, ok bool) int16 {
	if !ok {
		panic("no such key")
	}
	return v
}

// Version 1 adds the log end offset and the migration state to each
// partition; version 0 has neither on the wire.
func TestPositionsV1(t *testing.T) {
	_, resp := samplePositions()
	resp.Version = 1
	resp.Topics[0].Partitions[0].LogEndOffset = 11
	resp.Topics[0].Partitions[0].MigratedTo = "a-v2"
	b := resp.AppendTo(nil)
	got := &DescribePositionsResponse{Version: 1}
	if err := got.ReadFrom(b); err != nil || !reflect.DeepEqual(got, resp) {
		t.Fatalf("v1: decoded %+v, %v; want %+v", got, err, resp)
	}
	for n := range len(b) {
		if err := got.ReadFrom(b[:n]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("v1: %d of %d bytes: %v, want ErrMalformed", n, len(b), err)
		}
	}
	if err := (&DescribePositionsResponse{}).ReadFrom(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a v1 answer read as v0: %v, want ErrMalformed", err)
	}
	resp.Version = 0
	v0 := &DescribePositionsResponse{}
	if err := v0.ReadFrom(resp.AppendTo(nil)); err != nil || v0.Topics[0].Partitions[0].LogEndOffset != 0 || v0.Topics[0].Partitions[0].MigratedTo != "" {
		t.Fatalf("v0 carries the v1 fields: %+v, %v", v0, err)
	}
}
