package kafkaserver

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-4
//
// Consumer groups and transactions have no coordinator yet (groups come
// with the consumer group issue), so every key, group or transactional,
// is answered COORDINATOR_NOT_AVAILABLE, with a message saying why on
// v1+. That is an honest, retriable answer: a group consumer waits and
// retries rather than failing on an API it did not expect.
//
// It is advertised before groups exist because librdkafka reads its
// presence as a sign of a broker new enough for LZ4 (its feature map
// ties "lz4" to FindCoordinator v0): without it librdkafka and kcat
// silently send lz4-configured batches uncompressed.
//
// v4 (KIP-699) answers a list of keys; v0-3 one key. Key types other
// than group (0) and transaction (1) are INVALID_REQUEST.
func handleFindCoordinator(_ context.Context, _ *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.FindCoordinatorRequest)
	resp := body.ResponseKind().(*kmsg.FindCoordinatorResponse)
	answer := func(keyType int8) (int16, *string) {
		if req.version >= 1 && keyType != 0 && keyType != 1 {
			msg := "unknown coordinator key type: allowed 0 (group) and 1 (transaction)"
			return kerr.InvalidRequest.Code, &msg
		}
		msg := "Fjord has no group or transaction coordinator yet"
		return kerr.CoordinatorNotAvailable.Code, &msg
	}
	if req.version >= 4 {
		for _, key := range body.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			c.NodeID, c.Port = -1, -1
			c.ErrorCode, c.ErrorMessage = answer(body.CoordinatorType)
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp, nil, nil
	}
	resp.NodeID, resp.Port = -1, -1
	var msg *string
	resp.ErrorCode, msg = answer(body.CoordinatorType)
	if req.version >= 1 {
		resp.ErrorMessage = msg
	}
	return resp, nil, nil
}
