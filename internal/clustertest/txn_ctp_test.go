package clustertest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 17, acceptance point 1 with franz-go: the consume-transform-
// produce loop in GroupTransactSession, two application instances in one
// group (so rebalances fence a zombie's offset commit by generation,
// KIP-447), on three nodes. While they work, the transaction
// coordinator's node, an output partition's leader and the group
// coordinator's node are each SIGKILLed and brought back. At the end the
// output topic, read with read_committed, holds each input record's
// result exactly once, in input order per key, and the group's committed
// offsets are the input's end.
func (e *env) consumeTransformProduce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const (
		in, out    = "ctp-in", "ctp-out"
		partitions = 3
		keys       = 24
		perKey     = 125 // 3000 input records
		groupID    = "ctp"
	)
	e.createTopic(t, ctx, in, partitions, 3)
	e.createTopic(t, ctx, out, partitions, 3)
	e.fullISRs(t, ctx, in, partitions)
	e.fullISRs(t, ctx, out, partitions)

	// The input: key kN's records carry kN-0, kN-1, ... in order.
	var recs []*kgo.Record
	for i := range perKey {
		for k := range keys {
			recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "k%d-%d", k, i)})
		}
	}
	if err := e.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var processed atomic.Int64 // records produced in transactions that committed
	appCtx, stopApps := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { e.ctpApp(t, appCtx, fmt.Sprintf("ctp-app-%d", i), groupID, in, out, &processed) })
	}
	defer func() {
		stopApps()
		wg.Wait()
	}()
	total := int64(keys * perKey)
	progress := func(what string, atLeast int64) {
		t.Helper()
		testutil.Eventually(t, 90*time.Second, func() error {
			if n := processed.Load(); n < atLeast {
				return fmt.Errorf("%s: %d of %d records processed", what, n, atLeast)
			}
			return nil
		})
	}

	progress("before any fault", total/6)
	coord := e.coordinatorOf(t, ctx, 1, "ctp-app-0")
	t.Logf("killing node %d, the transaction coordinator of ctp-app-0", coord)
	e.c.Kill(coord)
	progress("with the transaction coordinator's node down", total/3)
	e.c.Start(coord)

	e.fullISRs(t, ctx, out, partitions)
	leader := e.c.Leader(t, out, 0)
	t.Logf("killing node %d, the leader of %s-0", leader, out)
	e.c.Kill(leader)
	progress("with an output leader down", total/2)
	e.c.Start(leader)

	e.fullISRs(t, ctx, out, partitions)
	groupCoord := e.coordinatorOf(t, ctx, 0, groupID)
	t.Logf("killing node %d, the group coordinator of %s", groupCoord, groupID)
	e.c.Kill(groupCoord)
	progress("with the group coordinator's node down", 2*total/3)
	e.c.Start(groupCoord)

	// Done when the group has committed the input's end.
	adm := kadm.NewClient(e.cl)
	ends, err := adm.ListEndOffsets(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Minute, func() error {
		committed, err := adm.FetchOffsets(ctx, groupID)
		if err != nil {
			return err
		}
		var behind []string
		ends.Each(func(o kadm.ListedOffset) {
			c, ok := committed.Lookup(o.Topic, o.Partition)
			if !ok || c.At != o.Offset {
				behind = append(behind, fmt.Sprintf("%s-%d at %d of %d", o.Topic, o.Partition, c.At, o.Offset))
			}
		})
		if len(behind) > 0 {
			return fmt.Errorf("group %s behind: %v", groupID, behind)
		}
		return nil
	})
	stopApps()
	wg.Wait()

	// Each input value exactly once, in input order per key.
	seen := map[string]int{}
	last := map[string]int{} // key -> the last sequence read
	for _, r := range e.readToEnd(t, ctx, out, partitions, true) {
		v := string(r.Value)
		seen[v]++
		k, seqText, _ := strings.Cut(v, "-")
		seq, err := strconv.Atoi(seqText)
		if err != nil || k != string(r.Key) {
			t.Fatalf("output record %q with key %q is no input's result", v, r.Key)
		}
		if prev, ok := last[k]; ok && seq <= prev {
			t.Errorf("key %s: %s after %s-%d: out of input order", k, v, k, prev)
		}
		last[k] = seq
	}
	var missing, dups int
	for k := range keys {
		for i := range perKey {
			switch n := seen[fmt.Sprintf("k%d-%d", k, i)]; {
			case n == 0:
				missing++
			case n > 1:
				dups++
			}
		}
	}
	if missing > 0 || dups > 0 || len(seen) != int(total) {
		t.Fatalf("output: %d distinct values of %d, %d missing, %d duplicated", len(seen), total, missing, dups)
	}
	t.Logf("%d input records transformed exactly once across three SIGKILLs", total)
}

// ctpApp is one instance of the application: it consumes in as a member
// of groupID, writes each record to out unchanged (same key and value)
// and commits its position in the same transaction, until ctx ends. When
// the session fails for good (the client gives up after a node's death),
// it starts a new one, as a restarted application would.
func (e *env) ctpApp(t *testing.T, ctx context.Context, txnID, groupID, in, out string, processed *atomic.Int64) {
	for ctx.Err() == nil {
		s, err := kgo.NewGroupTransactSession(
			kgo.SeedBrokers(strings.Split(e.c.Brokers(), ",")...),
			kgo.TransactionalID(txnID), kgo.TransactionTimeout(30*time.Second),
			kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(in),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DefaultProduceTopic(out), kgo.RetryTimeout(30*time.Second),
		)
		if err != nil {
			t.Errorf("%s: %v", txnID, err)
			return
		}
		err = ctpLoop(ctx, s, processed)
		s.Close()
		if err != nil && ctx.Err() == nil {
			t.Logf("%s: session failed, starting a new one: %v", txnID, err)
		}
	}
}

// ctpLoop runs one session's transactions until ctx ends or one fails.
func ctpLoop(ctx context.Context, s *kgo.GroupTransactSession, processed *atomic.Int64) error {
	for {
		fs := s.PollRecords(ctx, 200)
		if ctx.Err() != nil {
			return nil
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.Canceled) {
				return fmt.Errorf("fetch %s-%d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		if err := s.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		var outs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { outs = append(outs, &kgo.Record{Key: r.Key, Value: r.Value}) })
		var produceErr error
		if len(outs) > 0 {
			produceErr = s.ProduceSync(ctx, outs...).FirstErr()
		}
		committed, err := s.End(ctx, kgo.TransactionEndTry(produceErr == nil))
		if err != nil {
			return fmt.Errorf("end: %w", err)
		}
		if committed {
			processed.Add(int64(len(outs)))
		}
	}
}

// coordinatorOf is the node FindCoordinator names for key (type 0: a
// group, 1: a transactional id), once one is named.
func (e *env) coordinatorOf(t *testing.T, ctx context.Context, keyType int8, key string) int32 {
	t.Helper()
	var node int32
	testutil.Eventually(t, 30*time.Second, func() error {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKey = keyType, key
		resp, err := req.RequestWith(ctx, e.cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		node = resp.NodeID
		return nil
	})
	return node
}
