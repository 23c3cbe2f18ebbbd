package node

// Connection limits on a real node (issue 19, acceptance points 4 and
// 5's connection configs): set through IncrementalAlterConfigs, enforced
// at accept. Connections come from chosen loopback source addresses:
// Linux routes all of 127/8 on lo, so a client socket bound to 127.0.0.2
// reaches the node's 127.0.0.1 listener as a different remote address
// (nothing listens on 127.0.0.2). 127.0.0.1 is the node's registered
// listener host, so connections from it are exempt, as another node's
// would be.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/testutil"
)

// dialKafkaFrom dials n's Kafka listener from local address from.
func dialKafkaFrom(n *Node, from string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	return d.Dial("tcp", n.KafkaAddr().String())
}

// mustDialKafkaFrom is dialKafkaFrom, closed when the test ends.
func mustDialKafkaFrom(t *testing.T, n *Node, from string) net.Conn {
	t.Helper()
	nc, err := dialKafkaFrom(n, from)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// apiVersions sends an ApiVersions v3 on nc and reads its answer.
func apiVersions(nc net.Conn) error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, "conn-test", "1"
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	defer nc.SetDeadline(time.Time{})
	if _, err := nc.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("conn-test")).AppendRequest(nil, req, 1)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if len(frame) < 4 || len(frame) > 1<<20 {
		return fmt.Errorf("response frame of %d bytes", len(frame))
	}
	if _, err := io.ReadFull(nc, frame); err != nil {
		return err
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(frame[4:]); err != nil || resp.ErrorCode != 0 {
		return fmt.Errorf("ApiVersions answer: error code %d, %v", resp.ErrorCode, err)
	}
	return nil
}

// expectRefusedFrom dials n from local address from and expects the
// connection closed without an answer to its ApiVersions. On loopback
// the node's reset can come before connect returns, which fails the
// dial with ECONNRESET: refused too.
func expectRefusedFrom(t *testing.T, n *Node, from string) {
	t.Helper()
	nc, err := dialKafkaFrom(n, from)
	if errors.Is(err, syscall.ECONNRESET) {
		return
	}
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	defer nc.Close()
	err = apiVersions(nc)
	if err == nil {
		t.Fatal("a connection past the limit was answered")
	}
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("a connection past the limit is still open after 10 s")
	}
}

func alterBrokerDefaults(t *testing.T, adm *kadm.Client, configs ...kadm.AlterConfig) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resps, err := adm.AlterBrokerConfigs(ctx, configs) // no broker: the cluster default
	if err == nil {
		for _, r := range resps {
			if r.Err != nil {
				err = fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
			}
		}
	}
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs %v: %v", configs, err)
	}
}

func refusedConns(t *testing.T, n *Node, reason string) float64 {
	t.Helper()
	v, _ := scrape(t, n).Value("fjord_connections_refused_total", "reason="+reason)
	return v
}

// traffic is a franz-go client producing to a topic and consuming it
// until finish, every produce required to succeed.
type traffic struct {
	stop        chan struct{}
	stopPolling context.CancelFunc
	wg          sync.WaitGroup
	mu          sync.Mutex
	produced    int
	consumed    int
	failures    []error
}

func startTraffic(t *testing.T, n *Node, topic string, opts ...kgo.Opt) *traffic {
	t.Helper()
	cl := newClient(t, n, append([]kgo.Opt{
		kgo.DefaultProduceTopic(topic),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50 * time.Millisecond),
		kgo.RecordRetries(0), // a failure must surface, not be retried away
	}, opts...)...)
	tr := &traffic{stop: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	pollCtx, stopPolling := context.WithCancel(ctx)
	fail := func(err error) {
		tr.mu.Lock()
		tr.failures = append(tr.failures, err)
		tr.mu.Unlock()
	}
	tr.wg.Add(2)
	go func() {
		defer tr.wg.Done()
		for i := 0; ; i++ {
			select {
			case <-tr.stop: // finish
				return
			default:
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
				fail(fmt.Errorf("produce %d: %w", i, err))
				return
			}
			tr.mu.Lock()
			tr.produced++
			tr.mu.Unlock()
		}
	}()
	go func() {
		defer tr.wg.Done()
		for pollCtx.Err() == nil {
			fs := cl.PollRecords(pollCtx, 1000)
			if pollCtx.Err() != nil {
				return
			}
			fs.EachError(func(topic string, p int32, err error) { fail(fmt.Errorf("fetch %s[%d]: %w", topic, p, err)) })
			tr.mu.Lock()
			tr.consumed += fs.NumRecords()
			tr.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		select {
		case <-tr.stop:
		default:
			close(tr.stop)
		}
		stopPolling()
		tr.wg.Wait()
		cancel()
	})
	tr.stopPolling = stopPolling
	return tr
}

// counts returns what the client has produced and consumed so far.
func (tr *traffic) counts() (produced, consumed int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.produced, tr.consumed
}

// progress waits for 20 more records produced and consumed than now,
// and fails on any failure so far.
func (tr *traffic) progress(t *testing.T) {
	t.Helper()
	p0, c0 := tr.counts()
	testutil.Eventually(t, 30*time.Second, func() error {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if len(tr.failures) > 0 {
			return nil
		}
		if tr.produced < p0+20 || tr.consumed < c0+20 {
			return fmt.Errorf("produced %d (from %d), consumed %d (from %d)", tr.produced, p0, tr.consumed, c0)
		}
		return nil
	})
	tr.checkFailures(t)
}

func (tr *traffic) checkFailures(t *testing.T) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, err := range tr.failures {
		t.Errorf("well-behaved client: %v", err)
	}
	if len(tr.failures) > 0 {
		t.FailNow()
	}
}

// finish stops the client and fails on any failure.
func (tr *traffic) finish(t *testing.T) {
	t.Helper()
	close(tr.stop)
	tr.stopPolling()
	tr.wg.Wait()
	tr.checkFailures(t)
}

// startNodeWithTopic starts a node with a topic of one partition and
// returns an admin client from 127.0.0.1.
func startNodeWithTopic(t *testing.T, topic string) (*Node, *kadm.Client) {
	t.Helper()
	n := startNode(t, testConfig(t, t.TempDir()))
	testutil.Eventually(t, 10*time.Second, n.Ready)
	adm := kadm.NewClient(newClient(t, n))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	return n, adm
}

// max.connections.per.ip, then max.connections, set as the cluster
// default through IncrementalAlterConfigs: past each, a connection from
// 127.0.0.2 is closed unanswered and counted; the open ones keep
// working; a closed one frees its slot; the franz-go client on
// 127.0.0.1 (exempt: the node's own listener host) produces and
// consumes throughout and a new one connects past both limits.
func TestConnectionLimits(t *testing.T) {
	n, adm := startNodeWithTopic(t, "conns")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr := startTraffic(t, n, "conns")
	tr.progress(t)

	alterBrokerDefaults(t, adm, kadm.AlterConfig{Name: "max.connections.per.ip", Value: kadm.StringPtr("5")})
	var held []net.Conn
	for i := range 5 {
		nc := mustDialKafkaFrom(t, n, "127.0.0.2")
		if err := apiVersions(nc); err != nil {
			t.Fatalf("connection %d of 5: %v", i+1, err)
		}
		held = append(held, nc)
	}
	expectRefusedFrom(t, n, "127.0.0.2")
	if got := refusedConns(t, n, "max_connections_per_ip"); got != 1 {
		t.Fatalf("refused counter %v, want 1", got)
	}
	for i, nc := range held {
		if err := apiVersions(nc); err != nil {
			t.Fatalf("held connection %d after the refusal: %v", i+1, err)
		}
	}
	tr.progress(t)

	// A closed connection frees its slot once the node has seen the
	// close; until then a new one is refused (and counted).
	held[4].Close()
	attempts := 0
	testutil.Eventually(t, 10*time.Second, func() error {
		attempts++
		nc, err := dialKafkaFrom(n, "127.0.0.2")
		if err != nil {
			return err
		}
		if err := apiVersions(nc); err != nil {
			nc.Close()
			return fmt.Errorf("after a close: %w", err)
		}
		held[4] = nc
		t.Cleanup(func() { nc.Close() })
		return nil
	})
	if got := refusedConns(t, n, "max_connections_per_ip"); got != float64(attempts) {
		t.Fatalf("refused counter %v, want %d (1, and %d while the close was on its way)", got, attempts, attempts-1)
	}

	// max.connections: 127.0.0.2's five hold every slot, so another
	// address is refused too; 127.0.0.1 is not counted.
	alterBrokerDefaults(t, adm,
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "max.connections.per.ip"},
		kadm.AlterConfig{Name: "max.connections", Value: kadm.StringPtr("5")})
	expectRefusedFrom(t, n, "127.0.0.2")
	expectRefusedFrom(t, n, "127.0.0.3")
	if got := refusedConns(t, n, "max_connections"); got != 2 {
		t.Fatalf("max_connections refusals %v, want 2", got)
	}
	fresh := newClient(t, n) // new connections from 127.0.0.1
	if err := fresh.ProduceSync(ctx, &kgo.Record{Topic: "conns", Value: []byte("exempt")}).FirstErr(); err != nil {
		t.Fatalf("a new client on 127.0.0.1 at max.connections: %v", err)
	}
	for i := range 5 {
		if err := apiVersions(mustDialKafkaFrom(t, n, "127.0.0.1")); err != nil {
			t.Fatalf("raw connection %d from 127.0.0.1: %v", i, err)
		}
	}
	for i, nc := range held {
		if err := apiVersions(nc); err != nil {
			t.Fatalf("held connection %d at max.connections: %v", i+1, err)
		}
	}
	// DescribeConfigs shows the limit in force, with its source.
	described, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := described.On("1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var shown *kadm.Config
	for i := range rc.Configs {
		if rc.Configs[i].Key == "max.connections" {
			shown = &rc.Configs[i]
		}
	}
	if shown == nil || shown.MaybeValue() != "5" || shown.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("max.connections described as %+v", shown)
	}
	tr.progress(t)
	tr.finish(t)
}

// Acceptance point 4: a flood of connection attempts from one address
// (127.0.0.2) past its limit of 10, for 3 s, as fast as the machine
// dials. The node refuses every one at accept; a franz-go client on
// another address (127.0.0.3, counted and under the same limit)
// produces and consumes throughout with every produce succeeding; new
// connections from 127.0.0.1 and 127.0.0.4 are answered during the
// flood; the node's goroutines and heap stay bounded (sampled during
// the flood and after). Nothing here asserts a latency or a rate: the
// rate achieved is logged, and the assertion is that the attempts
// reached the node (every one refused).
func TestConnectionFloodFromOneAddress(t *testing.T) {
	n, adm := startNodeWithTopic(t, "flood")
	alterBrokerDefaults(t, adm, kadm.AlterConfig{Name: "max.connections.per.ip", Value: kadm.StringPtr("10")})
	tr := startTraffic(t, n, "flood", kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}
		return d.DialContext(ctx, network, host)
	}))
	tr.progress(t)
	// The flooding address holds its 10.
	for i := range 10 {
		if err := apiVersions(mustDialKafkaFrom(t, n, "127.0.0.2")); err != nil {
			t.Fatalf("connection %d of 10: %v", i+1, err)
		}
	}

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseGoroutines, baseHeap := runtime.NumGoroutine(), ms.HeapInuse
	const maxMoreGoroutines, maxMoreHeap = 200, 64 << 20
	var (
		peakGoroutines int
		peakHeap       uint64
	)
	sample := func() {
		runtime.ReadMemStats(&ms)
		peakGoroutines = max(peakGoroutines, runtime.NumGoroutine())
		peakHeap = max(peakHeap, ms.HeapInuse)
	}

	const floodFor, workers = 3 * time.Second, 8
	refusedBefore := refusedConns(t, n, "max_connections_per_ip")
	producedBefore, _ := tr.counts()
	var reached, dialErrors atomic.Int64
	var lastDialErr atomic.Value
	floodDone := make(chan struct{})
	var floodWG sync.WaitGroup
	start := time.Now()
	deadline := start.Add(floodFor)
	for range workers {
		floodWG.Add(1)
		go func() {
			defer floodWG.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 2 * time.Second}
			for time.Now().Before(deadline) {
				nc, err := d.Dial("tcp", n.KafkaAddr().String())
				switch {
				case err == nil:
					reached.Add(1)
					nc.Close()
				case errors.Is(err, syscall.ECONNRESET):
					// On loopback the node can accept and reset the
					// connection before connect returns: it was
					// refused like the others.
					reached.Add(1)
				default:
					dialErrors.Add(1)
					lastDialErr.Store(err.Error())
				}
			}
		}()
	}
	go func() { floodWG.Wait(); close(floodDone) }()

	// During the flood: sample the node, and open new connections from
	// other addresses, each of which must be answered.
	var probes int
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	for flooding := true; flooding; {
		select {
		case <-ticker.C: // sample and probe
			sample()
			from := []string{"127.0.0.1", "127.0.0.4"}[probes%2]
			nc, err := dialKafkaFrom(n, from)
			if err == nil {
				err = apiVersions(nc)
				nc.Close()
			}
			if err != nil {
				t.Fatalf("a new connection from %s during the flood: %v", from, err)
			}
			probes++
		case <-floodDone: // the flood is over
			flooding = false
		}
	}
	elapsed := time.Since(start)
	producedDuring, _ := tr.counts()
	sample()

	// Every connection the flood made reached the node and was refused;
	// none was admitted.
	testutil.Eventually(t, 30*time.Second, func() error {
		if got := refusedConns(t, n, "max_connections_per_ip") - refusedBefore; got != float64(reached.Load()) {
			return fmt.Errorf("%v refused of the %d connections made (%d dials failed otherwise, last %v)", got, reached.Load(), dialErrors.Load(), lastDialErr.Load())
		}
		return nil
	})
	rate := float64(reached.Load()) / elapsed.Seconds()
	t.Logf("flood: %d connections from 127.0.0.2 in %v (%.0f/s; %d dials failed otherwise, last %v), all refused; "+
		"%d probes from other addresses answered; the good client produced %d records during it",
		reached.Load(), elapsed.Round(time.Millisecond), rate, dialErrors.Load(), lastDialErr.Load(), probes, producedDuring-producedBefore)
	if reached.Load() < 2000 {
		t.Fatalf("only %d connection attempts reached the node in %v; want thousands", reached.Load(), elapsed)
	}
	tr.progress(t)
	runtime.GC()
	sample()
	runtime.ReadMemStats(&ms)
	t.Logf("goroutines: %d before, peak %d, %d after; heap in use: %.1f MiB before, peak %.1f MiB, %.1f MiB after",
		baseGoroutines, peakGoroutines, runtime.NumGoroutine(),
		float64(baseHeap)/(1<<20), float64(peakHeap)/(1<<20), float64(ms.HeapInuse)/(1<<20))
	if peakGoroutines >= baseGoroutines+maxMoreGoroutines {
		t.Errorf("goroutines peaked at %d, baseline %d: a refused connection costs a goroutine?", peakGoroutines, baseGoroutines)
	}
	if peakHeap >= baseHeap+maxMoreHeap {
		t.Errorf("heap in use peaked at %d bytes, baseline %d", peakHeap, baseHeap)
	}
	// Still working with the flood over, the flooding address included.
	if err := apiVersions(mustDialKafkaFrom(t, n, "127.0.0.4")); err != nil {
		t.Fatal(err)
	}
	tr.finish(t)
}
