package kafkaserver

// Hostile input (issue 3, acceptance point 4): raw connections send
// garbage, truncated frames, a 2 GiB frame size, unknown API keys and
// versions, and valid headers with corrupt bodies. Each is answered with
// an error or closed; the server stays up; a well-behaved client on
// another connection, producing and fetching throughout, sees no failure.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/testutil"
)

func TestHostileInputLeavesOthersUnharmed(t *testing.T) {
	h := newWireHarness(t, withConfig(func(c *Config) { c.MaxRequestBytes = 1 << 20 }))
	h.ctrl.addTopic("good", 2)

	// The well-behaved client: franz-go producing with acks=all and
	// consuming what it produced, until told to stop.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := kgo.NewClient(
		kgo.SeedBrokers(h.addr),
		kgo.DefaultProduceTopic("good"),
		kgo.ConsumeTopics("good"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50*time.Millisecond),
		kgo.RecordRetries(0), // a failure must surface, not be retried away
	)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// Polls end through pollCtx when the test stops the client; produces
	// are never cut short, so any produce error is a real failure.
	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []error
	produced, consumed := 0, 0
	fail := func(err error) {
		mu.Lock()
		failures = append(failures, err)
		mu.Unlock()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r := &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))}
			if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
				fail(fmt.Errorf("produce %d: %w", i, err))
				return
			}
			mu.Lock()
			produced++
			mu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			fs := client.PollRecords(pollCtx, 100)
			if pollCtx.Err() != nil {
				return
			}
			fs.EachError(func(topic string, p int32, err error) {
				fail(fmt.Errorf("fetch %s[%d]: %w", topic, p, err))
			})
			mu.Lock()
			consumed += fs.NumRecords()
			mu.Unlock()
		}
	}()

	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 4096)
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	corruptBody := append(header(3, 1, 1, false), 0x7f, 0xff, 0xff, 0xff) // 2^31-1 topics
	hostile := []struct {
		name   string
		bytes  []byte
		answer func(t *testing.T, c *rawConn) // nil: expect the connection closed
	}{
		{"garbage", garbage, nil},
		{"2 GiB frame size", binary.BigEndian.AppendUint32(nil, 1<<31), nil},
		{"frame over the limit", binary.BigEndian.AppendUint32(nil, 1<<20+1), nil},
		{"zero frame size", make([]byte, 4), nil},
		{"truncated frame", frameOf(append(header(18, 0, 1, false), make([]byte, 1000)...))[:200], nil},
		{"truncated header", frameOf(header(18, 0, 1, false))[:9], nil},
		{"unknown API key", frameOf(header(1234, 0, 1, false)), nil},
		{"unsupported version", frameOf(header(1, 0, 1, false)), nil},
		{"valid header, corrupt body", frameOf(corruptBody), nil},
		// DescribeCluster v2 with its body cut after the endpoint type:
		// no IncludeFencedBrokers, no tagged fields (KIP-1073's field).
		{"DescribeCluster v2, truncated body", frameOf(append(header(60, 2, 1, true), 0, 1)), nil},
		{"client id longer than the frame", frameOf([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0xff}), nil},
		{"ApiVersions too new", frameOf(header(18, 99, 1, true)), func(t *testing.T, c *rawConn) {
			frame, err := c.readFrame()
			if err != nil {
				t.Fatal(err)
			}
			var resp kmsg.ApiVersionsResponse
			if err := resp.ReadFrom(frame[4:]); err != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code {
				t.Fatalf("error %d (%v), want UNSUPPORTED_VERSION", resp.ErrorCode, err)
			}
		}},
		{"produce of garbage records", func() []byte {
			c := kmsg.NewRequestFormatter()
			return c.AppendRequest(nil, produceReq(9, 1, "good", 0, garbage[:500]), 1)
		}(), func(t *testing.T, c *rawConn) {
			p := producePartition(t, c.recv(produceReq(9, 1, "good", 0, nil), 1))
			if p.ErrorCode != kerr.CorruptMessage.Code {
				t.Fatalf("error %d, want CORRUPT_MESSAGE", p.ErrorCode)
			}
		}},
	}
	// Each hostile input several times, interleaved with the good client.
	for round := range 3 {
		for _, hc := range hostile {
			t.Run(fmt.Sprintf("%s/%d", hc.name, round), func(t *testing.T) {
				c := h.dialFor(t)
				c.write(hc.bytes)
				if hc.answer != nil {
					hc.answer(t, c)
					return
				}
				if tcp, ok := c.nc.(*net.TCPConn); ok {
					// A truncated frame is only truncated once the
					// client stops sending.
					tcp.CloseWrite()
				}
				c.expectClosed()
			})
		}
	}
	// Connections opened and dropped without a byte.
	for range 20 {
		nc, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.Close()
	}

	// Let the good client make progress after all that, then stop it.
	mu.Lock()
	start := produced
	mu.Unlock()
	testutil.Eventually(t, 20*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) > 0 {
			return nil
		}
		if produced < start+20 || consumed < 20 {
			return fmt.Errorf("good client produced %d, consumed %d", produced, consumed)
		}
		return nil
	})
	close(stop)
	stopPolling()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, err := range failures {
		t.Errorf("good client failed: %v", err)
	}
	h.dial().roundTrip(apiVersionsReq(3))
}
