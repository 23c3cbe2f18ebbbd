package kafkaserver

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
)

// Pipelined produces behind a refused one.
//
// An idempotent producer pipelines up to five produce requests per
// connection, each batch continuing the previous one's sequence
// numbers. When this node refuses one of them before writing it, for a
// reason that may pass a moment later, the ones behind it are already
// on the wire; if the reason passes before they are appended, the first
// of them no longer follows the log's last sequence number, and Kafka's
// rule answers it OUT_OF_ORDER_SEQUENCE_NUMBER. The reasons that pass:
//
//   - this node was just elected leader and its image does not say so
//     yet. The old leader's NOT_LEADER_OR_FOLLOWER names the new leader
//     (KIP-951) from the old leader's image, which has the election
//     first, so a producer moving its writes here after a controlled
//     shutdown often arrives before this node knows it leads;
//   - the leader lease, lapsed for a moment and renewed (replica's
//     lease.go);
//   - an ISR below min.insync.replicas that grows back.
//
// librdkafka takes that answer, on a request behind a failed one, as a
// reason to bump its producer epoch (rd_kafka_idemp_drain_epoch_bump,
// "skipped sequence numbers"; confluentinc/librdkafka#4953, open, and
// its fix #4972 unmerged as of v2.15), and a bump renumbers the queued batches of every
// partition from sequence 0 under the new epoch, including batches that
// are in a log already: those a stopped leader wrote and answered
// NOT_LEADER_OR_FOLLOWER because its leader epoch ended before the
// batches were committed (librdkafka counts that answer as "not
// persisted"). Their new leader holds them, replicated, but cannot
// recognise a retry under the new epoch as a duplicate, and writes them
// again: TestRollingRestart/Librdkafka's duplicates, each batch right
// after itself.
//
// So the successors of a refused batch are refused the same way: the
// producer retries the refused batch and then them, in order, with no
// OUT_OF_ORDER_SEQUENCE_NUMBER to react to. Only an answer that would
// have been OUT_OF_ORDER_SEQUENCE_NUMBER changes: a successor that
// follows the log (the refused batch was in it already, replicated) is
// written as before. Kafka answers OUT_OF_ORDER_SEQUENCE_NUMBER here;
// the changed answer is the refused batch's own, which every client
// retries, so it costs one more round trip at most.
//
// Rejected: refusing every pipelined successor before its append. It
// would refuse successors the log can take, for no client's benefit.
//
// Not covered: a gap the producer makes itself. librdkafka lowers a
// partition's in-flight count before it puts a failed request's
// messages back in the queue (rd_kafka_msgbatch_handle_Produce_result),
// so the new leader's thread can send later batches ahead of them; the
// gap is real, this connection refused nothing, and it is answered
// OUT_OF_ORDER_SEQUENCE_NUMBER as Kafka answers it (seen in
// TestRollingRestart with the old leader's refusals slowed on purpose).

// pipelineSuccessors is how many produces of one producer can follow a
// refused one on a connection before the producer has its answer: an
// idempotent producer keeps at most five in flight (Kafka's five-batch
// duplicate window; Java's producer and librdkafka cap it there).
// Past it, an entry is stale (the producer moved the partition to
// another node and came back without retrying here), and a gap is
// answered as Kafka does.
const pipelineSuccessors = 4

// pipelineRefusals is one connection's refused batches, by partition and
// producer. Nil until the first refusal. REQUIRES: the produce turn of
// the request that uses it (produceTurn orders a connection's produces
// one at a time).
type pipelineRefusals map[pipelineKey]*pipelineRefusal

type pipelineKey struct {
	topic      string
	partition  int32
	producerID int64
}

// pipelineRefusal is the latest batch of a producer refused on a
// partition before it was written.
type pipelineRefusal struct {
	epoch    int16
	firstSeq int32
	err      error
	// left is how many more successors may be answered err.
	left int
}

// settle applies the rule to one produce's partitions, in the request's
// order, once their appends have been tried (or refused before): it
// remembers the batches refused for a reason that may pass, answers
// their successors' OUT_OF_ORDER_SEQUENCE_NUMBER with that refusal
// instead, and forgets a partition's refusal once the producer's batch
// there is written or refused for good. Only the first batch of a
// partition's records is looked at: Kafka's producers send one.
func (r *pipelineRefusals) settle(jobs []*produceJob) {
	for _, j := range jobs {
		if j.err == nil && len(*r) == 0 {
			continue // the common case: nothing refused, nothing to forget
		}
		h, err := record.ParseHeader(j.records)
		if err != nil || !h.HasProducerID() {
			continue
		}
		key := pipelineKey{j.topic, j.partition, h.ProducerID}
		prev := (*r)[key]
		switch {
		case j.err == nil:
			delete(*r, key) // written, or a duplicate of a written batch
		case errors.Is(j.err, replica.ErrOutOfOrderSequence) && prev != nil &&
			prev.epoch == h.ProducerEpoch && prev.firstSeq != h.BaseSequence && prev.left > 0:
			prev.left--
			j.err = fmt.Errorf("%w (answered for the batch of sequence %d, refused so on this connection, which this one follows; retry both in order)",
				prev.err, prev.firstSeq)
		case mayPass(j.err):
			if *r == nil {
				*r = pipelineRefusals{}
			}
			first := h.BaseSequence
			if prev != nil && prev.epoch == h.ProducerEpoch && prev.left > 0 {
				// A successor refused for itself: the producer's retries
				// still start at the first refused batch, which is not
				// a successor of its own.
				first = prev.firstSeq
			}
			(*r)[key] = &pipelineRefusal{epoch: h.ProducerEpoch, firstSeq: first, err: j.err, left: pipelineSuccessors}
		default:
			// Refused for good, or a gap of the producer's own: answered
			// as Kafka does, and nothing behind it is changed.
			delete(*r, key)
		}
	}
}

// mayPass reports whether a produce refused with err before its append
// may be taken a moment later: the partition could not take writes here
// then, whatever the batch held.
func mayPass(err error) bool {
	for _, k := range []*kerr.Error{
		kerr.NotLeaderForPartition, kerr.LeaderNotAvailable, kerr.UnknownTopicOrPartition,
		kerr.NotEnoughReplicas, kerr.KafkaStorageError, kerr.RequestTimedOut,
	} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}
