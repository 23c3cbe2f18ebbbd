package kafkaserver

// Transaction verification on produce (KIP-890 part 1).
//
// Before KIP-890 a partition opened a transaction for any transactional
// batch of a producer with none open there: a client that skipped
// AddPartitionsToTxn, or a produce that arrived after its transaction's
// abort marker, left a transaction no coordinator knows, holding the
// partition's last stable offset (and every read_committed reader) until
// an operator aborted it. So, as Kafka 3.6+ does, a request with a
// transactional id first asks, for each partition where its batch would
// open the producer's transaction, the log for a verification guard
// (Replicas.TxnVerificationGuard), then the transaction's coordinator
// whether the partition is in the transaction (TxnVerifier: the
// coordinator in process, or AddPartitionsToTxn v4 verify-only to the
// node that runs it), and appends with the guard
// (StartAppendVerified). A marker that lands between the question and
// the append clears the guard, and the append is refused: the answer was
// about a transaction that has ended.
//
// Under Transactions V2 (Produce v12+, a client that read the
// transaction.version feature) the client sends no AddPartitionsToTxn:
// the question is the add itself (TxnVerifier.AddPartitionsToTxn, v5 to
// another node), which starts the producer's next transaction if none is
// open. While the coordinator is still writing the previous
// transaction's markers it answers CONCURRENT_TRANSACTIONS; the leader
// asks again, first after txnAddRetryBackoff and then after twice the
// wait before, for up to txnAddRetryMax (Kafka's
// add.partitions.to.txn.retry.backoff.max.ms) before it answers the
// client so, which retries too. Kafka waits 20 ms every time
// (add.partitions.to.txn.retry.backoff.ms); a commit's markers take about
// a millisecond on a quiet cluster, and every V2 transaction's first
// produce meets them, so a first wait of 20 ms would cost a 100 ms
// transaction a fifth of its time.
//
// Answers, as Kafka's ReplicaManager and AddPartitionsToTxnManager give
// them: a partition not in the transaction is INVALID_TXN_STATE for
// Produce v0-10 and TRANSACTION_ABORTABLE from v11 (clients that send
// v11 know it); PRODUCER_FENCED is INVALID_PRODUCER_EPOCH;
// INVALID_PRODUCER_ID_MAPPING and INVALID_TXN_STATE pass; a coordinator
// that is moving, loading, busy completing the previous transaction
// (CONCURRENT_TRANSACTIONS, V1 only) or unreachable is
// NOT_ENOUGH_REPLICAS, which every client retries without a metadata
// refresh. Batches of more than
// one producer in one request are INVALID_PRODUCER_ID_MAPPING. Nothing
// of a refused partition is written.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/txn"
)

// txnVerifyTimeout bounds the coordinator's answer: Kafka's
// request.timeout.ms would be 30 s, but a producer whose verification
// hangs holds its connection's later produces behind it, and a retry
// (NOT_ENOUGH_REPLICAS) is cheap.
const txnVerifyTimeout = 5 * time.Second

// Transactions V2's retries of an add answered CONCURRENT_TRANSACTIONS.
const (
	txnAddRetryBackoff = time.Millisecond
	txnAddRetryMax     = 100 * time.Millisecond
)

// tv2Produce is the first Produce version of Transactions V2.
const tv2Produce = 12

// verifyTxnBatches verifies the transactional batches of jobs (the
// partitions of one produce request with transactional id id) and marks
// each job to append verified with its guard, or sets its error.
func (s *Server) verifyTxnBatches(ctx context.Context, version int16, id string, jobs []*produceJob) {
	type producer struct {
		id    int64
		epoch int16
	}
	var (
		owner    *producer
		asked    []*produceJob
		askedTPs []txn.TopicPartition
	)
	for _, j := range jobs {
		if j.err != nil {
			continue
		}
		h, err := record.ParseHeader(j.records)
		if err != nil || !h.IsTransactional() || !h.HasProducerID() {
			// The log's own checks answer it (a bad batch, or a
			// non-transactional one inside a transaction).
			continue
		}
		p := producer{h.ProducerID, h.ProducerEpoch}
		if owner == nil {
			owner = &p
		} else if *owner != p {
			j.err = fmt.Errorf("%w: batches of producers %d (epoch %d) and %d (epoch %d) in one request",
				kerr.InvalidProducerIDMapping, owner.id, owner.epoch, p.id, p.epoch)
			continue
		}
		j.verified = true
		guard, needed, err := s.replicas.TxnVerificationGuard(j.topic, j.partition, p.id, p.epoch, version >= tv2Produce)
		switch {
		case err != nil:
			j.err = err
		case needed:
			j.guard = guard
			asked = append(asked, j)
			askedTPs = append(askedTPs, txn.TopicPartition{Topic: j.topic, Partition: j.partition})
		}
	}
	if len(asked) == 0 {
		return
	}
	vctx, cancel := context.WithTimeout(ctx, txnVerifyTimeout)
	var errs []error
	if version >= tv2Produce {
		errs = s.addToTxn(vctx, id, owner.id, owner.epoch, askedTPs)
	} else {
		errs = s.cfg.TxnVerifier.VerifyPartitionsInTxn(vctx, id, owner.id, owner.epoch, askedTPs)
	}
	cancel()
	for i, j := range asked {
		var err error
		if i < len(errs) {
			err = errs[i]
		} else {
			err = errors.New("the coordinator's answer has no result for the partition")
		}
		j.err = verifyError(err, version)
	}
}

// addToTxn is Transactions V2's implicit add of tps, asked again while
// the coordinator answers CONCURRENT_TRANSACTIONS for all of them (see
// the file comment), within txnAddRetryMax and ctx.
func (s *Server) addToTxn(ctx context.Context, id string, producerID int64, epoch int16, tps []txn.TopicPartition) []error {
	deadline := time.Now().Add(txnAddRetryMax)
	for wait := txnAddRetryBackoff; ; wait *= 2 {
		errs := s.cfg.TxnVerifier.AddPartitionsToTxn(ctx, id, producerID, epoch, tps)
		busy := len(errs) > 0
		for _, err := range errs {
			busy = busy && errors.Is(err, kerr.ConcurrentTransactions)
		}
		if !busy || time.Now().Add(wait).After(deadline) {
			return errs
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return errs
		}
	}
}

// verifyError is what a produce of version answers for the
// coordinator's verification error err (nil: verified).
func verifyError(err error, version int16) error {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return fmt.Errorf("%w: the transaction coordinator could not be asked: %v", kerr.NotEnoughReplicas, err)
	}
	switch ke {
	case kerr.TransactionAbortable:
		if version <= 10 {
			return fmt.Errorf("%w: the partition was not added to the transaction", kerr.InvalidTxnState)
		}
		return fmt.Errorf("%w: the partition was not added to the transaction", kerr.TransactionAbortable)
	case kerr.ProducerFenced:
		return fmt.Errorf("%w: %v", kerr.InvalidProducerEpoch, err)
	case kerr.InvalidProducerIDMapping, kerr.InvalidTxnState, kerr.InvalidProducerEpoch:
		return err
	case kerr.ConcurrentTransactions:
		if version >= tv2Produce {
			// A Transactions V2 client knows to retry it.
			return err
		}
	}
	return fmt.Errorf("%w: verifying the partition with the transaction coordinator: %v", kerr.NotEnoughReplicas, err)
}
