package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/testcluster"
)

// hostileDeadline bounds how long the node may take to answer or close a
// hostile connection. Far above any honest answer; a node that waits for
// bytes that will never come (a 2 GiB body) hits it.
const hostileDeadline = 10 * time.Second

// outcome is what the node did with a hostile connection.
type outcome struct {
	closed   bool   // EOF or reset before any complete response
	response []byte // the first complete response frame (without its size), if any
}

func (o outcome) String() string {
	if o.closed {
		return "closed"
	}
	return fmt.Sprintf("answered (%d bytes)", len(o.response))
}

// sendHostile opens a raw connection, writes b, half-closes the write side
// if halfClose (so a node waiting for the rest of a frame sees EOF), and
// waits for the node to answer or close. A node that does neither within
// hostileDeadline fails the test: that is a hang.
func sendHostile(t *testing.T, n *testcluster.Node, b []byte, halfClose bool) outcome {
	t.Helper()
	o, err := trySendHostile(n, b, halfClose)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func trySendHostile(n *testcluster.Node, b []byte, halfClose bool) (outcome, error) {
	c, err := net.DialTimeout("tcp", n.Brokers(), 5*time.Second)
	if err != nil {
		return outcome{}, fmt.Errorf("dial: %v", err)
	}
	defer c.Close()
	conn := c.(*net.TCPConn)
	conn.SetDeadline(time.Now().Add(hostileDeadline))
	if _, err := conn.Write(b); err != nil && !isClosed(err) {
		return outcome{}, fmt.Errorf("write: %v", err)
	}
	if halfClose {
		conn.CloseWrite()
	}
	return readOutcome(conn)
}

// readOutcome reads one response frame or the close.
func readOutcome(conn net.Conn) (outcome, error) {
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		if isClosed(err) {
			return outcome{closed: true}, nil
		}
		return outcome{}, fmt.Errorf("neither answered nor closed: %v", err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 64<<20 {
		return outcome{}, fmt.Errorf("response frame of %d bytes", n)
	}
	resp := make([]byte, n)
	if _, err := io.ReadFull(conn, resp); err != nil {
		return outcome{}, fmt.Errorf("truncated response frame (%d bytes announced): %v", n, err)
	}
	return outcome{response: resp}, nil
}

// waitClosed reads until the node closes the connection, allowing
// (and discarding) responses first.
func waitClosed(conn net.Conn) error {
	conn.SetReadDeadline(time.Now().Add(hostileDeadline))
	_, err := io.Copy(io.Discard, conn)
	if err == nil || isClosed(err) {
		return nil
	}
	return fmt.Errorf("connection not closed: %v", err)
}

func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// sized prefixes body with its length, as the protocol frames requests.
func sized(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// rawHeader is a request header v1 (key, version, correlation id, null
// client id), plus the empty tag buffer of header v2 when flexible.
func rawHeader(key, version int16, correlationID int32, flexible bool) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	b = binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	if flexible {
		b = append(b, 0)
	}
	return b
}

var formatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("fjord-e2e-hostile"))

// apiVersionsRequest is a valid ApiVersions request: from v3 on, Kafka
// refuses an empty client software name or version with INVALID_REQUEST.
func apiVersionsRequest() *kmsg.ApiVersionsRequest {
	r := kmsg.NewPtrApiVersionsRequest()
	r.ClientSoftwareName = "fjord-e2e"
	r.ClientSoftwareVersion = "1.0.0"
	return r
}

// request frames a kmsg request at version v.
func request(r kmsg.Request, v int16, correlationID int32) []byte {
	r.SetVersion(v)
	return formatter.AppendRequest(nil, r, correlationID)
}

// responseBody checks the correlation id of a response frame and returns
// the body after the response header (v0 for ApiVersions and
// non-flexible versions; v1, with a tag buffer, for flexible ones).
func responseBody(t *testing.T, resp []byte, correlationID int32, flexibleHeader bool) []byte {
	t.Helper()
	if len(resp) < 4 || int32(binary.BigEndian.Uint32(resp)) != correlationID {
		t.Fatalf("response %x: want correlation id %d", resp[:min(len(resp), 16)], correlationID)
	}
	resp = resp[4:]
	if flexibleHeader {
		if len(resp) == 0 || resp[0] != 0 {
			t.Fatalf("flexible response header: want an empty tag buffer, got %x", resp[:min(len(resp), 8)])
		}
		resp = resp[1:]
	}
	return resp
}

// goodClient produces and consumes on its own connections while the
// hostile ones run, recording any failure.
type goodClient struct {
	produced atomic.Int64
	consumed atomic.Int64
	errs     errorList
	stopping atomic.Bool // the producer finishes its current record and stops
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

func startGoodClient(t *testing.T, n *testcluster.Node, topic string) *goodClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &goodClient{cancel: cancel}
	producer := newClient(t, n, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	consumer := newClient(t, n, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	g.wg.Add(2)
	go func() {
		defer g.wg.Done()
		// Not canceled by ctx: a produce cut short could be written
		// without being counted.
		for i := 0; !g.stopping.Load(); i++ {
			pctx, pcancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := producer.ProduceSync(pctx, &kgo.Record{Value: fmt.Appendf(nil, "%d", i)}).FirstErr()
			pcancel()
			if err != nil {
				g.errs.add(fmt.Errorf("produce %d: %w", i, err))
				return
			}
			g.produced.Add(1)
		}
	}()
	go func() {
		defer g.wg.Done()
		for ctx.Err() == nil {
			fetches := consumer.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			fetches.EachError(func(topic string, p int32, err error) {
				g.errs.add(fmt.Errorf("fetch %s-%d: %w", topic, p, err))
			})
			fetches.EachRecord(func(r *kgo.Record) {
				want := g.consumed.Load()
				if r.Offset != want || string(r.Value) != fmt.Sprint(want) {
					g.errs.add(fmt.Errorf("consumed offset %d value %q, want offset %d value %d", r.Offset, r.Value, want, want))
				}
				g.consumed.Add(1)
			})
		}
	}()
	t.Cleanup(g.stop)
	return g
}

// stop ends the producer after its current record, then the consumer.
func (g *goodClient) stop() {
	g.stopping.Store(true)
	g.cancel()
	g.wg.Wait()
}

// TestHostileInput: raw connections send garbage, truncated frames, frame
// sizes up to 2 GiB, unknown API keys and versions, and valid headers with
// corrupt bodies. Each gets an error response or a closed connection,
// never a hang; a corrupt batch leaves the log unchanged; the node stays
// up and ready; and a franz-go client producing and consuming on its own
// connections the whole time sees no failure.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ctx := testContext(t, 2*time.Minute)
	adm := newAdmin(t, n)
	createTopic(ctx, t, adm, "steady", 1)
	createTopic(ctx, t, adm, "hostile", 1)
	good := startGoodClient(t, n, "steady")
	eventually(t, 30*time.Second, func() error {
		if good.consumed.Load() == 0 {
			return fmt.Errorf("the good client has not consumed a record yet (errors: %v)", good.errs.err())
		}
		return nil
	})

	mustClose := func(name string, b []byte, halfClose bool) {
		t.Run(name, func(t *testing.T) {
			if o := sendHostile(t, n, b, halfClose); !o.closed {
				t.Fatalf("want the connection closed, got %v: %x", o, o.response[:min(len(o.response), 32)])
			}
		})
	}
	answerOrClose := func(name string, b []byte, halfClose bool) {
		t.Run(name, func(t *testing.T) { sendHostile(t, n, b, halfClose) })
	}

	// Frame sizes the node must refuse without reading a body.
	mustClose("http-request", []byte("GET / HTTP/1.1\r\nHost: fjord\r\n\r\n"), false)
	mustClose("size-2GiB", []byte{0x80, 0, 0, 0, 0, 18, 0, 0}, false)
	mustClose("size-2GiB-minus-1", []byte{0x7f, 0xff, 0xff, 0xff, 0, 18, 0, 0}, false)
	mustClose("size-negative-1", []byte{0xff, 0xff, 0xff, 0xff}, false)
	mustClose("size-just-over-100MiB", binary.BigEndian.AppendUint32(nil, 100<<20+1), false)
	mustClose("size-zero", []byte{0, 0, 0, 0}, false)
	mustClose("size-below-header", sized([]byte{0, 18, 0}), false)

	// Truncated frames: the node cannot know more is not coming until the
	// client closes its side; then it must close too.
	mustClose("truncated-size", []byte{0, 0}, true)
	valid := request(kmsg.NewPtrMetadataRequest(), 9, 1)
	mustClose("truncated-frame", valid[:len(valid)/2], true)
	mustClose("header-only-of-longer-frame", append(binary.BigEndian.AppendUint32(nil, 200), rawHeader(3, 9, 1, true)...), true)

	// Unknown API keys and versions: Kafka closes the connection.
	mustClose("unknown-api-key", sized(rawHeader(9999, 0, 1, false)), false)
	mustClose("negative-api-key", sized(rawHeader(-1, 0, 1, false)), false)
	mustClose("metadata-version-999", sized(append(rawHeader(3, 999, 1, true), 0, 0)), false)
	mustClose("produce-version-99", sized(append(rawHeader(0, 99, 1, true), 0, 0)), false)

	// ApiVersions at an unknown version: a v0 answer with
	// UNSUPPORTED_VERSION and the supported ranges, and the connection
	// stays open for the client's retry at a version it now knows.
	t.Run("api-versions-unknown-version", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", n.Brokers(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(hostileDeadline))
		if _, err := c.Write(request(apiVersionsRequest(), 99, 41)); err != nil {
			t.Fatal(err)
		}
		o, err := readOutcome(c)
		if err != nil || o.closed {
			t.Fatalf("want an answer, got %v, %v", o, err)
		}
		var v0 kmsg.ApiVersionsResponse
		v0.SetVersion(0)
		if err := v0.ReadFrom(responseBody(t, o.response, 41, false)); err != nil {
			t.Fatalf("decoding the v0 answer: %v", err)
		}
		if v0.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("error code %d, want UNSUPPORTED_VERSION (%d)", v0.ErrorCode, kerr.UnsupportedVersion.Code)
		}
		var listed bool
		for _, k := range v0.ApiKeys {
			listed = listed || (k.ApiKey == 18 && k.MaxVersion >= 3)
		}
		if !listed {
			t.Fatalf("the v0 answer does not list ApiVersions up to v3: %+v", v0.ApiKeys)
		}
		if _, err := c.Write(request(apiVersionsRequest(), 3, 42)); err != nil {
			t.Fatal(err)
		}
		o, err = readOutcome(c)
		if err != nil || o.closed {
			t.Fatalf("retry at v3: want an answer, got %v, %v", o, err)
		}
		var v3 kmsg.ApiVersionsResponse
		v3.SetVersion(3)
		if err := v3.ReadFrom(responseBody(t, o.response, 42, false)); err != nil || v3.ErrorCode != 0 {
			t.Fatalf("retry at v3: %v, error code %d", err, v3.ErrorCode)
		}
	})

	// Valid headers with corrupt bodies.
	answerOrClose("metadata-huge-topic-count", sized(append(rawHeader(3, 1, 1, false), 0x7f, 0xff, 0xff, 0xff)), false)
	answerOrClose("metadata-v12-truncated-body", sized(append(rawHeader(3, 12, 1, true), 0x05, 0x01)), false)
	rng := rand.New(rand.NewPCG(3, 14))
	randomBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	answerOrClose("produce-v9-random-body", sized(append(rawHeader(0, 9, 1, true), randomBytes(300)...)), false)
	answerOrClose("fetch-v12-random-body", sized(append(rawHeader(1, 12, 1, true), randomBytes(300)...)), false)
	answerOrClose("create-topics-v5-random-body", sized(append(rawHeader(19, 5, 1, true), randomBytes(64)...)), false)
	// A valid request and garbage in one write. The node may read both
	// before answering the first (it pipelines), so closing without the
	// first answer is allowed; an answer, if any, must be the right one.
	t.Run("answer-then-garbage", func(t *testing.T) {
		b := append(request(apiVersionsRequest(), 3, 7), sized(append(rawHeader(-7, 0, 8, false), 0xde, 0xad))...)
		c, err := net.DialTimeout("tcp", n.Brokers(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(hostileDeadline))
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		o, err := readOutcome(c)
		if err != nil {
			t.Fatal(err)
		}
		if o.closed {
			t.Logf("closed without answering the valid request before the garbage")
			return
		}
		var v3 kmsg.ApiVersionsResponse
		v3.SetVersion(3)
		if err := v3.ReadFrom(responseBody(t, o.response, 7, false)); err != nil || v3.ErrorCode != 0 {
			t.Fatalf("the valid request before the garbage: %v, error code %d", err, v3.ErrorCode)
		}
		if err := waitClosed(c); err != nil {
			t.Fatal(err)
		}
	})

	// A well-formed produce carrying a batch with a bad CRC: the partition
	// fails with CORRUPT_MESSAGE and nothing is appended; the same batch
	// intact is appended (so the refusal is about the CRC).
	t.Run("produce-corrupt-batch", func(t *testing.T) {
		b := record.NewBuilder(record.DefaultBatchOptions())
		b.Add([]byte("k"), []byte("a record whose CRC will not match"), nil, time.Now().UnixMilli())
		batch, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		corrupt := bytes.Clone(batch)
		corrupt[len(corrupt)-1] ^= 0xff
		endOffset := func() int64 {
			ends, err := adm.ListEndOffsets(ctx, "hostile")
			if err == nil {
				err = ends.Error()
			}
			if err != nil {
				t.Fatal(err)
			}
			o, _ := ends.Lookup("hostile", 0)
			return o.Offset
		}
		produce := func(batch []byte, correlationID int32) kmsg.ProduceResponseTopicPartition {
			req := kmsg.NewPtrProduceRequest()
			req.Acks = -1
			req.TimeoutMillis = 5000
			topic := kmsg.NewProduceRequestTopic()
			topic.Topic = "hostile"
			part := kmsg.NewProduceRequestTopicPartition()
			part.Records = batch
			topic.Partitions = append(topic.Partitions, part)
			req.Topics = append(req.Topics, topic)
			o := sendHostile(t, n, request(req, 9, correlationID), false)
			if o.closed {
				t.Fatalf("produce with batch %x...: connection closed, want a response", batch[:16])
			}
			var resp kmsg.ProduceResponse
			resp.SetVersion(9)
			if err := resp.ReadFrom(responseBody(t, o.response, correlationID, true)); err != nil {
				t.Fatalf("decoding produce response: %v", err)
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("produce response %+v: want one partition", resp)
			}
			return resp.Topics[0].Partitions[0]
		}
		before := endOffset()
		if p := produce(corrupt, 100); p.ErrorCode != kerr.CorruptMessage.Code {
			t.Fatalf("corrupt batch: error code %d (%v), want CORRUPT_MESSAGE", p.ErrorCode, kerr.ErrorForCode(p.ErrorCode))
		}
		if after := endOffset(); after != before {
			t.Fatalf("corrupt batch moved the end offset from %d to %d", before, after)
		}
		if p := produce(batch, 101); p.ErrorCode != 0 || p.BaseOffset != before {
			t.Fatalf("intact batch: error code %d, base offset %d; want 0 at %d", p.ErrorCode, p.BaseOffset, before)
		}
		if after := endOffset(); after != before+1 {
			t.Fatalf("intact batch: end offset %d, want %d", after, before+1)
		}
	})

	// Random bytes on many connections at once, each half-closed after
	// its bytes: some are refused by their size, some parse as a header
	// and fail later; every one must end.
	t.Run("random", func(t *testing.T) {
		conns := scale(64, 2000)
		const workers = 8
		var wg sync.WaitGroup
		var failures errorList
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 99))
				for i := w; i < conns; i += workers {
					body := make([]byte, 1+rng.IntN(400))
					for j := range body {
						body[j] = byte(rng.Uint32())
					}
					if i%2 == 0 {
						// A plausible frame: right size, a real API key,
						// then noise.
						key := uint16(rng.IntN(70))
						body = sized(append(binary.BigEndian.AppendUint16(nil, key), body...))
					}
					if _, err := trySendHostile(n, body, true); err != nil {
						failures.add(fmt.Errorf("connection %d (%x...): %w", i, body[:min(len(body), 12)], err))
					}
				}
			}()
		}
		wg.Wait()
		if err := failures.err(); err != nil {
			t.Fatal(err)
		}
	})

	// The good client kept working throughout; let it do some more, then
	// stop it and check it read what it wrote, in order, and that the log
	// holds exactly what it was told was written.
	floor := good.produced.Load() + 20
	eventually(t, 30*time.Second, func() error {
		if p := good.produced.Load(); p < floor {
			return fmt.Errorf("good client produced %d, want %d (errors: %v)", p, floor, good.errs.err())
		}
		return nil
	})
	produced := good.produced.Load()
	eventually(t, 30*time.Second, func() error {
		if c := good.consumed.Load(); c < produced {
			return fmt.Errorf("good client consumed %d of %d", c, produced)
		}
		return nil
	})
	good.stop()
	if err := good.errs.err(); err != nil {
		t.Fatalf("the well-behaved client saw failures: %v", err)
	}
	produced = good.produced.Load()
	steady := readAll(ctx, t, n, "steady")[history.TopicPartition{Topic: "steady"}]
	if len(steady) != int(produced) {
		t.Fatalf("steady holds %d records, the good client produced %d", len(steady), produced)
	}
	for i, r := range steady {
		if r.Offset != int64(i) || string(r.Value) != fmt.Sprint(i) {
			t.Fatalf("steady offset %d holds %q at position %d", r.Offset, r.Value, i)
		}
	}
	if !n.Running() {
		t.Fatal("the node is gone")
	}
	if err := n.CheckReady(); err != nil {
		t.Fatalf("the node is not ready after the hostile input: %v", err)
	}
	log, err := os.ReadFile(n.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(log, []byte("panic")) {
		t.Fatalf("the node's log mentions a panic:\n%s", n.LogTail(80))
	}
	t.Logf("good client: %d records produced and consumed during the hostile input", produced)
}
