// Package faultproxy is a Kafka-protocol proxy that breaks a broker's
// guarantees on purpose, one fault at a time, so that fjord verify's
// checks are shown to fail when a broker is wrong (issue 16, acceptance
// point 2). It sits in front of one broker, answers Metadata,
// FindCoordinator and DescribeCluster with its own address so clients
// send everything through it, and passes every request and response
// through unchanged, except the one batch of partition 0 of its topic
// that its fault is done to:
//
//   - Drop: the batch was acknowledged, and is never served to anyone
//     (the checker must say lost);
//   - Duplicate: once the broker acknowledged the batch, the proxy writes
//     it again without its producer id, so the broker cannot tell it is
//     a retry (duplicate);
//   - Reorder: the batch and the one after it are served in each other's
//     place, on every fetch (moved);
//   - Vanish: the batch is served until the reader named by Config.Reader
//     has been served it, and never again: what a leader does that served
//     records it had not committed and then lost them (unstable-read).
//
// The batch is the first one of partition 0 at or past Config.After
// (drawn from the run's seed by the caller): the same fault at the same
// place on every run with that seed. Faults are done to whole batches,
// so compressed batches are handled as they are: moving a batch to
// another offset rewrites only fields outside its CRC.
//
// It is a test tool: one client connection is one broker connection,
// nothing is buffered beyond one request, and it has no TLS or SASL.
package faultproxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/fjordmsg"
)

// Fault is what the proxy does wrong.
type Fault string

// The faults.
const (
	None      Fault = "none"
	Drop      Fault = "drop"
	Duplicate Fault = "duplicate"
	Reorder   Fault = "reorder"
	Vanish    Fault = "vanish"
)

// Faults are every fault, None first.
var Faults = []Fault{None, Drop, Duplicate, Reorder, Vanish}

// maxFrame bounds one request or response; Kafka's own default for
// socket.request.max.bytes is 100 MiB.
const maxFrame = 100 << 20

// Config says where the proxy forwards to and what it breaks.
type Config struct {
	// Upstream is the broker's Kafka address.
	Upstream string
	// Topic is the topic whose partition 0 is faulted.
	Topic string
	Fault Fault
	// After: the fault is done to the first batch of partition 0 whose
	// base offset is at least After.
	After int64
	// Reader is the client id whose fetch, once served the batch, makes
	// it vanish (Vanish only).
	Reader string
}

// Proxy is a running proxy.
type Proxy struct {
	cfg  Config
	ln   net.Listener
	host string
	port int32
	wg   sync.WaitGroup

	mu struct {
		sync.Mutex
		conns   map[net.Conn]bool
		closed  bool
		topicID [16]byte
		// target is the batch the fault is done to, once seen; next is
		// the batch after it (Reorder).
		target, next batch
		// vanished: the reader was served the target (Vanish).
		vanished bool
		// duplicated: the target was written again (Duplicate).
		duplicated bool
		did        []string
		errs       []string
	}
}

// Start listens on a free port of 127.0.0.1.
func Start(cfg Config) (*Proxy, error) {
	switch cfg.Fault {
	case None, Drop, Duplicate, Reorder, Vanish:
	default:
		return nil, fmt.Errorf("faultproxy: unknown fault %q", cfg.Fault)
	}
	if cfg.Fault == Vanish && cfg.Reader == "" {
		return nil, errors.New("faultproxy: Vanish needs the reader's client id")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().(*net.TCPAddr)
	p := &Proxy{cfg: cfg, ln: ln, host: addr.IP.String(), port: int32(addr.Port)}
	p.mu.conns = make(map[net.Conn]bool)
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the address clients connect to instead of the broker's.
func (p *Proxy) Addr() string { return net.JoinHostPort(p.host, strconv.Itoa(int(p.port))) }

// Did says what the fault did, one line each; none yet if it found no
// batch to do it to.
func (p *Proxy) Did() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.mu.did...)
}

// Errors are the responses the proxy could not read or rewrite (the
// connection was closed); a clean run has none.
func (p *Proxy) Errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.mu.errs...)
}

// Close stops listening, closes every connection and waits for them.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.mu.closed = true
	for c := range p.mu.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// track adds c to the connections Close closes; false once closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return false
	}
	p.mu.conns[c] = true
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.mu.conns, c)
}

func (p *Proxy) failed(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.errs = append(p.mu.errs, fmt.Sprintf(format, args...))
}

// pending is a request awaiting its response: responses come back in
// request order on a connection, so a queue of these says what each is.
type pending struct {
	key, version int16
	clientID     string
	// produced is partition 0's batch of the proxy's topic in a Produce
	// (Duplicate only).
	produced batch
}

// serve relays one client connection to a connection of its own to the
// broker.
func (p *Proxy) serve(client net.Conn) {
	defer p.untrack(client)
	defer client.Close()
	up, err := net.DialTimeout("tcp", p.cfg.Upstream, 10*time.Second)
	if err != nil {
		p.failed("dialing the broker: %v", err)
		return
	}
	if !p.track(up) {
		up.Close()
		return
	}
	defer p.untrack(up)
	defer up.Close()
	queue := make(chan pending, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer client.Close()
		defer up.Close()
		p.responses(up, client, queue)
	}()
	p.requests(client, up, queue, done)
	close(queue)
	<-done
}

// requests forwards the client's requests, queueing each that will be
// answered.
func (p *Proxy) requests(client, up net.Conn, queue chan<- pending, responsesDone <-chan struct{}) {
	for {
		frame, err := readFrame(client)
		if err != nil {
			if !hungUp(err) {
				p.failed("reading a request: %v", err)
			}
			return
		}
		h, err := parseRequestHeader(frame)
		if err != nil {
			p.failed("%v", err)
			return
		}
		pd := pending{key: h.key, version: h.version, clientID: h.clientID}
		answered := true
		if h.key == 0 { // Produce: acks=0 has no response
			req := kmsg.NewPtrProduceRequest()
			req.Version = h.version
			if err := req.ReadFrom(frame[h.size:]); err != nil {
				p.failed("reading a produce request: %v", err)
				return
			}
			answered = req.Acks != 0
			if p.cfg.Fault == Duplicate {
				pd.produced = p.producedBatch(req)
			}
		}
		if answered {
			select {
			case queue <- pd:
			case <-responsesDone: // the connection is closing
				return
			}
		}
		if err := writeFrame(up, frame); err != nil {
			return
		}
	}
}

// producedBatch is partition 0's batch of the proxy's topic in req, if
// it has one batch there.
func (p *Proxy) producedBatch(req *kmsg.ProduceRequest) batch {
	for _, t := range req.Topics {
		if t.Topic != p.cfg.Topic {
			continue
		}
		for _, part := range t.Partitions {
			if part.Partition != 0 {
				continue
			}
			batches, partial, err := splitBatches(part.Records)
			if err == nil && len(batches) == 1 && len(partial) == 0 {
				return append(batch(nil), batches[0]...)
			}
		}
	}
	return nil
}

// responses relays the broker's responses, rewriting the few the proxy
// must.
func (p *Proxy) responses(up, client net.Conn, queue <-chan pending) {
	for pd := range queue {
		frame, err := readFrame(up)
		if err != nil {
			if !hungUp(err) {
				p.failed("reading a response: %v", err)
			}
			return
		}
		out, err := p.rewrite(pd, frame)
		if err != nil {
			p.failed("api key %d version %d: %v", pd.key, pd.version, err)
			return
		}
		if err := writeFrame(client, out); err != nil {
			return
		}
	}
}

// rewrite is the response the client gets for frame.
func (p *Proxy) rewrite(pd pending, frame []byte) ([]byte, error) {
	var resp kmsg.Response
	switch pd.key {
	case 0, 1, 3, 10, 60: // Produce, Fetch, Metadata, FindCoordinator, DescribeCluster
		resp = kmsg.ResponseForKey(pd.key)
	default:
		return frame, nil
	}
	resp.SetVersion(pd.version)
	hsize, err := responseHeaderSize(frame, resp.IsFlexible())
	if err != nil {
		return nil, err
	}
	if err := resp.ReadFrom(frame[hsize:]); err != nil {
		return nil, err
	}
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = p.host, p.port
		}
		if pd.produced != nil {
			p.produced(r, pd)
		}
	case *kmsg.FetchResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = p.host, p.port
		}
		if err := p.fetched(r, pd.clientID); err != nil {
			return nil, err
		}
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = p.host, p.port
		}
		for _, t := range r.Topics {
			if t.Topic != nil && *t.Topic == p.cfg.Topic {
				p.mu.Lock()
				p.mu.topicID = t.TopicID
				p.mu.Unlock()
			}
		}
	case *kmsg.FindCoordinatorResponse:
		if r.NodeID >= 0 {
			r.Host, r.Port = p.host, p.port
		}
		for i := range r.Coordinators {
			r.Coordinators[i].Host, r.Coordinators[i].Port = p.host, p.port
		}
	case *kmsg.DescribeClusterResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = p.host, p.port
		}
	}
	return resp.AppendTo(append([]byte(nil), frame[:hsize]...)), nil
}

// produced writes pd's batch again, the first time the broker
// acknowledges one of partition 0 at or past After (Duplicate).
func (p *Proxy) produced(r *kmsg.ProduceResponse, pd pending) {
	for _, t := range r.Topics {
		if t.Topic != p.cfg.Topic {
			continue
		}
		for _, part := range t.Partitions {
			if part.Partition != 0 || part.ErrorCode != 0 || part.BaseOffset < p.cfg.After {
				continue
			}
			p.mu.Lock()
			first := !p.mu.duplicated
			p.mu.duplicated = true
			p.mu.Unlock()
			if !first {
				return
			}
			// Written before the client is answered, so that the copy is
			// in the log whatever the client does next.
			at, err := p.produceAgain(pd.version, pd.produced.withoutProducer())
			p.mu.Lock()
			if err != nil {
				p.mu.errs = append(p.mu.errs, fmt.Sprintf("writing the batch again: %v", err))
			} else {
				p.mu.did = append(p.mu.did, fmt.Sprintf("%s-0: the batch acknowledged at offset %d (%d records) written again at offset %d without its producer id",
					p.cfg.Topic, part.BaseOffset, pd.produced.records(), at))
			}
			p.mu.Unlock()
			return
		}
	}
}

// produceAgain writes b to partition 0 on a connection of its own, with
// acks=all, and returns the offset the broker gave it.
func (p *Proxy) produceAgain(version int16, b batch) (int64, error) {
	conn, err := net.DialTimeout("tcp", p.cfg.Upstream, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return 0, err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = -1
	req.TimeoutMillis = 10000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = p.cfg.Topic
	part := kmsg.NewProduceRequestTopicPartition()
	part.Records = b
	t.Partitions = append(t.Partitions, part)
	req.Topics = append(req.Topics, t)
	frame := appendRequestHeader(nil, req, 1, "faultproxy")
	if err := writeFrame(conn, req.AppendTo(frame)); err != nil {
		return 0, err
	}
	answer, err := readFrame(conn)
	if err != nil {
		return 0, err
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Version = version
	hsize, err := responseHeaderSize(answer, resp.IsFlexible())
	if err != nil {
		return 0, err
	}
	if err := resp.ReadFrom(answer[hsize:]); err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, errors.New("the broker answered another partition")
	}
	ans := resp.Topics[0].Partitions[0]
	if ans.ErrorCode != 0 {
		return 0, fmt.Errorf("the broker answered error code %d", ans.ErrorCode)
	}
	return ans.BaseOffset, nil
}

// fetched does the fault to a fetch response's records.
func (p *Proxy) fetched(r *kmsg.FetchResponse, clientID string) error {
	if p.cfg.Fault == None || p.cfg.Fault == Duplicate {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for ti := range r.Topics {
		t := &r.Topics[ti]
		if t.Topic != p.cfg.Topic && (t.TopicID == [16]byte{} || t.TopicID != p.mu.topicID) {
			continue
		}
		for pi := range t.Partitions {
			part := &t.Partitions[pi]
			if part.Partition != 0 || len(part.RecordBatches) == 0 {
				continue
			}
			batches, partial, err := splitBatches(part.RecordBatches)
			if err != nil {
				return err
			}
			batches, partial = p.faultLocked(batches, partial, clientID)
			part.RecordBatches = joinBatches(batches, partial)
		}
	}
	return nil
}

// faultLocked is what a fetch of partition 0 is served instead of
// batches.
//
// REQUIRES: p.mu held.
func (p *Proxy) faultLocked(batches []batch, partial []byte, clientID string) ([]batch, []byte) {
	if p.mu.target == nil {
		i := firstAtOrPast(batches, p.cfg.After)
		if i < 0 {
			return batches, partial
		}
		if p.cfg.Fault == Reorder {
			if i+1 == len(batches) {
				// The batch after it is not here yet: hold this one back
				// (the client fetches it again) until both can be served
				// swapped, so that nobody is ever served it in its place.
				return batches[:i], nil
			}
			p.mu.next = append(batch(nil), batches[i+1]...)
			a, b := batches[i], p.mu.next
			p.mu.did = append(p.mu.did, fmt.Sprintf("%s-0: the batches at offsets %d (%d records) and %d (%d records) served in each other's place",
				p.cfg.Topic, a.baseOffset(), a.records(), b.baseOffset(), b.records()))
		}
		p.mu.target = append(batch(nil), batches[i]...)
		switch p.cfg.Fault {
		case Drop:
			p.mu.did = append(p.mu.did, fmt.Sprintf("%s-0: the batch at offset %d (%d records) never served", p.cfg.Topic, p.mu.target.baseOffset(), p.mu.target.records()))
		case Vanish:
			p.mu.did = append(p.mu.did, fmt.Sprintf("%s-0: the batch at offset %d (%d records) served until %s was served it, then never again",
				p.cfg.Topic, p.mu.target.baseOffset(), p.mu.target.records(), p.cfg.Reader))
		}
	}
	at := p.mu.target.baseOffset()
	switch p.cfg.Fault {
	case Drop:
		return without(batches, at), partial
	case Vanish:
		if p.mu.vanished {
			return without(batches, at), partial
		}
		if clientID == p.cfg.Reader && firstAt(batches, at) >= 0 {
			p.mu.vanished = true // gone from the next fetch on
		}
		return batches, partial
	case Reorder:
		a, b := p.mu.target, p.mu.next
		var out []batch
		swapped := false
		for _, x := range batches {
			if o := x.baseOffset(); o == a.baseOffset() || o == b.baseOffset() {
				if !swapped {
					out = append(out, b.rebased(a.baseOffset()), a.rebased(a.baseOffset()+b.records()))
					swapped = true
				}
				continue
			}
			out = append(out, x)
		}
		return out, partial
	}
	return batches, partial
}

func firstAtOrPast(batches []batch, offset int64) int {
	for i, b := range batches {
		if b.baseOffset() >= offset {
			return i
		}
	}
	return -1
}

func firstAt(batches []batch, offset int64) int {
	for i, b := range batches {
		if b.baseOffset() == offset {
			return i
		}
	}
	return -1
}

func without(batches []batch, offset int64) []batch {
	out := batches[:0:0]
	for _, b := range batches {
		if b.baseOffset() != offset {
			out = append(out, b)
		}
	}
	return out
}

// hungUp reports whether err is a connection ending rather than a frame
// the proxy could not read: a client that is done (or that gave up on a
// fetch the proxy held back) closes or resets its connection, and Close
// closes them all.
func hungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// readFrame reads one size-prefixed request or response.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > maxFrame {
		return nil, fmt.Errorf("a frame of %d bytes (at most %d)", n, maxFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

func writeFrame(w io.Writer, b []byte) error {
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	_, err := w.Write(append(out, b...))
	return err
}

type requestHeader struct {
	key, version int16
	clientID     string
	size         int // bytes of the header, before the body
}

// parseRequestHeader reads a request header (v1, or v2 with tagged
// fields when the request is flexible).
func parseRequestHeader(b []byte) (requestHeader, error) {
	var h requestHeader
	if len(b) < 10 {
		return h, fmt.Errorf("a request of %d bytes has no header", len(b))
	}
	h.key = int16(binary.BigEndian.Uint16(b[0:]))
	h.version = int16(binary.BigEndian.Uint16(b[2:]))
	req := fjordmsg.RequestForKey(h.key)
	if req == nil {
		return h, fmt.Errorf("unknown api key %d", h.key)
	}
	req.SetVersion(h.version)
	n := int(int16(binary.BigEndian.Uint16(b[8:])))
	h.size = 10
	if n > 0 {
		if 10+n > len(b) {
			return h, errors.New("a request header's client id runs past its end")
		}
		h.clientID = string(b[10 : 10+n])
		h.size += n
	}
	if req.IsFlexible() {
		tags, err := taggedFieldsSize(b[h.size:])
		if err != nil {
			return h, fmt.Errorf("api key %d: request header: %w", h.key, err)
		}
		h.size += tags
	}
	return h, nil
}

// appendRequestHeader appends req's header to dst.
func appendRequestHeader(dst []byte, req kmsg.Request, corrID int32, clientID string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.GetVersion()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corrID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(clientID)))
	dst = append(dst, clientID...)
	if req.IsFlexible() {
		dst = append(dst, 0) // no tagged fields
	}
	return dst
}

// responseHeaderSize is the size of a response's header: its
// correlation id, and tagged fields when flexible (ApiVersions' response
// header never is, which is why it is never rewritten here).
func responseHeaderSize(b []byte, flexible bool) (int, error) {
	if len(b) < 4 {
		return 0, fmt.Errorf("a response of %d bytes has no header", len(b))
	}
	if !flexible {
		return 4, nil
	}
	tags, err := taggedFieldsSize(b[4:])
	if err != nil {
		return 0, fmt.Errorf("response header: %w", err)
	}
	return 4 + tags, nil
}

// taggedFieldsSize is the size of the tagged fields at the start of b.
func taggedFieldsSize(b []byte) (int, error) {
	r := bytes.NewReader(b)
	count, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, errors.New("truncated tagged fields")
	}
	for range count {
		if _, err := binary.ReadUvarint(r); err != nil {
			return 0, errors.New("truncated tagged fields")
		}
		size, err := binary.ReadUvarint(r)
		if err != nil || size > uint64(r.Len()) {
			return 0, errors.New("truncated tagged fields")
		}
		if _, err := r.Seek(int64(size), io.SeekCurrent); err != nil {
			return 0, err
		}
	}
	return len(b) - r.Len(), nil
}
