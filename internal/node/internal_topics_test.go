package node

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 12, defect 1: deleting __consumer_offsets wiped every group's
// committed offsets, and deleting the HTTP gateway's idempotency index
// broke idempotent produces (then let a retried key write twice). Every
// way a client can delete, grow, reconfigure or write an internal topic
// is refused, with an error naming the topic, while the group
// coordinator and the gateway go on using them.
const (
	offsetsTopicName = "__consumer_offsets"
	dedupTopicName   = "__fjord_http_idempotency"
	txnTopicName     = "__transaction_state" // never created: refused before it exists too
)

// internalTopicsNode is a node with group "billing"'s offsets committed
// on "orders" and one idempotent HTTP produce (key "k") made, so both
// internal topics exist and hold state.
type internalTopicsNode struct {
	n         *Node
	adm       *kadm.Client
	committed kadm.Offsets
	first     httpProduced // the answer to the produce with key "k"
}

type httpProduced struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Error     string `json:"error"`
	Message   string `json:"message"`
}

func startInternalTopicsNode(t *testing.T, ctx context.Context) *internalTopicsNode {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	cfg.GroupInitialRebalanceDelay = -1
	n := startNode(t, cfg)
	testutil.Eventually(t, 10*time.Second, n.Ready)
	e := &internalTopicsNode{n: n, adm: kadm.NewClient(newClient(t, n))}
	if _, err := e.adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	e.committed = kadm.Offsets{}
	e.committed.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 7, LeaderEpoch: -1, Metadata: "m"})
	e.committed.Add(kadm.Offset{Topic: "orders", Partition: 1, At: 9, LeaderEpoch: -1, Metadata: "m"})
	resp, err := e.adm.CommitOffsets(ctx, "billing", e.committed)
	if err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v, %v", err, resp.Error())
	}
	var status int
	status, e.first = e.httpProduce(t, "orders", "k")
	if status != http.StatusOK {
		t.Fatalf("idempotent produce: %d %+v", status, e.first)
	}
	return e
}

// httpProduce sends one record to topic through the HTTP API, with
// idempotency key key when not empty.
func (e *internalTopicsNode) httpProduce(t *testing.T, topic, key string) (int, httpProduced) {
	t.Helper()
	body := `{"value": "YQ=="}`
	if key != "" {
		body = `{"value": "YQ==", "idempotency_key": "` + key + `"}`
	}
	return e.httpDo(t, http.MethodPost, "/v1/topics/"+topic+"/produce", body)
}

func (e *internalTopicsNode) httpDo(t *testing.T, method, path, body string) (int, httpProduced) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+e.n.HTTPAddr().String()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out httpProduced
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %v in %q", method, path, err, raw)
	}
	return resp.StatusCode, out
}

// checkStateKept: the group's offsets are as committed, and a retry of
// key "k" answers the first produce's offset without appending, while a
// new key still produces.
func (e *internalTopicsNode) checkStateKept(t *testing.T, ctx context.Context) {
	t.Helper()
	got, err := e.adm.FetchOffsets(ctx, "billing")
	if err == nil {
		err = got.Error()
	}
	if err != nil {
		t.Fatalf("fetching billing's offsets: %v", err)
	}
	for p, want := range e.committed["orders"] {
		if o, ok := got.Lookup("orders", p); !ok || o.At != want.At {
			t.Errorf("billing's offset of orders-%d: %+v (found %v), want %d", p, o, ok, want.At)
		}
	}
	ends, err := e.adm.ListEndOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := ends.Lookup("orders", e.first.Partition)
	if status, again := e.httpProduce(t, "orders", "k"); status != http.StatusOK || again.Offset != e.first.Offset || again.Partition != e.first.Partition {
		t.Errorf("retry of key k: %d %+v, want partition %d offset %d", status, again, e.first.Partition, e.first.Offset)
	}
	if ends, err = e.adm.ListEndOffsets(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if after, _ := ends.Lookup("orders", e.first.Partition); after.Offset != before.Offset {
		t.Errorf("retry of key k appended: orders-%d end %d -> %d", e.first.Partition, before.Offset, after.Offset)
	}
	if status, fresh := e.httpProduce(t, "orders", "k2"); status != http.StatusOK {
		t.Errorf("idempotent produce with a new key: %d %+v", status, fresh)
	}
}

// refused checks that err (or code and msg) is want, with a message
// naming topic.
func refused(t *testing.T, what string, code int16, msg *string, want *kerr.Error, topic string) {
	t.Helper()
	m := ""
	if msg != nil {
		m = *msg
	}
	if code != want.Code {
		t.Errorf("%s: %v (%q), want %s", what, kerr.ErrorForCode(code), m, want.Message)
		return
	}
	if !strings.Contains(m, `"`+topic+`"`) {
		t.Errorf("%s: message %q does not name %q", what, m, topic)
	}
}

func TestInternalTopicsCannotBeDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := startInternalTopicsNode(t, ctx)
	cl := newClient(t, e.n)

	ids := map[string][16]byte{}
	details, err := e.adm.ListTopicsWithInternal(ctx, offsetsTopicName, dedupTopicName)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{offsetsTopicName, dedupTopicName} {
		d, ok := details[name]
		if !ok || d.Err != nil {
			t.Fatalf("%s: %+v (found %v)", name, d, ok)
		}
		ids[name] = d.ID
	}

	// By name and by id (franz-go sends v6, which has both forms).
	deleteOne := func(what, name string, rt kmsg.DeleteTopicsRequestTopic) {
		t.Helper()
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Topics = []kmsg.DeleteTopicsRequestTopic{rt}
		req.TimeoutMillis = 10000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 {
			t.Fatalf("%s %s: %v, %d answers", what, name, err, len(resp.Topics))
		}
		refused(t, what+" "+name, resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage, kerr.InvalidTopicException, name)
	}
	for _, name := range []string{offsetsTopicName, dedupTopicName, txnTopicName} {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		deleteOne("DeleteTopics", name, rt)
	}
	for _, name := range []string{offsetsTopicName, dedupTopicName} {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.TopicID = ids[name]
		deleteOne("DeleteTopics by id", name, rt)
	}

	// DELETE /v1/topics/{t} goes through DeleteTopics: a 400 naming the
	// topic, not a 500.
	for _, name := range []string{offsetsTopicName, dedupTopicName} {
		status, body := e.httpDo(t, http.MethodDelete, "/v1/topics/"+name, "")
		if status != http.StatusBadRequest || !strings.Contains(body.Message, `"`+name+`"`) || !strings.Contains(body.Message, "internal") {
			t.Errorf("DELETE /v1/topics/%s: %d %+v, want 400 naming the topic as internal", name, status, body)
		}
	}

	// DeleteRecords would drop offsets as surely (Kafka refuses it too).
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = offsetsTopicName
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Offset = -1
	for p := range int32(50) {
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.DeleteRecordsRequestTopic{rt}
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 {
		t.Fatalf("DeleteRecords: %v, %d answers", err, len(resp.Topics))
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.InvalidTopicException.Code {
			t.Errorf("DeleteRecords %s-%d: %v, want INVALID_TOPIC_EXCEPTION", offsetsTopicName, p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}

	e.checkStateKept(t, ctx)

	// Look-alikes are other topics: created, written and deleted freely.
	for _, name := range []string{"__Consumer_Offsets", "__FJORD_HTTP_IDEMPOTENCY", "__consumer_offsets_copy"} {
		if _, err := e.adm.CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: name, Value: []byte("x")}).FirstErr(); err != nil {
			t.Errorf("producing to %s: %v", name, err)
		}
		if r, err := e.adm.DeleteTopic(ctx, name); err != nil || r.Err != nil {
			t.Errorf("deleting %s: %v %v", name, err, r.Err)
		}
	}
}

func TestInternalTopicsKeepTheirPartitionsAndConfigs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := startInternalTopicsNode(t, ctx)

	for _, name := range []string{offsetsTopicName, dedupTopicName, txnTopicName} {
		resp, err := e.adm.UpdatePartitions(ctx, 60, name)
		if err != nil {
			t.Fatal(err)
		}
		r := resp[name]
		refused(t, "CreatePartitions "+name, errCode(r.Err), &r.ErrMessage, kerr.InvalidTopicException, name)
	}

	set := func(name, value string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: &value}
	}
	for _, c := range []struct {
		topic string
		alter []kadm.AlterConfig
	}{
		{offsetsTopicName, []kadm.AlterConfig{set("cleanup.policy", "delete")}},
		{offsetsTopicName, []kadm.AlterConfig{set("cleanup.policy", "compact,delete")}},
		{offsetsTopicName, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "cleanup.policy"}}},
		{dedupTopicName, []kadm.AlterConfig{set("retention.ms", "1000")}},
		{dedupTopicName, []kadm.AlterConfig{set("retention.bytes", "1")}},
		{dedupTopicName, []kadm.AlterConfig{set("cleanup.policy", "delete")}},
	} {
		resps, err := e.adm.AlterTopicConfigs(ctx, c.alter, c.topic)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := resps.On(c.topic, nil)
		refused(t, "IncrementalAlterConfigs "+c.topic+" "+c.alter[0].Name, errCode(r.Err), &r.ErrMessage, kerr.InvalidConfig, c.topic)
		// Legacy AlterConfigs replaces every override: the same
		// values, and a set that leaves cleanup.policy out (back to
		// the default, delete).
		var legacy []kadm.AlterConfig
		for _, a := range c.alter {
			if a.Op == kadm.SetConfig {
				legacy = append(legacy, a)
			}
		}
		if len(legacy) == 0 {
			legacy = []kadm.AlterConfig{set("segment.bytes", "1048576")}
		}
		lresps, err := e.adm.AlterTopicConfigsState(ctx, legacy, c.topic)
		if err != nil {
			t.Fatal(err)
		}
		lr, _ := lresps.On(c.topic, nil)
		refused(t, "AlterConfigs "+c.topic+" "+legacy[0].Name, errCode(lr.Err), &lr.ErrMessage, kerr.InvalidConfig, c.topic)
	}
	// Keeping more is safe: a longer idempotency window needs it.
	resps, err := e.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{set("retention.ms", "7200000")}, dedupTopicName)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := resps.On(dedupTopicName, nil); r.Err != nil {
		t.Errorf("raising %s's retention.ms: %v %s", dedupTopicName, r.Err, r.ErrMessage)
	}

	described, err := e.adm.DescribeTopicConfigs(ctx, offsetsTopicName)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := described.On(offsetsTopicName, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.MaybeValue() != "compact" {
			t.Errorf("%s's cleanup.policy is %q after the refused changes", offsetsTopicName, c.MaybeValue())
		}
	}
	e.checkStateKept(t, ctx)
}

// errCode is the Kafka error code of err, 0 for nil.
func errCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if err != nil {
		return -1
	}
	return 0
}

// Clients cannot write internal topics, however they name themselves,
// while the gateway still writes its index.
func TestInternalTopicsRefuseOutsideProduce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := startInternalTopicsNode(t, ctx)

	// Kafka's exempt admin client id, the gateway's own, and near misses
	// of the node's internal one are all outside clients.
	id := e.n.InternalClientID()
	for _, clientID := range []string{"kgo", "fjord-http", "__admin_client", "fjord-internal-", id + " ", " " + id, strings.ToUpper(id), id[:len(id)-1]} {
		cl := newClient(t, e.n, kgo.ClientID(clientID), kgo.RecordRetries(1))
		for _, name := range []string{offsetsTopicName, dedupTopicName} {
			err := cl.ProduceSync(ctx, &kgo.Record{Topic: name, Partition: 0, Key: []byte("k"), Value: []byte("garbage")}).FirstErr()
			if !errors.Is(err, kerr.InvalidTopicException) {
				t.Errorf("client %q producing to %s: %v, want INVALID_TOPIC_EXCEPTION", clientID, name, err)
			}
		}
	}
	// The node's own id writes (what the gateway's index client does).
	own := newClient(t, e.n, kgo.ClientID(id))
	if err := own.ProduceSync(ctx, &kgo.Record{Topic: dedupTopicName, Partition: 0, Key: []byte("orders\x00unused"), Value: []byte(`{"state":"done"}`)}).FirstErr(); err != nil {
		t.Errorf("the node's internal client id producing to %s: %v", dedupTopicName, err)
	}
	// The HTTP API produces as a client, not as the gateway's index, and
	// says which topic it refused and why, as the Kafka listener does
	// (franz-go would pass on the error code alone). Also for an
	// internal topic not yet created, and with an idempotency key.
	for _, name := range []string{offsetsTopicName, dedupTopicName, txnTopicName} {
		for _, key := range []string{"", "retry-1"} {
			status, body := e.httpProduce(t, name, key)
			if status != http.StatusBadRequest || body.Error != "invalid_topic" ||
				!strings.Contains(body.Message, `"`+name+`"`) || !strings.Contains(body.Message, "internal") {
				t.Errorf("HTTP produce to %s (idempotency key %q): %d %+v, want 400 invalid_topic naming the internal topic", name, key, status, body)
			}
		}
	}
	// And CreateTopics of an internal name not yet created.
	r, err := e.adm.CreateTopic(ctx, 1, 1, nil, txnTopicName)
	if err == nil {
		err = r.Err
	}
	if !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("creating %s: %v, want INVALID_REQUEST", txnTopicName, err)
	}
	// A name that collides with an internal one ('.' and '_' are one in
	// metric names) would keep it from ever being created.
	for _, name := range []string{"__transaction.state", "__share.group_state"} {
		r, err := e.adm.CreateTopic(ctx, 1, 1, nil, name)
		if err == nil {
			err = r.Err
		}
		if !errors.Is(err, kerr.InvalidTopicException) || !strings.Contains(r.ErrMessage, "internal") {
			t.Errorf("creating %s: %v %q, want INVALID_TOPIC_EXCEPTION naming the internal topic", name, err, r.ErrMessage)
		}
	}
	e.checkStateKept(t, ctx)
}
