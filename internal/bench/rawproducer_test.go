package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/record"
)

// The raw producer's pre-encoded batch: for every record count a batch
// is sent with, the first k records, once finish rewrites the header,
// are a batch a node accepts from a client (record.Validate with
// Client), with the header fields and the values put in place. This
// holds the header offsets and the record positions rawproducer.go
// works out to internal/record's own encoding.
func TestRawBatchLayout(t *testing.T) {
	for _, size := range []int{16, 100, 1024, 1_000_000} {
		l, err := newRawLayout(size, kafkaBatchMaxBytes, 4242, 7)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		n := l.records()
		// 63 and 64, 8191 and 8192 are where an offset delta's varint
		// grows a byte.
		for _, k := range []int{1, 2, 63, 64, 65, 8191, 8192, n - 1, n} {
			if k < 1 || k > n {
				continue
			}
			buf := append([]byte(nil), l.template...)
			values := make([][]byte, k)
			for i := range values {
				v := bytes.Repeat([]byte{byte(i)}, size)
				putHeader(v, int64(i)*1000, sequence(3, int64(i)))
				copy(buf[l.valueAt[i]:], v)
				values[i] = v
			}
			seq := int32(math.MaxInt32 - 5)
			batch := l.finish(buf, k, seq, 1_700_000_000_123)
			h, err := record.Validate(batch, record.ValidateOptions{Client: true})
			if err != nil {
				t.Fatalf("size %d, %d of %d records: %v", size, k, n, err)
			}
			if h.NumRecords != int32(k) || h.LastOffsetDelta != int32(k-1) || h.BaseSequence != seq ||
				h.ProducerID != 4242 || h.ProducerEpoch != 7 || h.FirstTimestamp != 1_700_000_000_123 || h.MaxTimestamp != 1_700_000_000_123 {
				t.Errorf("size %d, %d records: header %+v", size, k, h)
			}
			recs, err := record.Records(batch)
			if err != nil || len(recs) != k {
				t.Fatalf("size %d, %d records: read %d, %v", size, k, len(recs), err)
			}
			for i, r := range recs {
				if r.Key != nil || !bytes.Equal(r.Value, values[i]) || r.Offset != int64(i) {
					t.Fatalf("size %d, %d records: record %d is offset %d key %v, value not the one put there", size, k, i, r.Offset, r.Key)
				}
			}
		}
	}
	// A 1 MiB batch holds as many 1 KiB records as fit, and no more.
	l, _ := newRawLayout(1024, kafkaBatchMaxBytes, 1, 0)
	if n := l.records(); n < 1000 || l.endAt[n-1] > kafkaBatchMaxBytes {
		t.Errorf("%d records of 1 KiB in %d bytes", n, l.endAt[n-1])
	}
	if _, err := newRawLayout(2<<20, kafkaBatchMaxBytes, 1, 0); err == nil {
		t.Error("a record larger than the batch was taken")
	}
}

func TestNextSequenceWraps(t *testing.T) {
	for _, tc := range []struct {
		seq  int32
		k    int
		want int32
	}{{0, 5, 5}, {math.MaxInt32 - 1, 1, math.MaxInt32}, {math.MaxInt32, 1, 0}, {math.MaxInt32 - 2, 5, 2}} {
		if got := nextSequence(tc.seq, tc.k); got != tc.want {
			t.Errorf("nextSequence(%d, %d) = %d, want %d", tc.seq, tc.k, got, tc.want)
		}
	}
}

// The framed prefix and a batch after it are one Produce request as a
// broker parses it, for the patched size, correlation id and batch.
func TestRawRequestFrame(t *testing.T) {
	l, err := newRawLayout(100, kafkaBatchMaxBytes, 9, 0)
	if err != nil {
		t.Fatal(err)
	}
	prefix := framePrefix(kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")), "orders", 5, 10*time.Second, l.template)
	batch := l.finish(append([]byte(nil), l.template...), 3, 0, 1)
	patchPrefix(prefix, 77, len(batch))
	frame := append(append([]byte(nil), prefix...), batch...)
	if size := int(binary.BigEndian.Uint32(frame)); size != len(frame)-4 {
		t.Fatalf("frame says %d bytes, has %d", size, len(frame)-4)
	}
	// Header v1: api key, version, correlation id, client id.
	if key, version, corr := binary.BigEndian.Uint16(frame[4:]), binary.BigEndian.Uint16(frame[6:]), int32(binary.BigEndian.Uint32(frame[8:])); key != 0 || version != rawProduceVersion || corr != 77 {
		t.Fatalf("header: key %d version %d correlation %d", key, version, corr)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = rawProduceVersion
	if err := req.ReadFrom(frame[4+2+2+4+2+1:]); err != nil { // client id "c"
		t.Fatal(err)
	}
	if req.Acks != -1 || req.TimeoutMillis != 10_000 || len(req.Topics) != 1 || req.Topics[0].Topic != "orders" ||
		len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].Partition != 5 || !bytes.Equal(req.Topics[0].Partitions[0].Records, batch) {
		t.Fatalf("request %+v", req)
	}
}

// fakeBroker answers Produce requests on a socket: code(n) is the error
// code for the n-th request (from 0), and after closeAfter requests (if
// > 0) it closes the connection without answering.
type fakeBroker struct {
	ln         net.Listener
	code       func(n int) int16
	closeAfter int

	mu       sync.Mutex
	requests []*kmsg.ProduceRequest
}

func startFakeBroker(t *testing.T, code func(n int) int16, closeAfter int) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBroker{ln: ln, code: code, closeAfter: closeAfter}
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		b.serve(conn)
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return b
}

func (b *fakeBroker) serve(conn net.Conn) {
	for n := 0; ; n++ {
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, frame); err != nil {
			return
		}
		if b.closeAfter > 0 && n == b.closeAfter {
			return
		}
		corr := binary.BigEndian.Uint32(frame[4:])
		clientIDLen := int(binary.BigEndian.Uint16(frame[8:]))
		req := kmsg.NewPtrProduceRequest()
		req.Version = rawProduceVersion
		if err := req.ReadFrom(frame[10+clientIDLen:]); err != nil {
			return
		}
		b.mu.Lock()
		b.requests = append(b.requests, req)
		b.mu.Unlock()
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = rawProduceVersion
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = req.Topics[0].Topic
		rp := kmsg.NewProduceResponseTopicPartition()
		rp.Partition = req.Topics[0].Partitions[0].Partition
		rp.ErrorCode = b.code(n)
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		body := resp.AppendTo(binary.BigEndian.AppendUint32(nil, corr))
		if _, err := conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)); err != nil {
			return
		}
	}
}

func (b *fakeBroker) produced() []*kmsg.ProduceRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*kmsg.ProduceRequest(nil), b.requests...)
}

// outcomes collects done callbacks' results.
type outcomes struct {
	mu   sync.Mutex
	errs []error
}

func (o *outcomes) done() func(error) {
	return func(err error) {
		o.mu.Lock()
		o.errs = append(o.errs, err)
		o.mu.Unlock()
	}
}

func (o *outcomes) count() (ok, failed int, first error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, err := range o.errs {
		if err == nil {
			ok++
			continue
		}
		failed++
		if first == nil {
			first = err
		}
	}
	return ok, failed, first
}

func newTestRawProducer(t *testing.T, b *fakeBroker, partitions int) *rawProducer {
	t.Helper()
	var targets []rawTarget
	for i := range partitions {
		targets = append(targets, rawTarget{partition: int32(i), addr: b.ln.Addr().String()})
	}
	p, err := newRawProducer(context.Background(), "t", targets, 32, 4096, 11, 0, time.Second, "test")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func rawValue(i int) []byte {
	v := make([]byte, 32)
	putHeader(v, 0, sequence(0, int64(i)))
	return v
}

// Against a broker that answers every request: every record is
// acknowledged once, the partitions take turns batch by batch, and each
// partition's base sequences follow on from its last batch.
func TestRawProducerAcknowledgesEveryRecord(t *testing.T) {
	b := startFakeBroker(t, func(int) int16 { return 0 }, 0)
	p := newTestRawProducer(t, b, 3)
	var o outcomes
	const records = 2000
	ctx := context.Background()
	for i := range records {
		p.Send(ctx, nil, rawValue(i), o.done())
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, failed, first := o.count(); ok != records || failed != 0 {
		t.Fatalf("%d acknowledged, %d failed (%v), want all %d acknowledged", ok, failed, first, records)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	next := map[int32]int32{}
	seen := map[uint64]bool{}
	reqs := b.produced()
	for i, req := range reqs {
		part := req.Topics[0].Partitions[0]
		if want := int32(i % 3); part.Partition != want {
			t.Fatalf("request %d went to partition %d, want %d (round-robin)", i, part.Partition, want)
		}
		h, err := record.Validate(part.Records, record.ValidateOptions{Client: true})
		if err != nil || h.ProducerID != 11 || h.BaseSequence != next[part.Partition] {
			t.Fatalf("request %d: %+v, %v; want producer 11, base sequence %d", i, h, err, next[part.Partition])
		}
		next[part.Partition] += h.NumRecords
		if err := record.ForEachRecord(part.Records, func(r *record.Record) error {
			_, seq, _ := readHeader(r.Value)
			if seen[seq] {
				t.Errorf("record %d sent twice", seq)
			}
			seen[seq] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != records {
		t.Errorf("%d distinct records reached the broker, want %d", len(seen), records)
	}
}

// An error code fails that request's records with the code's error, and
// no other; a lost connection fails every record in flight, and every
// later Send at once.
func TestRawProducerFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("error code", func(t *testing.T) {
		b := startFakeBroker(t, func(n int) int16 {
			if n == 1 {
				return kerr.NotEnoughReplicas.Code
			}
			return 0
		}, 0)
		p := newTestRawProducer(t, b, 1)
		defer p.Close()
		var first, second, third outcomes
		// One record at a time, flushed, so each is its own request.
		for _, o := range []*outcomes{&first, &second, &third} {
			p.Send(ctx, nil, rawValue(0), o.done())
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if ok, _, _ := first.count(); ok != 1 {
			t.Errorf("first request's record not acknowledged")
		}
		if _, failed, err := second.count(); failed != 1 || !errors.Is(err, kerr.NotEnoughReplicas) {
			t.Errorf("second request: %d failed with %v, want NOT_ENOUGH_REPLICAS", failed, err)
		}
		if ok, _, _ := third.count(); ok != 1 {
			t.Errorf("third request's record not acknowledged")
		}
	})
	t.Run("connection lost", func(t *testing.T) {
		b := startFakeBroker(t, func(int) int16 { return 0 }, 1)
		p := newTestRawProducer(t, b, 1)
		defer p.Close()
		var o outcomes
		for i := range 500 {
			p.Send(ctx, nil, rawValue(i), o.done())
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		ok, failed, err := o.count()
		if ok+failed != 500 || failed == 0 || err == nil {
			t.Fatalf("%d acknowledged, %d failed (%v); want every record done, the unanswered ones failed", ok, failed, err)
		}
		var later outcomes
		p.Send(ctx, nil, rawValue(0), later.done())
		if _, failed, err := later.count(); failed != 1 || err == nil {
			t.Errorf("a Send after the connection failed: %d failed (%v), want it failed at once", failed, err)
		}
	})
	t.Run("closed with records pending", func(t *testing.T) {
		// A broker that never answers: Close fails what is in flight.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			if c, err := ln.Accept(); err == nil {
				_, _ = io.Copy(io.Discard, c)
			}
		}()
		p, err := newRawProducer(ctx, "t", []rawTarget{{0, ln.Addr().String()}}, 32, 4096, 1, 0, time.Second, "test")
		if err != nil {
			t.Fatal(err)
		}
		var o outcomes
		for i := range 10 {
			p.Send(ctx, nil, rawValue(i), o.done())
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if ok, failed, err := o.count(); ok != 0 || failed != 10 || !errors.Is(err, ErrRawProducerClosed) {
			t.Errorf("%d acknowledged, %d failed (%v); want all 10 failed with ErrRawProducerClosed", ok, failed, err)
		}
	})
	t.Run("keys refused", func(t *testing.T) {
		b := startFakeBroker(t, func(int) int16 { return 0 }, 0)
		p := newTestRawProducer(t, b, 1)
		defer p.Close()
		var o outcomes
		p.Send(ctx, []byte("k"), rawValue(0), o.done())
		if _, failed, _ := o.count(); failed != 1 {
			t.Errorf("a keyed record was not refused")
		}
	})
}
