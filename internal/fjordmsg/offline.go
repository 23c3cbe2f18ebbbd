package fjordmsg

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ReportOfflineReplicasRequest tells the active controller that the
// sending broker's replicas of these partitions are offline: their logs
// failed (a write or fsync returned EIO or ENOSPC) and refuse writes
// until the broker's process is replaced (DESIGN.md section 25, Kafka's
// log-dir failure handling for one replica). The controller marks them
// (metadata.OfflineReplicaRecord) and moves the broker out of their
// ISRs and leaderships. Only a Fjord node sends it, for itself: BrokerID
// must be the sender's own id, BrokerEpoch its current registration's.
// A repeat is harmless; the node sends it until its image shows the
// marks.
//
// Kafka's brokers carry the same news in BrokerHeartbeat
// (OfflineLogDirs, directory ids); Fjord's failures are per partition,
// and a heartbeat, which commits nothing and is answered at once, is no
// place for a commit of up to MaxReportedOfflineReplicas partition
// changes.
type ReportOfflineReplicasRequest struct {
	Version     int16
	BrokerID    int32
	BrokerEpoch int64
	Topics      []ReportOfflineReplicasTopic
}

// ReportOfflineReplicasTopic is one topic's offline replicas, by topic
// id (the name may have been reused since the log was opened).
type ReportOfflineReplicasTopic struct {
	TopicID    [16]byte
	Partitions []int32
}

// ReportOfflineReplicasResponse answers ReportOfflineReplicasRequest.
// ErrorCode is NOT_CONTROLLER from a node that is not the active
// controller (the sender looks for it again), STALE_BROKER_EPOCH for a
// process since replaced, CLUSTER_AUTHORIZATION_FAILED for a sender
// that is not the Fjord node it names, INVALID_REQUEST for a report no
// node sends (too many partitions, a zero topic id, a negative
// partition). Partitions of topics deleted since, or no longer on the
// broker, are passed over, not refused: a node's report may race those.
// MetadataOffset is, on success, the offset of an image that includes
// the marks, for the sender to wait for; 0 otherwise.
type ReportOfflineReplicasResponse struct {
	Version        int16
	ErrorCode      int16
	ErrorMessage   *string
	MetadataOffset int64
}

func (*ReportOfflineReplicasRequest) Key() int16           { return ReportOfflineReplicasKey }
func (*ReportOfflineReplicasRequest) MaxVersion() int16    { return 0 }
func (r *ReportOfflineReplicasRequest) SetVersion(v int16) { r.Version = v }
func (r *ReportOfflineReplicasRequest) GetVersion() int16  { return r.Version }
func (*ReportOfflineReplicasRequest) IsFlexible() bool     { return false }
func (r *ReportOfflineReplicasRequest) ResponseKind() kmsg.Response {
	return &ReportOfflineReplicasResponse{Version: r.Version}
}

func (r *ReportOfflineReplicasRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, r.BrokerID)
	dst = kbin.AppendInt64(dst, r.BrokerEpoch)
	dst = kbin.AppendArrayLen(dst, len(r.Topics))
	for _, t := range r.Topics {
		dst = kbin.AppendUuid(dst, t.TopicID)
		dst = kbin.AppendArrayLen(dst, len(t.Partitions))
		for _, p := range t.Partitions {
			dst = kbin.AppendInt32(dst, p)
		}
	}
	return dst
}

// ReadFrom decodes a request. Each array is allocated for no more
// elements than the bytes left could hold, so a hostile length costs
// nothing before the body is found too short.
func (r *ReportOfflineReplicasRequest) ReadFrom(src []byte) error {
	rd := reader{Reader: kbin.Reader{Src: src}}
	*r = ReportOfflineReplicasRequest{Version: r.Version, BrokerID: rd.Int32(), BrokerEpoch: rd.Int64()}
	n := rd.arrayLen()
	r.Topics = make([]ReportOfflineReplicasTopic, 0, min(n, len(rd.Src)/20))
	for ; n > 0 && rd.Ok(); n-- {
		t := ReportOfflineReplicasTopic{TopicID: rd.Uuid()}
		np := rd.arrayLen()
		t.Partitions = make([]int32, 0, min(np, len(rd.Src)/4))
		for ; np > 0 && rd.Ok(); np-- {
			t.Partitions = append(t.Partitions, rd.Int32())
		}
		r.Topics = append(r.Topics, t)
	}
	return rd.done("ReportOfflineReplicas request")
}

func (*ReportOfflineReplicasResponse) Key() int16           { return ReportOfflineReplicasKey }
func (*ReportOfflineReplicasResponse) MaxVersion() int16    { return 0 }
func (r *ReportOfflineReplicasResponse) SetVersion(v int16) { r.Version = v }
func (r *ReportOfflineReplicasResponse) GetVersion() int16  { return r.Version }
func (*ReportOfflineReplicasResponse) IsFlexible() bool     { return false }
func (r *ReportOfflineReplicasResponse) RequestKind() kmsg.Request {
	return &ReportOfflineReplicasRequest{Version: r.Version}
}

func (r *ReportOfflineReplicasResponse) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, r.ErrorCode)
	dst = kbin.AppendNullableString(dst, r.ErrorMessage)
	return kbin.AppendInt64(dst, r.MetadataOffset)
}

func (r *ReportOfflineReplicasResponse) ReadFrom(src []byte) error {
	rd := reader{Reader: kbin.Reader{Src: src}}
	*r = ReportOfflineReplicasResponse{Version: r.Version, ErrorCode: rd.Int16()}
	// As MarkTopicKeyed's: only -1 is null, so what decodes encodes back
	// the same.
	if len(rd.Src) >= 2 {
		if n := int16(binary.BigEndian.Uint16(rd.Src)); n < -1 {
			return fmt.Errorf("%w: ReportOfflineReplicas response: error message length %d", ErrMalformed, n)
		}
	}
	r.ErrorMessage = rd.NullableString()
	r.MetadataOffset = rd.Int64()
	return rd.done("ReportOfflineReplicas response")
}
