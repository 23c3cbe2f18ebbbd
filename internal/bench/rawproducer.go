package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/record"
)

// The raw producer: a load generator that costs the client as little as
// the Kafka protocol allows, so that a figure can say how much of a run's
// cost is the nodes' and how much franz-go's (issue 13). The bare ingest
// loop of `fjord bench limits` sends prebuilt frames; this sends
// prebuilt Produce requests a node takes like any other:
//
//   - A producer's batch is encoded once, with internal/record's Builder:
//     batchRecords records of messageSize bytes, no key, timestamp delta
//     0, offset deltas 0, 1, 2, ... Every record's framing (its length,
//     deltas, key and value lengths, header count) is then fixed, so the
//     first k records of the batch are a valid batch of k records once
//     the header says so.
//   - Each Send copies its value into the next record's slot. The values
//     must differ record by record: each carries the intended send time
//     and the producer's sequence (payload.go), which the run's exactly-
//     once accounting and its latencies read. So, per batch sent, the
//     header is rewritten (length, last offset delta, timestamps, base
//     sequence, record count) and the CRC-32C computed over the batch:
//     the one pass over the bytes a producer cannot avoid, and the one
//     the node makes again to check it.
//   - The Produce request around the batch is framed once per partition
//     (kmsg), as version 8, the last with fixed-width lengths: per send
//     only its size, its correlation id and the records' length are
//     patched. One partition per request.
//   - Idempotent (an InitProducerId, a base sequence per partition), so
//     the node does the same producer-state work as for franz-go's
//     batches, and acks=all.
//   - One connection per broker per producer, up to rawMaxInflight
//     requests in flight on each (franz-go's count with idempotence),
//     answered in order, as a Kafka connection answers. Linger 0, as
//     franz-go runs here: a batch goes as soon as a connection has room,
//     with whatever records it holds, and grows while none has.
//   - No retries: an error code or a lost connection fails the records
//     it concerns (and, for a connection, every later Send), which the
//     run's checks report. Partition leaders are looked up once.
//
// What differs from franz-go, and so from the node's view of a run:
// batches are up to 1 MiB of one partition and go one per request, where
// franz-go switches partitions every 64 KiB and puts every partition's
// batch into one request per broker. Compare node CPU per MB between the
// two producers, not only MB/s. Records have no keys: the producer
// refuses keyed workloads.
//
// Threads: the runner's producer goroutine calls Send (and, after the
// producer goroutine ended, the runner's flush goroutine calls Flush);
// one sender goroutine (sendLoop) takes full or waiting batches and
// writes every request, and owns the partitions' prefixes, sequences and
// the connections' correlation ids; one reader goroutine per connection
// (readLoop) reads its answers and calls the records' done callbacks.
// p.mu guards the batch being filled, the spare, each connection's
// in-flight list and the counts, and p.cond, on p.mu, is broadcast on
// every change any of them waits for.

// rawMaxInflight is the requests in flight per connection.
const rawMaxInflight = kafkaMaxInflight

// rawProduceVersion is the Produce version sent (see above).
const rawProduceVersion = 8

// rawReadTimeout is how long a connection may go without an answer while
// requests are in flight before they fail.
const rawReadTimeout = kafkaDeliveryTimeout

// ErrRawProducerClosed completes the records still pending when the raw
// producer closes.
var ErrRawProducerClosed = errors.New("raw producer closed")

// Offsets in a v2 batch header of the fields rewritten per send
// (internal/record's package doc has the layout; TestRawBatchLayout
// holds these to it through record.Validate and record.ParseHeader).
const (
	batchOffLength          = 8
	batchOffCRC             = 17
	batchOffAttributes      = 21
	batchOffLastOffsetDelta = 23
	batchOffFirstTimestamp  = 27
	batchOffMaxTimestamp    = 35
	batchOffBaseSequence    = 53
	batchOffNumRecords      = 57
	batchLengthOverhead     = 12 // baseOffset and batchLength themselves
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// rawLayout is a pre-encoded batch and where its records lie.
// Read-only once built; shared by all of a producer's batches.
type rawLayout struct {
	template []byte
	valueAt  []int // record i's value starts at valueAt[i]
	endAt    []int // and the record ends at endAt[i]
	size     int   // each value's size
}

// newRawLayout encodes a batch of as many records of size bytes as fit in
// maxBytes, for an idempotent producer's batches (its id and epoch are in
// the header and never change).
func newRawLayout(size, maxBytes int, producerID int64, epoch int16) (*rawLayout, error) {
	l := &rawLayout{size: size}
	pos := record.HeaderSize
	for i := 0; ; i++ {
		// attributes, timestamp delta 0, offset delta i, key -1, value
		// length and bytes, no headers.
		body := 1 + 1 + uvarintLen(zigzag(int64(i))) + 1 + uvarintLen(zigzag(int64(size))) + size + 1
		end := pos + uvarintLen(zigzag(int64(body))) + body
		if end > maxBytes {
			break
		}
		l.valueAt = append(l.valueAt, end-1-size)
		l.endAt = append(l.endAt, end)
		pos = end
	}
	if len(l.endAt) == 0 {
		return nil, fmt.Errorf("raw producer: a %d-byte record does not fit a %d-byte batch", size, maxBytes)
	}
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = producerID, epoch, 0
	b := record.NewBuilder(opts)
	zeros := make([]byte, size)
	for range l.endAt {
		b.Add(nil, zeros, nil, 0)
	}
	batch, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("raw producer: %w", err)
	}
	if len(batch) != l.endAt[len(l.endAt)-1] {
		// The positions above are the Builder's encoding, worked out
		// ahead; a difference is a bug in one of the two.
		panic(fmt.Sprintf("raw producer: built %d bytes for %d records of %d, computed %d", len(batch), len(l.endAt), size, l.endAt[len(l.endAt)-1]))
	}
	l.template = batch
	return l, nil
}

func (l *rawLayout) records() int { return len(l.endAt) }

// finish makes the first k records of b a batch of k records with base
// sequence seq and timestamp ms, and returns it.
func (l *rawLayout) finish(b []byte, k int, seq int32, ms int64) []byte {
	b = b[:l.endAt[k-1]]
	binary.BigEndian.PutUint32(b[batchOffLength:], uint32(len(b)-batchLengthOverhead))
	binary.BigEndian.PutUint32(b[batchOffLastOffsetDelta:], uint32(k-1))
	binary.BigEndian.PutUint64(b[batchOffFirstTimestamp:], uint64(ms))
	binary.BigEndian.PutUint64(b[batchOffMaxTimestamp:], uint64(ms))
	binary.BigEndian.PutUint32(b[batchOffBaseSequence:], uint32(seq))
	binary.BigEndian.PutUint32(b[batchOffNumRecords:], uint32(k))
	binary.BigEndian.PutUint32(b[batchOffCRC:], crc32.Checksum(b[batchOffAttributes:], castagnoli))
	return b
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// nextSequence is seq advanced by k, wrapping past MaxInt32 to 0 as
// Kafka's producer sequences do.
func nextSequence(seq int32, k int) int32 {
	return int32((int64(seq) + int64(k)) % (math.MaxInt32 + 1))
}

// rawBatch is a batch buffer with the records filled so far.
type rawBatch struct {
	buf   []byte
	n     int
	dones []func(error)
}

// rawPartition is one partition of the producer's topic.
type rawPartition struct {
	id   int32
	conn *rawConn
	// prefix is the framed request up to the records (sender-owned:
	// patched per send).
	prefix []byte
	// sequence is the next batch's base sequence (sender-owned).
	sequence int32
}

// rawRequest is one request in flight.
type rawRequest struct {
	correlationID int32
	partition     int32
	dones         []func(error)
}

// rawConn is the producer's connection to one broker.
type rawConn struct {
	addr string
	conn net.Conn
	// correlation is the next request's id (sender-owned).
	correlation int32
	// inflight holds the requests written (or being written), oldest
	// first. REQUIRES p.mu.
	inflight []*rawRequest
	done     chan struct{} // closed when readLoop returned
}

// rawTarget is where one partition's requests go.
type rawTarget struct {
	partition int32
	addr      string // the leader's host:port
}

// rawProducer is a Producer of pre-encoded requests (see above).
type rawProducer struct {
	topic      string
	layout     *rawLayout
	parts      []*rawPartition
	conns      []*rawConn
	senderDone chan struct{}

	mu struct {
		sync.Mutex
		// fill is the batch Send fills; spare is the other buffer, nil
		// while the sender writes it.
		fill, spare *rawBatch
		// next is the partition the next batch goes to first, if its
		// connection has room.
		next int
		// outstanding counts the records Send took that are not done.
		outstanding int
		closed      bool
		// err, once set, fails every later Send: a connection failed.
		err error
	}
	cond *sync.Cond // on mu
}

var _ Producer = (*rawProducer)(nil)

// newRawProducer connects to every partition's leader and starts the
// sender and the readers. producerID and epoch come from an
// InitProducerId; clientID names the producer's requests.
func newRawProducer(ctx context.Context, topic string, targets []rawTarget, size, maxBatchBytes int, producerID int64, epoch int16, timeout time.Duration, clientID string) (*rawProducer, error) {
	if len(targets) == 0 {
		return nil, errors.New("raw producer: no partitions")
	}
	layout, err := newRawLayout(size, maxBatchBytes, producerID, epoch)
	if err != nil {
		return nil, err
	}
	p := &rawProducer{topic: topic, layout: layout, senderDone: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	byAddr := map[string]*rawConn{}
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	dialer := net.Dialer{Timeout: kafkaDialTimeout}
	for _, t := range targets {
		c := byAddr[t.addr]
		if c == nil {
			nc, err := dialer.DialContext(ctx, "tcp", t.addr)
			if err != nil {
				p.closeConns()
				return nil, fmt.Errorf("raw producer: %w", err)
			}
			c = &rawConn{addr: t.addr, conn: nc, done: make(chan struct{})}
			byAddr[t.addr] = c
			p.conns = append(p.conns, c)
		}
		p.parts = append(p.parts, &rawPartition{id: t.partition, conn: c, prefix: framePrefix(formatter, topic, t.partition, timeout, layout.template)})
	}
	p.mu.fill = p.newBatch()
	p.mu.spare = p.newBatch()
	for _, c := range p.conns {
		go p.readLoop(c)
	}
	go p.sendLoop()
	return p, nil
}

// framePrefix frames a Produce request for one partition around batch
// and returns the bytes before the batch: the records are the last field
// of a one-partition request.
func framePrefix(f *kmsg.RequestFormatter, topic string, partition int32, timeout time.Duration, batch []byte) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version = rawProduceVersion
	req.Acks = -1
	req.TimeoutMillis = int32(timeout / time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	frame := f.AppendRequest(nil, req, 0)
	return frame[:len(frame)-len(batch)]
}

// patchPrefix sets the request's size, correlation id and records length
// for a batch of n bytes. The request header is v1: size, api key,
// version, correlation id, then the client id.
func patchPrefix(prefix []byte, correlationID int32, n int) {
	binary.BigEndian.PutUint32(prefix[0:], uint32(len(prefix)-4+n))
	binary.BigEndian.PutUint32(prefix[8:], uint32(correlationID))
	binary.BigEndian.PutUint32(prefix[len(prefix)-4:], uint32(n))
}

func (p *rawProducer) newBatch() *rawBatch {
	return &rawBatch{
		buf:   append([]byte(nil), p.layout.template...),
		dones: make([]func(error), 0, p.layout.records()),
	}
}

// Send copies value into the batch being filled, waiting while that
// batch is full. key must be nil.
func (p *rawProducer) Send(ctx context.Context, key, value []byte, done func(error)) {
	if key != nil || len(value) != p.layout.size {
		done(fmt.Errorf("raw producer: records of %d bytes without keys, got a %d-byte value with a %d-byte key", p.layout.size, len(value), len(key)))
		return
	}
	p.mu.Lock()
	if p.fullLocked() && p.mu.err == nil {
		// Rare (the connections are all busy): only then is ctx
		// watched, since a Cond cannot wait on it.
		stop := context.AfterFunc(ctx, p.wake)
		for p.fullLocked() && p.mu.err == nil && ctx.Err() == nil {
			p.cond.Wait()
		}
		stop()
	}
	err := p.mu.err
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		p.mu.Unlock()
		done(err)
		return
	}
	b := p.mu.fill
	copy(b.buf[p.layout.valueAt[b.n]:], value)
	b.n++
	b.dones = append(b.dones, done)
	p.mu.outstanding++
	first := b.n == 1
	p.mu.Unlock()
	if first {
		p.cond.Broadcast() // the sender may be waiting for records
	}
}

// REQUIRES: p.mu held.
func (p *rawProducer) fullLocked() bool { return p.mu.fill.n == p.layout.records() }

// wake wakes every waiter to look at its condition again.
func (p *rawProducer) wake() {
	p.mu.Lock()
	p.cond.Broadcast()
	p.mu.Unlock()
}

// sendLoop takes the filled batch whenever a connection has room and
// writes it as one request.
func (p *rawProducer) sendLoop() {
	defer close(p.senderDone)
	p.mu.Lock()
	for {
		var part *rawPartition
		for {
			if p.mu.closed || p.mu.err != nil {
				p.mu.Unlock()
				return
			}
			if p.mu.fill.n > 0 {
				if part = p.pickLocked(); part != nil {
					break
				}
			}
			p.cond.Wait()
		}
		b := p.mu.fill
		p.mu.fill, p.mu.spare = p.mu.spare, nil
		c := part.conn
		req := &rawRequest{correlationID: c.correlation, partition: part.id, dones: b.dones}
		c.correlation++
		// In the list before the write: the answer can come before
		// Write returns.
		c.inflight = append(c.inflight, req)
		p.mu.Unlock()
		p.cond.Broadcast() // Send may be waiting for an empty batch

		batch := p.layout.finish(b.buf, b.n, part.sequence, time.Now().UnixMilli())
		part.sequence = nextSequence(part.sequence, b.n)
		patchPrefix(part.prefix, req.correlationID, len(batch))
		bufs := net.Buffers{part.prefix, batch}
		_, err := bufs.WriteTo(c.conn)

		p.mu.Lock()
		b.n, b.dones = 0, make([]func(error), 0, p.layout.records())
		p.mu.spare = b
		if err != nil {
			p.failLocked(fmt.Errorf("raw producer: writing to %s: %w", c.addr, err))
		}
	}
}

// pickLocked returns the first partition from p.mu.next on whose
// connection a request can go, and moves next past it; nil when every
// connection is full.
//
// REQUIRES: p.mu held.
func (p *rawProducer) pickLocked() *rawPartition {
	for i := range p.parts {
		j := (p.mu.next + i) % len(p.parts)
		if len(p.parts[j].conn.inflight) < rawMaxInflight {
			p.mu.next = (j + 1) % len(p.parts)
			return p.parts[j]
		}
	}
	return nil
}

// readLoop reads c's answers in order and completes their records.
func (p *rawProducer) readLoop(c *rawConn) {
	defer close(c.done)
	var head [4]byte // the answer's size
	var body []byte
	for {
		_ = c.conn.SetReadDeadline(time.Now().Add(rawReadTimeout))
		n, err := io.ReadFull(c.conn, head[:4])
		if errors.Is(err, os.ErrDeadlineExceeded) && n == 0 {
			p.mu.Lock()
			idle := len(c.inflight) == 0 && p.mu.err == nil && !p.mu.closed
			p.mu.Unlock()
			if idle {
				continue
			}
		}
		if err == nil {
			size := int(binary.BigEndian.Uint32(head[:4]))
			if size < 4 || size > 1<<20 {
				err = fmt.Errorf("answer of %d bytes", size)
			} else {
				if cap(body) < size {
					body = make([]byte, size)
				}
				body = body[:size]
				_, err = io.ReadFull(c.conn, body)
			}
		}
		if err != nil {
			p.mu.Lock()
			if !p.mu.closed {
				p.failLocked(fmt.Errorf("raw producer: reading from %s: %w", c.addr, err))
			}
			p.mu.Unlock()
			return
		}
		p.mu.Lock()
		if len(c.inflight) == 0 {
			p.failLocked(fmt.Errorf("raw producer: %s answered a request it was not sent", c.addr))
			p.mu.Unlock()
			return
		}
		req := c.inflight[0]
		c.inflight = c.inflight[1:]
		p.mu.Unlock()
		p.cond.Broadcast() // the connection has room

		rerr := p.answer(req, body)
		for _, done := range req.dones {
			done(rerr)
		}
		p.mu.Lock()
		p.mu.outstanding -= len(req.dones)
		p.mu.Unlock()
		p.cond.Broadcast() // Flush may be waiting
		if rerr != nil && errors.Is(rerr, errRawProtocol) {
			p.mu.Lock()
			p.failLocked(rerr)
			p.mu.Unlock()
			return
		}
	}
}

// errRawProtocol marks an answer that does not parse or does not match
// its request: the connection cannot be trusted after it.
var errRawProtocol = errors.New("raw producer: protocol error")

// answer is the error for req's records from its answer body (the
// correlation id, then a Produce response).
func (p *rawProducer) answer(req *rawRequest, body []byte) error {
	if got := int32(binary.BigEndian.Uint32(body[:4])); got != req.correlationID {
		return fmt.Errorf("%w: answer to request %d where %d was next", errRawProtocol, got, req.correlationID)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = rawProduceVersion
	if err := resp.ReadFrom(body[4:]); err != nil {
		return fmt.Errorf("%w: %v", errRawProtocol, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != req.partition {
		return fmt.Errorf("%w: answer for other partitions than %s/%d", errRawProtocol, p.topic, req.partition)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		err := kerr.ErrorForCode(code)
		if msg := resp.Topics[0].Partitions[0].ErrorMessage; msg != nil {
			return fmt.Errorf("producing to %s/%d: %w (%s)", p.topic, req.partition, err, *msg)
		}
		return fmt.Errorf("producing to %s/%d: %w", p.topic, req.partition, err)
	}
	return nil
}

// failLocked records the producer's first failure, closes every
// connection (their readers then end), and fails every record not
// answered: in flight, and in the batch being filled. The callbacks run
// after p.mu is released, on a goroutine of their own, since the caller
// holds the lock.
//
// REQUIRES: p.mu held.
func (p *rawProducer) failLocked(err error) {
	if p.mu.err != nil {
		return
	}
	p.mu.err = err
	var dones []func(error)
	for _, c := range p.conns {
		for _, req := range c.inflight {
			dones = append(dones, req.dones...)
		}
		c.inflight = nil
	}
	if f := p.mu.fill; f != nil {
		dones = append(dones, f.dones...)
		f.n, f.dones = 0, nil
	}
	p.closeConns()
	p.cond.Broadcast()
	go p.complete(dones, err)
}

// complete calls dones with err, then counts them done.
func (p *rawProducer) complete(dones []func(error), err error) {
	for _, done := range dones {
		done(err)
	}
	p.mu.Lock()
	p.mu.outstanding -= len(dones)
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *rawProducer) closeConns() {
	for _, c := range p.conns {
		c.conn.Close()
	}
}

// Flush waits until every record Send took is acknowledged or failed.
func (p *rawProducer) Flush(ctx context.Context) error {
	stop := context.AfterFunc(ctx, p.wake)
	defer stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.mu.outstanding > 0 && ctx.Err() == nil {
		p.cond.Wait()
	}
	if p.mu.outstanding > 0 {
		return ctx.Err()
	}
	return nil
}

// Close stops the sender and the readers; records still pending fail
// with ErrRawProducerClosed.
func (p *rawProducer) Close() error {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return nil
	}
	p.failLocked(ErrRawProducerClosed)
	p.mu.closed = true
	p.mu.Unlock()
	p.cond.Broadcast()
	<-p.senderDone
	for _, c := range p.conns {
		<-c.done
	}
	// The failed records' callbacks run on failLocked's goroutine;
	// Close returns once they have.
	p.mu.Lock()
	for p.mu.outstanding > 0 {
		p.cond.Wait()
	}
	p.mu.Unlock()
	return nil
}

// rawSettings describes the raw producer for a result's settings.
func rawSettings(batchBytes int) map[string]string {
	return map[string]string{
		"producer": "raw: pre-encoded Produce v" + strconv.Itoa(rawProduceVersion) + " requests (internal/record batches, CRC and header patched per send), " +
			"one partition per request, round-robin over partitions by batch, no retries",
		"client":               "franz-go (admin, consumers); raw producer",
		"batch.max.bytes":      strconv.Itoa(batchBytes),
		"max.in.flight":        strconv.Itoa(rawMaxInflight) + " requests per broker, one connection per broker per producer",
		"max.buffered.records": "one batch being filled and one being written per producer",
		"partitioner":          "round-robin, one partition per batch; keyed records refused",
		"delivery.timeout":     rawReadTimeout.String() + " without an answer while requests are in flight",
	}
}
