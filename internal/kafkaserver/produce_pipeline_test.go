package kafkaserver

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
)

// The rule of produce_pipeline.go, one produce at a time: what the
// append answered (or the refusal before it), and what the client is
// answered. TestPipelinedProduceBehindARefusedOneIsRefusedToo has it
// over the wire.
func TestPipelineRefusalsSettle(t *testing.T) {
	notLeader := fmt.Errorf("%w: t-0: leader is node 2", replica.ErrNotLeader)
	outOfOrder := fmt.Errorf("%w: sequence 2, expected 1", replica.ErrOutOfOrderSequence)
	tooFew := fmt.Errorf("%w: 1 in-sync replica", replica.ErrNotEnoughReplicas)
	invalid := fmt.Errorf("%w: bad record", replica.ErrInvalidRecord)
	type step struct {
		pid   int64
		epoch int16
		seq   int32
		got   error // the append's answer
		want  error // the client's: its code
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"successors of a refused batch are refused the same way", []step{
			{7, 0, 1, notLeader, kerr.NotLeaderForPartition},
			{7, 0, 2, outOfOrder, kerr.NotLeaderForPartition},
			{7, 0, 3, outOfOrder, kerr.NotLeaderForPartition},
		}},
		{"and for too few in-sync replicas", []step{
			{7, 0, 1, tooFew, kerr.NotEnoughReplicas},
			{7, 0, 2, outOfOrder, kerr.NotEnoughReplicas},
		}},
		{"a successor the log takes is written, and the refusal forgotten", []step{
			{7, 0, 1, notLeader, kerr.NotLeaderForPartition},
			{7, 0, 2, nil, nil},
			{7, 0, 4, outOfOrder, kerr.OutOfOrderSequenceNumber},
		}},
		{"the refused batch's retry is not its own successor", []step{
			{7, 0, 1, notLeader, kerr.NotLeaderForPartition},
			{7, 0, 1, outOfOrder, kerr.OutOfOrderSequenceNumber},
			{7, 0, 2, outOfOrder, kerr.OutOfOrderSequenceNumber},
		}},
		{"a successor refused for itself keeps the first refused batch", []step{
			{7, 0, 1, notLeader, kerr.NotLeaderForPartition},
			{7, 0, 2, notLeader, kerr.NotLeaderForPartition},
			{7, 0, 3, outOfOrder, kerr.NotLeaderForPartition},
			{7, 0, 1, outOfOrder, kerr.OutOfOrderSequenceNumber},
		}},
		{"at most four successors: past them a gap is the producer's", []step{
			{7, 0, 1, notLeader, kerr.NotLeaderForPartition},
			{7, 0, 2, outOfOrder, kerr.NotLeaderForPartition},
			{7, 0, 3, outOfOrder, kerr.NotLeaderForPartition},
			{7, 0, 4, outOfOrder, kerr.NotLeaderForPartition},
			{7, 0, 5, outOfOrder, kerr.NotLeaderForPartition},
			{7, 0, 6, outOfOrder, kerr.OutOfOrderSequenceNumber},
		}},
		{"another epoch or producer is not a successor", []step{
			{7, 0, 1, notLeader, kerr.NotLeaderForPartition},
			{7, 1, 2, outOfOrder, kerr.OutOfOrderSequenceNumber},
			{8, 0, 2, outOfOrder, kerr.OutOfOrderSequenceNumber},
		}},
		{"a refusal for what the batch holds changes nothing behind it", []step{
			{7, 0, 1, invalid, kerr.InvalidRecord},
			{7, 0, 2, outOfOrder, kerr.OutOfOrderSequenceNumber},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r pipelineRefusals
			for i, s := range tc.steps {
				j := &produceJob{topic: "t", partition: 0, records: idempotentBatch(t, s.pid, s.epoch, s.seq), err: s.got}
				r.settle([]*produceJob{j})
				if got := errorCode(j.err); s.want == nil && got != 0 || s.want != nil && !errors.Is(j.err, s.want) {
					t.Fatalf("step %d (producer %d epoch %d sequence %d, %v): answered %v, want %v",
						i, s.pid, s.epoch, s.seq, s.got, kerr.ErrorForCode(got), s.want)
				}
			}
		})
	}
}

func idempotentBatch(t *testing.T, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, epoch, seq
	b := record.NewBuilder(opts)
	b.Add(nil, []byte("v"), nil, time.Now().UnixMilli())
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}
