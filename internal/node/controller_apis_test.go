package node

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"maps"
	"math"
	mrand "math/rand/v2"
	"net"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The requests nodes send the active controller (BrokerRegistration,
// AllocateProducerIds) refuse what no Fjord node sends, each with its
// Kafka error code, and change nothing; garbage on the controller's Raft
// port closes that connection and nothing else.
func TestControllerAPIsRefuseHostileInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := startNode(t, testConfig(t, t.TempDir()))
	outside := newClient(t, n)
	img := n.ctrl.Image()
	brokers, nextPID := maps.Clone(img.Brokers), img.NextProducerID

	valid := func() *kmsg.BrokerRegistrationRequest {
		r := kmsg.NewPtrBrokerRegistrationRequest()
		r.BrokerID, r.ClusterID = 1, img.ClusterID
		rand.Read(r.IncarnationID[:])
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name, l.Host, l.Port = "PLAINTEXT", "127.0.0.1", 9092
		r.Listeners = []kmsg.BrokerRegistrationRequestListener{l}
		return r
	}
	str := func(s string) *string { return &s }
	for _, c := range []struct {
		name string
		edit func(*kmsg.BrokerRegistrationRequest)
		want *kerr.Error
	}{
		{"another cluster", func(r *kmsg.BrokerRegistrationRequest) { r.ClusterID = "not-this-one" }, kerr.InconsistentClusterID},
		{"no cluster id", func(r *kmsg.BrokerRegistrationRequest) { r.ClusterID = "" }, kerr.InconsistentClusterID},
		{"negative node id", func(r *kmsg.BrokerRegistrationRequest) { r.BrokerID = -5 }, kerr.InvalidRegistration},
		{"a node id outside the quorum", func(r *kmsg.BrokerRegistrationRequest) { r.BrokerID = 7 }, kerr.InvalidRegistration},
		{"another process for the live node 1", func(*kmsg.BrokerRegistrationRequest) {}, kerr.DuplicateBrokerRegistration},
		{"zero incarnation", func(r *kmsg.BrokerRegistrationRequest) { r.IncarnationID = [16]byte{} }, kerr.InvalidRegistration},
		{"no listener", func(r *kmsg.BrokerRegistrationRequest) { r.Listeners = nil }, kerr.InvalidRegistration},
		{"no listener", func(r *kmsg.BrokerRegistrationRequest) { r.Listeners = nil }, kerr.InvalidRegistration},
		{"a listener without a name", func(r *kmsg.BrokerRegistrationRequest) { r.Listeners[0].Name = "" }, kerr.InvalidRegistration},
		{"an unknown security protocol", func(r *kmsg.BrokerRegistrationRequest) { r.Listeners[0].SecurityProtocol = 9 }, kerr.InvalidRegistration},
		{"a listener named twice", func(r *kmsg.BrokerRegistrationRequest) { r.Listeners = append(r.Listeners, r.Listeners[0]) }, kerr.InvalidRegistration},
		{"port 0", func(r *kmsg.BrokerRegistrationRequest) { r.Listeners[0].Port = 0 }, kerr.InvalidRegistration},
		{"empty host", func(r *kmsg.BrokerRegistrationRequest) { r.Listeners[0].Host = "" }, kerr.InvalidRegistration},
		{"oversized host", func(r *kmsg.BrokerRegistrationRequest) { r.Listeners[0].Host = strings.Repeat("h", 70000) }, kerr.InvalidRegistration},
		{"many listeners", func(r *kmsg.BrokerRegistrationRequest) {
			for range 1000 {
				r.Listeners = append(r.Listeners, r.Listeners[0])
			}
		}, kerr.InvalidRegistration},
		{"oversized rack", func(r *kmsg.BrokerRegistrationRequest) { r.Rack = str(strings.Repeat("r", 256)) }, kerr.InvalidRegistration},
		{"control character in rack", func(r *kmsg.BrokerRegistrationRequest) { r.Rack = str("rack\n1") }, kerr.InvalidRegistration},
		{"rack ending in a space", func(r *kmsg.BrokerRegistrationRequest) { r.Rack = str("rack-1 ") }, kerr.InvalidRegistration},
	} {
		r := valid()
		c.edit(r)
		resp, err := r.RequestWith(ctx, outside)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := kerr.ErrorForCode(resp.ErrorCode); !errors.Is(got, c.want) || resp.BrokerEpoch != -1 {
			t.Errorf("BrokerRegistration with %s: %v epoch %d, want %v and epoch -1", c.name, got, resp.BrokerEpoch, c.want)
		}
	}

	alloc := func(cl *kgo.Client, id int32, epoch int64) *kerr.Error {
		r := kmsg.NewPtrAllocateProducerIDsRequest()
		r.BrokerID, r.BrokerEpoch = id, epoch
		resp, err := r.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 && (resp.ProducerIDStart != -1 || resp.ProducerIDLen != 0) {
			t.Errorf("refused AllocateProducerIds answered a block from %d of %d", resp.ProducerIDStart, resp.ProducerIDLen)
		}
		e, _ := kerr.ErrorForCode(resp.ErrorCode).(*kerr.Error)
		return e
	}
	epoch := brokers[1].Epoch
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID, hb.BrokerEpoch, hb.WantShutdown = 1, epoch, true // an outsider must not shut a broker down
	if resp, err := hb.RequestWith(ctx, outside); err != nil {
		t.Fatal(err)
	} else if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("BrokerHeartbeat from an outside client: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.ErrorCode))
	}
	// One for a broker id nobody registered is told so, as an
	// unregistered (drained) node must be, to stop its heartbeats.
	hb = kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID, hb.BrokerEpoch = 77, 1
	if resp, err := hb.RequestWith(ctx, outside); err != nil {
		t.Fatal(err)
	} else if resp.ErrorCode != kerr.BrokerIDNotRegistered.Code {
		t.Errorf("BrokerHeartbeat for an unregistered broker: %v, want BROKER_ID_NOT_REGISTERED", kerr.ErrorForCode(resp.ErrorCode))
	}
	if got := alloc(outside, 1, epoch); got != kerr.ClusterAuthorizationFailed {
		t.Errorf("AllocateProducerIds from an outside client: %v, want CLUSTER_AUTHORIZATION_FAILED", got)
	}
	internal := newClient(t, n, kgo.ClientID(n.InternalClientID()))
	if got := alloc(internal, 2, epoch); got != kerr.ClusterAuthorizationFailed {
		t.Errorf("AllocateProducerIds for another node's ids: %v, want CLUSTER_AUTHORIZATION_FAILED", got)
	}
	for _, stale := range []int64{epoch - 1, epoch + 1, -1} {
		if got := alloc(internal, 1, stale); got != kerr.StaleBrokerEpoch {
			t.Errorf("AllocateProducerIds with broker epoch %d (current %d): %v, want STALE_BROKER_EPOCH", stale, epoch, got)
		}
	}
	// A node's own heartbeat: a negative metadata offset is refused, a
	// stale epoch too, and neither changes the image (checked below),
	// even asking for a controlled shutdown.
	for _, c := range []struct {
		epoch, offset int64
		want          *kerr.Error
	}{
		{epoch, -1, kerr.InvalidRequest},
		{epoch, math.MinInt64, kerr.InvalidRequest},
		{epoch - 1, 1 << 62, kerr.StaleBrokerEpoch},
	} {
		hb := kmsg.NewPtrBrokerHeartbeatRequest()
		hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset, hb.WantShutdown = 1, c.epoch, c.offset, true
		resp, err := hb.RequestWith(ctx, internal)
		if err != nil {
			t.Fatal(err)
		}
		if got := kerr.ErrorForCode(resp.ErrorCode); got != c.want {
			t.Errorf("BrokerHeartbeat epoch %d metadata offset %d: %v, want %v", c.epoch, c.offset, got, c.want)
		}
	}

	// Garbage on the Raft port: the connection is closed and the node
	// goes on. Each sender then closes its side, as a client that wrote
	// a whole (bad) message does: an input that is only the start of a
	// valid one (an array header claiming 2^31 entries) is otherwise
	// rightly waited on for its rest. The noise is seeded, so every run
	// sends the same bytes.
	noise := mrand.New(mrand.NewPCG(1, 2))
	randomNoise := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(noise.Uint32())
		}
		return b
	}
	for _, garbage := range [][]byte{
		{0xff, 0xff, 0xff, 0xff},                                            // not an RPC type
		append([]byte{0}, randomNoise(64<<10)...),                           // an append-entries RPC of noise
		append([]byte{0, 0xdd, 0x7f, 0xff, 0xff, 0xff}, randomNoise(16)...), // an array claiming 2^31 entries
	} {
		conn, err := net.DialTimeout("tcp", n.ControllerAddr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(garbage)
		conn.(*net.TCPConn).CloseWrite()
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadAll(conn); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("garbage (%d bytes, first %#x) on the controller port: the connection stayed open", len(garbage), garbage[0])
		}
		conn.Close()
	}

	after := n.ctrl.Image()
	if !reflect.DeepEqual(after.Brokers, brokers) || after.NextProducerID != nextPID {
		t.Errorf("refused requests changed the image: brokers %+v -> %+v, next producer id %d -> %d",
			brokers, after.Brokers, nextPID, after.NextProducerID)
	}
	// And the node still works: a topic is created and produced to.
	producer := newClient(t, n, kgo.AllowAutoTopicCreation())
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "after-garbage", Value: []byte("v")}).FirstErr(); err != nil {
		t.Errorf("producing after the hostile requests: %v", err)
	}
}
