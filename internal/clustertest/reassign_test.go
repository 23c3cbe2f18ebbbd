package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 15, partition reassignment (KIP-455): a loaded topic on nodes 1
// to 3 gets node 4, the broker-only node, into every partition in place
// of one replica, first in half of them, through AlterPartitionReassignments
// from franz-go's admin client, while an idempotent acks=all producer
// writes to every partition. Checked: no produce fails; the
// reassignments show in ListPartitionReassignments until they end; every
// node then answers Metadata with the target replicas and full ISRs; the
// replaced replicas' logs are deleted from their nodes; a preferred
// election makes node 4 the leader of its half; everything acknowledged
// is read back and the replicas are identical. Then the bad requests of
// acceptance point 9 are refused, each with its code, changing nothing.
func (e *env) reassignOntoObserver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, partitions = "reassign", 6
	var before [][]int32
	for p := range partitions {
		r := []int32{1, 2, 3}
		before = append(before, append(r[p%3:], r[:p%3]...))
	}
	e.createTopicAssigned(t, ctx, topic, partitions, 3, nil, before)
	e.fullISRs(t, ctx, topic, partitions)
	load := e.startLoad(t, ctx, topic, partitions)
	load.waitAcks(t, 300)

	adm := kadm.NewClient(e.cl)
	var req kadm.AlterPartitionAssignmentsReq
	target := make([][]int32, partitions)
	for p := range partitions {
		kept := before[p][:2]
		if p%2 == 0 {
			target[p] = append([]int32{observer}, kept...)
		} else {
			target[p] = append(slices.Clone(kept), observer)
		}
		req.Assign(topic, int32(p), target[p])
	}
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("AlterPartitionAssignments: %v", err)
	}
	sawInProgress := false
	testutil.Eventually(t, 60*time.Second, func() error {
		n, err := e.reassignmentsListed(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			sawInProgress = true
			return fmt.Errorf("%d reassignments in progress", n)
		}
		return e.eachPartition(ctx, func(tn string, p int32, leader int32, replicas, isr []int32) error {
			if tn != topic {
				return nil
			}
			if !slices.Equal(replicas, target[p]) || len(isr) != 3 || leader < 0 {
				return fmt.Errorf("%s-%d: replicas %v ISR %v leader %d, want replicas %v", tn, p, replicas, isr, leader, target[p])
			}
			return nil
		})
	})
	t.Logf("reassignments in progress were listed: %v", sawInProgress)
	load.waitAcks(t, 300)

	// The replaced replica of each partition deletes its log.
	testutil.Eventually(t, 30*time.Second, func() error {
		for p := range partitions {
			gone := before[p][2]
			dir := filepath.Join(e.c.Node(gone).DataDir(), fmt.Sprintf("%s-%d", topic, p))
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				return fmt.Errorf("node %d, replaced in %s-%d, still has %s (%v)", gone, topic, p, dir, err)
			}
		}
		return nil
	})

	all := kadm.TopicsSet{}
	for p := range partitions {
		all.Add(topic, int32(p))
	}
	elect, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, all)
	if err != nil {
		t.Fatalf("ElectLeaders: %v", err)
	}
	for _, ps := range elect {
		for _, r := range ps {
			if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
				t.Fatalf("preferred election of %s-%d: %v", r.Topic, r.Partition, r.Err)
			}
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if led := e.ledBy(t, ctx, topic, observer); led != partitions/2 {
			return fmt.Errorf("node 4 leads %d partitions after the preferred election, want %d", led, partitions/2)
		}
		return nil
	})
	load.waitAcks(t, 300)
	load.finish(t, ctx, e)

	// Acceptance point 9: each bad request is refused with its code and
	// changes nothing.
	for _, tc := range []struct {
		name     string
		replicas []int32
		want     error
	}{
		{"a broker that does not exist", []int32{1, 2, 9}, kerr.InvalidReplicaAssignment},
		{"the same broker twice", []int32{1, 1, 2}, kerr.InvalidReplicaAssignment},
		{"RF 0", []int32{}, kerr.InvalidReplicaAssignment},
	} {
		var bad kadm.AlterPartitionAssignmentsReq
		bad.Assign(topic, 0, tc.replicas)
		resp, err := adm.AlterPartitionAssignments(ctx, bad)
		if err == nil {
			err = resp.Error()
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("a reassignment to %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	e.eachPartition(ctx, func(tn string, p int32, leader int32, replicas, isr []int32) error {
		if tn == topic && p == 0 && !slices.Equal(replicas, target[0]) {
			t.Errorf("%s-0 after the refused requests: replicas %v, want %v", tn, replicas, target[0])
		}
		return nil
	})
	if n, err := e.reassignmentsListed(ctx); err != nil || n != 0 {
		t.Errorf("after the refused requests: %d reassignments listed (%v), want none", n, err)
	}
}

// reassignmentsListed is how many partitions ListPartitionReassignments
// with null topics (every one in progress) names. (kadm's
// ListPartitionReassignments sends nothing for an empty set.)
func (e *env) reassignmentsListed(ctx context.Context) (int, error) {
	resp, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(ctx, e.cl)
	if err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	n := 0
	for _, t := range resp.Topics {
		n += len(t.Partitions)
	}
	return n, nil
}
