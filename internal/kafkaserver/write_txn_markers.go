package kafkaserver

// WriteTxnMarkers: v0-2
//
// Writes transaction markers (storage/txn.go): for each marker (a
// producer id and epoch, commit or abort, the coordinator epoch and, from
// v2, the transaction version), a control batch to each partition it
// names, which ends the producer's transaction there. Kafka's transaction
// coordinator sends it to the partitions' leaders once a transaction is
// decided; so does the admin abort of a hanging transaction
// (kafka-transactions.sh abort, kadm), with the producer's epoch and
// coordinator epoch as DescribeProducers reported them.
//
// Per partition, in this order: the marker's own fields (a negative
// producer id or epoch, or a transaction version other than 0, 1 or 2,
// is INVALID_REQUEST for every partition of the marker); the topic and
// partition exist (UNKNOWN_TOPIC_OR_PARTITION); the topic is not
// internal other than __consumer_offsets (INVALID_TOPIC_EXCEPTION:
// nothing a marker could end lives in __transaction_state); this
// node leads it (NOT_LEADER_OR_FOLLOWER); then the log's checks of the
// marker against the producer (an older producer epoch, or under
// Transactions V2 one not newer: INVALID_PRODUCER_EPOCH; an older
// coordinator epoch: TRANSACTION_COORDINATOR_FENCED), which write
// nothing when they refuse. The write is acks=all, as Kafka's: it is
// answered once the high watermark passes the marker (NOT_ENOUGH_REPLICAS
// below min.insync.replicas), or REQUEST_TIMED_OUT after
// writeTxnMarkersTimeout, since the request carries no timeout of its
// own. Markers are written in request order, and waited for together.
//
// A marker on __consumer_offsets ends transactional offset commits
// (TxnOffsetCommit): once it is answered written, the group coordinator
// is told (Groups.CompleteTxn) and the producer's pending offsets of the
// partition's groups become committed or are dropped, as Kafka's
// GroupCoordinator.onTransactionCompleted does. The log holds the marker
// first, so a coordinator that loads the partition later finds it
// there.
//
// Only a principal with ALTER or CLUSTER_ACTION on the cluster may send
// it (a node's; authz.go): anyone else's is answered
// CLUSTER_AUTHORIZATION_FAILED on every partition, and nothing is
// written.

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
)

// writeTxnMarkersTimeout bounds a marker's wait for its replicas: Kafka's
// default request.timeout.ms, which its coordinator waits for too.
const writeTxnMarkersTimeout = 30 * time.Second

func handleWriteTxnMarkers(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.WriteTxnMarkersRequest)
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	resp.SetVersion(req.version)
	img := s.image()

	type job struct {
		out       *kmsg.WriteTxnMarkersResponseMarkerTopicPartition
		topic     string
		partition int32
		pending   replica.Pending
		err       error
		// producerID and commit are the marker's, for a
		// __consumer_offsets partition's group coordinator.
		producerID int64
		commit     bool
	}
	var jobs []*job
	var denied error
	if !s.allowedQuiet(req, acl.OperationAlter, acl.ResourceCluster, acl.ClusterName) &&
		!s.allowedCluster(req, acl.OperationClusterAction) {
		denied = kerr.ClusterAuthorizationFailed
	}
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(r.Markers))
	for i := range r.Markers {
		m := &r.Markers[i]
		rm := &resp.Markers[i]
		*rm = kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		markerErr := denied
		if markerErr == nil {
			markerErr = checkTxnMarker(m)
		}
		marker := storage.TxnMarker{
			ProducerID:       m.ProducerID,
			ProducerEpoch:    m.ProducerEpoch,
			CoordinatorEpoch: m.CoordinatorEpoch,
			Commit:           m.Committed,
			StrictEpoch:      m.TransactionVersion >= 2,
		}
		rm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(m.Topics))
		for j := range m.Topics {
			t := &m.Topics[j]
			rt := &rm.Topics[j]
			*rt = kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(t.Partitions))
			for k, p := range t.Partitions {
				rp := &rt.Partitions[k]
				*rp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				jb := &job{out: rp, topic: t.Topic, partition: p, err: markerErr}
				if jb.err == nil {
					_, jb.err = s.leaderPartition(img, t.Topic, p, -1)
				}
				if jb.err == nil && metadata.IsInternalTopic(t.Topic) && t.Topic != metadata.ConsumerOffsetsTopic {
					jb.err = metadata.InternalTopicError(t.Topic, "no transaction writes to it")
				}
				if jb.err == nil {
					jb.pending, jb.err = s.replicas.StartTxnMarker(t.Topic, p, marker)
				}
				jb.producerID, jb.commit = m.ProducerID, m.Committed
				jobs = append(jobs, jb)
			}
		}
	}
	var wg sync.WaitGroup
	for _, jb := range jobs {
		if jb.pending != nil {
			wg.Go(func() { _, jb.err = jb.pending.Wait(ctx, writeTxnMarkersTimeout) })
		}
	}
	wg.Wait()
	for _, jb := range jobs {
		if jb.err == nil && jb.topic == metadata.ConsumerOffsetsTopic && s.groups != nil {
			s.groups.CompleteTxn(jb.partition, jb.producerID, jb.commit)
		}
		jb.out.ErrorCode, _ = s.errorAndMessage(jb.err, "WriteTxnMarkers", "topic", jb.topic, "partition", jb.partition)
	}
	return resp, nil, nil
}

// checkTxnMarker checks a marker's own fields.
func checkTxnMarker(m *kmsg.WriteTxnMarkersRequestMarker) error {
	switch {
	case m.ProducerID < 0:
		return invalidRequest("transaction marker for producer id %d", m.ProducerID)
	case m.ProducerEpoch < 0:
		return invalidRequest("transaction marker for producer %d at epoch %d", m.ProducerID, m.ProducerEpoch)
	case m.TransactionVersion < 0 || m.TransactionVersion > 2:
		return invalidRequest("transaction version %d (want 0, 1 or 2)", m.TransactionVersion)
	}
	return nil
}
