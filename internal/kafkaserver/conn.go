package kafkaserver

// One client connection: framing, header decoding, pipelining.
//
// Wire format (every request and response, both directions):
//
//	+----------+-------------------------------------------+
//	| size     | size bytes                                |
//	| int32 BE | header | body                             |
//	+----------+-------------------------------------------+
//
// Request header v1: api_key int16, api_version int16, correlation_id
// int32, client_id nullable string (int16 length). v2 (flexible API
// versions, KIP-482) adds tagged fields (uvarint count, then uvarint tag,
// uvarint size, bytes each). The client id stays a non-compact string in
// v2, so clients can send ApiVersions before they know the broker. v0
// (no client id) is only ControlledShutdown v0, which is not served.
// Response header v0: correlation_id int32; v1 adds tagged fields, used
// for flexible versions of every API except ApiVersions, whose response
// header is always v0 so a client that guessed a version too new can
// still read the correlation id and the error.
//
// Pipelining: the reader takes an in-flight token, reads and decodes one
// frame, queues a result slot and starts the handler on its own
// goroutine, then reads the next. The writer takes slots from the queue
// in order, waits for each to be filled, writes it and gives the token
// back. So responses leave in request order however the handlers
// finish, and at most MaxInFlight requests are unanswered; past that the
// reader stops reading and TCP pushes back on the client. Produces are
// held tighter: the reader reads no frame while two produces on the
// connection have not finished their appends (readLoop), so a producer's
// window waits in the socket buffers rather than in the heap.
//
// A frame buffer is taken from the pool (bufpool.go) as its bytes arrive
// (first up to 1 MiB, then doubling), so a client that announces a large
// frame and sends nothing pins little memory. The records of a produce
// request alias the frame (kmsg's ReadFrom slices byte fields out of its
// input), so they are appended without a copy. The frame goes back to
// its pool once the request's response is written, or, for a produce,
// as soon as its appends are done (request.releaseFrame).
//
// Closing: bad framing, an unknown API key, an unsupported version of any
// API but ApiVersions, a body that does not decode, a handler error or
// panic, and idleness close the connection (Kafka does the same; there
// is no way to answer a request one could not parse). The responses
// owed for the requests before it are written first: when the reader
// stops (on an error, or the client closing its side), it cancels the
// handlers' context (a long-poll answers with what it has), and the
// writer drains the queue and then closes.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/controlplane/forward"
	"github.com/fjordmq/fjord/internal/fjordmsg"
)

const (
	// minFrameBytes is the smallest request header: api key, version and
	// correlation id. A shorter frame cannot be a request.
	minFrameBytes = 8
	// firstChunkBytes is how much of a frame is allocated before its
	// bytes arrive.
	firstChunkBytes = 1 << 20
	// maxKeptResponseBytes: the writer keeps its response buffer for the
	// next response unless it grew past this; a larger one goes back to
	// the pool (one huge fetch must not pin memory for the connection's
	// lifetime).
	maxKeptResponseBytes = 64 << 10
	apiVersionsKey       = 18
	produceKey           = 0
	// connBufferBytes is the size of a connection's read and write
	// buffers; smallConnBufferBytes theirs before a SASL connection has
	// authenticated.
	connBufferBytes      = 32 << 10
	smallConnBufferBytes = 2 << 10
)

// bufferBytes is the size of a new read or write buffer.
func (c *conn) bufferBytes(small bool) int {
	if small {
		return smallConnBufferBytes
	}
	return connBufferBytes
}

// errCloseConnection, returned by a handler, closes the connection once
// the responses ahead of it are written (acks=0 produce errors: Kafka's
// way of telling a client that reads no responses to refresh metadata).
var errCloseConnection = errors.New("kafkaserver: close connection")

// conn is one client connection.
type conn struct {
	s      *Server
	nc     net.Conn
	remote string
	// host is the peer's address, what ACL host filters match.
	host netip.Addr
	// listener is the listener the connection came in on (shared by its
	// connections; never modified).
	listener *ListenerConfig
	// principal is who the connection is: Anonymous until it
	// authenticates (a TLS client certificate, or SASL). Set by the
	// reader goroutine, read by handlers (Principal).
	principal atomic.Pointer[Principal]
	// sasl is the authentication of a SASL listener's connection (nil on
	// other listeners); the reader goroutine owns it (sasl.go).
	sasl *saslConn
	// sendfile: fetch answers may carry file ranges (fetch_ranges.go).
	sendfile bool

	// ctx ends when the connection closes (or the server does), so
	// handlers stop waiting for anyone.
	ctx    context.Context
	cancel context.CancelFunc

	// sem holds one token per request read and not yet answered. The
	// reader takes the next request's token before reading its frame, so
	// with MaxInFlight unanswered requests it stops reading.
	sem chan struct{}
	// queue carries result slots from the reader to the writer in request
	// order. Closed by the reader when it stops.
	queue chan *slot

	// lastActivity is the unix-nanosecond time of the last byte read or
	// response written, for the idle timeout.
	lastActivity atomic.Int64

	// lastTurn is the produce turn of the latest Produce request read;
	// the next one waits for it. Only the reader goroutine touches it.
	lastTurn *produceTurn
	// prevTurn is the produce turn before lastTurn, until it ends. The
	// reader reads no further frame until it has (readLoop). Only the
	// reader goroutine touches it.
	prevTurn *produceTurn
	// refused is the produce batches this connection had refused
	// before they were written, whose pipelined successors are refused
	// the same way (produce_pipeline.go). Only a Produce handler
	// holding its turn touches it: turns run one at a time, in order.
	refused pipelineRefusals

	// mutedUntil is the unix-nanosecond time until which the reader
	// reads no request: the client is over a quota (quota.go).
	mutedUntil atomic.Int64

	handlers  sync.WaitGroup
	closeOnce sync.Once
	closed    chan struct{}
}

// slot is one request's place in the response order. The handler
// goroutine fills it and closes done; the writer reads it after done.
type slot struct {
	done chan struct{}

	key           int16
	version       int16
	correlationID int32
	frame         []byte // returned to its pool once written, may be nil

	resp    kmsg.Response // nil: nothing to write (acks=0)
	release func()
	err     error // non-nil: close the connection instead of answering
	// delay holds the response back this long: a quota throttle owed by
	// a client of a version that does not wait by itself (quota.go).
	delay time.Duration
}

func newConn(s *Server, nc net.Conn, lc *ListenerConfig) *conn {
	c := &conn{
		s:        s,
		nc:       nc,
		listener: lc,
		sendfile: s.cfg.SendfileMinBytes > 0 && canSendfile(nc),
		remote:   nc.RemoteAddr().String(),
		host:     remoteHost(nc),
		sem:      make(chan struct{}, s.cfg.MaxInFlight),
		queue:    make(chan *slot, s.cfg.MaxInFlight),
		closed:   make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	c.setPrincipal(Anonymous)
	if lc.SASL != nil {
		c.sasl = &saslConn{server: lc.SASL}
	}
	c.touch()
	return c
}

// Principal is who the connection is.
func (c *conn) Principal() Principal { return *c.principal.Load() }

func (c *conn) setPrincipal(p Principal) { c.principal.Store(&p) }

// close closes the socket and ends the connection's context; the reader
// and writer notice and stop. Safe from any goroutine, more than once.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.cancel()
		c.nc.Close()
	})
}

func (c *conn) touch() { c.lastActivity.Store(time.Now().UnixNano()) }

// serve runs the connection until it closes and every goroutine it
// started has returned.
func (c *conn) serve() {
	if err := c.handshake(); err != nil {
		c.logHandshakeFailure(err)
		c.close()
		return
	}
	defer c.startAuthTimer()()
	abandoned := make(chan []*slot, 1)
	go func() { abandoned <- c.writeLoop() }()
	if err := c.readLoop(); err != nil {
		c.logClose(err)
	}
	// No more requests will come: end the handlers' waits (a long-poll
	// answers with what it has), so the answers owed go out now and the
	// connection closes after them. Waiting out a fetch's MaxWait for a
	// client that has gone would let closed connections pin memory and
	// descriptors for as long as the client asked.
	c.cancel()
	close(c.queue)
	left := <-abandoned
	c.close()
	c.handlers.Wait()
	// Slots the writer never wrote (it stopped on an error or a close):
	// their handlers are done now, so give their buffers back.
	for _, sl := range left {
		sl.finish()
	}
	for sl := range c.queue {
		sl.finish()
	}
}

func (c *conn) logClose(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	c.s.log.Debug("kafkaserver: closing connection", slog.String("remote", c.remote), slog.Any("err", err))
}

// Reasons the reader closes a connection. Logged at debug only: a bad
// client is the client's problem, and logging louder would let one fill
// the operator's disk.
var (
	errFrameSize      = errors.New("frame size out of range")
	errIdle           = errors.New("idle timeout")
	errUnknownAPI     = errors.New("unknown API key")
	errUnsupportedVer = errors.New("unsupported API version")
	errBadHeader      = errors.New("malformed request header")
	errBadBody        = errors.New("malformed request body")
	errDecoderPanic   = errors.New("decoder panic")
)

// readLoop reads, decodes and dispatches requests until the connection
// fails or closes. It returns nil when the client closed cleanly between
// frames.
func (c *conn) readLoop() error {
	// A SASL connection starts with small buffers, so a flood of
	// connections that never authenticate pins little memory; they grow
	// once it has.
	small := c.sasl != nil && !c.sasl.done
	br := bufio.NewReaderSize(c.nc, c.bufferBytes(small))
	var sizeBuf [4]byte
	if err := c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout)); err != nil {
		return err
	}
	for {
		select {
		case c.sem <- struct{}{}: // a token for the next request
		case <-c.closed: // the writer failed or the server is closing
			return nil
		}
		// Read at most one produce frame ahead of the appends: the
		// frames of produces waiting their turn hold their records in
		// the heap, and a client with many in flight (or a fast one
		// while the partitions' appends are slow) would otherwise have
		// the reader copy its whole window into memory. Waiting here
		// leaves the rest in the socket buffers, which is TCP's
		// backpressure, and costs no pipelining: the turn before the
		// last is done appending, and acks are still awaited
		// concurrently.
		if t := c.prevTurn; t != nil {
			select {
			case <-t.done: // appended: its frame is back in the pool
			case <-c.closed:
				return nil
			}
			c.prevTurn = nil
		}
		if !c.waitUnmuted() {
			return nil
		}
		n, err := c.readFull(br, sizeBuf[:])
		if err != nil {
			if n == 0 && errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if size < minFrameBytes || size > c.s.cfg.MaxRequestBytes {
			return fmt.Errorf("%w: %d bytes (allowed %d..%d)", errFrameSize, size, minFrameBytes, c.s.cfg.MaxRequestBytes)
		}
		if c.sasl != nil && !c.sasl.done && size > maxUnauthenticatedFrameBytes {
			return fmt.Errorf("%w: %d bytes (allowed %d)", errUnauthorizedSize, size, maxUnauthenticatedFrameBytes)
		}
		frame, err := c.readFrame(br, int(size))
		if err != nil {
			return err
		}
		// Again: the reader may have been waiting for this frame when a
		// handler muted the connection.
		if !c.waitUnmuted() {
			putBuffer(frame)
			return nil
		}
		if err := c.dispatch(frame); err != nil {
			putBuffer(frame)
			return err
		}
		if c.sasl != nil && c.sasl.closing {
			// Refused: its answer is queued; the writer sends it and
			// then the connection closes.
			return errSASLFailed
		}
		if small && c.sasl.done {
			br, small = bufio.NewReaderSize(br, connBufferBytes), false
		}
	}
}

// readFull reads len(buf) bytes. A read deadline that passes while the
// connection is not idle (a request is still being answered, or bytes
// or responses moved within IdleTimeout) is pushed out; one that passes
// on an idle connection ends it.
func (c *conn) readFull(r io.Reader, buf []byte) (int, error) {
	read := 0
	for read < len(buf) {
		n, err := r.Read(buf[read:])
		if n > 0 {
			read += n
			c.touch()
		}
		if err == nil {
			continue
		}
		var ne net.Error
		if !(errors.As(err, &ne) && ne.Timeout()) && !errors.Is(err, os.ErrDeadlineExceeded) {
			if errors.Is(err, io.EOF) && read > 0 {
				err = io.ErrUnexpectedEOF
			}
			return read, err
		}
		idle := c.s.cfg.IdleTimeout
		last := time.Unix(0, c.lastActivity.Load())
		deadline := last.Add(idle)
		if len(c.sem) > 1 {
			// Requests are being answered besides the one being read
			// (a long-poll fetch may take a while): the client is
			// waiting on us, not idle.
			deadline = time.Now().Add(idle)
		} else if !time.Now().Before(deadline) {
			return read, errIdle
		}
		if err := c.nc.SetReadDeadline(deadline); err != nil {
			return read, err
		}
	}
	return read, nil
}

// readFrame reads a size-byte frame. Its first firstChunkBytes go into a
// pooled buffer of that size, taken before they arrive; a larger frame
// moves, once that chunk is full, to a pooled buffer of its whole size.
// A client must so send a megabyte before the node holds memory for the
// rest (at most MaxRequestBytes, one frame per connection at a time),
// and a large produce costs one 1 MiB copy. Doubling the buffer as bytes
// came in instead copied a 3.4 MB frame, typical of a producer at full
// rate, nearly whole: 7% of the node's CPU.
func (c *conn) readFrame(r io.Reader, size int) ([]byte, error) {
	buf := getBuffer(min(size, firstChunkBytes))
	filled := 0
	for filled < size {
		if filled == len(buf) {
			grown := getBuffer(size)
			copy(grown, buf[:filled])
			putBuffer(buf)
			buf = grown
		}
		n, err := c.readFull(r, buf[filled:min(size, len(buf))])
		filled += n
		if err != nil {
			putBuffer(buf)
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("truncated frame (%d of %d bytes): %w", filled, size, err)
		}
	}
	return buf[:size], nil
}

// dispatch decodes one frame and either queues an answer or returns why
// the connection must close. It owns frame: on success the slot holds it.
func (c *conn) dispatch(frame []byte) error {
	r := kbin.Reader{Src: frame}
	key := r.Int16()
	version := r.Int16()
	correlationID := r.Int32()

	a, ok := apis[key]
	if !ok {
		return fmt.Errorf("%w %d (version %d)", errUnknownAPI, key, version)
	}
	if err := c.saslAllows(key); err != nil {
		return fmt.Errorf("%w: %s", err, fjordmsg.NameForKey(key))
	}
	sl := &slot{
		done:          make(chan struct{}),
		key:           key,
		version:       version,
		correlationID: correlationID,
		frame:         frame,
	}
	if version < a.minVersion || version > a.maxVersion {
		if key != apiVersionsKey {
			return fmt.Errorf("%w: %s v%d (serving v%d-%d)", errUnsupportedVer, fjordmsg.NameForKey(key), version, a.minVersion, a.maxVersion)
		}
		// A client that does not know our versions tried one too new:
		// answer v0 with the ranges so it can retry lower. The header
		// is not parsed further (a newer header could differ).
		sl.version = 0
		sl.resp = unsupportedAPIVersions()
		close(sl.done)
		c.queue <- sl
		return nil
	}

	clientID := r.NullableString()
	body := fjordmsg.RequestForKey(key)
	body.SetVersion(version)
	if body.IsFlexible() {
		skipTags(&r)
	}
	if !r.Ok() {
		return fmt.Errorf("%w: %s v%d", errBadHeader, fjordmsg.NameForKey(key), version)
	}
	if err := decodeBody(body, r.Src); err != nil {
		return fmt.Errorf("%w: %s v%d: %v", errBadBody, fjordmsg.NameForKey(key), version, err)
	}
	req := &request{
		key:           key,
		version:       version,
		correlationID: correlationID,
		clientID:      clientID,
		body:          body,
		conn:          c,
		sl:            sl,
		frameBytes:    len(frame) + 4,
	}
	if key == produceKey {
		req.turn = newProduceTurn(c.lastTurn)
		c.prevTurn, c.lastTurn = c.lastTurn, req.turn
	}
	c.queue <- sl
	c.handlers.Add(1)
	if key == saslHandshakeKey || key == saslAuthenticateKey {
		// On the reader goroutine: the exchange's state is the
		// reader's, and the next frame is read against it (sasl.go).
		c.handle(a, req, sl)
		return nil
	}
	go c.handle(a, req, sl)
	return nil
}

// skipTags skips a tagged-field section (header tags carry nothing the
// server uses).
func skipTags(r *kbin.Reader) {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint()              // tag
		r.Span(int(r.Uvarint())) // size, data
	}
}

// decodeBody decodes a request body, turning a decoder panic into an
// error: hostile bytes must never take the node down, whatever kmsg's
// generated code does with them.
func decodeBody(body kmsg.Request, src []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errDecoderPanic, r)
		}
	}()
	return body.ReadFrom(src)
}

// handle runs one request's handler, fills its slot and marks it done.
func (c *conn) handle(a api, req *request, sl *slot) {
	defer c.handlers.Done()
	// A handler that failed or panicked before its appends still ends
	// its turn, or the connection's later produces would wait forever.
	defer req.turn.end()
	c.runHandler(a, req, sl)
	close(sl.done)
	if h := c.s.testHookHandled; h != nil {
		h(req.key, req.correlationID)
	}
}

// runHandler fills sl with the handler's answer, turning a panic into a
// closed connection: one bad request must not take the node down.
func (c *conn) runHandler(a api, req *request, sl *slot) {
	start := time.Now()
	defer func() { c.s.metrics.observe(req.key, start, sl.resp, sl.err != nil) }()
	defer func() {
		if r := recover(); r != nil {
			c.s.log.Error("kafkaserver: handler panicked; closing the connection",
				slog.String("api", fjordmsg.NameForKey(req.key)), slog.Int("version", int(req.version)),
				slog.String("remote", c.remote), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
			sl.resp, sl.release = nil, nil
			sl.err = fmt.Errorf("handler panic: %v", r)
			if h := c.s.testHookPanic; h != nil {
				h(fjordmsg.NameForKey(req.key), r)
			}
		}
	}()
	ctx, peer := c.ctx, false
	if a.controlChange {
		if node, ok := c.s.internalPeer(req); ok && node != c.s.cfg.NodeID {
			ctx, peer = controlplane.LocalOnly(ctx), true // a forward: never forwarded again
		}
	}
	if sl.err = c.s.waitReady(ctx, req); sl.err != nil {
		return
	}
	sl.resp, sl.release, sl.err = a.handle(ctx, c.s, req)
	if sl.err == nil && !peer {
		c.chargeAfterHandling(req, sl, time.Since(start)-req.parked)
	}
	if peer && sl.resp != nil {
		// This node's image includes whatever the handler changed: the
		// local controller answers only once it is published.
		forward.TagMetadataOffset(sl.resp, c.s.image().Offset)
	}
}

// finish releases what the slot holds.
func (sl *slot) finish() {
	if sl.release != nil {
		sl.release()
		sl.release = nil
	}
	putBuffer(sl.frame)
	sl.frame = nil
}

// writeLoop writes answers in request order until the queue closes or
// the connection fails. It returns the slots it took from the queue but
// did not finish (their handlers may still be running), for serve to
// release once the handlers are done.
func (c *conn) writeLoop() (abandoned []*slot) {
	defer c.close()
	small := c.sasl != nil && !c.sasl.authenticated.Load()
	bw := bufio.NewWriterSize(c.nc, c.bufferBytes(small))
	var buf []byte
	var next *slot
	for {
		sl := next
		next = nil
		if sl == nil {
			var ok bool
			select {
			case sl, ok = <-c.queue: // the oldest unanswered request
			case <-c.closed: // failed elsewhere; serve drains the queue
				return nil
			}
			if !ok {
				c.flush(bw)
				return nil
			}
		}
		select {
		case <-sl.done: // answered
		case <-c.closed: // the handler may still be using the frame
			return []*slot{sl}
		}
		if sl.delay > 0 {
			// Held back for a quota (quota.go): what is written goes out
			// first, then nothing for the throttle.
			if err := c.flush(bw); err != nil {
				c.logClose(err)
				return []*slot{sl}
			}
			t := time.NewTimer(sl.delay)
			select {
			case <-t.C:
			case <-c.closed:
				t.Stop()
				return []*slot{sl}
			}
		}
		if sl.err != nil {
			if !errors.Is(sl.err, errCloseConnection) {
				c.s.log.Debug("kafkaserver: request failed; closing connection",
					slog.String("api", fjordmsg.NameForKey(sl.key)), slog.String("remote", c.remote), slog.Any("err", sl.err))
			}
			c.flush(bw)
			sl.finish()
			return nil
		}
		var err error
		if rf, ok := sl.resp.(*rangedFetch); ok {
			buf, err = c.writeRanged(bw, buf, sl, rf)
		} else if sl.resp != nil {
			if hint := responseSizeHint(sl.resp); hint > cap(buf) {
				putBuffer(buf)
				buf = getBuffer(hint)
			}
			buf, err = c.encode(buf[:0], sl)
			if err == nil {
				err = c.write(bw, buf)
			}
			if cap(buf) > maxKeptResponseBytes {
				putBuffer(buf)
				buf = nil
			}
		}
		sl.finish()
		<-c.sem
		if err != nil {
			c.logClose(err)
			return nil
		}
		if small && c.sasl.authenticated.Load() {
			if err := c.flush(bw); err != nil {
				c.logClose(err)
				return nil
			}
			bw, small = bufio.NewWriterSize(c.nc, connBufferBytes), false
		}
		// Coalesce: flush only when the next answer is not ready yet.
		select {
		case n, ok := <-c.queue:
			if !ok {
				c.flush(bw)
				return nil
			}
			next = n
			select {
			case <-next.done: // ready: write it before flushing
				continue
			default:
			}
		default:
		}
		if err := c.flush(bw); err != nil {
			c.logClose(err)
			if next != nil {
				return []*slot{next}
			}
			return nil
		}
	}
}

func (c *conn) write(bw *bufio.Writer, b []byte) error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.IdleTimeout)); err != nil {
		return err
	}
	_, err := bw.Write(b)
	c.touch()
	return err
}

func (c *conn) flush(bw *bufio.Writer) error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.IdleTimeout)); err != nil {
		return err
	}
	err := bw.Flush()
	c.touch()
	return err
}

// writeRanged writes a fetch answer with file ranges: its bytes through
// bw, each range with sendfile once bw is flushed. It returns buf, which
// held the bytes, for reuse.
func (c *conn) writeRanged(bw *bufio.Writer, buf []byte, sl *slot, rf *rangedFetch) ([]byte, error) {
	var ends []int
	err := c.guardEncode(sl, func() (err error) {
		buf, ends, err = encodeRanged(buf[:0], sl, rf)
		return err
	})
	if errors.Is(err, errPlaceholders) {
		// A bug, not the client's doing: answer with the records copied
		// in, as without sendfile, and say so.
		c.s.log.Error("kafkaserver: fetch answer with file ranges did not encode; copying its records", slog.Any("err", err))
		if err = inlineRanges(rf); err == nil {
			sl.resp = rf.FetchResponse
			buf, err = c.encode(buf[:0], sl)
			if err == nil {
				err = c.write(bw, buf)
			}
		}
		return buf, err
	}
	if err != nil {
		return buf, err
	}
	prev := 0
	for k, r := range rf.ranges {
		if err := c.write(bw, buf[prev:ends[k]]); err != nil {
			return buf, err
		}
		if err := c.flush(bw); err != nil {
			return buf, err
		}
		if err := sendRange(c.nc, r); err != nil {
			return buf, err
		}
		c.s.rangeBytesSent.Add(int64(r.Size))
		c.touch()
		prev = ends[k]
	}
	return buf, c.write(bw, buf[prev:])
}

// encode appends sl's framed response to dst. A panic while encoding (a
// handler that built a response kmsg cannot encode) closes the
// connection instead of the node.
func (c *conn) encode(dst []byte, sl *slot) (out []byte, err error) {
	err = c.guardEncode(sl, func() error {
		out = appendResponse(dst, sl)
		return nil
	})
	if err != nil {
		out = dst[:0]
	}
	return out, err
}

// guardEncode runs fn, turning a panic while encoding (a handler that
// built a response kmsg cannot encode) into an error.
func (c *conn) guardEncode(sl *slot, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.s.log.Error("kafkaserver: encoding a response panicked; closing the connection",
				slog.String("api", fjordmsg.NameForKey(sl.key)), slog.Int("version", int(sl.version)),
				slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
			if h := c.s.testHookPanic; h != nil {
				h(fjordmsg.NameForKey(sl.key), r)
			}
			err = fmt.Errorf("encoding %s response: %v", fjordmsg.NameForKey(sl.key), r)
		}
	}()
	return fn()
}

// appendResponse appends a framed response: size, header, body.
func appendResponse(dst []byte, sl *slot) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = kbin.AppendInt32(dst, sl.correlationID)
	sl.resp.SetVersion(sl.version)
	if sl.resp.IsFlexible() && sl.key != apiVersionsKey {
		dst = append(dst, 0) // no header tags
	}
	dst = sl.resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// unsupportedAPIVersions is the v0 ApiVersions answer to a version this
// server does not serve.
func unsupportedAPIVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = advertisedAPIKeys(false)
	return resp
}

// produceTurn orders the appends of one connection's Produce requests.
//
// Requests on a connection are handled concurrently, but Kafka promises
// that a connection's produce requests reach the log in the order they
// were sent: an idempotent producer pipelines up to five per connection
// and each must follow the previous one's sequence numbers, and a
// producer without idempotence relies on it for its order. Handling them
// one after another would serialize their fsync waits too, one fsync per
// request instead of one for all of them (group commit). So each Produce
// starts its appends only after the previous request's have started
// (turn), and waits for its acks concurrently with the others.
type produceTurn struct {
	prev  *produceTurn // nil for the connection's first produce
	done  chan struct{}
	ended bool // only the request's handler goroutine touches it
}

func newProduceTurn(prev *produceTurn) *produceTurn {
	return &produceTurn{prev: prev, done: make(chan struct{})}
}

// wait returns once the previous produce on the connection has started
// its appends. It does not give up when the connection closes: a request
// read whole is carried out whether or not its answer can be written, as
// in Kafka (an acks=0 producer often closes right after sending), and the
// previous request always ends its turn (its handler defers end, and
// nothing before its appends waits without the connection's context).
func (t *produceTurn) wait() {
	if t != nil && t.prev != nil {
		<-t.prev.done
	}
}

// end lets the next produce start its appends, once the previous one has:
// a request that fails before appending must not let a later one overtake
// an earlier one still appending. Safe to call twice and on a nil turn.
// REQUIRES: called from the request's handler goroutine.
func (t *produceTurn) end() {
	if t == nil || t.ended {
		return
	}
	t.ended = true
	if t.prev != nil {
		<-t.prev.done // every turn ends: its handler defers end
		t.prev = nil  // so a long connection does not keep a chain of turns
	}
	close(t.done)
}
