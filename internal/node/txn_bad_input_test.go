package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/txn"
)

// Issue 17, acceptance point 6, over the wire on one node (the first
// case, a produce to a partition not added, is TestTransactionVerification):
// an InitProducerId with a transactional id over txn.MaxTransactionalIDBytes
// (INVALID_REQUEST) or a timeout over transaction.max.timeout.ms
// (INVALID_TRANSACTION_TIMEOUT); an EndTxn with a stale epoch
// (PRODUCER_FENCED); a TxnOffsetCommit from a stale generation of its
// group (ILLEGAL_GENERATION). Each changes nothing: the transaction stays
// as it was and no offset is pending.
func TestTransactionBadInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := testConfig(t, t.TempDir())
	cfg.GroupInitialRebalanceDelay = -1
	cfg.TransactionMaxTimeout = time.Minute // transaction.max.timeout.ms
	n := startNode(t, cfg)
	testutil.Eventually(t, 10*time.Second, n.Ready)
	cl, b := brokerClient(t, n)
	createTopic(t, ctx, b, "in", 1, 1)
	createTransactionStateTopic(t, ctx, n, 1)

	initPID := func(id string, timeoutMs int32) *kmsg.InitProducerIDResponse {
		t.Helper()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, timeoutMs
		resp, err := req.RequestWith(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// The coordinator answers once its partition is loaded.
	var pid int64
	var epoch int16
	testutil.Eventually(t, 20*time.Second, func() error {
		resp := initPID("app", 60_000)
		pid, epoch = resp.ProducerID, resp.ProducerEpoch
		return kerr.ErrorForCode(resp.ErrorCode)
	})
	expect := func(what string, code int16, want *kerr.Error) {
		t.Helper()
		if code != want.Code {
			t.Fatalf("%s: code %d (%v), want %v", what, code, kerr.ErrorForCode(code), want)
		}
	}
	expect("a transactional id over the limit", initPID(strings.Repeat("x", txn.MaxTransactionalIDBytes+1), 60_000).ErrorCode, kerr.InvalidRequest)
	expect("a timeout over transaction.max.timeout.ms", initPID("other", 60_001).ErrorCode, kerr.InvalidTransactionTimeout)
	if d := n.txns.DescribeTransactions([]string{"other", strings.Repeat("x", txn.MaxTransactionalIDBytes+1)}); d[0].Err == nil || d[1].Err == nil {
		t.Fatalf("refused InitProducerIds stored transactions: %+v", d)
	}

	// FindCoordinator makes __consumer_offsets; its partition loads
	// moments later.
	testutil.Eventually(t, 20*time.Second, func() error {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = "g"
		r, err := fc.RequestWith(ctx, cl) // the client's, which shards v4+'s keys
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return err
		}
		desc := kmsg.NewPtrDescribeGroupsRequest()
		desc.Groups = []string{"g"}
		dr, err := desc.RequestWith(ctx, b)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(dr.Groups[0].ErrorCode)
	})

	// A transaction with the group's partition in it.
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "app", pid, epoch, "g"
	if resp, err := add.RequestWith(ctx, b); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v, %+v", err, resp)
	}

	// EndTxn of a stale epoch.
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "app", pid, epoch-1, true
	if epoch == 0 {
		end.ProducerEpoch = epoch + 1 // a newer one is fenced too: not this session's
	}
	resp, err := end.RequestWith(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	expect("EndTxn with a stale epoch", resp.ErrorCode, kerr.ProducerFenced)
	if d := n.txns.DescribeTransactions([]string{"app"})[0]; d.State != txn.StateOngoing || len(d.Partitions) != 1 {
		t.Fatalf("after the refused EndTxn: %+v, want the transaction Ongoing with the group's partition", d)
	}

	// A member of generation 1 of group g, then a TxnOffsetCommit that
	// names generation 0.
	member, generation := joinAsLeader(t, ctx, b, "g", "in")
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = "app", "g", pid, epoch
	commit.MemberID, commit.Generation = member, generation-1
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = "in"
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.LeaderEpoch = 0, 5, -1
	ct.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{cp}
	commit.Topics = []kmsg.TxnOffsetCommitRequestTopic{ct}
	cresp, err := commit.RequestWith(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	expect("TxnOffsetCommit from a stale generation", cresp.Topics[0].Partitions[0].ErrorCode, kerr.IllegalGeneration)
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.RequireStable = true
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "in", Partitions: []int32{0}}}}}
	fresp, err := fetch.RequestWith(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range fresp.Groups {
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				got = append(got, fmt.Sprintf("%s-%d at %d (code %d)", tp.Topic, p.Partition, p.Offset, p.ErrorCode))
			}
		}
	}
	if len(got) != 1 || got[0] != "in-0 at -1 (code 0)" {
		t.Fatalf("OffsetFetch require_stable after the refused commit: %v, want nothing committed or pending", got)
	}
}

// joinAsLeader joins group as its only member (subscribed to topic),
// completes the rebalance as its leader, and returns the member id and
// generation.
func joinAsLeader(t *testing.T, ctx context.Context, b interface {
	Request(context.Context, kmsg.Request) (kmsg.Response, error)
}, group, topic string) (string, int32) {
	t.Helper()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{topic}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = group, 30_000, 30_000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	var jresp *kmsg.JoinGroupResponse
	for range 2 { // the first answers MEMBER_ID_REQUIRED with the id to use
		r, err := b.Request(ctx, join)
		if err != nil {
			t.Fatal(err)
		}
		jresp = r.(*kmsg.JoinGroupResponse)
		if jresp.ErrorCode != kerr.MemberIDRequired.Code {
			break
		}
		join.MemberID = jresp.MemberID
	}
	if err := kerr.ErrorForCode(jresp.ErrorCode); err != nil {
		t.Fatalf("JoinGroup: %v", err)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.Generation, sync.MemberID = group, jresp.Generation, jresp.MemberID
	protocolType, protocol := "consumer", "range"
	sync.ProtocolType, sync.Protocol = &protocolType, &protocol
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jresp.MemberID}}
	r, err := b.Request(ctx, sync)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(r.(*kmsg.SyncGroupResponse).ErrorCode); err != nil {
		t.Fatalf("SyncGroup: %v", err)
	}
	return jresp.MemberID, jresp.Generation
}
