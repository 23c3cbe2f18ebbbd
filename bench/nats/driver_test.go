package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// testServer starts an in-process server on a temp dir: the driver does
// not care which process the server is in, and in-process keeps these
// tests fast. The child-process path is tested in server_test.go.
func testServer(t *testing.T) *server.Server {
	t.Helper()
	s, err := startServer(serverConfig{StoreDir: t.TempDir(), Sync: "default"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

func testDriver(t *testing.T, cfg driverConfig) *driver {
	t.Helper()
	d, err := newDriver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// value makes record i's payload: its index, then filler, so every
// record is distinct and its index can be read back.
func value(i int) []byte {
	v := make([]byte, 100)
	binary.BigEndian.PutUint64(v, uint64(i))
	for j := 8; j < len(v); j++ {
		v[j] = byte(i + j)
	}
	return v
}

// TestDriverProduceConsume sends keyed and unkeyed records to a
// 4-partition topic, then reads them with two consumers of two
// partitions each: every record is acknowledged once, read once, intact,
// from the partition its key chose.
func TestDriverProduceConsume(t *testing.T) {
	for _, kind := range []string{consumerPull, consumerPush} {
		t.Run(kind, func(t *testing.T) { testProduceConsume(t, kind) })
	}
}

func testProduceConsume(t *testing.T, consumerKind string) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := testDriver(t, driverConfig{URLs: []string{s.ClientURL()}, MaxPending: 64, PullMaxMessages: 100, Consumer: consumerKind})
	const (
		topic      = "bench.t0" // a dot, which stream names do not allow
		partitions = 4
		n          = 4000
	)
	if err := d.CreateTopics(ctx, []string{topic}, partitions); err != nil {
		t.Fatal(err)
	}
	p, err := d.NewProducer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}

	// Even records carry a key, odd ones none.
	keyOf := func(i int) []byte {
		if i%2 == 1 {
			return nil
		}
		return fmt.Appendf(nil, "k%d", i)
	}
	var acks sync.WaitGroup
	acks.Add(n)
	var mu sync.Mutex
	acked := make(map[int]int)
	var ackErrs []error
	buf := make([]byte, 100)
	for i := range n {
		// The driver must not keep value: reuse one buffer.
		copy(buf, value(i))
		p.Send(ctx, keyOf(i), buf, func(err error) {
			mu.Lock()
			acked[i]++
			if err != nil {
				ackErrs = append(ackErrs, err)
			}
			mu.Unlock()
			acks.Done()
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Flush returned, so every done callback has already run.
	mu.Lock()
	if len(acked) != n || len(ackErrs) != 0 {
		t.Fatalf("after Flush: %d records acknowledged, errors %v; want %d and none", len(acked), ackErrs, n)
	}
	for i, c := range acked {
		if c != 1 {
			t.Fatalf("record %d: done called %d times", i, c)
		}
	}
	mu.Unlock()
	acks.Wait()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	assignments := [][]int32{{0, 1}, {2, 3}}
	got := make([]map[int]int, len(assignments))
	var wg sync.WaitGroup
	runErrs := make([]error, len(assignments))
	var total sync.WaitGroup
	total.Add(n)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	for ci, parts := range assignments {
		c, err := d.NewConsumer(ctx, topic, parts)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		got[ci] = make(map[int]int)
		wg.Add(1)
		go func() {
			defer wg.Done()
			runErrs[ci] = c.Run(runCtx, func(v []byte) {
				i := int(binary.BigEndian.Uint64(v))
				if string(v) != string(value(i)) {
					t.Errorf("record %d corrupted", i)
				}
				got[ci][i]++
				total.Done()
			})
		}()
	}
	// Each record arrives once, so n deliveries mean all arrived; more
	// would panic the WaitGroup (negative counter), failing the test.
	waitOrFail(t, ctx, &total)
	stop()
	wg.Wait()
	for ci, err := range runErrs {
		if err != nil {
			t.Fatalf("consumer %d: Run = %v, want nil at context end", ci, err)
		}
	}

	part := newPartitioner(partitions)
	for i := range n {
		want := -1
		if k := keyOf(i); k != nil {
			want = part.partition(k)
		}
		found := 0
		for ci, parts := range assignments {
			if got[ci][i] == 0 {
				continue
			}
			found += got[ci][i]
			if want >= 0 && want/2 != ci {
				t.Fatalf("keyed record %d (partition %d) read by consumer of %v", i, want, parts)
			}
		}
		if found != 1 {
			t.Fatalf("record %d read %d times, want 1", i, found)
		}
	}
	// Unkeyed records go round-robin: half to each consumer's pair.
	for ci := range assignments {
		unkeyed := 0
		for i := range got[ci] {
			if i%2 == 1 {
				unkeyed++
			}
		}
		if unkeyed != n/4 {
			t.Errorf("consumer %d read %d unkeyed records, want %d", ci, unkeyed, n/4)
		}
	}
}

func waitOrFail(t *testing.T, ctx context.Context, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("timed out waiting for records")
	}
}

// A Send blocked on a full window gives up when its context ends, and
// reports that through done rather than hanging.
func TestProducerSendHonoursContext(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := testDriver(t, driverConfig{URLs: []string{s.ClientURL()}, MaxPending: 1})
	if err := d.CreateTopics(ctx, []string{"t"}, 1); err != nil {
		t.Fatal(err)
	}
	bp, err := d.NewProducer(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer bp.Close()
	p := bp.(*producer)
	// Take the only slot, as an unacknowledged publish would.
	p.slots <- struct{}{}
	sendCtx, sendCancel := context.WithCancel(ctx)
	sendCancel()
	var got error
	calls := 0
	p.Send(sendCtx, nil, value(1), func(err error) { got = err; calls++ })
	if calls != 1 || !errors.Is(got, context.Canceled) {
		t.Fatalf("done called %d times with %v, want once with context.Canceled", calls, got)
	}
	<-p.slots
}

func TestDriverRejectsUnknownTopicAndPartitions(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := testDriver(t, driverConfig{URLs: []string{s.ClientURL()}})
	if _, err := d.NewProducer(ctx, "nope"); !errors.Is(err, errUnknownTopic) {
		t.Fatalf("NewProducer(unknown) = %v, want errUnknownTopic", err)
	}
	if err := d.CreateTopics(ctx, []string{"t"}, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NewConsumer(ctx, "t", []int32{2}); !errors.Is(err, errBadPartitions) {
		t.Fatalf("NewConsumer(partition 2 of 2) = %v, want errBadPartitions", err)
	}
	if err := d.CreateTopics(ctx, []string{"u"}, 0); !errors.Is(err, errBadPartitions) {
		t.Fatalf("CreateTopics(0 partitions) = %v, want errBadPartitions", err)
	}
	if _, err := newDriver(driverConfig{URLs: []string{s.ClientURL()}, Consumer: "sideways"}); !errors.Is(err, errBadConsumer) {
		t.Fatalf("newDriver(consumer sideways) = %v, want errBadConsumer", err)
	}
}

// Settings name what shapes the numbers.
func TestDriverSettings(t *testing.T) {
	d := &driver{cfg: driverConfig{Sync: "always", MaxPending: 7, PullMaxMessages: 9, Consumer: consumerPull}}
	s := d.Settings()
	for key, want := range map[string]string{
		"stream.storage":      "file",
		"stream.replicas":     "1",
		"publish.max_pending": "7 unacknowledged messages per producer",
		"consumer.ack_policy": "none",
	} {
		if s[key] != want {
			t.Errorf("Settings[%q] = %q, want %q", key, s[key], want)
		}
	}
	if got := s["server.sync_interval"]; got == "" || got[:6] != "always" {
		t.Errorf("sync setting = %q, want it to say always", got)
	}
	if got := s["consumer.max_messages"]; got != "9 read ahead" {
		t.Errorf("pull read-ahead setting = %q", got)
	}
	push := (&driver{cfg: driverConfig{Consumer: consumerPush}}).Settings()
	if _, ok := push["consumer.max_messages"]; ok || push["consumer"] == s["consumer"] {
		t.Errorf("push consumer settings %v do not differ from pull's", push)
	}
}
