package kafkaserver

// The transactional APIs' wire layer (apis_txn.go) against a scripted
// coordinator: what reaches it, and how its answers and the layer's own
// checks come back per version. The coordinator's rules are
// internal/txn's tests; the whole path with real clients is the node's.

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/txn"
	"github.com/fjordmq/fjord/internal/txn/txnstatetopic"
)

// scriptedTxns records each call and answers err.
type scriptedTxns struct {
	mu    sync.Mutex
	calls []string
	added [][]txn.TopicPartition
	err   error
}

func (f *scriptedTxns) note(call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	return f.err
}

func (f *scriptedTxns) InitProducerID(_ context.Context, id string, timeoutMs int32, pid int64, epoch int16) (int64, int16, error) {
	if err := f.note("init " + id); err != nil {
		return -1, -1, err
	}
	return 7, 3, nil
}

func (f *scriptedTxns) AddPartitionsToTxn(_ context.Context, id string, pid int64, epoch int16, tps []txn.TopicPartition, tv2 bool) error {
	f.mu.Lock()
	f.added = append(f.added, tps)
	f.mu.Unlock()
	return f.note("add " + id)
}

func (f *scriptedTxns) AddOffsetsToTxn(_ context.Context, id string, pid int64, epoch int16, groupID string) error {
	return f.note("add offsets " + id + " " + groupID)
}

// VerifyPartitionsInTxn: a partition of topic "added" is in the
// transaction, any other TRANSACTION_ABORTABLE; err, when set, for all.
func (f *scriptedTxns) VerifyPartitionsInTxn(id string, pid int64, epoch int16, tps []txn.TopicPartition) []error {
	err := f.note("verify " + id)
	errs := make([]error, len(tps))
	for i, tp := range tps {
		switch {
		case err != nil:
			errs[i] = err
		case tp.Topic != "added":
			errs[i] = txn.ErrTransactionAbortable
		}
	}
	return errs
}

// EndTxn: a V2 end (v5) continues at the next epoch, as the coordinator
// answers; a V1 end answers no producer (-1, -1), as it does.
func (f *scriptedTxns) EndTxn(_ context.Context, id string, pid int64, epoch int16, commit, tv2 bool) (int64, int16, error) {
	if tv2 {
		return pid, epoch + 1, f.note("end v2 " + id)
	}
	return -1, -1, f.note("end " + id)
}

func (f *scriptedTxns) DescribeTransactions(ids []string) []txn.TransactionDescription {
	out := make([]txn.TransactionDescription, len(ids))
	for i, id := range ids {
		out[i] = txn.TransactionDescription{TransactionalID: id, Err: txn.ErrTransactionalIDNotFound}
		if id == "known" {
			out[i] = txn.TransactionDescription{TransactionalID: id, State: txn.StateOngoing, TimeoutMs: 60_000, StartTimeMs: 5,
				ProducerID: 7, ProducerEpoch: 3,
				Partitions: []txn.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 2}, {Topic: "b", Partition: 1}}}
		}
	}
	return out
}

func (f *scriptedTxns) ListTransactions(filter txn.ListTransactionsFilter) ([]txn.TransactionListing, []string, error) {
	if filter.TransactionalIDPattern == "(" {
		return nil, nil, txn.ErrInvalidRegularExpression
	}
	f.note("list " + strings.Join(filter.States, ","))
	return []txn.TransactionListing{{TransactionalID: "known", ProducerID: 7, State: txn.StateOngoing}}, []string{"Bogus"}, nil
}

func withTransactions(f *scriptedTxns) harnessOpt {
	return withConfig(func(c *Config) { c.Transactions = f })
}

func TestFindTransactionCoordinator(t *testing.T) {
	h := newWireHarness(t, withTransactions(&scriptedTxns{}))
	c := h.dial()
	for _, v := range []int16{1, 3, 4} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorType = v, 1
		req.CoordinatorKey, req.CoordinatorKeys = "payments", []string{"payments", ""}
		resp := c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
		if v < 4 {
			if resp.ErrorCode != 0 || resp.NodeID != 1 {
				t.Fatalf("v%d: %+v", v, resp)
			}
			continue
		}
		if len(resp.Coordinators) != 2 || resp.Coordinators[0].ErrorCode != 0 || resp.Coordinators[0].NodeID != 1 ||
			resp.Coordinators[1].ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("v%d: %+v", v, resp.Coordinators)
		}
	}
	tp, ok := lookupTopic(h.ctrl.Image(), metadata.TransactionStateTopic)
	if !ok || len(tp.Partitions) != txnstatetopic.DefaultPartitions {
		t.Fatalf("%s after the lookups: %+v", metadata.TransactionStateTopic, tp)
	}
}

func TestInitProducerIDWithCoordinator(t *testing.T) {
	f := &scriptedTxns{}
	h := newWireHarness(t, withTransactions(f))
	c := h.dial()
	id := "payments"
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 5, &id, 60_000
	req.ProducerID, req.ProducerEpoch = -1, -1
	if resp := c.roundTrip(req).(*kmsg.InitProducerIDResponse); resp.ErrorCode != 0 || resp.ProducerID != 7 || resp.ProducerEpoch != 3 {
		t.Fatalf("v5: %+v", resp)
	}
	// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v4.
	f.err = txn.ErrProducerFenced
	for v, want := range map[int16]int16{3: kerr.InvalidProducerEpoch.Code, 4: kerr.ProducerFenced.Code} {
		req.Version = v
		if resp := c.roundTrip(req).(*kmsg.InitProducerIDResponse); resp.ErrorCode != want || resp.ProducerID != -1 {
			t.Fatalf("v%d fenced: %+v", v, resp)
		}
	}
	// Hostile: an empty id, and one of producer id and epoch.
	empty := ""
	req.TransactionalID = &empty
	if resp := c.roundTrip(req).(*kmsg.InitProducerIDResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("empty id: %+v", resp)
	}
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = &id, 9, -1
	if resp := c.roundTrip(req).(*kmsg.InitProducerIDResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("producer id without epoch: %+v", resp)
	}
	if got := len(f.calls); got != 3 {
		t.Fatalf("%d coordinator calls (%v), want 3: the refused requests reach it not", got, f.calls)
	}
}

func TestAddPartitionsToTxnWire(t *testing.T) {
	f := &scriptedTxns{}
	h := newWireHarness(t, withTransactions(f))
	h.ctrl.addTopic("a", 3)
	h.ctrl.addTopic(metadata.ConsumerOffsetsTopic, 1)
	c := h.dial()
	add := func(v int16, topics map[string][]int32) map[string]map[int32]int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = v, "payments", 7, 3
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for k := range topics {
				if !yield(k) {
					return
				}
			}
		}) {
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic, rt.Partitions = name, topics[name]
			req.Topics = append(req.Topics, rt)
		}
		resp := c.roundTrip(req).(*kmsg.AddPartitionsToTxnResponse)
		out := map[string]map[int32]int16{}
		for _, rt := range resp.Topics {
			out[rt.Topic] = map[int32]int16{}
			for _, p := range rt.Partitions {
				out[rt.Topic][p.Partition] = p.ErrorCode
			}
		}
		return out
	}

	// Every partition known: one call, each partition once, all answered.
	got := add(3, map[string][]int32{"a": {0, 2, 0}})
	if got["a"][0] != 0 || got["a"][2] != 0 || len(f.added) != 1 || len(f.added[0]) != 2 {
		t.Fatalf("added %v: %v", f.added, got)
	}
	// One partition unknown, one internal: nothing is added, and the
	// others are not attempted.
	got = add(3, map[string][]int32{"a": {1, 9}, "nope": {0}, metadata.ConsumerOffsetsTopic: {0}})
	want := map[string]map[int32]int16{
		"a":                           {1: kerr.OperationNotAttempted.Code, 9: kerr.UnknownTopicOrPartition.Code},
		"nope":                        {0: kerr.UnknownTopicOrPartition.Code},
		metadata.ConsumerOffsetsTopic: {0: kerr.TopicAuthorizationFailed.Code},
	}
	if !mapsEqual(got, want) || len(f.added) != 1 {
		t.Fatalf("got %v, want %v (added %v)", got, want, f.added)
	}
	// The coordinator's one error is every partition's, PRODUCER_FENCED
	// as INVALID_PRODUCER_EPOCH below v2.
	f.err = txn.ErrProducerFenced
	for v, code := range map[int16]int16{1: kerr.InvalidProducerEpoch.Code, 2: kerr.ProducerFenced.Code} {
		got = add(v, map[string][]int32{"a": {0, 1}})
		if got["a"][0] != code || got["a"][1] != code {
			t.Fatalf("v%d fenced: %v", v, got)
		}
	}
}

func mapsEqual(a, b map[string]map[int32]int16) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || len(av) != len(bv) {
			return false
		}
		for p, code := range av {
			if bv[p] != code {
				return false
			}
		}
	}
	return true
}

func TestEndTxnWire(t *testing.T) {
	f := &scriptedTxns{}
	h := newWireHarness(t, withTransactions(f))
	c := h.dial()
	req := kmsg.NewPtrEndTxnRequest()
	req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = 4, "payments", 7, 3, true
	if resp := c.roundTrip(req).(*kmsg.EndTxnResponse); resp.ErrorCode != 0 {
		t.Fatalf("v4: %+v", resp)
	}
	f.err = txn.ErrConcurrentTransactions
	if resp := c.roundTrip(req).(*kmsg.EndTxnResponse); resp.ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Fatalf("concurrent: %+v", resp)
	}
	f.err = txn.ErrProducerFenced
	req.Version = 1
	if resp := c.roundTrip(req).(*kmsg.EndTxnResponse); resp.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("v1 fenced: %+v", resp)
	}
	req.TransactionalID = ""
	if resp := c.roundTrip(req).(*kmsg.EndTxnResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("empty id: %+v", resp)
	}
	// v5, Transactions V2: the coordinator is asked for a V2 end and
	// its bumped epoch is the answer's.
	f.err, f.calls = nil, nil
	req.Version, req.TransactionalID = 5, "payments"
	if resp := c.roundTrip(req).(*kmsg.EndTxnResponse); resp.ErrorCode != 0 || resp.ProducerID != 7 || resp.ProducerEpoch != 4 {
		t.Fatalf("v5: %+v, want producer 7 at epoch 4", resp)
	}
	if !slices.Equal(f.calls, []string{"end v2 payments"}) {
		t.Fatalf("coordinator calls %q", f.calls)
	}
	f.err = txn.ErrProducerFenced
	if resp := c.roundTrip(req).(*kmsg.EndTxnResponse); resp.ErrorCode != kerr.ProducerFenced.Code || resp.ProducerID != -1 {
		t.Fatalf("v5 fenced: %+v", resp)
	}
}

// ApiVersions v3 finalizes transaction.version 2 with a non-negative
// epoch, and leaves it out of SupportedFeatures (its minimum is 0,
// which v3 clients took to mean unsupported); v0-2 carry no features.
func TestTransactionVersionFeature(t *testing.T) {
	h := newWireHarness(t)
	c := h.dial()
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "fjord-test", "1.0"
		resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if v < 3 {
			if len(resp.FinalizedFeatures) != 0 {
				t.Fatalf("v%d: features %+v", v, resp.FinalizedFeatures)
			}
			continue
		}
		if resp.FinalizedFeaturesEpoch < 0 || len(resp.FinalizedFeatures) != 1 || resp.FinalizedFeatures[0].Name != "transaction.version" ||
			resp.FinalizedFeatures[0].MaxVersionLevel != 2 || resp.FinalizedFeatures[0].MinVersionLevel != 2 {
			t.Fatalf("v3: epoch %d, finalized %+v", resp.FinalizedFeaturesEpoch, resp.FinalizedFeatures)
		}
		if len(resp.SupportedFeatures) != 0 {
			t.Fatalf("v3: supported %+v", resp.SupportedFeatures)
		}
	}
}

func TestDescribeAndListTransactionsWire(t *testing.T) {
	f := &scriptedTxns{}
	h := newWireHarness(t, withTransactions(f))
	c := h.dial()
	d := kmsg.NewPtrDescribeTransactionsRequest()
	d.TransactionalIDs = []string{"known", "", "unknown"}
	resp := c.roundTrip(d).(*kmsg.DescribeTransactionsResponse)
	if len(resp.TransactionStates) != 3 {
		t.Fatalf("%+v", resp)
	}
	k := resp.TransactionStates[0]
	if k.ErrorCode != 0 || k.State != "Ongoing" || k.ProducerID != 7 || k.TimeoutMillis != 60_000 || len(k.Topics) != 2 ||
		k.Topics[0].Topic != "a" || !slices.Equal(k.Topics[0].Partitions, []int32{0, 2}) || !slices.Equal(k.Topics[1].Partitions, []int32{1}) {
		t.Fatalf("known: %+v", k)
	}
	if resp.TransactionStates[1].ErrorCode != kerr.InvalidRequest.Code || resp.TransactionStates[2].ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("empty and unknown: %+v", resp.TransactionStates[1:])
	}

	l := kmsg.NewPtrListTransactionsRequest()
	l.Version, l.StateFilters = 2, []string{"Ongoing", "Bogus"}
	lr := c.roundTrip(l).(*kmsg.ListTransactionsResponse)
	if lr.ErrorCode != 0 || len(lr.TransactionStates) != 1 || lr.TransactionStates[0].TransactionState != "Ongoing" ||
		!slices.Equal(lr.UnknownStateFilters, []string{"Bogus"}) {
		t.Fatalf("list: %+v", lr)
	}
	bad := "("
	l.TransactionalIDPattern = &bad
	if lr := c.roundTrip(l).(*kmsg.ListTransactionsResponse); lr.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Fatalf("bad pattern: %+v", lr)
	}
}

// Without a coordinator every transactional API answers so, and the
// lookups say why.
func TestTransactionalAPIsWithoutCoordinator(t *testing.T) {
	h := newWireHarness(t)
	c := h.dial()
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID = "x"
	if resp := c.roundTrip(end).(*kmsg.EndTxnResponse); resp.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("EndTxn: %+v", resp)
	}
	l := kmsg.NewPtrListTransactionsRequest()
	if resp := c.roundTrip(l).(*kmsg.ListTransactionsResponse); resp.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("ListTransactions: %+v", resp)
	}
}
