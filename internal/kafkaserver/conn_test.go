package kafkaserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/testutil"
)

func apiVersionsReq(version int16) *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = version
	req.ClientSoftwareName = "fjord-test"
	req.ClientSoftwareVersion = "1.0"
	return req
}

// The frame size limit is inclusive: a frame of exactly MaxRequestBytes is
// read and answered, one byte more closes the connection, as do sizes
// below the smallest header, negative sizes and 2 GiB.
func TestFrameSizeLimits(t *testing.T) {
	const limit = 1024
	h := newWireHarness(t, withConfig(func(c *Config) { c.MaxRequestBytes = limit }))

	// ApiVersions v0 has an empty body; kmsg ignores trailing bytes, so
	// padding makes a valid request of any size.
	padded := func(size int) []byte {
		b := header(18, 0, 7, false)
		return frameOf(append(b, make([]byte, size-len(b))...))
	}
	t.Run("exactly the limit is answered", func(t *testing.T) {
		c := h.dialFor(t)
		c.write(padded(limit))
		resp := c.recv(apiVersionsReq(0), 7).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
			t.Fatalf("error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
		}
	})
	sizes := map[string]uint32{
		"one over the limit": limit + 1,
		"2 GiB":              1 << 31,
		"max int32":          1<<31 - 1,
		"zero":               0,
		"below the header":   minFrameBytes - 1,
		"negative":           0xFFFFFFF0,
	}
	for name, size := range sizes {
		t.Run(name+" closes", func(t *testing.T) {
			c := h.dialFor(t)
			b := binary.BigEndian.AppendUint32(nil, size)
			c.write(append(b, header(18, 0, 1, false)...))
			c.expectClosed()
		})
	}
	// The server is still up.
	c := h.dial()
	c.roundTrip(apiVersionsReq(3))
}

// A frame cut short by the client's close ends only that connection.
func TestTruncatedFrameCloses(t *testing.T) {
	h := newWireHarness(t)
	c := h.dial()
	full := frameOf(append(header(18, 0, 1, false), make([]byte, 100)...))
	c.write(full[:50])
	c.nc.(*net.TCPConn).CloseWrite()
	c.expectClosed()
	h.dial().roundTrip(apiVersionsReq(2))
}

// Responses leave in request order even when a later request is handled
// first. Request 1's append waits until request 2 has been fully
// handled (its slot filled), so the handlers finish in the order 2, 1;
// the client must still read 1 then 2. A server that handled one request
// at a time would deadlock here and fail on the read deadline.
func TestPipelinedResponsesInRequestOrder(t *testing.T) {
	secondHandled := make(chan struct{})
	var once sync.Once
	h := newWireHarness(t, withServer(func(s *Server) {
		s.testHookHandled = func(key int16, corr int32) {
			if corr == 2 {
				once.Do(func() { close(secondHandled) })
			}
		}
	}))
	h.ctrl.addTopic("a", 1)
	h.ctrl.addTopic("b", 1)
	h.reps.appendHook = func(ctx context.Context, topic string, _ int32) error {
		if topic == "a" {
			select {
			case <-secondHandled: // request 2 answered first
			case <-ctx.Done(): // connection closed: test failed already
				return ctx.Err()
			}
		}
		return nil
	}
	c := h.dial()
	reqA := produceReq(9, 1, "a", 0, batch(t, "a", 3))
	reqB := produceReq(9, 1, "b", 0, batch(t, "b", 2))
	if c.send(reqA) != 1 || c.send(reqB) != 2 {
		t.Fatal("correlation ids")
	}
	ra := c.recv(reqA, 1).(*kmsg.ProduceResponse)
	rb := c.recv(reqB, 2).(*kmsg.ProduceResponse)
	if ra.Topics[0].Topic != "a" || ra.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("first response: %+v", ra.Topics)
	}
	if rb.Topics[0].Topic != "b" || rb.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("second response: %+v", rb.Topics)
	}
}

// Many pipelined requests of mixed kinds come back in order with their
// own answers.
func TestPipelinedMixedRequests(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("t", 4)
	c := h.dial()
	var reqs []kmsg.Request
	for i := range 40 {
		var req kmsg.Request
		switch i % 3 {
		case 0:
			req = apiVersionsReq(3)
		case 1:
			m := kmsg.NewPtrMetadataRequest()
			m.Version = 12
			req = m
		default:
			req = produceReq(11, 1, "t", int32(i%4), batch(t, "v", 1))
		}
		reqs = append(reqs, req)
		c.send(req)
	}
	for i, req := range reqs {
		resp := c.recv(req, int32(i+1))
		if resp.Key() != req.Key() {
			t.Fatalf("response %d is %s, want %s", i, kmsg.NameForKey(resp.Key()), kmsg.NameForKey(req.Key()))
		}
	}
}

// At most MaxInFlight requests of a connection are unanswered: with two
// allowed and every append held, the third produce is not read until one
// is answered, and all are answered in order once released.
func TestInFlightBound(t *testing.T) {
	const bound, total = 2, 6
	var inHook, maxInHook atomic.Int32
	// Request i produces to partition i and is let through by proceed[i],
	// so the test releases exactly the oldest request.
	proceed := make([]chan struct{}, total)
	for i := range proceed {
		proceed[i] = make(chan struct{})
	}
	h := newWireHarness(t, withConfig(func(c *Config) { c.MaxInFlight = bound }))
	h.ctrl.addTopic("t", total)
	h.reps.appendHook = func(ctx context.Context, _ string, partition int32) error {
		n := inHook.Add(1)
		for {
			m := maxInHook.Load()
			if n <= m || maxInHook.CompareAndSwap(m, n) {
				break
			}
		}
		defer inHook.Add(-1)
		select {
		case <-proceed[partition]: // the test lets this one through
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c := h.dial()
	var reqs []kmsg.Request
	for i := range total {
		req := produceReq(7, 1, "t", int32(i), batch(t, "x", 1))
		reqs = append(reqs, req)
		c.send(req)
	}
	for i := range total {
		want := int32(min(bound, total-i))
		testutil.Eventually(t, 5*time.Second, func() error {
			if n := inHook.Load(); n != want {
				return fmt.Errorf("%d appends in flight, want %d", n, want)
			}
			return nil
		})
		if n := h.reps.appends.Load(); n != int32(i)+want {
			t.Fatalf("after %d answers, %d appends started, want %d", i, n, int32(i)+want)
		}
		close(proceed[i])
		resp := c.recv(reqs[i], int32(i+1)).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		if p.Partition != int32(i) || p.ErrorCode != 0 || p.BaseOffset != 0 {
			t.Fatalf("response %d: %+v", i, p)
		}
	}
	if m := maxInHook.Load(); m != bound {
		t.Fatalf("at most %d appends ran at once, want %d", m, bound)
	}
}

// An idle connection is closed after IdleTimeout; one waiting on a
// long-poll fetch longer than that is not idle.
func TestIdleTimeout(t *testing.T) {
	h := newWireHarness(t, withConfig(func(c *Config) { c.IdleTimeout = 100 * time.Millisecond }))
	tp := h.ctrl.addTopic("t", 1)

	busy := h.dial()
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 11
	fetch.MaxWaitMillis = 400 // four idle timeouts with a request in flight
	fetch.MinBytes = 1
	fetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = tp.Name
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	start := time.Now()
	resp := busy.roundTrip(fetch).(*kmsg.FetchResponse)
	if waited := time.Since(start); waited < 400*time.Millisecond {
		t.Fatalf("long-poll answered after %v, want MaxWait", waited)
	}
	if resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("fetch error %d", resp.Topics[0].Partitions[0].ErrorCode)
	}

	idle := h.dial()
	idle.roundTrip(apiVersionsReq(3))
	idle.expectClosed()
	// The busy connection, idle now too, is closed as well.
	busy.expectClosed()
}

// The ApiVersions response header is v0 even for the flexible v3 (no
// tagged-field byte), and its body is exactly a v3 body.
func TestAPIVersionsV3HeaderShape(t *testing.T) {
	h := newWireHarness(t)
	c := h.dial()
	c.send(apiVersionsReq(3))
	frame, err := c.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	if corr := int32(binary.BigEndian.Uint32(frame)); corr != 1 {
		t.Fatalf("correlation id %d", corr)
	}
	var resp kmsg.ApiVersionsResponse
	resp.Version = 3
	if err := resp.ReadFrom(frame[4:]); err != nil {
		t.Fatal(err)
	}
	if string(resp.AppendTo(nil)) != string(frame[4:]) {
		t.Fatalf("body after a 4-byte header is not a v3 ApiVersions response: % x", frame)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("error %d", resp.ErrorCode)
	}
	got := make(map[int16][2]int16)
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	// A client that is not Fjord's is shown every Kafka API, and none of
	// Fjord's own (describe_positions_test.go shows those).
	kafkaAPIs := 0
	for key := range apis {
		if !fjordmsg.IsFjordKey(key) {
			kafkaAPIs++
		}
	}
	if len(got) != kafkaAPIs {
		t.Fatalf("advertised %d APIs, table has %d Kafka APIs", len(got), kafkaAPIs)
	}
	for key, a := range apis {
		if fjordmsg.IsFjordKey(key) {
			continue
		}
		if got[key] != [2]int16{a.minVersion, a.maxVersion} {
			t.Errorf("%s: advertised %v, table v%d-%d", kmsg.NameForKey(key), got[key], a.minVersion, a.maxVersion)
		}
	}
	want := map[int16][2]int16{18: {0, 3}, 3: {0, 12}, 0: {0, 12}, 1: {4, 16}}
	for key, v := range want {
		if got[key] != v {
			t.Errorf("%s advertised %v, want %v", kmsg.NameForKey(key), got[key], v)
		}
	}
}

// An ApiVersions version above ours gets a v0 answer with
// UNSUPPORTED_VERSION and the ranges, on the same connection, so the
// client can retry lower; the retry works.
func TestAPIVersionsUnknownVersionDowngrade(t *testing.T) {
	h := newWireHarness(t)
	for _, v := range []int16{4, 5, 127} {
		c := h.dial()
		// A v4+ request has a flexible header and a body we do not parse.
		c.write(frameOf(append(header(18, v, 42, true), 0x05, 'x', 'y', 'z', 0x02, '1', 0x00)))
		frame, err := c.readFrame()
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		var resp kmsg.ApiVersionsResponse // v0
		if corr := int32(binary.BigEndian.Uint32(frame)); corr != 42 {
			t.Fatalf("v%d: correlation id %d", v, corr)
		}
		if err := resp.ReadFrom(frame[4:]); err != nil {
			t.Fatal(err)
		}
		if string(resp.AppendTo(nil)) != string(frame[4:]) {
			t.Fatalf("v%d: answer is not a v0 body", v)
		}
		if resp.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("v%d: error %d, want UNSUPPORTED_VERSION", v, resp.ErrorCode)
		}
		found := false
		for _, k := range resp.ApiKeys {
			found = found || k.ApiKey == 18 && k.MaxVersion == 3
		}
		if !found {
			t.Fatalf("v%d: ranges missing ApiVersions v3: %+v", v, resp.ApiKeys)
		}
		// Retry lower on the same connection.
		c.corr = 42
		if r := c.roundTrip(apiVersionsReq(3)).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
			t.Fatalf("retry: error %d", r.ErrorCode)
		}
	}
}

// KIP-511: v3+ software name and version must match the pattern.
func TestAPIVersionsSoftwareNameValidation(t *testing.T) {
	h := newWireHarness(t)
	c := h.dial()
	cases := []struct {
		name, version string
		ok            bool
	}{
		{"franz-go", "1.22.3", true},
		{"a", "0", true},
		{"librdkafka", "2.11.0-RC1", true},
		{"", "1.0", false},
		{"franz go", "1.0", false},
		{"-lead", "1.0", false},
		{"trail.", "1.0", false},
		{"ok", "", false},
		{"ok", "1_0", false},
	}
	for _, tc := range cases {
		req := apiVersionsReq(3)
		req.ClientSoftwareName, req.ClientSoftwareVersion = tc.name, tc.version
		resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
		want := int16(0)
		if !tc.ok {
			want = kerr.InvalidRequest.Code
		}
		if resp.ErrorCode != want || len(resp.ApiKeys) == 0 {
			t.Errorf("%q %q: error %d with %d keys, want error %d with the ranges", tc.name, tc.version, resp.ErrorCode, len(resp.ApiKeys), want)
		}
	}
}

// Unknown API keys and unsupported versions of APIs other than
// ApiVersions close the connection (Kafka does the same).
func TestUnknownKeyAndVersionClose(t *testing.T) {
	h := newWireHarness(t)
	cases := map[string][]byte{
		"unknown key 9999":       header(9999, 0, 1, false),
		"group API not served":   header(11, 5, 1, false),
		"negative key":           header(-1, 0, 1, false),
		"fetch v3 below min":     header(1, 3, 1, false),
		"fetch v17 above max":    header(1, 17, 1, true),
		"metadata v13 above max": header(3, 13, 1, true),
		"produce v13 above max":  header(0, 13, 1, true),
	}
	for name, hdr := range cases {
		t.Run(name, func(t *testing.T) {
			c := h.dialFor(t)
			c.write(frameOf(append(hdr, make([]byte, 16)...)))
			c.expectClosed()
		})
	}
	h.dial().roundTrip(apiVersionsReq(3))
}

// A valid header with a body that does not decode closes the connection.
func TestCorruptBodyCloses(t *testing.T) {
	h := newWireHarness(t)
	// Metadata v1 whose topic array claims 1000 entries in 4 bytes.
	body := binary.BigEndian.AppendUint32(nil, 1000)
	c := h.dial()
	c.write(frameOf(append(header(3, 1, 1, false), body...)))
	c.expectClosed()
	// A flexible header whose tagged fields run past the frame.
	c = h.dial()
	hdr := header(3, 12, 1, false)
	hdr = append(hdr, 0x01, 0x00, 0x7f) // one tag, id 0, 127 bytes that are not there
	c.write(frameOf(hdr))
	c.expectClosed()
	h.dial().roundTrip(apiVersionsReq(3))
}

// Header tagged fields are skipped, not misread as the body.
func TestFlexibleHeaderTagsSkipped(t *testing.T) {
	h := newWireHarness(t)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	body := req.AppendTo(nil)
	hdr := header(3, 12, 5, false)
	hdr = append(hdr, 0x02, 0x00, 0x03, 'a', 'b', 'c', 0x07, 0x00) // two tags
	c := h.dial()
	c.write(frameOf(append(hdr, body...)))
	resp := c.recv(req, 5).(*kmsg.MetadataResponse)
	if len(resp.Brokers) != 1 {
		t.Fatalf("brokers %+v", resp.Brokers)
	}
}

// Produce with acks=0 writes no response: the next response on the
// connection is the next request's.
func TestAcksZeroWritesNothing(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("t", 1)
	c := h.dial()
	c.send(produceReq(9, 0, "t", 0, batch(t, "z", 2)))
	corr := c.send(apiVersionsReq(3))
	c.recv(apiVersionsReq(3), corr)
	if n := h.reps.appends.Load(); n != 1 {
		t.Fatalf("%d appends, want 1", n)
	}
	h.reps.mu.Lock()
	next := h.reps.parts[memTP{"t", 0}].next
	h.reps.mu.Unlock()
	if next != 2 {
		t.Fatalf("log end offset %d, want 2", next)
	}
}

// acks=0 to a partition that fails closes the connection, so a client
// that reads no answers refreshes its metadata (Kafka's behaviour).
func TestAcksZeroErrorCloses(t *testing.T) {
	h := newWireHarness(t, withConfig(func(c *Config) { c.AutoCreateTopics = false }))
	c := h.dial()
	c.send(produceReq(9, 0, "missing", 0, batch(t, "z", 1)))
	c.expectClosed()
}

// A panicking handler closes only its connection; the node and other
// connections carry on.
func TestHandlerPanicClosesConnection(t *testing.T) {
	var panics atomic.Int32
	h := newWireHarness(t, withServer(func(s *Server) {
		s.testHookPanic = func(api string, _ any) {
			if api == "Produce" {
				panics.Add(1)
			}
		}
	}))
	h.ctrl.addTopic("boom", 1)
	h.ctrl.addTopic("fine", 1)
	h.reps.appendHook = func(_ context.Context, topic string, _ int32) error {
		if topic == "boom" {
			panic("injected")
		}
		return nil
	}
	other := h.dial()
	other.roundTrip(apiVersionsReq(3))

	c := h.dial()
	c.send(produceReq(9, 1, "boom", 0, batch(t, "p", 1)))
	c.expectClosed()
	if panics.Load() != 1 {
		t.Fatalf("%d panics seen", panics.Load())
	}
	resp := other.roundTrip(produceReq(9, 1, "fine", 0, batch(t, "p", 1))).(*kmsg.ProduceResponse)
	if resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("other connection: error %d", resp.Topics[0].Partitions[0].ErrorCode)
	}
}

// Responses ahead of a request that closes the connection are written
// first.
func TestResponsesBeforeCloseAreWritten(t *testing.T) {
	h := newWireHarness(t)
	c := h.dial()
	c.send(apiVersionsReq(3))
	c.send(apiVersionsReq(2))
	c.write(frameOf(header(9999, 0, 3, false)))
	c.recv(apiVersionsReq(3), 1)
	c.recv(apiVersionsReq(2), 2)
	c.expectClosed()
}

// Close ends long-polls, closes connections and leaves no goroutines.
func TestCloseWaitsForConnections(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctrl := newMemController(1, "127.0.0.1", 1)
	ctrl.addTopic("t", 1)
	srv := New(Config{NodeID: 1, TopicConfigs: testConfigs, Logger: testutil.Logger(t)}, ctrl, newMemReplicas(ctrl), &memPIDs{}, nil)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	h := &wireHarness{t: t, addr: l.Addr().String()}
	c := h.dial()
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	fetch.MaxWaitMillis = 60_000
	fetch.MinBytes = 1
	fetch.MaxBytes = 1 << 20
	fetch.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	c.send(fetch)
	idle := h.dial()
	idle.roundTrip(apiVersionsReq(3))

	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Close took %v with a 60s long-poll open", d)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	// Closing twice is fine; Serve after Close refuses.
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _ := net.Listen("tcp", "127.0.0.1:0")
	if err := srv.Serve(l2); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
	c.nc.Close()
	idle.nc.Close()
}

// Regression (found by FuzzAPIBodies, seed 195f2ea61951c703): a fetch
// with a MaxWait of days, then the client closing its side, pinned the
// connection until MaxWait passed. Now the reader's stop ends the
// long-poll: the owed answer is written at once and the connection
// closes.
func TestClientCloseEndsLongPoll(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("t", 1)
	for _, parts := range [][]fetchPart{nil, {{topic: "t"}}} {
		c := h.dial()
		req := fetchReq(12, 1<<30, 1, parts...) // MaxWait: 12 days
		corr := c.send(req)
		c.nc.(*net.TCPConn).CloseWrite()
		c.recv(req, corr) // within recv's 10s deadline
		c.expectClosed()
	}
}

// Regression: a connection's produce requests were appended in whatever
// order their handler goroutines ran, so an idempotent producer with
// several requests in flight got OUT_OF_ORDER_SEQUENCE_NUMBER (and a
// producer without idempotence had its records reordered). Request 1's
// append is held until request 2 has either appended (the bug) or parked
// waiting for its turn (the fix); the log must then hold 1 before 2.
func TestPipelinedProducesAppendInRequestOrder(t *testing.T) {
	secondParked := make(chan struct{})
	secondAppended := make(chan struct{})
	var parkOnce, appendOnce sync.Once
	h := newWireHarness(t, withServer(func(s *Server) {
		s.testHookProduceTurn = func(corr int32) {
			if corr == 2 {
				parkOnce.Do(func() { close(secondParked) })
			}
		}
	}))
	h.ctrl.addTopic("t", 1)
	h.reps.startHook = func(string, int32) {
		if h.reps.appends.Load() == 1 { // request 1's append
			select {
			case <-secondParked:
			case <-secondAppended:
			}
			return
		}
		appendOnce.Do(func() { close(secondAppended) })
	}
	c := h.dial()
	req1 := produceReq(9, 1, "t", 0, batch(t, "first", 1))
	req2 := produceReq(9, 1, "t", 0, batch(t, "second", 1))
	c.send(req1)
	c.send(req2)
	r1 := c.recv(req1, 1).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	r2 := c.recv(req2, 2).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if r1.ErrorCode != 0 || r2.ErrorCode != 0 || r1.BaseOffset != 0 || r2.BaseOffset != 1 {
		t.Fatalf("request 1 at offset %d (error %d), request 2 at %d (error %d); want 0 then 1",
			r1.BaseOffset, r1.ErrorCode, r2.BaseOffset, r2.ErrorCode)
	}
}

// Regression: produces read whole are carried out even when the client
// closes the connection right after sending them, as an acks=0 producer
// does. A version of produceTurn gave up waiting for its turn when the
// connection closed, and `fjord produce --acks 0` lost every record.
func TestProducesAppendAfterClientCloses(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("t", 1)
	c := h.dial()
	for i := range 3 {
		c.send(produceReq(9, 0, "t", 0, batch(t, fmt.Sprintf("r%d", i), 1)))
	}
	c.nc.Close()
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := h.reps.appends.Load(); n != 3 {
			return fmt.Errorf("%d of 3 produces appended", n)
		}
		return nil
	})
}
