package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/vfs"
)

// testConfig is a node on dir with every listener on a free loopback port.
func testConfig(t *testing.T, dir string) Config {
	t.Helper()
	return Config{
		NodeID:           1,
		DataDir:          dir,
		KafkaAddr:        "127.0.0.1:0",
		ControllerAddr:   "127.0.0.1:0",
		HTTPAddr:         "127.0.0.1:0",
		AutoCreateTopics: true,
		Logger:           testLogger(t),
	}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func startNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func newClient(t *testing.T, n *Node, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(n.KafkaAddr().String()),
		kgo.RetryTimeout(10 * time.Second),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

type kv struct{ key, value string }

// consumeAll reads want records from every partition of topic from the
// start.
func consumeAll(t *testing.T, n *Node, topic string, partitions int32, want int) map[int32][]kv {
	t.Helper()
	parts := map[int32]kgo.Offset{}
	for p := range partitions {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl := newClient(t, n, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := map[int32][]kv{}
	count := 0
	for count < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", count, want, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s-%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if int64(len(got[r.Partition])) != r.Offset {
				t.Fatalf("partition %d: record at offset %d, want %d", r.Partition, r.Offset, len(got[r.Partition]))
			}
			got[r.Partition] = append(got[r.Partition], kv{string(r.Key), string(r.Value)})
			count++
		})
	}
	return got
}

func TestProduceConsumeRestart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, testConfig(t, dir))
	testutil.Eventually(t, 10*time.Second, n.Ready)

	const topic, partitions, records = "orders", 3, 300
	adm := kadm.NewClient(newClient(t, n))
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	producer := newClient(t, n, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	var rs []*kgo.Record
	for i := range records {
		rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i%7), Value: fmt.Appendf(nil, "value-%d", i)})
	}
	if err := producer.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("ProduceSync: %v", err)
	}
	want := map[int32][]kv{}
	for _, r := range rs {
		if int64(len(want[r.Partition])) != r.Offset {
			t.Fatalf("acknowledged offset %d in partition %d, want %d", r.Offset, r.Partition, len(want[r.Partition]))
		}
		want[r.Partition] = append(want[r.Partition], kv{string(r.Key), string(r.Value)})
	}
	checkRecords(t, consumeAll(t, n, topic, partitions, records), want)
	clusterID := n.ClusterID()
	if clusterID == "" {
		t.Fatal("no cluster id")
	}
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); err != nil {
		t.Fatalf("no clean-shutdown marker after Close: %v", err)
	}

	props, ok, err := readMetaProperties(vfs.OS(), dir)
	if err != nil || !ok || props.NodeID != 1 || props.ClusterID != clusterID {
		t.Fatalf("meta.properties = %+v, exists %v, err %v; want node 1, cluster %s", props, ok, err, clusterID)
	}

	// The restarted node binds new ports; clients find it there and read
	// every record back from the logs and the metadata log.
	n2 := startNode(t, testConfig(t, dir))
	if n2.ClusterID() != clusterID {
		t.Fatalf("cluster id after restart %q, want %q", n2.ClusterID(), clusterID)
	}
	testutil.Eventually(t, 10*time.Second, n2.Ready)
	checkRecords(t, consumeAll(t, n2, topic, partitions, records), want)
}

func checkRecords(t *testing.T, got, want map[int32][]kv) {
	t.Helper()
	for p, w := range want {
		g := got[p]
		if len(g) != len(w) {
			t.Fatalf("partition %d: %d records, want %d", p, len(g), len(w))
		}
		for i := range w {
			if g[i] != w[i] {
				t.Fatalf("partition %d offset %d: %+v, want %+v", p, i, g[i], w[i])
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("records in %d partitions, want %d", len(got), len(want))
	}
}

func TestReadyzAndHealthz(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	base := "http://" + n.HTTPAddr().String()
	get := func(path string) (int, string, error) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	code, body, err := get("/healthz")
	if err != nil || code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz = %d %q %v, want 200 ok", code, body, err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		code, body, err := get("/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusOK || body != "ready\n" {
			return fmt.Errorf("/readyz = %d %q", code, body)
		}
		return nil
	})
	if code, _, _ := get("/nope"); code != http.StatusNotFound {
		t.Errorf("/nope = %d, want 404", code)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Ready(); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("Ready after Close = %v, want shutting down", err)
	}
	if _, _, err := get("/healthz"); err == nil {
		t.Error("HTTP listener still answers after Close")
	}
	// The handler itself answers 503 with the reason when not ready.
	rec := httptest.NewRecorder()
	n.httpHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Body.String() != "not ready: shutting down\n" {
		t.Errorf("/readyz while closed = %d %q, want 503 with the reason", rec.Code, rec.Body.String())
	}
}

func TestNodeIDMismatchRefused(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, testConfig(t, dir))
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, dir)
	cfg.NodeID = 2
	_, err := Start(context.Background(), cfg)
	if !errors.Is(err, ErrNodeIDMismatch) {
		t.Fatalf("Start as node 2 on node 1's directory: %v, want ErrNodeIDMismatch", err)
	}
	for _, want := range []string{"belongs to node 1", "--node-id 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// The refused start released the directory: node 1 starts again.
	startNode(t, testConfig(t, dir))
}

// Regression: the refused start had already let the replica manager see
// the new cluster's empty image, which deleted every partition log as a
// stray before the mismatch was noticed: the guard lost the data it was
// there to protect. The logs must survive the refusal.
func TestClusterIDMismatchRefused(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, testConfig(t, dir))
	testutil.Eventually(t, 10*time.Second, n.Ready)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := newClient(t, n, kgo.DefaultProduceTopic("keep"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// Losing the metadata log would make the controller bootstrap a new
	// cluster over the old cluster's partition logs.
	if err := os.RemoveAll(filepath.Join(dir, metadataDir)); err != nil {
		t.Fatal(err)
	}
	_, err := Start(ctx, testConfig(t, dir))
	if !errors.Is(err, ErrClusterIDMismatch) {
		t.Fatalf("Start after losing metadata/: %v, want ErrClusterIDMismatch", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep-0", "00000000000000000000.log")); err != nil {
		t.Fatalf("the refused start lost the partition log: %v", err)
	}
}

func TestSecondNodeOnSameDataDirRefused(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, testConfig(t, dir))
	testutil.Eventually(t, 10*time.Second, n.Ready)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Start(ctx, testConfig(t, dir))
	if !errors.Is(err, ErrDataDirInUse) || !strings.Contains(err.Error(), "locked by another fjord node") {
		t.Fatalf("second Start on the same directory: %v, want ErrDataDirInUse", err)
	}
	// The first node is unharmed.
	cl := newClient(t, n, kgo.DefaultProduceTopic("still-works"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("first node after the refused second start: %v", err)
	}
}

func TestStartFailureReleasesEverything(t *testing.T) {
	// An occupied controller port fails the start after the lock, the
	// listeners and the storage manager are open; all must be released.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.ControllerAddr = busy.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Start(ctx, cfg); err == nil || !strings.Contains(err.Error(), "controller-addr") {
		t.Fatalf("Start with a busy controller port: %v, want an error naming controller-addr", err)
	}
	n := startNode(t, testConfig(t, dir))
	testutil.Eventually(t, 10*time.Second, n.Ready)

	cfg = testConfig(t, t.TempDir())
	cfg.HTTPAddr = busy.Addr().String()
	if _, err := Start(ctx, cfg); err == nil || !strings.Contains(err.Error(), "http-addr") {
		t.Fatalf("Start with a busy HTTP port: %v, want an error naming http-addr", err)
	}
}

func TestPprofListener(t *testing.T) {
	httpGet := func(url string) (int, []byte, error) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}

	// Off by default: no listener, and the health listener does not
	// serve the profiles either.
	off := startNode(t, testConfig(t, t.TempDir()))
	if a := off.PprofAddr(); a != nil {
		t.Fatalf("PprofAddr() = %v without PprofAddr set, want nil", a)
	}
	if code, _, err := httpGet("http://" + off.HTTPAddr().String() + "/debug/pprof/"); err != nil || code != http.StatusNotFound {
		t.Errorf("/debug/pprof/ on the health listener = %d %v, want 404", code, err)
	}

	cfg := testConfig(t, t.TempDir())
	cfg.PprofAddr = "127.0.0.1:0"
	n := startNode(t, cfg)
	if n.PprofAddr() == nil {
		t.Fatal("PprofAddr() = nil with PprofAddr set")
	}
	base := "http://" + n.PprofAddr().String()
	code, body, err := httpGet(base + "/debug/pprof/")
	if err != nil || code != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("/debug/pprof/ = %d %v, want 200 listing the profiles:\n%.300s", code, err, body)
	}
	// A CPU profile is gzipped protobuf.
	code, body, err = httpGet(base + "/debug/pprof/profile?seconds=1")
	if err != nil || code != http.StatusOK || len(body) < 2 || body[0] != 0x1f || body[1] != 0x8b {
		t.Fatalf("/debug/pprof/profile = %d %v, %d bytes; want 200 with a gzipped profile", code, err, len(body))
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := httpGet(base + "/debug/pprof/"); err == nil {
		t.Error("pprof listener still answers after Close")
	}
}

func TestInvalidConfigRefusedBeforeTouchingDisk(t *testing.T) {
	base := func(t *testing.T) Config { return testConfig(t, filepath.Join(t.TempDir(), "data")) }
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"negative node id", func(c *Config) { c.NodeID = -1 }, `node-id "-1": allowed: 0 to 2147483647`},
		{"empty data dir", func(c *Config) { c.DataDir = " " }, "data-dir is empty"},
		{"kafka addr without port", func(c *Config) { c.KafkaAddr = "127.0.0.1" }, `kafka-addr "127.0.0.1": want host:port`},
		{"kafka port out of range", func(c *Config) { c.KafkaAddr = "127.0.0.1:70000" }, `kafka-addr "127.0.0.1:70000"`},
		{"controller addr", func(c *Config) { c.ControllerAddr = "nope" }, `controller-addr "nope"`},
		{"http addr", func(c *Config) { c.HTTPAddr = ":http" }, `http-addr ":http"`},
		{"pprof addr", func(c *Config) { c.PprofAddr = "6060" }, `pprof-addr "6060": want host:port (port 0 picks a free one), e.g. 127.0.0.1:6060`},
		{"wildcard without advertised", func(c *Config) { c.KafkaAddr = "0.0.0.0:0" }, "set advertised-kafka-addr"},
		{"empty host without advertised", func(c *Config) { c.KafkaAddr = ":0" }, "set advertised-kafka-addr"},
		{"advertised wildcard", func(c *Config) { c.AdvertisedKafkaAddr = "0.0.0.0:9092" }, "not empty, 0.0.0.0 or ::"},
		{"advertised port 0", func(c *Config) { c.AdvertisedKafkaAddr = "h:0" }, "port must be 1 to 65535"},
		{"advertised no port", func(c *Config) { c.AdvertisedKafkaAddr = "h" }, `advertised-kafka-addr "h"`},
		{"negative partitions", func(c *Config) { c.NumPartitions = -3 }, `num-partitions "-3"`},
		{"negative default replication factor", func(c *Config) { c.DefaultReplicationFactor = -1 }, `default-replication-factor "-1": allowed: 1 to 32767`},
		{"most negative default replication factor", func(c *Config) { c.DefaultReplicationFactor = math.MinInt16 }, `default-replication-factor "-32768": allowed: 1 to 32767`},
		{"negative http body limit", func(c *Config) { c.HTTP.MaxBodyBytes = -1 }, `http-max-body-bytes -1: allowed: 1024 to 134217728 bytes`},
		{"tiny http body limit", func(c *Config) { c.HTTP.MaxBodyBytes = 10 }, `http-max-body-bytes 10: allowed: 1024 to`},
		{"absurd http body limit", func(c *Config) { c.HTTP.MaxBodyBytes = 1 << 40 }, `http-max-body-bytes 1099511627776: allowed: 1024 to 134217728`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base(t)
			tc.mod(&cfg)
			_, err := Start(context.Background(), cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start: %v, want ErrInvalidConfig saying %q", err, tc.want)
			}
			if _, err := os.Stat(cfg.DataDir); !os.IsNotExist(err) && strings.TrimSpace(cfg.DataDir) != "" {
				t.Errorf("data dir created for an invalid config (stat: %v)", err)
			}
		})
	}
}

// TestDefaultReplicationFactor: the node hands default-replication-factor
// to the controller (3 when unset), which caps it at the one broker
// there is, so a single node still creates topics with -1; an explicit
// factor above the brokers is still refused. The controller names the
// default it capped in its log line, which is how the test sees it.
func TestDefaultReplicationFactor(t *testing.T) {
	for _, tc := range []struct {
		set, want int16
	}{{0, DefaultReplicationFactor}, {2, 2}, {math.MaxInt16, math.MaxInt16}} {
		t.Run(strconv.Itoa(int(tc.set)), func(t *testing.T) {
			var log testutil.Buffer
			cfg := testConfig(t, t.TempDir())
			cfg.DefaultReplicationFactor = tc.set
			cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
			n := startNode(t, cfg)
			adm := kadm.NewClient(newClient(t, n))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := adm.CreateTopic(ctx, 1, -1, nil, "defaulted")
			if err == nil {
				err = resp.Err
			}
			if err != nil || resp.ReplicationFactor != 1 {
				t.Fatalf("create with the default: rf %d, %v; want 1 (capped at one broker)", resp.ReplicationFactor, err)
			}
			if want := fmt.Sprintf("topic=defaulted topic_id=%s partitions=1 replication_factor=1 configs=map[] default_replication_factor=%d registered_brokers=1",
				metadata.UUID(resp.ID).Base64(), tc.want); !strings.Contains(log.String(), want) {
				t.Fatalf("log does not say %q:\n%s", want, log.String())
			}
			resp, err = adm.CreateTopic(ctx, 1, 2, nil, "explicit")
			if err == nil {
				err = resp.Err
			}
			if !errors.Is(err, kerr.InvalidReplicationFactor) {
				t.Fatalf("explicit rf 2 on one broker: %v, want INVALID_REPLICATION_FACTOR", err)
			}
		})
	}
}

func TestAdvertisedAddressIsRegistered(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.KafkaAddr = "0.0.0.0:0"
	cfg.AdvertisedKafkaAddr = "127.0.0.1:0"
	if _, err := Start(context.Background(), cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("advertised port 0 accepted: %v", err)
	}
	// Clients bootstrap through the listener and are then told the
	// advertised endpoint, which need not be bound here (a proxy or NAT
	// in front of the node).
	cfg.KafkaAddr = "127.0.0.1:0"
	cfg.AdvertisedKafkaAddr = "fjord-test.invalid:19092"
	n := startNode(t, cfg)
	meta, err := kadm.NewClient(newClient(t, n)).BrokerMetadata(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Brokers) != 1 || meta.Brokers[0].Host != "fjord-test.invalid" || meta.Brokers[0].Port != 19092 {
		t.Fatalf("brokers %+v, want fjord-test.invalid:19092", meta.Brokers)
	}
	if meta.Cluster != n.ClusterID() {
		t.Errorf("metadata cluster id %q, node says %q", meta.Cluster, n.ClusterID())
	}
}

func TestMetaPropertiesParsing(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.OS()
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, metaPropertiesFile), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Kafka's own layout, with a comment and a date line.
	write("#\n#Thu Jan 01 00:00:00 UTC 2026\nnode.id=7\nversion=1\ncluster.id=abc-DEF_1\n")
	p, ok, err := readMetaProperties(fs, dir)
	if err != nil || !ok || p != (metaProperties{NodeID: 7, ClusterID: "abc-DEF_1"}) {
		t.Fatalf("read = %+v %v %v", p, ok, err)
	}
	for _, bad := range []string{"version=1\n", "node.id=x\n", "node.id=-1\n"} {
		write(bad)
		if _, _, err := readMetaProperties(fs, dir); err == nil || !strings.Contains(err.Error(), "meta.properties") {
			t.Errorf("%q: err %v, want one naming the file", bad, err)
		}
	}
	if err := writeMetaProperties(fs, dir, metaProperties{NodeID: 3, ClusterID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if p, ok, err := readMetaProperties(fs, dir); err != nil || !ok || p != (metaProperties{NodeID: 3, ClusterID: "c1"}) {
		t.Fatalf("round trip = %+v %v %v", p, ok, err)
	}
	if _, ok, err := readMetaProperties(fs, t.TempDir()); ok || err != nil {
		t.Fatalf("missing file: exists %v err %v", ok, err)
	}
}
