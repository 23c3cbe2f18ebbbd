package kafkaserver

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/fjordmsg"
)

// api is one Kafka API this server serves: its key, the version range it
// advertises in ApiVersions, and its handler. Each API lives in its own
// file (produce.go, fetch.go, ...), which opens with the versions it serves
// and its behaviour.
type api struct {
	key        int16
	minVersion int16
	maxVersion int16
	// handle answers one decoded request. It returns the response (nil
	// for a produce with acks=0, which gets none) and, when the response
	// borrows pooled buffers, a release func the connection writer calls
	// once the response is on the wire (or the connection closes).
	//
	// Errors a client should see go in the response's error codes
	// (errorCode maps service errors). A non-nil err means the request
	// cannot be answered at all: the connection is closed after the
	// responses ahead of it are written, as Kafka closes a connection on
	// a request it cannot process. A panic is recovered, logged with the
	// API's name, and closes the connection the same way.
	//
	// handle runs on its own goroutine, concurrently with the other
	// requests of the same connection; ctx ends when the connection or
	// the server closes. The response's version is set by the writer to
	// the request's.
	handle func(ctx context.Context, s *Server, req *request) (resp kmsg.Response, release func(), err error)
	// controlChange marks the APIs that change cluster metadata through
	// the active controller, which a node that is not the controller
	// forwards to it (controlplane/forwarding.go). When one comes from
	// another Fjord node (a forward), the handler serves it only as the
	// active controller, and the answer carries the metadata offset
	// that includes the change.
	controlChange bool
}

// apis is every API served, by key. It is built from the tables in
// apis_data.go (bootstrap, produce, fetch), apis_admin.go (admin and
// offsets), apis_group.go (consumer groups), apis_txn.go (transactions)
// apis_controller.go (the requests nodes send the active controller),
// apis_acl.go (ACLs), sasl.go (authentication) and
// describe_positions.go (Fjord's own requests, internal/fjordmsg),
// so each part can change without touching the others.
// Built in init, not a var initializer: ApiVersions' handler reads the
// table, which would make the initializer refer to itself.
var apis map[int16]api

func init() {
	apis = make(map[int16]api)
	for _, tab := range [][]api{dataAPIs, adminAPIs, groupAPIs, txnAPIs, controllerAPIs, fjordAPIs, saslAPIs, aclAPIs} {
		for _, a := range tab {
			if _, dup := apis[a.key]; dup {
				panic("kafkaserver: API registered twice: " + fjordmsg.NameForKey(a.key))
			}
			// The connection decodes with kmsg (or fjordmsg), which must
			// know every version advertised.
			if k := fjordmsg.RequestForKey(a.key); k == nil || a.minVersion < 0 || a.maxVersion < a.minVersion || a.maxVersion > k.MaxVersion() || a.handle == nil {
				panic(fmt.Sprintf("kafkaserver: bad registration for %s: v%d-%d", fjordmsg.NameForKey(a.key), a.minVersion, a.maxVersion))
			}
			apis[a.key] = a
		}
	}
}
