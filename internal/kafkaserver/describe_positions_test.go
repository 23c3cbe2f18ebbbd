package kafkaserver

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/fjordmsg"
)

// FjordDescribePositions (describe_positions.go) through franz-go, as the
// lag refresher and `fjord group describe` send it, against the real
// replica manager: three batches of known timestamps, then where offsets
// stand, and each refusal.
func TestDescribePositions(t *testing.T) {
	h := newRealReplicasHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append(fjordmsg.ClientOpts(), kgo.SeedBrokers(h.addr),
		kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// One batch per ProduceSync: offsets 0-1 at 1000, 2-3 at 2000, 4 at 3000.
	for _, b := range []struct {
		n  int
		ts int64
	}{{2, 1000}, {2, 2000}, {1, 3000}} {
		var recs []*kgo.Record
		for range b.n {
			recs = append(recs, &kgo.Record{Topic: "pos", Partition: 0, Value: make([]byte, 100), Timestamp: time.UnixMilli(b.ts)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ask := func(topics ...fjordmsg.DescribePositionsTopic) *fjordmsg.DescribePositionsResponse {
		t.Helper()
		resp, err := cl.Broker(1).Request(ctx, &fjordmsg.DescribePositionsRequest{Topics: topics})
		if err != nil {
			t.Fatalf("DescribePositions: %v", err)
		}
		return resp.(*fjordmsg.DescribePositionsResponse)
	}
	part := func(p int32, offsets ...int64) fjordmsg.DescribePositionsPartition {
		return fjordmsg.DescribePositionsPartition{Partition: p, Offsets: offsets}
	}

	resp := ask(fjordmsg.DescribePositionsTopic{Topic: "pos", Partitions: []fjordmsg.DescribePositionsPartition{part(0, 0, 3, 5, 9)}})
	got := resp.Topics[0].Partitions[0]
	if got.ErrorCode != 0 || got.LogStartOffset != 0 || got.HighWatermark != 5 || got.LastStableOffset != 5 {
		t.Fatalf("partition answer %+v", got)
	}
	pos := got.Positions
	if len(pos) != 4 {
		t.Fatalf("%d positions, want 4", len(pos))
	}
	if pos[0].Timestamp != 1000 || pos[1].Timestamp != 2000 || pos[2].Timestamp != -1 || pos[3].Timestamp != -1 {
		t.Errorf("timestamps %+v, want 1000 2000 -1 -1", pos)
	}
	// Offset 3 is inside the second batch: its bytes are the second and
	// third batches', less than all three and more than the last alone.
	if !(pos[0].Bytes > pos[1].Bytes && pos[1].Bytes > 0 && pos[2].Bytes == 0 && pos[3].Bytes == 0) {
		t.Errorf("bytes %+v: want decreasing to 0 at the high watermark", pos)
	}
	for i, o := range []int64{0, 3, 5, 9} {
		if pos[i].Offset != o {
			t.Errorf("position %d is for offset %d, want %d", i, pos[i].Offset, o)
		}
	}

	// Refusals, partition by partition: unknown topic and partition, a
	// partition listed twice (both entries), a negative offset.
	resp = ask(
		fjordmsg.DescribePositionsTopic{Topic: "nope", Partitions: []fjordmsg.DescribePositionsPartition{part(0, 0)}},
		fjordmsg.DescribePositionsTopic{Topic: "pos", Partitions: []fjordmsg.DescribePositionsPartition{part(7, 0), part(0, -1)}},
		fjordmsg.DescribePositionsTopic{Topic: "dup", Partitions: []fjordmsg.DescribePositionsPartition{part(0, 0), part(0, 1)}},
	)
	var codes []int16
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			codes = append(codes, rp.ErrorCode)
			if rp.ErrorCode != 0 && (len(rp.Positions) != 0 || rp.HighWatermark != 0) {
				t.Errorf("%s-%d: an error with an answer: %+v", rt.Topic, rp.Partition, rp)
			}
		}
	}
	want := []int16{kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code, kerr.InvalidRequest.Code,
		kerr.InvalidRequest.Code, kerr.InvalidRequest.Code}
	if !slices.Equal(codes, want) {
		t.Errorf("codes %v, want %v", codes, want)
	}
}

// Fjord's keys are listed in ApiVersions only to a v3+ client whose
// software name is Fjord's; a Kafka client never sees them.
func TestDescribePositionsAdvertisedToFjordOnly(t *testing.T) {
	// Fjord's clients ask ApiVersions at the version served here, where
	// the software name is read.
	if got := apis[apiVersionsKey].maxVersion; got != fjordmsg.ApiVersionsVersion {
		t.Fatalf("ApiVersions served up to v%d, Fjord's clients send v%d", got, fjordmsg.ApiVersionsVersion)
	}
	h := newWireHarness(t)
	c := h.dial()
	for _, tc := range []struct {
		version int16
		name    string
		want    bool
	}{{3, fjordmsg.SoftwareName, true}, {3, "fjord-test", false}, {3, "kgo", false}, {2, fjordmsg.SoftwareName, false}} {
		req := apiVersionsReq(tc.version)
		req.ClientSoftwareName = tc.name
		resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
		listed := slices.ContainsFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool {
			return k.ApiKey == fjordmsg.DescribePositionsKey
		})
		if resp.ErrorCode != 0 || listed != tc.want {
			t.Errorf("v%d software %q: error %d, Fjord key listed %v, want %v", tc.version, tc.name, resp.ErrorCode, listed, tc.want)
		}
	}
}

// A body that does not decode closes the connection, as a malformed
// Kafka request does; the server keeps serving others.
func TestDescribePositionsMalformed(t *testing.T) {
	h := newWireHarness(t)
	topic := kbin.AppendString(kbin.AppendArrayLen(nil, 1), "t")
	for name, body := range map[string][]byte{
		"truncated":       kbin.AppendArrayLen(nil, 3),
		"negative length": kbin.AppendArrayLen(slices.Clone(topic), -5),
		"trailing bytes":  append(kbin.AppendArrayLen(nil, 0), 1, 2, 3),
		"huge length":     kbin.AppendArrayLen(nil, 1<<30),
	} {
		t.Run(name, func(t *testing.T) {
			c := h.dialFor(t)
			c.write(frameOf(append(header(fjordmsg.DescribePositionsKey, 0, 1, false), body...)))
			c.expectClosed()
		})
	}
	// Others are still answered.
	if resp := h.dial().roundTrip(apiVersionsReq(3)).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions after the malformed requests: error %d", resp.ErrorCode)
	}
}
