package bench

import (
	"context"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/tlsconf"
)

// End to end: the runner and the franz-go driver against a real node
// process, with the node's resources read from /proc.

func runKafka(t *testing.T, node *testcluster.Node, w *Workload, flushPolicy string) *Result {
	t.Helper()
	return runKafkaWith(t, node, w, KafkaConfig{FlushPolicy: flushPolicy})
}

// runKafkaWith runs w against node with cfg (its Brokers filled in).
func runKafkaWith(t *testing.T, node *testcluster.Node, w *Workload, cfg KafkaConfig) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg.Brokers = []string{node.Brokers()}
	d, err := NewKafkaDriver(ctx, w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	res, err := Run(ctx, w, d, RunOptions{Nodes: []NodeProcess{{PID: node.Pid()}}})
	if err != nil {
		if res != nil {
			var b strings.Builder
			res.WriteTable(&b)
			t.Logf("result:\n%s", b.String())
		}
		t.Fatalf("run failed: %v", err)
	}
	return res
}

func TestKafkaMaxRate(t *testing.T) {
	node := testcluster.Start(t, testcluster.Options{LogLevel: "warn"})
	w, err := LoadWorkload("max-rate-1p-1kb")
	if err != nil {
		t.Fatal(err)
	}
	w.TestDurationSeconds, w.WarmupSeconds = 1.5, 0.5
	res := runKafka(t, node, w, "interval")
	if !res.Passed || res.Produce.Records == 0 || res.Consume.Records == 0 {
		t.Fatalf("result: passed %v, produce %+v, consume %+v", res.Passed, res.Produce, res.Consume)
	}
	if res.ProduceLatency.Count == 0 || res.EndToEndLatency == nil || res.EndToEndLatency.Count == 0 {
		t.Errorf("latencies missing: %+v %+v", res.ProduceLatency, res.EndToEndLatency)
	}
	s := res.DriverSettings
	if s["topic flush.policy"] != "interval" || s["topic replication.factor"] != "1" || s["acks"] != "all" || s["linger"] != "0s" {
		t.Errorf("settings %v: want the topic's flush.policy and replication factor as the node reports them", s)
	}
	if len(res.Nodes) != 1 {
		t.Fatalf("node stats %+v, want one node's", res.Nodes)
	}
	n := res.Nodes[0]
	if n.Error != "" || n.PID != node.Pid() || n.PeakRSSBytes < 1<<20 || n.CPUSeconds <= 0 || n.CPUWindowSeconds != 1.5 {
		t.Errorf("node stats %+v", n)
	}
}

// A fixed rate with keys over several partitions, producers and
// consumers, and two subscriptions: every record reaches each
// subscription once, at the rate asked.
func TestKafkaFixedRateKeyed(t *testing.T) {
	node := testcluster.Start(t, testcluster.Options{LogLevel: "warn"})
	w := &Workload{
		Name: "keyed", Topics: 1, PartitionsPerTopic: 6, MessageSize: 200, PayloadRandomness: 0.5,
		SubscriptionsPerTopic: 2, ConsumerPerSubscription: 3, ProducersPerTopic: 2,
		ProducerRate: 2000, TestDurationSeconds: 1.5, WarmupSeconds: 0.3, KeyDistributor: KeyRoundRobin,
	}
	res := runKafka(t, node, w, "")
	// The rate is held to the schedule, not to each window: a producer
	// that stalled catches up (no coordinated omission), so a 1.5 s
	// window on a shared 2-core machine can read 10% over or under
	// (CI saw 2,258/s). Within a quarter still tells a limiter that
	// works from one that does not (unlimited, this producer sends tens
	// of thousands a second); precision is the benchmarks' to measure.
	if got := res.Produce.RecordsPerSecond; math.Abs(got-2000) > 500 {
		t.Errorf("produced %.0f records/s, want 2,000 (within a quarter)", got)
	}
	if res.Consume.TotalRecords != 2*res.Produce.TotalRecords {
		t.Errorf("consumed %d, want twice the %d produced", res.Consume.TotalRecords, res.Produce.TotalRecords)
	}
	if s := res.DriverSettings["topic flush.policy"]; s != "ack" {
		t.Errorf("topic flush.policy %q, want the node's default, ack", s)
	}
}

func TestKafkaCatchUp(t *testing.T) {
	node := testcluster.Start(t, testcluster.Options{LogLevel: "warn"})
	w, err := LoadWorkload("catchup-2gb")
	if err != nil {
		t.Fatal(err)
	}
	w.ConsumerBacklogSizeGB = 16.0 / 1024 // 16 MiB
	res := runKafka(t, node, w, "interval")
	if want := int64(16 << 10); res.Produce.TotalRecords != want || res.Consume.Records != want {
		t.Errorf("backlog %d records, consumed %d in the window; want %d", res.Produce.TotalRecords, res.Consume.Records, want)
	}
	if res.EndToEndLatency != nil || res.Consume.MBPerSecond <= 0 {
		t.Errorf("catch-up: end-to-end %+v, consume %+v", res.EndToEndLatency, res.Consume)
	}
}

// The raw producer against a real node: as fast as it goes over several
// partitions and producers, and at a fixed rate, the node takes its
// pre-encoded requests and the run's accounting holds (every
// acknowledged record consumed once, intact).
func TestKafkaRawProducer(t *testing.T) {
	node := testcluster.Start(t, testcluster.Options{LogLevel: "warn"})
	for _, w := range []*Workload{
		{Name: "raw-max", Topics: 1, PartitionsPerTopic: 4, MessageSize: 1024, PayloadRandomness: 1,
			SubscriptionsPerTopic: 1, ConsumerPerSubscription: 2, ProducersPerTopic: 2,
			TestDurationSeconds: 1.5, WarmupSeconds: 0.3, KeyDistributor: NoKey},
		{Name: "raw-rate", Topics: 1, PartitionsPerTopic: 3, MessageSize: 200, PayloadRandomness: 1,
			SubscriptionsPerTopic: 2, ConsumerPerSubscription: 1, ProducersPerTopic: 1,
			ProducerRate: 2000, TestDurationSeconds: 1, KeyDistributor: NoKey},
	} {
		res := runKafkaWith(t, node, w, KafkaConfig{Producer: ProducerRaw})
		subs := int64(w.SubscriptionsPerTopic)
		if !res.Passed || res.Produce.Records == 0 || res.Consume.TotalRecords != subs*res.Produce.TotalRecords {
			t.Errorf("%s: passed %v, produced %d, consumed %d over %d subscriptions", w.Name, res.Passed, res.Produce.TotalRecords, res.Consume.TotalRecords, subs)
		}
		if res.ProduceLatency.Count == 0 || res.EndToEndLatency == nil || res.EndToEndLatency.Count == 0 {
			t.Errorf("%s: latencies missing: %+v %+v", w.Name, res.ProduceLatency, res.EndToEndLatency)
		}
		if s := res.DriverSettings["producer"]; !strings.HasPrefix(s, "raw: pre-encoded Produce v8") {
			t.Errorf("%s: producer setting %q", w.Name, s)
		}
	}
}

func TestKafkaDriverUnreachable(t *testing.T) {
	w, _ := LoadWorkload("max-rate-1p-1kb")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := NewKafkaDriver(ctx, w, KafkaConfig{Brokers: []string{"127.0.0.1:1"}})
	if err == nil || !strings.Contains(err.Error(), "cannot reach a broker at 127.0.0.1:1") {
		t.Errorf("err = %v", err)
	}
	if _, err := NewKafkaDriver(ctx, w, KafkaConfig{Brokers: []string{"127.0.0.1:1"}, FlushPolicy: "always"}); err == nil || !strings.Contains(err.Error(), "allowed: ack, interval") {
		t.Errorf("bad flush policy: %v", err)
	}
	if _, err := NewKafkaDriver(ctx, w, KafkaConfig{Brokers: []string{"127.0.0.1:1"}, Producer: "sarama"}); err == nil || !strings.Contains(err.Error(), `producer "sarama": allowed: franz-go, raw`) {
		t.Errorf("bad producer: %v", err)
	}
	keyed := *w
	keyed.KeyDistributor = KeyRoundRobin
	if _, err := NewKafkaDriver(ctx, &keyed, KafkaConfig{Brokers: []string{"127.0.0.1:1"}, Producer: ProducerRaw}); err == nil || !strings.Contains(err.Error(), "the raw producer sends records without keys") {
		t.Errorf("raw producer with keys: %v", err)
	}
}

// Over SASL_SSL (SCRAM-SHA-512) every client the driver makes, the
// admin, the producers and the consumers, direct and in groups, speaks
// the listener's protocol with KafkaConfig.ClientOpts: the node answers
// each with the SASL_SSL listener's endpoints, so a client without them
// would fail at its first connection, and the run's checks with it.
func TestKafkaSASLSSL(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsconf.NewCA("bench test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(tlsconf.IssueOptions{CommonName: "fjord-node", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	files, err := tlsconf.WriteFiles(dir, "node", certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	node := testcluster.Start(t, testcluster.Options{
		LogLevel:  "warn",
		Listeners: []testcluster.Listener{{Name: "SASL_SSL", Protocol: "SASL_SSL"}},
		// A SASL listener turns allow.everyone.if.no.acl.found off: the
		// PLAINTEXT inter-broker listener's principal (the node's own
		// clients) and the benchmark's user are super users, the
		// benchmark being about the driver's clients, not ACLs.
		Args: []string{"--ssl-cert-file", files.CertFile, "--ssl-key-file", files.KeyFile, "--ssl-ca-file", caFile,
			"--super-users", "User:ANONYMOUS;User:bench",
			"--bootstrap-scram-users", "SCRAM-SHA-512=[name=bench,password=bench-secret]"},
	})
	store, err := tlsconf.Load(tlsconf.Files{CAFile: caFile}, tlsconf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	security := []kgo.Opt{kgo.Dialer(store.DialContext), kgo.SASL(kscram.Auth{User: "bench", Pass: "bench-secret"}.AsSha512Mechanism())}

	w := &Workload{
		Name: "sasl-ssl", Topics: 1, PartitionsPerTopic: 2, MessageSize: 512, PayloadRandomness: 1,
		SubscriptionsPerTopic: 1, ConsumerPerSubscription: 2, ProducersPerTopic: 1,
		ProducerRate: 1000, TestDurationSeconds: 1, KeyDistributor: NoKey,
	}
	for _, groups := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		d, err := NewKafkaDriver(ctx, w, KafkaConfig{Brokers: []string{node.ListenerAddr("SASL_SSL")}, SecurityProtocol: "SASL_SSL", ClientOpts: security})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		res, err := Run(ctx, w, d, RunOptions{Groups: groups})
		d.Close()
		cancel()
		if err != nil {
			t.Fatalf("groups %v: %v", groups, err)
		}
		if !res.Passed || res.Produce.Records == 0 || res.Consume.TotalRecords != res.Produce.TotalRecords {
			t.Errorf("groups %v: passed %v, produced %d, consumed %d", groups, res.Passed, res.Produce.TotalRecords, res.Consume.TotalRecords)
		}
		if s := res.DriverSettings["security.protocol"]; s != "SASL_SSL" {
			t.Errorf("groups %v: security.protocol setting %q", groups, s)
		}
	}

	// The raw producer dials plain TCP: refused before it connects.
	_, err = NewKafkaDriver(context.Background(), w, KafkaConfig{Brokers: []string{node.ListenerAddr("SASL_SSL")}, SecurityProtocol: "SASL_SSL", ClientOpts: security, Producer: ProducerRaw})
	if err == nil || !strings.Contains(err.Error(), "the raw producer speaks PLAINTEXT only") {
		t.Errorf("raw producer over SASL_SSL: %v", err)
	}
}
