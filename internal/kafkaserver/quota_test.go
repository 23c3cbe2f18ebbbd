package kafkaserver

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
)

// setQuotas replaces the image's client quotas (test setup).
func (c *memController) setQuotas(q map[metadata.QuotaEntity]map[string]float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.cloneLocked()
	next.ClientQuotas = q
	c.img = next
}

func (h *wireHarness) dialAs(clientID string) *rawConn {
	h.t.Helper()
	c := h.dial()
	c.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	return c
}

// bigBatch is one batch of a single record of n random-looking bytes.
func bigBatch(t *testing.T, n int) []byte {
	t.Helper()
	v := bytes.Repeat([]byte("0123456789abcdef"), n/16)
	b := record.NewBuilder(record.DefaultBatchOptions())
	b.Add(nil, v, nil, time.Now().UnixMilli())
	data, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// expectNothingFor fails if a response arrives on c within d: the
// connection is muted.
func expectNothingFor(t *testing.T, c *rawConn, d time.Duration) {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(d))
	if _, err := c.br.Peek(1); err == nil {
		t.Fatalf("a response arrived within %v on a muted connection", d)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("waiting on a muted connection: %v", err)
	}
}

// A producer over its producer_byte_rate gets throttle_time_ms, and its
// connection reads nothing more until the throttle has passed; a client
// id without a quota, and another connection of the same client, are not
// muted by it.
func TestProduceQuota(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("q", 1)
	h.ctrl.setQuotas(map[metadata.QuotaEntity]map[string]float64{
		{ClientID: metadata.Named("slow")}: {metadata.QuotaProducerByteRate: 20_000},
	})
	slow := h.dialAs("slow")
	// 20,000 bytes of burst; 80 KB more is a debt of about 4 s.
	resp := slow.roundTrip(produceReq(9, -1, "q", 0, bigBatch(t, 100_000))).(*kmsg.ProduceResponse)
	if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
		t.Fatalf("produce error %d", ec)
	}
	if ms := resp.ThrottleMillis; ms < 3000 || ms > 4500 {
		t.Fatalf("throttle %d ms, want about 4,000 (100 KB at 20 KB/s with 20 KB of burst)", ms)
	}
	start := time.Now()
	corr := slow.send(kmsg.NewPtrApiVersionsRequest())
	expectNothingFor(t, slow, time.Second)
	slow.recv(kmsg.NewPtrApiVersionsRequest(), corr)
	if waited := time.Since(start); waited < 2*time.Second {
		t.Fatalf("the muted connection answered after %v, want after the throttle", waited)
	}

	fast := h.dialAs("fast")
	resp = fast.roundTrip(produceReq(9, -1, "q", 0, bigBatch(t, 100_000))).(*kmsg.ProduceResponse)
	if resp.ThrottleMillis != 0 {
		t.Fatalf("client without a quota throttled %d ms", resp.ThrottleMillis)
	}
}

// A consumer over its consumer_byte_rate is throttled after the fetch
// that took it over; while it owes the wait, a fetch (from any of its
// connections) is answered at once with no records and the time left.
func TestFetchQuota(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("q", 1)
	w := h.dialAs("writer")
	for range 3 {
		if r := w.roundTrip(produceReq(9, -1, "q", 0, bigBatch(t, 50_000))).(*kmsg.ProduceResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatal("produce failed")
		}
	}
	h.ctrl.setQuotas(map[metadata.QuotaEntity]map[string]float64{
		{ClientID: metadata.DefaultName()}: {metadata.QuotaConsumerByteRate: 10_000},
	})
	fetch := func() *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = 11, 0, 50<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "q"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 50 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	r1 := h.dialAs("reader")
	resp := r1.roundTrip(fetch()).(*kmsg.FetchResponse)
	got := len(resp.Topics[0].Partitions[0].RecordBatches)
	// Capped at a window of the quota, so one batch (the first always
	// comes, whatever its size).
	if got < 50_000 || got > 60_000 {
		t.Fatalf("fetched %d bytes, want the first batch alone (the fetch size is capped at the quota's window)", got)
	}
	if resp.ThrottleMillis < 3000 {
		t.Fatalf("throttle %d ms after %d bytes at 10 KB/s, want about 4,000", resp.ThrottleMillis, got)
	}
	r2 := h.dialAs("reader")
	resp = r2.roundTrip(fetch()).(*kmsg.FetchResponse)
	if len(resp.Topics) != 0 || resp.ThrottleMillis < 2000 {
		t.Fatalf("fetch while owing a wait: %d topics, throttle %d ms; want none and the time left", len(resp.Topics), resp.ThrottleMillis)
	}
	// Another client id has its own rate (client-id=<default>).
	other := h.dialAs("other-reader")
	resp = other.roundTrip(fetch()).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatal("another client id was refused by the first one's quota")
	}
}

// request_percentage charges handler time: a tiny one throttles even a
// Metadata request.
func TestRequestPercentageQuota(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.setQuotas(map[metadata.QuotaEntity]map[string]float64{
		{User: metadata.DefaultName()}: {metadata.QuotaRequestPercentage: 0.0001},
	})
	c := h.dialAs("busy")
	var throttled int32
	for range 5 {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 9
		resp := c.roundTrip(req).(*kmsg.MetadataResponse)
		throttled = max(throttled, resp.ThrottleMillis)
		if throttled > 0 {
			break
		}
	}
	if throttled == 0 {
		t.Fatal("five Metadata requests under a request_percentage of 0.0001 were never throttled")
	}
}

// Fjord's own connections are never charged.
func TestQuotasSpareInternalClients(t *testing.T) {
	h := newWireHarness(t, withConfig(func(c *Config) { c.InternalClientID = "__fjord_node_1" }))
	h.ctrl.addTopic("q", 1)
	h.ctrl.setQuotas(map[metadata.QuotaEntity]map[string]float64{
		{ClientID: metadata.DefaultName()}: {metadata.QuotaProducerByteRate: 1},
	})
	c := h.dialAs("__fjord_node_1")
	resp := c.roundTrip(produceReq(9, -1, "q", 0, bigBatch(t, 10_000))).(*kmsg.ProduceResponse)
	if resp.ThrottleMillis != 0 {
		t.Fatalf("the node's own client throttled %d ms", resp.ThrottleMillis)
	}
}

func alterQuotas(t *testing.T, f *adminFixture, validateOnly bool, entries ...kmsg.AlterClientQuotasRequestEntry) *kmsg.AlterClientQuotasResponse {
	t.Helper()
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries, req.ValidateOnly = entries, validateOnly
	return adminCall[*kmsg.AlterClientQuotasResponse](t, f, req, 1)
}

func quotaEntry(entity [][2]*string, ops ...kmsg.AlterClientQuotasRequestEntryOp) kmsg.AlterClientQuotasRequestEntry {
	e := kmsg.NewAlterClientQuotasRequestEntry()
	for _, p := range entity {
		ee := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ee.Type, ee.Name = *p[0], p[1]
		e.Entity = append(e.Entity, ee)
	}
	e.Ops = ops
	return e
}

func quotaOp(key string, v float64, remove bool) kmsg.AlterClientQuotasRequestEntryOp {
	o := kmsg.NewAlterClientQuotasRequestEntryOp()
	o.Key, o.Value, o.Remove = key, v, remove
	return o
}

// AlterClientQuotas refuses each bad entry alone, with INVALID_REQUEST
// and a message, and commits the good ones; DescribeClientQuotas
// filters as Kafka's does.
func TestAlterAndDescribeClientQuotas(t *testing.T) {
	f := newAdminFixture(t)
	user, client, ip := strp("user"), strp("client-id"), strp("ip")
	resp := alterQuotas(t, f, false,
		quotaEntry([][2]*string{{user, strp("alice")}}, quotaOp("producer_byte_rate", 1<<20, false)),
		quotaEntry([][2]*string{{user, strp("alice")}, {client, nil}}, quotaOp("consumer_byte_rate", 2<<20, false)),
		quotaEntry([][2]*string{{client, strp("app")}}, quotaOp("request_percentage", 25, false)),
		quotaEntry([][2]*string{{ip, nil}}, quotaOp("connection_creation_rate", 10, false)),
		// The bad ones.
		quotaEntry([][2]*string{{strp("group"), strp("g")}}, quotaOp("producer_byte_rate", 5, false)),
		quotaEntry([][2]*string{{user, strp("a")}, {user, strp("b")}}, quotaOp("producer_byte_rate", 5, false)),
		quotaEntry([][2]*string{{ip, strp("10.0.0.1")}, {user, strp("a")}}, quotaOp("connection_creation_rate", 5, false)),
		quotaEntry([][2]*string{{ip, strp("not-an-ip")}}, quotaOp("connection_creation_rate", 5, false)),
		quotaEntry([][2]*string{{user, strp("bob")}}, quotaOp("producer_byte_rate", -5, false)),
		quotaEntry([][2]*string{{user, strp("bob")}}, quotaOp("producer_byte_rate", 1.5, false)),
		quotaEntry([][2]*string{{user, strp("bob")}}, quotaOp("bytes_per_fortnight", 5, false)),
		quotaEntry([][2]*string{{user, strp("bob")}}, quotaOp("producer_byte_rate", 5, false), quotaOp("producer_byte_rate", 6, false)),
		quotaEntry(nil, quotaOp("producer_byte_rate", 5, false)),
		quotaEntry([][2]*string{{user, strp("")}}, quotaOp("producer_byte_rate", 5, false)),
	)
	wantErr := []string{"", "", "", "", "unknown entity type", "given twice", "cannot be combined", "not an IP address",
		"at most", "whole number", "unknown quota key", "given twice", "names no type", "empty name"}
	if len(resp.Entries) != len(wantErr) {
		t.Fatalf("%d entries answered, want %d", len(resp.Entries), len(wantErr))
	}
	for i, e := range resp.Entries {
		if wantErr[i] == "" {
			adminWantCode(t, "good entry", e.ErrorCode, nil)
			continue
		}
		adminWantCode(t, wantErr[i], e.ErrorCode, kerr.InvalidRequest)
		if e.ErrorMessage == nil || !strings.Contains(*e.ErrorMessage, wantErr[i]) {
			t.Errorf("entry %d: message %s, want %q", i, adminMsg(e.ErrorMessage), wantErr[i])
		}
	}
	if n := len(f.ctrl.Image().ClientQuotas); n != 4 {
		t.Fatalf("%d entities with quotas, want the 4 good ones", n)
	}

	describe := func(strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) *kmsg.DescribeClientQuotasResponse {
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Strict, req.Components = strict, comps
		return adminCall[*kmsg.DescribeClientQuotasResponse](t, f, req, 1)
	}
	comp := func(typ string, match int8, name *string) kmsg.DescribeClientQuotasRequestComponent {
		c := kmsg.NewDescribeClientQuotasRequestComponent()
		c.EntityType, c.MatchType, c.Match = typ, kmsg.QuotasMatchType(match), name
		return c
	}
	count := func(r *kmsg.DescribeClientQuotasResponse) int {
		adminWantCode(t, "describe", r.ErrorCode, nil)
		return len(r.Entries)
	}
	for _, c := range []struct {
		name   string
		strict bool
		comps  []kmsg.DescribeClientQuotasRequestComponent
		want   int
	}{
		{"everything", false, nil, 4},
		{"user alice, any entity with her", false, []kmsg.DescribeClientQuotasRequestComponent{comp("user", 0, strp("alice"))}, 2},
		{"user alice alone", true, []kmsg.DescribeClientQuotasRequestComponent{comp("user", 0, strp("alice"))}, 1},
		{"any client id", false, []kmsg.DescribeClientQuotasRequestComponent{comp("client-id", 2, nil)}, 2},
		{"the default client id", false, []kmsg.DescribeClientQuotasRequestComponent{comp("client-id", 1, nil)}, 1},
		{"ip", false, []kmsg.DescribeClientQuotasRequestComponent{comp("ip", 2, nil)}, 1},
	} {
		if got := count(describe(c.strict, c.comps...)); got != c.want {
			t.Errorf("%s: %d entries, want %d", c.name, got, c.want)
		}
	}
	r := describe(true, comp("user", 0, strp("alice")))
	if e := r.Entries[0]; len(e.Entity) != 1 || *e.Entity[0].Name != "alice" || len(e.Values) != 1 || e.Values[0].Key != "producer_byte_rate" || e.Values[0].Value != 1<<20 {
		t.Fatalf("alice's entry: %+v", e)
	}
	for _, bad := range [][]kmsg.DescribeClientQuotasRequestComponent{
		{comp("group", 2, nil)},
		{comp("user", 0, nil)},
		{comp("user", 1, strp("x"))},
		{comp("user", 7, nil)},
		{comp("user", 2, nil), comp("user", 2, nil)},
		{comp("ip", 2, nil), comp("user", 2, nil)},
	} {
		if r := describe(false, bad...); r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil {
			t.Errorf("components %+v: error %d, want INVALID_REQUEST with a message", bad, r.ErrorCode)
		}
	}

	// An address in any form is one entity, kept in canonical form.
	resp = alterQuotas(t, f, false,
		quotaEntry([][2]*string{{ip, strp("0:0:0:0:0:0:0:1")}}, quotaOp("connection_creation_rate", 7, false)),
		quotaEntry([][2]*string{{ip, strp("::ffff:10.1.2.3")}}, quotaOp("connection_creation_rate", 8, false)))
	for _, e := range resp.Entries {
		adminWantCode(t, "ip in another form", e.ErrorCode, nil)
	}
	if v, ok := f.ctrl.Image().ClientQuota(metadata.QuotaEntity{IP: metadata.Named("::1")}, "connection_creation_rate"); !ok || v != 7 {
		t.Fatalf("0:0:0:0:0:0:0:1 not kept as ::1: %v", f.ctrl.Image().ClientQuotas)
	}
	if _, ok := f.ctrl.Image().ClientQuota(metadata.QuotaEntity{IP: metadata.Named("10.1.2.3")}, "connection_creation_rate"); !ok {
		t.Fatalf("::ffff:10.1.2.3 not kept as 10.1.2.3: %v", f.ctrl.Image().ClientQuotas)
	}

	// Remove: a key, then the entity's last.
	resp = alterQuotas(t, f, false, quotaEntry([][2]*string{{user, strp("alice")}}, quotaOp("producer_byte_rate", 0, true)))
	adminWantCode(t, "remove", resp.Entries[0].ErrorCode, nil)
	if got := count(describe(false, comp("user", 0, strp("alice")))); got != 1 {
		t.Fatalf("after removing alice's only user-level key: %d entries with her, want 1", got)
	}
	// Too many entries in one request: all refused.
	var many []kmsg.AlterClientQuotasRequestEntry
	for range maxQuotaEntries + 1 {
		many = append(many, quotaEntry([][2]*string{{user, strp("x")}}, quotaOp("producer_byte_rate", 5, false)))
	}
	resp = alterQuotas(t, f, false, many...)
	for _, e := range resp.Entries {
		adminWantCode(t, "too many", e.ErrorCode, kerr.InvalidRequest)
	}
}

// controller_mutation_rate (KIP-599): from CreateTopics v6 a client that
// owes a wait has further topics refused THROTTLING_QUOTA_EXCEEDED; an
// older version is let through and throttled instead.
func TestControllerMutationQuota(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.setQuotas(map[metadata.QuotaEntity]map[string]float64{
		{ClientID: metadata.DefaultName()}: {metadata.QuotaControllerMutationRate: 1},
	})
	create := func(version int16, names ...string) *kmsg.CreateTopicsRequest {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.TimeoutMillis = version, 5000
		for _, n := range names {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 20, 1
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	c := h.dialAs("admin")
	// The bucket holds 11 (the whole window at 1/s): the first topic of
	// 20 goes through whole, the second is refused.
	resp := c.roundTrip(create(7, "m1", "m2")).(*kmsg.CreateTopicsResponse)
	if resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("first topic: error %d", resp.Topics[0].ErrorCode)
	}
	if resp.Topics[1].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || resp.Topics[1].ErrorMessage == nil ||
		!strings.Contains(*resp.Topics[1].ErrorMessage, "controller_mutation_rate") {
		t.Fatalf("second topic: error %d %s, want THROTTLING_QUOTA_EXCEEDED", resp.Topics[1].ErrorCode, adminMsg(resp.Topics[1].ErrorMessage))
	}
	if resp.ThrottleMillis < 5000 {
		t.Fatalf("throttle %d ms after 20 partitions at 1/s with 11 of burst, want about 9,000", resp.ThrottleMillis)
	}
	if _, ok := h.ctrl.Image().Topics["m2"]; ok {
		t.Fatal("the refused topic was created")
	}
	// Version 5 cannot be refused this way: created, and throttled.
	old := h.dialAs("old-admin")
	resp = old.roundTrip(create(5, "o1", "o2")).(*kmsg.CreateTopicsResponse)
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("v5 %s: error %d", rt.Topic, rt.ErrorCode)
		}
	}
	// 40 partitions at 1/s with 11 of burst owe 29 s, capped at the
	// window (11 s).
	if resp.ThrottleMillis < 10_000 || resp.ThrottleMillis > 11_100 {
		t.Fatalf("v5, 40 partitions: throttle %d ms, want the 11 s cap", resp.ThrottleMillis)
	}
}

// connection_creation_rate (KIP-612): connections from one address past
// its rate are closed at accept; the rate is each address's own, the
// open ones keep working, and a broker's address is exempt.
func TestConnectionCreationRateQuota(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.setQuotas(map[metadata.QuotaEntity]map[string]float64{
		{IP: metadata.DefaultName()}:      {metadata.QuotaConnectionCreationRate: 1},
		{IP: metadata.Named("127.0.0.3")}: {metadata.QuotaConnectionCreationRate: 1000},
	})
	// A burst of one second at 1/s: one connection, then refusals.
	open := dialFrom(t, h.addr, "127.0.0.2")
	open.roundTrip(apiVersionsReq(3))
	for range 3 {
		expectRefusedFrom(t, h.addr, "127.0.0.2")
	}
	open.roundTrip(apiVersionsReq(3)) // the open one still answers
	// 127.0.0.3's own rate is high; 127.0.0.4 has a rate of its own.
	for range 5 {
		dialFrom(t, h.addr, "127.0.0.3").roundTrip(apiVersionsReq(3))
	}
	dialFrom(t, h.addr, "127.0.0.4").roundTrip(apiVersionsReq(3))
	// 127.0.0.1, the registered broker's host, is exempt.
	for range 5 {
		h.dialFor(t).roundTrip(apiVersionsReq(3))
	}
	var m dto.Metric
	if err := h.srv.metrics.connectionsRefused[refusedConnectionCreationRate].Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n != 3 {
		t.Fatalf("connection_creation_rate refusals %v, want 3", n)
	}
}
