package fjordmsg

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribePositionsRequest asks a partition's leader where given offsets
// stand in its log: for consumer lag in records, bytes and seconds, and
// for retention gaps, which no Kafka API answers (ListOffsets has no
// "bytes from here to the high watermark" and no "timestamp of the record
// at this offset"). A group's coordinator asks it of every leader for its
// groups' committed offsets; `fjord group describe` and the HTTP group
// view ask it for one group's.
//
// The answer comes from the leader's indexes and one batch header per
// offset, not from reading the records between.
//
// Version 1 adds the log end offset and the migration state to each
// partition's answer: `fjord topic migrate` learns from the leaders that
// the source refuses produces and where its log ends for good.
type DescribePositionsRequest struct {
	Version int16
	Topics  []DescribePositionsTopic
}

// DescribePositionsTopic is one topic's partitions in the request.
type DescribePositionsTopic struct {
	Topic      string
	Partitions []DescribePositionsPartition
}

// DescribePositionsPartition is one partition and the offsets asked
// about in it.
type DescribePositionsPartition struct {
	Partition int32
	Offsets   []int64
}

// DescribePositionsResponse answers DescribePositionsRequest, partition
// by partition in the request's order.
type DescribePositionsResponse struct {
	Version int16
	Topics  []DescribePositionsResponseTopic
}

// DescribePositionsResponseTopic is one topic's partitions in the
// response.
type DescribePositionsResponseTopic struct {
	Topic      string
	Partitions []DescribePositionsResponsePartition
}

// DescribePositionsResponsePartition is one partition's answer. With an
// ErrorCode (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, ...) the
// rest is zero.
type DescribePositionsResponsePartition struct {
	Partition        int32
	ErrorCode        int16
	LogStartOffset   int64
	HighWatermark    int64
	LastStableOffset int64
	// LogEndOffset (v1+): the leader's log end, read after MigratedTo.
	LogEndOffset int64
	// MigratedTo (v1+): the destination of the topic's migration once
	// it has cut over and this leader refuses produces; then
	// LogEndOffset is final. Empty otherwise.
	MigratedTo string
	Positions  []Position
}

// Position is where one offset stands. Bytes is the log's size from the
// batch holding Offset up to the high watermark (a batch's granularity:
// the bytes a consumer at Offset has yet to fetch); Timestamp is that
// batch's first record's timestamp in milliseconds (its append time on a
// LogAppendTime topic), or -1 when Offset is at or past the high
// watermark (nothing to consume). An Offset below LogStartOffset is
// answered from the log start: the records between are gone. DeleteAt
// is when (Unix milliseconds) time retention may delete the segment
// holding Offset, -1 when time retention does not apply or nothing is
// left to consume (storage.Backlog).
type Position struct {
	Offset    int64
	Bytes     int64
	Timestamp int64
	DeleteAt  int64
}

func (*DescribePositionsRequest) Key() int16           { return DescribePositionsKey }
func (*DescribePositionsRequest) MaxVersion() int16    { return 1 }
func (r *DescribePositionsRequest) SetVersion(v int16) { r.Version = v }
func (r *DescribePositionsRequest) GetVersion() int16  { return r.Version }
func (*DescribePositionsRequest) IsFlexible() bool     { return false }
func (r *DescribePositionsRequest) ResponseKind() kmsg.Response {
	return &DescribePositionsResponse{Version: r.Version}
}

func (r *DescribePositionsRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendArrayLen(dst, len(r.Topics))
	for _, t := range r.Topics {
		dst = kbin.AppendString(dst, t.Topic)
		dst = kbin.AppendArrayLen(dst, len(t.Partitions))
		for _, p := range t.Partitions {
			dst = kbin.AppendInt32(dst, p.Partition)
			dst = kbin.AppendArrayLen(dst, len(p.Offsets))
			for _, o := range p.Offsets {
				dst = kbin.AppendInt64(dst, o)
			}
		}
	}
	return dst
}

func (r *DescribePositionsRequest) ReadFrom(src []byte) error {
	rd := reader{Reader: kbin.Reader{Src: src}}
	r.Topics = nil
	// Each loop stops once the reader has gone bad, so a lying length
	// costs nothing: a length is at most the bytes left (kbin checks).
	for n := rd.arrayLen(); n > 0 && rd.Ok(); n-- {
		t := DescribePositionsTopic{Topic: rd.String()}
		for n := rd.arrayLen(); n > 0 && rd.Ok(); n-- {
			p := DescribePositionsPartition{Partition: rd.Int32()}
			n := rd.arrayLen()
			p.Offsets = make([]int64, 0, min(n, len(rd.Src)/8))
			for range n {
				p.Offsets = append(p.Offsets, rd.Int64())
			}
			t.Partitions = append(t.Partitions, p)
		}
		r.Topics = append(r.Topics, t)
	}
	return rd.done("DescribePositions request")
}

func (*DescribePositionsResponse) Key() int16           { return DescribePositionsKey }
func (*DescribePositionsResponse) MaxVersion() int16    { return 1 }
func (r *DescribePositionsResponse) SetVersion(v int16) { r.Version = v }
func (r *DescribePositionsResponse) GetVersion() int16  { return r.Version }
func (*DescribePositionsResponse) IsFlexible() bool     { return false }
func (r *DescribePositionsResponse) RequestKind() kmsg.Request {
	return &DescribePositionsRequest{Version: r.Version}
}

func (r *DescribePositionsResponse) AppendTo(dst []byte) []byte {
	dst = kbin.AppendArrayLen(dst, len(r.Topics))
	for _, t := range r.Topics {
		dst = kbin.AppendString(dst, t.Topic)
		dst = kbin.AppendArrayLen(dst, len(t.Partitions))
		for _, p := range t.Partitions {
			dst = kbin.AppendInt32(dst, p.Partition)
			dst = kbin.AppendInt16(dst, p.ErrorCode)
			dst = kbin.AppendInt64(dst, p.LogStartOffset)
			dst = kbin.AppendInt64(dst, p.HighWatermark)
			dst = kbin.AppendInt64(dst, p.LastStableOffset)
			if r.Version >= 1 {
				dst = kbin.AppendInt64(dst, p.LogEndOffset)
				dst = kbin.AppendString(dst, p.MigratedTo)
			}
			dst = kbin.AppendArrayLen(dst, len(p.Positions))
			for _, pos := range p.Positions {
				dst = kbin.AppendInt64(dst, pos.Offset)
				dst = kbin.AppendInt64(dst, pos.Bytes)
				dst = kbin.AppendInt64(dst, pos.Timestamp)
				dst = kbin.AppendInt64(dst, pos.DeleteAt)
			}
		}
	}
	return dst
}

func (r *DescribePositionsResponse) ReadFrom(src []byte) error {
	rd := reader{Reader: kbin.Reader{Src: src}}
	r.Topics = nil
	for n := rd.arrayLen(); n > 0 && rd.Ok(); n-- {
		t := DescribePositionsResponseTopic{Topic: rd.String()}
		for n := rd.arrayLen(); n > 0 && rd.Ok(); n-- {
			p := DescribePositionsResponsePartition{
				Partition:        rd.Int32(),
				ErrorCode:        rd.Int16(),
				LogStartOffset:   rd.Int64(),
				HighWatermark:    rd.Int64(),
				LastStableOffset: rd.Int64(),
			}
			if r.Version >= 1 {
				p.LogEndOffset = rd.Int64()
				p.MigratedTo = rd.String()
			}
			n := rd.arrayLen()
			p.Positions = make([]Position, 0, min(n, len(rd.Src)/32))
			for range n {
				p.Positions = append(p.Positions, Position{Offset: rd.Int64(), Bytes: rd.Int64(), Timestamp: rd.Int64(), DeleteAt: rd.Int64()})
			}
			t.Partitions = append(t.Partitions, p)
		}
		r.Topics = append(r.Topics, t)
	}
	return rd.done("DescribePositions response")
}
