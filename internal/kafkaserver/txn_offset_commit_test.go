package kafkaserver

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/group"
	"github.com/fjordmq/fjord/internal/group/offsetstopic"
	"github.com/fjordmq/fjord/internal/txn"
)

// Transactional offset commits end to end on one node (issue 17, slice
// 4), over the real replica manager and __consumer_offsets log:
// TxnOffsetCommit writes the offsets as the producer's transactional
// batch, pending; OffsetFetch answers the offset before them, or
// UNSTABLE_OFFSET_COMMIT with require_stable; a commit marker written
// with WriteTxnMarkers makes them visible, an abort marker drops them;
// the partition refuses a fenced producer's commit; and bad requests are
// refused before anything is written.
func TestTxnOffsetCommitThroughMarkers(t *testing.T) {
	h := newRealReplicasHarness(t, withGroupsOn(func(h *wireHarness) group.Log { return managerOffsetsLog{h} }))
	h.ctrl.addTopic("t", 2)
	h.ctrl.addTopic("__consumer_offsets", offsetstopic.DefaultPartitions)
	c := h.dial()
	const g = "ctp"
	offsetsPartition := group.PartitionFor(g, offsetstopic.DefaultPartitions)

	txnCommit := func(version int16, txnID, grp string, pid int64, epoch int16, generation int32, topic string, partition int32, offset int64) int16 {
		t.Helper()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.SetVersion(version)
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = txnID, grp, pid, epoch, generation
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = partition, offset, -1
		rt.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{rp}
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{rt}
		resp := c.roundTrip(req).(*kmsg.TxnOffsetCommitResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != partition {
			t.Fatalf("answer %+v", resp)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	fetch := func(requireStable bool) (int64, int16) {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(7)
		req.Group, req.RequireStable = g, requireStable
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		resp := c.roundTrip(req).(*kmsg.OffsetFetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("OffsetFetch: %+v", resp)
		}
		p := resp.Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	marker := func(pid int64, epoch int16, commit bool) int16 {
		t.Helper()
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.SetVersion(1)
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed = pid, epoch, 0, commit
		rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		rt.Topic, rt.Partitions = "__consumer_offsets", []int32{offsetsPartition}
		m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{rt}
		req.Markers = []kmsg.WriteTxnMarkersRequestMarker{m}
		resp := c.roundTrip(req).(*kmsg.WriteTxnMarkersResponse)
		return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	expect := func(what string, got int16, want *kerr.Error) {
		t.Helper()
		var code int16
		if want != nil {
			code = want.Code
		}
		if got != code {
			t.Fatalf("%s: code %d (%v), want %v", what, got, kerr.ErrorForCode(got), want)
		}
	}
	expectOffset := func(what string, want int64) {
		t.Helper()
		if o, code := fetch(false); o != want || code != 0 {
			t.Fatalf("%s: OffsetFetch %d (code %d), want %d", what, o, code, want)
		}
	}
	leo := func() int64 {
		t.Helper()
		_, end, err := h.manager.LogEnd("__consumer_offsets", offsetsPartition)
		if err != nil {
			t.Fatal(err)
		}
		return end
	}

	// Committed in a transaction: pending until its marker.
	expect("txn commit", txnCommit(3, "app", g, 9, 0, -1, "t", 0, 42), nil)
	expectOffset("pending", -1)
	if o, code := fetch(true); o != -1 || code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require_stable while pending: offset %d code %d, want -1 and UNSTABLE_OFFSET_COMMIT", o, code)
	}
	expect("commit marker", marker(9, 0, true), nil)
	expectOffset("committed", 42)
	if o, code := fetch(true); o != 42 || code != 0 {
		t.Fatalf("require_stable after the commit: offset %d code %d", o, code)
	}

	// The next transaction aborts: its offset never shows.
	expect("txn commit", txnCommit(3, "app", g, 9, 0, -1, "t", 0, 50), nil)
	expect("abort marker", marker(9, 0, false), nil)
	expectOffset("aborted", 42)

	// A new session fences the producer (its epoch-1 abort marker); the
	// old epoch's commit is refused by the partition.
	expect("fencing marker", marker(9, 1, false), nil)
	before := leo()
	expect("fenced producer's commit", txnCommit(3, "app", g, 9, 0, -1, "t", 0, 60), kerr.InvalidProducerEpoch)

	// Refused before anything is written.
	for _, tc := range []struct {
		name string
		code int16
		want *kerr.Error
	}{
		{"no transactional id", txnCommit(3, "", g, 9, 1, -1, "t", 0, 1), kerr.InvalidRequest},
		{"no group", txnCommit(3, "app", "", 9, 1, -1, "t", 0, 1), kerr.InvalidGroupID},
		{"a negative producer id", txnCommit(3, "app", g, -1, 1, -1, "t", 0, 1), kerr.InvalidRequest},
		{"a negative epoch", txnCommit(3, "app", g, 9, -1, -1, "t", 0, 1), kerr.InvalidRequest},
		{"an unknown topic", txnCommit(3, "app", g, 9, 1, -1, "missing", 0, 1), kerr.UnknownTopicOrPartition},
		{"an unknown partition", txnCommit(3, "app", g, 9, 1, -1, "t", 7, 1), kerr.UnknownTopicOrPartition},
		// As Kafka's current coordinator: a generation names a member.
		{"a generation without a member", txnCommit(3, "app", g, 9, 1, 5, "t", 0, 1), kerr.UnknownMemberID},
	} {
		expect(tc.name, tc.code, tc.want)
	}
	if after := leo(); after != before {
		t.Fatalf("refused commits wrote: __consumer_offsets-%d end %d -> %d", offsetsPartition, before, after)
	}
	expectOffset("after the refusals", 42)

	// v0-2 carry no generation: a member-less commit, at the new epoch.
	expect("v2 txn commit", txnCommit(2, "app", g, 9, 1, 0, "t", 1, 7), nil)
	expect("commit marker", marker(9, 1, true), nil)
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(7)
	req.Group = g
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{1}}}
	if resp := c.roundTrip(req).(*kmsg.OffsetFetchResponse); resp.Topics[0].Partitions[0].Offset != 7 {
		t.Fatalf("t-1 after the v2 commit: %+v", resp.Topics[0].Partitions[0])
	}
}

// managerOffsetsLog is offsetstopic's Log over the harness's replica
// manager, which the harness makes after the group coordinator.
type managerOffsetsLog struct{ h *wireHarness }

func (l managerOffsetsLog) Append(ctx context.Context, p int32, recs []group.Record) error {
	return offsetstopic.NewLog(l.h.manager, time.Now).Append(ctx, p, recs)
}

func (l managerOffsetsLog) AppendTxn(ctx context.Context, p int32, pid int64, epoch int16, guard group.TxnGuard, recs []group.Record) error {
	return offsetstopic.NewLog(l.h.manager, time.Now).AppendTxn(ctx, p, pid, epoch, guard, recs)
}

// AddOffsetsToTxn reaches the coordinator with the group; its errors
// come back per version (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below
// v2); a request without a transactional id or group, or with no
// coordinator on the node, is refused here.
func TestAddOffsetsToTxn(t *testing.T) {
	f := &scriptedTxns{}
	h := newWireHarness(t, withTransactions(f))
	c := h.dial()
	send := func(version int16, id, grp string) int16 {
		t.Helper()
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.SetVersion(version)
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = id, grp, 7, 3
		return c.roundTrip(req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
	}
	if code := send(3, "app", "g"); code != 0 {
		t.Fatalf("add: code %d", code)
	}
	f.err = txn.ErrProducerFenced
	for v, want := range map[int16]int16{1: kerr.InvalidProducerEpoch.Code, 2: kerr.ProducerFenced.Code, 4: kerr.ProducerFenced.Code} {
		if code := send(v, "app", "g"); code != want {
			t.Fatalf("v%d fenced: code %d, want %d", v, code, want)
		}
	}
	f.err = nil
	if code := send(3, "", "g"); code != kerr.InvalidRequest.Code {
		t.Fatalf("no transactional id: code %d", code)
	}
	if code := send(3, "app", ""); code != kerr.InvalidGroupID.Code {
		t.Fatalf("no group: code %d", code)
	}
	if want := []string{"add offsets app g", "add offsets app g", "add offsets app g", "add offsets app g"}; !slices.Equal(f.calls, want) {
		t.Fatalf("coordinator calls %q, want %q: the refused requests reach it not", f.calls, want)
	}

	bare := newWireHarness(t).dial()
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.Group = "app", "g"
	if resp := bare.roundTrip(req).(*kmsg.AddOffsetsToTxnResponse); resp.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("no coordinator: %+v", resp)
	}
}

// TxnOffsetCommit is verified with the transaction's coordinator as a
// produce is: not in the transaction, it is INVALID_TXN_STATE (v3) or
// TRANSACTION_ABORTABLE (v4) and writes nothing; verified, it is
// written, and while the producer's transaction is open there the next
// commit is not asked about; v5 (Transactions V2) adds the group's
// partition itself.
func TestTxnOffsetCommitVerified(t *testing.T) {
	v := &scriptedVerifier{answers: map[string]error{}}
	h := newRealReplicasHarness(t, withGroupsOn(func(h *wireHarness) group.Log { return managerOffsetsLog{h} }),
		withConfig(func(c *Config) { c.TxnVerifier = v }))
	h.ctrl.addTopic("t", 1)
	h.ctrl.addTopic("__consumer_offsets", offsetstopic.DefaultPartitions)
	c := h.dial()
	partition := group.PartitionFor("g", offsetstopic.DefaultPartitions)
	commit := func(version int16, pid int64) int16 {
		t.Helper()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.SetVersion(version)
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "app", "g", pid, 0, -1
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
		return c.roundTrip(req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	end := func() int64 {
		_, e, err := h.manager.LogEnd("__consumer_offsets", partition)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	v.answers["__consumer_offsets"] = txn.ErrTransactionAbortable
	if code := commit(3, 5); code != kerr.InvalidTxnState.Code {
		t.Fatalf("v3, not in the transaction: code %d, want INVALID_TXN_STATE", code)
	}
	if code := commit(4, 5); code != kerr.TransactionAbortable.Code {
		t.Fatalf("v4, not in the transaction: code %d, want TRANSACTION_ABORTABLE", code)
	}
	if e := end(); e != 0 {
		t.Fatalf("refused commits wrote %d records", e)
	}
	v.answers["__consumer_offsets"] = nil
	if code := commit(3, 5); code != 0 {
		t.Fatalf("v3, verified: code %d", code)
	}
	v.mu.Lock()
	asked := len(v.asked)
	v.mu.Unlock()
	if code := commit(3, 5); code != 0 {
		t.Fatalf("v3, the transaction open: code %d", code)
	}
	if e := end(); e != 2 {
		t.Fatalf("%d records after two commits, want 2", e)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.asked) != asked {
		t.Fatalf("asked again with the producer's transaction open: %v", v.asked)
	}
	v.mu.Unlock()
	if code := commit(5, 6); code != 0 {
		t.Fatalf("v5: code %d", code)
	}
	v.mu.Lock()
	if len(v.added) != 1 || v.added[0] != (txn.TopicPartition{Topic: "__consumer_offsets", Partition: partition}) {
		t.Fatalf("v5 added %v, want the group's partition", v.added)
	}
}
