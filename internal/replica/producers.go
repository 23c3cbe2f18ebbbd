package replica

import (
	"cmp"
	"slices"

	"github.com/fjordmq/fjord/internal/metadata"
)

// ActiveProducer is one producer's state on a partition, as
// DescribeProducers reports it (the admin's view of hanging
// transactions: kafka-transactions.sh find-hanging and abort).
type ActiveProducer struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence is the last sequence number of the producer's newest
	// batch in its epoch, -1 when it has none (a marker bumped the
	// epoch since).
	LastSequence int32
	// LastTimestamp is the max timestamp of its newest batch or marker.
	LastTimestamp int64
	// CoordinatorEpoch is the coordinator epoch of its last marker, -1
	// when none.
	CoordinatorEpoch int32
	// CurrentTxnStartOffset is the first offset of its open transaction
	// here, -1 when none.
	CurrentTxnStartOffset int64
}

// ActiveProducers returns the producers a partition this node leads
// knows of, by producer id. As Kafka's, only the leader answers
// (ErrNotLeader): a follower's state may be behind it.
func (m *Manager) ActiveProducers(topic string, partition int32) ([]ActiveProducer, error) {
	p, err := m.partition(topic, metadata.UUID{}, partition)
	if err != nil {
		return nil, err
	}
	if _, err := p.checkLeader(-1); err != nil {
		return nil, err
	}
	all := p.log.ActiveProducers()
	out := make([]ActiveProducer, 0, len(all))
	for pid, e := range all {
		ap := ActiveProducer{
			ProducerID:            pid,
			ProducerEpoch:         e.Epoch,
			LastSequence:          -1,
			LastTimestamp:         e.LastTimestamp,
			CoordinatorEpoch:      e.CoordinatorEpoch,
			CurrentTxnStartOffset: e.TxnFirstOffset,
		}
		if n := len(e.Batches); n > 0 {
			ap.LastSequence = e.Batches[n-1].LastSeq
		}
		out = append(out, ap)
	}
	slices.SortFunc(out, func(a, b ActiveProducer) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out, nil
}
