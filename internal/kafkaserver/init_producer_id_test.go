package kafkaserver

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestInitProducerID(t *testing.T) {
	f := newAdminFixture(t)
	for i, version := range []int16{0, 4} {
		resp := adminCall[*kmsg.InitProducerIDResponse](t, f, kmsg.NewPtrInitProducerIDRequest(), version)
		adminWantCode(t, "init", resp.ErrorCode, nil)
		if resp.ProducerID != 1000+int64(i) || resp.ProducerEpoch != 0 {
			t.Fatalf("v%d: id %d epoch %d", version, resp.ProducerID, resp.ProducerEpoch)
		}
	}
}

// KIP-360: a non-transactional producer sending its id and epoch gets a
// fresh id with epoch 0, as from Kafka.
func TestInitProducerIDEpochBump(t *testing.T) {
	f := newAdminFixture(t)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.ProducerID, req.ProducerEpoch = 1000, 3
	resp := adminCall[*kmsg.InitProducerIDResponse](t, f, req, 3)
	adminWantCode(t, "bump", resp.ErrorCode, nil)
	if resp.ProducerID != 1000 || resp.ProducerEpoch != 0 || f.pids.calls != 1 {
		t.Fatalf("id %d epoch %d after %d allocations", resp.ProducerID, resp.ProducerEpoch, f.pids.calls)
	}

	for _, half := range [][2]int64{{1000, -1}, {-1, 2}} {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.ProducerID, req.ProducerEpoch = half[0], int16(half[1])
		resp := adminCall[*kmsg.InitProducerIDResponse](t, f, req, 4)
		adminWantCode(t, fmt.Sprint("id/epoch ", half), resp.ErrorCode, kerr.InvalidRequest)
		if resp.ProducerID != -1 || resp.ProducerEpoch != -1 {
			t.Fatalf("refused request answered id %d epoch %d", resp.ProducerID, resp.ProducerEpoch)
		}
	}
	// Below v3 the fields do not exist: nothing to check.
	req = kmsg.NewPtrInitProducerIDRequest()
	req.ProducerID, req.ProducerEpoch = 5, -1
	resp = adminCall[*kmsg.InitProducerIDResponse](t, f, req, 2)
	adminWantCode(t, "v2", resp.ErrorCode, nil)
}

func TestInitProducerIDTransactionalWithoutCoordinator(t *testing.T) {
	f := newAdminFixture(t)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = strp("txn-1")
	resp := adminCall[*kmsg.InitProducerIDResponse](t, f, req, 4)
	adminWantCode(t, "transactional", resp.ErrorCode, kerr.TransactionalIDAuthorizationFailed)
	if kerr.IsRetriable(kerr.ErrorForCode(resp.ErrorCode)) {
		t.Fatal("the refusal must not be retriable, or clients retry forever")
	}

	req.TransactionalID = strp("")
	resp = adminCall[*kmsg.InitProducerIDResponse](t, f, req, 0)
	adminWantCode(t, "empty transactional id", resp.ErrorCode, kerr.InvalidRequest)
	if f.pids.calls != 0 {
		t.Fatal("an id was allocated for a refused request")
	}
}

// The allocator's errors (a controller that moved, a commit that timed
// out) reach the client as retriable codes.
func TestInitProducerIDAllocatorErrors(t *testing.T) {
	f := newAdminFixture(t)
	for _, e := range []*kerr.Error{kerr.NotController, kerr.RequestTimedOut} {
		f.pids.fail = fmt.Errorf("%w: committing a producer id block", e)
		resp := adminCall[*kmsg.InitProducerIDResponse](t, f, kmsg.NewPtrInitProducerIDRequest(), 1)
		adminWantCode(t, e.Message, resp.ErrorCode, e)
		if !kerr.IsRetriable(kerr.ErrorForCode(resp.ErrorCode)) {
			t.Fatalf("%v must be retriable", e)
		}
	}
}
