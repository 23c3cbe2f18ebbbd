package kafkaserver

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/testutil"
)

// Keyed topics at the listener: CreatePartitions' refusal on Fjord's tag
// (create_partitions.go), its log line and metric when a keyed topic
// grows, and FjordMarkTopicKeyed (mark_topic_keyed.go).

const keyedInternalID = "fjord-internal-keyed-test"

// keyedFixture is the admin fixture with an internal client id, a
// metrics registry and a captured log.
type keyedFixture struct {
	*adminFixture
	reg *prometheus.Registry
	log testutil.Buffer
}

func (f *keyedFixture) logged() string { return f.log.String() }

func newKeyedFixture(t *testing.T) *keyedFixture {
	t.Helper()
	f := &keyedFixture{adminFixture: &adminFixture{
		ctrl: newAdminFakeController(),
		reps: newAdminFakeReplicas(),
		pids: &adminFakeProducerIDs{next: 1000},
	}, reg: prometheus.NewRegistry()}
	f.s = New(Config{NodeID: adminTestNodeID, TopicConfigs: testConfigs, InternalClientID: keyedInternalID,
		Metrics: f.reg, Logger: slog.New(slog.NewTextHandler(&f.log, nil))}, f.ctrl, f.reps, f.pids, nil)
	t.Cleanup(func() { f.s.Close() })
	return f
}

// call runs body's handler as the listener would for a client named
// clientID (nil: a null client id), the response through the wire's
// encoding at version.
func keyedCall[R kmsg.Response](t *testing.T, f *keyedFixture, clientID *string, body kmsg.Request, version int16) R {
	t.Helper()
	body.SetVersion(version)
	a, ok := apis[body.Key()]
	if !ok {
		t.Fatalf("no API for key %d", body.Key())
	}
	resp, _, err := a.handle(context.Background(), f.s, &request{key: body.Key(), version: version, body: body, clientID: clientID})
	if err != nil {
		t.Fatalf("%s: handler error %v", fjordmsg.NameForKey(body.Key()), err)
	}
	resp.SetVersion(version)
	decoded := body.ResponseKind()
	decoded.SetVersion(version)
	if err := decoded.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatalf("%s: response does not decode: %v", fjordmsg.NameForKey(body.Key()), err)
	}
	return decoded.(R)
}

// markKeyed marks name keyed in the fake controller's image.
func (f *keyedFixture) markKeyed(t *testing.T, name string) {
	t.Helper()
	if err := f.ctrl.MarkTopicKeyed(context.Background(), f.ctrl.Image().Topics[name].ID); err != nil {
		t.Fatal(err)
	}
}

// addedToKeyed reads fjord_partitions_added_to_keyed_topics_total by
// topic.
func (f *keyedFixture) addedToKeyed(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, fam := range families {
		if fam.GetName() != "fjord_partitions_added_to_keyed_topics_total" {
			continue
		}
		for _, m := range fam.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

func refusing(topic string, count int32) kmsg.CreatePartitionsRequestTopic {
	t := growTo(topic, count)
	fjordmsg.SetRefuseKeyed(&t)
	return t
}

// Fjord's tag on a keyed topic: INVALID_PARTITIONS saying why, nothing
// asked of the controller; the same request for an unkeyed topic grows
// it. Without the tag a keyed topic grows as in Kafka, and the grow is
// logged and counted; a validate-only one is neither.
func TestCreatePartitionsRefusesKeyedTopics(t *testing.T) {
	f := newKeyedFixture(t)
	f.ctrl.addTopic("keyed", adminLeaderPartitions(0), nil)
	f.ctrl.addTopic("plain", adminLeaderPartitions(0), nil)
	f.markKeyed(t, "keyed")
	calls := len(f.ctrl.callLog())

	resp := adminCall[*kmsg.CreatePartitionsResponse](t, f.adminFixture, createPartitionsReq(false, refusing("keyed", 4), refusing("plain", 2)), 3)
	adminWantCode(t, "keyed, tagged", resp.Topics[0].ErrorCode, kerr.InvalidPartitions)
	msg := *resp.Topics[0].ErrorMessage
	for _, want := range []string{`"keyed" has keyed records`, "changes the partition of existing keys", "nothing changed"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	if !fjordmsg.RefusedKeyed(&resp.Topics[0]) || fjordmsg.RefusedKeyed(&resp.Topics[1]) {
		t.Errorf("the answer's tag: keyed %v, plain %v; want only keyed's", fjordmsg.RefusedKeyed(&resp.Topics[0]), fjordmsg.RefusedKeyed(&resp.Topics[1]))
	}
	adminWantCode(t, "plain, tagged", resp.Topics[1].ErrorCode, nil)
	if got := f.ctrl.callLog()[calls:]; len(got) != 1 {
		t.Fatalf("controller asked %v, want one CreatePartitions (plain's)", got)
	}
	if n := len(f.ctrl.Image().Topics["keyed"].Partitions); n != 1 {
		t.Fatalf("the refused topic has %d partitions", n)
	}
	if len(f.addedToKeyed(t)) != 0 || strings.Contains(f.logged(), "keyed records") {
		t.Fatalf("a refusal or an unkeyed grow was counted: %v\n%s", f.addedToKeyed(t), f.logged())
	}
	// Validate-only is refused too: it says what a real request would get.
	resp = adminCall[*kmsg.CreatePartitionsResponse](t, f.adminFixture, createPartitionsReq(true, refusing("keyed", 4)), 3)
	adminWantCode(t, "keyed, tagged, validate only", resp.Topics[0].ErrorCode, kerr.InvalidPartitions)

	// Kafka's behaviour without the tag, at every version.
	resp = adminCall[*kmsg.CreatePartitionsResponse](t, f.adminFixture, createPartitionsReq(true, growTo("keyed", 4)), 3)
	adminWantCode(t, "keyed, validate only", resp.Topics[0].ErrorCode, nil)
	if len(f.addedToKeyed(t)) != 0 {
		t.Fatal("a validate-only grow was counted")
	}
	resp = adminCall[*kmsg.CreatePartitionsResponse](t, f.adminFixture, createPartitionsReq(false, growTo("keyed", 4)), 0)
	adminWantCode(t, "keyed, untagged v0", resp.Topics[0].ErrorCode, nil)
	resp = adminCall[*kmsg.CreatePartitionsResponse](t, f.adminFixture, createPartitionsReq(false, growTo("keyed", 5)), 3)
	adminWantCode(t, "keyed, untagged v3", resp.Topics[0].ErrorCode, nil)
	if n := len(f.ctrl.Image().Topics["keyed"].Partitions); n != 5 || !f.ctrl.Image().Topics["keyed"].Keyed {
		t.Fatalf("keyed topic after two grows: %d partitions, keyed %v", n, f.ctrl.Image().Topics["keyed"].Keyed)
	}
	if got := f.addedToKeyed(t); len(got) != 1 || got["keyed"] != 4 {
		t.Fatalf("fjord_partitions_added_to_keyed_topics_total %v, want keyed=4 (1->4, 4->5)", got)
	}
	logged := f.logged()
	for _, want := range []string{"level=WARN", "topic=keyed from=1 to=4", "topic=keyed from=4 to=5"} {
		if !strings.Contains(logged, want) {
			t.Errorf("log lacks %q:\n%s", want, logged)
		}
	}
}

// A tag of another length or value is INVALID_REQUEST for that topic,
// checked before anything else about it, and grows nothing.
func TestCreatePartitionsRefuseKeyedTagBadValues(t *testing.T) {
	f := newKeyedFixture(t)
	f.ctrl.addTopic("plain", adminLeaderPartitions(0), nil)
	calls := len(f.ctrl.callLog())
	for _, val := range [][]byte{{}, {0}, {2}, {1, 0}, bytes.Repeat([]byte{1}, 300)} {
		tp := growTo("plain", 2)
		tp.UnknownTags.Set(fjordmsg.RefuseKeyedTag, val)
		resp := adminCall[*kmsg.CreatePartitionsResponse](t, f.adminFixture, createPartitionsReq(false, tp), 3)
		name := fmt.Sprintf("tag value %x", val)
		adminWantCode(t, name, resp.Topics[0].ErrorCode, kerr.InvalidRequest)
		if m := *resp.Topics[0].ErrorMessage; !strings.Contains(m, "refuse if the topic has keyed records") || !strings.Contains(m, `"plain"`) || len(m) > 250 {
			t.Errorf("%s: message %s", name, m)
		}
	}
	// Even on a topic that does not exist: the request's shape first.
	tp := growTo("nope", 2)
	tp.UnknownTags.Set(fjordmsg.RefuseKeyedTag, []byte{7})
	resp := adminCall[*kmsg.CreatePartitionsResponse](t, f.adminFixture, createPartitionsReq(false, tp), 3)
	adminWantCode(t, "bad tag on an unknown topic", resp.Topics[0].ErrorCode, kerr.InvalidRequest)
	if got := f.ctrl.callLog()[calls:]; len(got) != 0 {
		t.Fatalf("bad tags reached the controller: %v", got)
	}
	if n := len(f.ctrl.Image().Topics["plain"].Partitions); n != 1 {
		t.Fatalf("plain grew to %d", n)
	}
}

// FjordMarkTopicKeyed: only from a Fjord node's client
// (CLUSTER_AUTHORIZATION_FAILED otherwise, nothing asked of the
// controller); the controller's answers (a mark, a repeat, an unknown or
// zero id, NOT_CONTROLLER) come back with their codes; a success carries
// the image offset that has the mark.
func TestMarkTopicKeyedHandler(t *testing.T) {
	f := newKeyedFixture(t)
	topic := f.ctrl.addTopic("t", adminLeaderPartitions(0), nil)
	mark := func(clientID *string, id metadata.UUID) *fjordmsg.MarkTopicKeyedResponse {
		return keyedCall[*fjordmsg.MarkTopicKeyedResponse](t, f, clientID, &fjordmsg.MarkTopicKeyedRequest{TopicID: id}, 0)
	}
	calls := len(f.ctrl.callLog())
	for _, id := range []*string{nil, kmsg.StringPtr(""), kmsg.StringPtr("rdkafka"), kmsg.StringPtr(keyedInternalID + "x")} {
		resp := mark(id, topic.ID)
		adminWantCode(t, fmt.Sprintf("client id %v", adminMsg(id)), resp.ErrorCode, kerr.ClusterAuthorizationFailed)
		if resp.MetadataOffset != 0 || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "Fjord nodes") {
			t.Errorf("refusal answered offset %d, message %s", resp.MetadataOffset, adminMsg(resp.ErrorMessage))
		}
	}
	if got := f.ctrl.callLog()[calls:]; len(got) != 0 || f.ctrl.Image().Topics["t"].Keyed {
		t.Fatalf("outside clients reached the controller: %v", got)
	}

	internal := kmsg.StringPtr(keyedInternalID)
	resp := mark(internal, topic.ID)
	adminWantCode(t, "the node's own client", resp.ErrorCode, nil)
	if !f.ctrl.Image().Topics["t"].Keyed || resp.MetadataOffset != int64(f.ctrl.Image().Offset) {
		t.Fatalf("after a mark: keyed %v, answered offset %d, image at %d", f.ctrl.Image().Topics["t"].Keyed, resp.MetadataOffset, f.ctrl.Image().Offset)
	}
	adminWantCode(t, "a repeat", mark(internal, topic.ID).ErrorCode, nil)
	adminWantCode(t, "an unknown id", mark(internal, metadata.UUID{0xde, 0xad}).ErrorCode, kerr.UnknownTopicID)
	adminWantCode(t, "the zero id", mark(internal, metadata.UUID{}).ErrorCode, kerr.InvalidRequest)

	f.ctrl.mu.Lock()
	f.ctrl.fail = fmt.Errorf("%w: node 2 is", controlplane.ErrNotController)
	f.ctrl.mu.Unlock()
	if resp := mark(internal, topic.ID); resp.ErrorCode != kerr.NotController.Code || resp.MetadataOffset != 0 {
		t.Fatalf("not the controller: %v offset %d", kerr.ErrorForCode(resp.ErrorCode), resp.MetadataOffset)
	}
}

// Malformed FjordMarkTopicKeyed bodies (short, long, huge) never reach a
// handler: the listener closes the connection, as for any body that does
// not decode, and the node is unharmed.
func TestMarkTopicKeyedMalformedBodies(t *testing.T) {
	for _, body := range [][]byte{{}, make([]byte, 15), make([]byte, 17), make([]byte, 1<<20)} {
		if err := new(fjordmsg.MarkTopicKeyedRequest).ReadFrom(body); err == nil {
			t.Fatalf("a %d-byte body decoded", len(body))
		}
	}
	h := newWireHarness(t)
	for _, body := range [][]byte{{}, make([]byte, 15), make([]byte, 17), make([]byte, 64<<10)} {
		conn := h.dial()
		conn.write(frameOf(append(header(fjordmsg.MarkTopicKeyedKey, 0, 1, false), body...)))
		conn.expectClosed()
	}
	// A well-formed one on a new connection is answered: refused, since
	// the test's client is no Fjord node.
	resp := h.dial().roundTrip(&fjordmsg.MarkTopicKeyedRequest{TopicID: [16]byte{1}}).(*fjordmsg.MarkTopicKeyedResponse)
	if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("after the malformed bodies: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}
