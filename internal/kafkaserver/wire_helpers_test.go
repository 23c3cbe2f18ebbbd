package kafkaserver

// A test harness for the wire: a Server on a loopback listener wired to
// the in-memory services, and a raw client that writes requests exactly
// as a Kafka client does (kmsg's RequestFormatter) and reads responses
// byte by byte, so the tests see the framing and headers the server
// really sends.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/testutil"
)

type wireHarness struct {
	t      testing.TB
	srv    *Server
	ctrl   *memController
	reps   *memReplicas
	groups Groups // nil unless withGroups
	addr   string
	// manager is the real replica manager under newRealReplicasHarness,
	// nil otherwise.
	manager *replica.Manager
}

// harnessOpt changes the harness before the server starts serving.
type harnessOpt struct {
	// listener, when set, is how the harness's listener is served
	// (ServeListener); nil: Serve, plain PLAINTEXT.
	listener *ListenerConfig
	config   func(*Config)
	server   func(*Server)
	replicas func(h *wireHarness) Replicas
	groups   func(h *wireHarness) Groups
}

func withConfig(fn func(*Config)) harnessOpt { return harnessOpt{config: fn} }
func withServer(fn func(*Server)) harnessOpt { return harnessOpt{server: fn} }

// withListener serves the harness's listener as lc says.
func withListener(lc ListenerConfig) harnessOpt { return harnessOpt{listener: &lc} }

// withReplicas serves with other Replicas than the in-memory ones.
func withReplicas(fn func(h *wireHarness) Replicas) harnessOpt { return harnessOpt{replicas: fn} }

// newWireHarness starts a Server (node 1, auto-create on) on 127.0.0.1:0.
func newWireHarness(t testing.TB, opts ...harnessOpt) *wireHarness {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, portStr, _ := net.SplitHostPort(l.Addr().String())
	port, _ := strconv.Atoi(portStr)
	h := &wireHarness{t: t, addr: l.Addr().String()}
	h.ctrl = newMemController(1, host, int32(port))
	h.reps = newMemReplicas(h.ctrl)
	cfg := Config{NodeID: 1, AutoCreateTopics: true, TopicConfigs: testConfigs, Logger: testutil.Logger(t)}
	for _, o := range opts {
		if o.config != nil {
			o.config(&cfg)
		}
	}
	var reps Replicas = h.reps
	for _, o := range opts {
		if o.replicas != nil {
			reps = o.replicas(h)
		}
		if o.groups != nil {
			h.groups = o.groups(h)
		}
	}
	h.srv = New(cfg, h.ctrl, reps, &memPIDs{}, h.groups)
	for _, o := range opts {
		if o.server != nil {
			o.server(h.srv)
		}
	}
	lc := ListenerConfig{Name: DefaultListenerName}
	for _, o := range opts {
		if o.listener != nil {
			lc = *o.listener
		}
	}
	served := make(chan error, 1)
	go func() { served <- h.srv.ServeListener(l, lc) }()
	t.Cleanup(func() {
		if err := h.srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v after Close, want nil", err)
		}
	})
	return h
}

// rawConn is a client connection that speaks the framing by hand.
type rawConn struct {
	t    testing.TB
	nc   net.Conn
	br   *bufio.Reader
	corr int32
	fmt  *kmsg.RequestFormatter
}

func (h *wireHarness) dial() *rawConn {
	h.t.Helper()
	return h.dialFor(h.t)
}

// dialFor dials a connection owned by t (closed when t ends).
func (h *wireHarness) dialFor(t testing.TB) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("wire-test"))}
}

// send writes req (its version already set) and returns its correlation id.
func (c *rawConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	b := c.fmt.AppendRequest(nil, req, c.corr)
	c.write(b)
	return c.corr
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one response frame (without its size).
func (c *rawConn) readFrame() ([]byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 256<<20 {
		return nil, fmt.Errorf("response frame size %d", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c.br, b); err != nil {
		return nil, err
	}
	return b, nil
}

// recv reads one response for a request of kind req and checks its
// correlation id and header shape.
func (c *rawConn) recv(req kmsg.Request, wantCorr int32) kmsg.Response {
	c.t.Helper()
	frame, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("reading %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	body, corr := splitResponseHeader(c.t, frame, resp)
	if corr != wantCorr {
		c.t.Fatalf("%s response: correlation id %d, want %d", kmsg.NameForKey(req.Key()), corr, wantCorr)
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decoding %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	// The body must be exactly one response: re-encoding what was
	// decoded gives back the same bytes.
	if again := resp.AppendTo(nil); string(again) != string(body) {
		c.t.Fatalf("%s v%d response: %d body bytes, re-encoded %d (header shape wrong?)", kmsg.NameForKey(req.Key()), req.GetVersion(), len(body), len(again))
	}
	return resp
}

// splitResponseHeader returns the body and correlation id of a response
// frame: header v0 (correlation id) or, for flexible versions of every
// API but ApiVersions, v1 (plus empty tagged fields).
func splitResponseHeader(t testing.TB, frame []byte, resp kmsg.Response) ([]byte, int32) {
	t.Helper()
	r := kbin.Reader{Src: frame}
	corr := r.Int32()
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		if n := r.Uvarint(); n != 0 {
			t.Fatalf("response header has %d tagged fields, want 0", n)
		}
	}
	if !r.Ok() {
		t.Fatalf("short response header: % x", frame)
	}
	return r.Src, corr
}

// roundTrip sends req and returns its response.
func (c *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	return c.recv(req, c.send(req))
}

// expectClosed waits for the server to close the connection; a response
// arriving first fails the test.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	frame, err := c.readFrame()
	if err == nil {
		c.t.Fatalf("got a %d-byte response, want the connection closed", len(frame))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection still open after 10s, want closed")
	}
}

// frameOf frames a raw request: size, then b.
func frameOf(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// header builds a request header v1 (v2 with flexible) by hand.
func header(key, version int16, corr int32, flexible bool) []byte {
	b := kbin.AppendInt16(nil, key)
	b = kbin.AppendInt16(b, version)
	b = kbin.AppendInt32(b, corr)
	id := "wire-test"
	b = kbin.AppendNullableString(b, &id)
	if flexible {
		b = append(b, 0)
	}
	return b
}

// batch builds a valid record batch of n records with values
// "<prefix>-<i>".
func batch(t testing.TB, prefix string, n int) []byte {
	t.Helper()
	bld := record.NewBuilder(record.DefaultBatchOptions())
	for i := range n {
		bld.Add(nil, []byte(fmt.Sprintf("%s-%d", prefix, i)), nil, time.Now().UnixMilli())
	}
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// produceReq builds a produce request for one partition.
func produceReq(version int16, acks int16, topic string, partition int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// ctxT is a context for a test's requests.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
