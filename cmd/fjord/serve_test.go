package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/sasl"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/testutil"
)

// The serve tests run the real command in a child process: the test
// binary re-executes itself as `fjord` when FJORD_TEST_RUN_MAIN is set.
func TestMain(m *testing.M) {
	if os.Getenv("FJORD_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	code := m.Run()
	closeSharedNode()
	os.Exit(code)
}

func fjordCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "FJORD_TEST_RUN_MAIN=1")
	return cmd
}

// freePorts are serve flags that put every listener on a free loopback
// port.
var freePorts = []string{"--kafka-addr", "127.0.0.1:0", "--controller-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}

// syncBuffer collects a child's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServe runs `fjord serve` and waits for its start line.
func startServe(t *testing.T, env []string, args ...string) (*exec.Cmd, *syncBuffer, chan error) {
	t.Helper()
	cmd := fjordCommand(t, append([]string{"serve"}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	out := &syncBuffer{}
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), "fjord node started") {
				once = true
				close(started)
			}
		}
		done <- cmd.Wait()
	}()
	select {
	case <-started: // the node logged its start line
	case err := <-done: // the child exited first
		t.Fatalf("serve exited before starting: %v\n%s", err, out.String())
	case <-time.After(30 * time.Second): // a start takes well under a second
		t.Fatalf("serve did not start\n%s", out.String())
	}
	return cmd, out, done
}

// logValue returns key's value in the child's start line.
func logValue(t *testing.T, log, key string) string {
	t.Helper()
	m := regexp.MustCompile(`fjord node started.* ` + regexp.QuoteMeta(key) + `=("[^"]*"|\S+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no %s in the start line:\n%s", key, log)
	}
	return strings.Trim(m[1], `"`)
}

func TestServeShutsDownCleanlyOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			args := append([]string{"--data-dir", dir}, freePorts...)
			cmd, out, done := startServe(t, nil, args...)
			// A brand-new data directory is a first start, not a crash.
			if got := logValue(t, out.String(), "start"); got != "new" {
				t.Errorf("first start of a new data directory logged start=%s, want new:\n%s", got, out)
			}
			// The node serves /readyz before it is signalled.
			waitReady(t, "http://"+logValue(t, out.String(), "http_addr"))
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("serve exited with %v\n%s", err, out)
			}
			if !strings.Contains(out.String(), "shutting down") {
				t.Errorf("no shutdown log line:\n%s", out)
			}
			if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); err != nil {
				t.Fatalf("no clean-shutdown marker after %v: %v\n%s", sig, err, out)
			}
			// The next start sees the clean shutdown.
			cmd, out, done = startServe(t, nil, args...)
			if got := logValue(t, out.String(), "start"); got != "clean" {
				t.Errorf("second start logged start=%s, want clean:\n%s", got, out)
			}
			// A node killed outright starts unclean, even with no
			// partition logs yet.
			cmd.Process.Kill()
			<-done
			cmd, out, done = startServe(t, nil, args...)
			if got := logValue(t, out.String(), "start"); got != "unclean" {
				t.Errorf("start after SIGKILL logged start=%s, want unclean:\n%s", got, out)
			}
			cmd.Process.Signal(syscall.SIGTERM)
			if err := <-done; err != nil {
				t.Fatalf("third serve exited with %v\n%s", err, out)
			}
		})
	}
}

func waitReady(t *testing.T, base string) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() error {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return fmt.Errorf("%s/readyz: %w", base, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s/readyz: %w", base, &readyError{resp.StatusCode, string(body)})
		}
		return nil
	})
}

type readyError struct {
	code int
	body string
}

func (e *readyError) Error() string { return http.StatusText(e.code) + ": " + e.body }

func TestServeReadsEnvironment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "from-env")
	cmd := fjordCommand(t, "serve")
	cmd.Env = append(cmd.Env, "FJORD_DATA_DIR="+dir, "FJORD_LOG_LEVEL=verbose")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `FJORD_LOG_LEVEL="verbose": allowed: debug, info, warn, error`) {
		t.Fatalf("bad FJORD_LOG_LEVEL accepted or not named: err=%v\n%s", err, out)
	}

	cmd, log, done := startServe(t, []string{
		"FJORD_DATA_DIR=" + dir, "FJORD_KAFKA_ADDR=127.0.0.1:0",
		"FJORD_CONTROLLER_ADDR=127.0.0.1:0", "FJORD_HTTP_ADDR=127.0.0.1:0",
	})
	if got := logValue(t, log.String(), "data_dir"); got != dir {
		t.Errorf("FJORD_DATA_DIR not used: data_dir=%s", got)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := <-done; err != nil {
		t.Fatalf("serve exited with %v\n%s", err, log)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); err != nil {
		t.Fatalf("data dir from environment not used: %v", err)
	}
}

func TestServeReadsConfigFile(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "fjord.yaml")
	writeFile(t, cfg, "# a node for the test\n"+
		"data-dir: "+data+"\n"+
		"kafka-addr: 127.0.0.1:0\n"+
		"controller-addr: \"127.0.0.1:0\"\n"+
		"http-addr: 127.0.0.1:0\n"+
		"pprof-addr: 127.0.0.1:0\n"+
		"node-id: 7\n"+
		"log-level: debug\n")
	cmd, log, done := startServe(t, nil, "--config", cfg)
	if got := logValue(t, log.String(), "node_id"); got != "7" {
		t.Errorf("node-id from the config file not used: node_id=%s", got)
	}
	if got := logValue(t, log.String(), "data_dir"); got != data {
		t.Errorf("data-dir from the config file not used: data_dir=%s", got)
	}
	if got := logValue(t, log.String(), "pprof_addr"); !strings.HasPrefix(got, "127.0.0.1:") {
		t.Errorf("pprof-addr from the config file not used: pprof_addr=%s", got)
	}
	cmd.Process.Signal(syscall.SIGINT)
	if err := <-done; err != nil {
		t.Fatalf("serve exited with %v\n%s", err, log)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestServePrecedence checks flag > environment > config file > default
// for each kind of flag, without starting a node.
func TestServePrecedence(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "fjord.yaml")
	writeFile(t, cfg, "data-dir: /from/file\nnode-id: 3\nkafka-addr: 10.0.0.1:1\nauto-create-topics: false\nnum-partitions: 4\npprof-addr: 10.0.0.1:6060\nhttp-max-long-polls: 9\nrack: from-file\nreplica-selector: rack\nlog-dir-free-space-refuse: 2%\n")
	t.Setenv("FJORD_NODE_ID", "5")
	t.Setenv("FJORD_PPROF_ADDR", "10.0.0.2:6060")
	t.Setenv("FJORD_KAFKA_ADDR", "10.0.0.2:2")
	var got serveOptions
	cmd := newServeCommandWith(func(_ context.Context, o serveOptions, _ io.Writer) error {
		got = o
		return nil
	})
	cmd.SetArgs([]string{"--config", cfg, "--kafka-addr", "10.0.0.3:3", "--http-idempotency-window-ms", "5000"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want := serveOptions{
		configFile:       cfg,
		dataDir:          "/from/file", // file beats default
		nodeID:           5,            // env beats file
		kafkaAddr:        "10.0.0.3:3", // flag beats env and file
		autoCreateTopics: false,        // file beats default (true)
		numPartitions:    4,
		controllerAddr:   "127.0.0.1:9093", // default
		httpAddr:         "127.0.0.1:8082",
		pprofAddr:        "10.0.0.2:6060", // env beats file
		rack:             "from-file",
		replicaSelector:  "rack", // file beats default (leader)
		logLevel:         "info",
		// Kafka's group.initial.rebalance.delay.ms, by default.
		groupInitialRebalanceDelayMs:        3000,
		replicaLagTimeMaxMs:                 30000,
		brokerHeartbeatIntervalMs:           100,
		brokerSessionTimeoutMs:              750,
		autoLeaderRebalance:                 true,
		txnPartitionVerification:            true,
		transactionMaxTimeoutMs:             900_000,
		logRetentionCheckIntervalMs:         300_000,
		leaderImbalanceCheckIntervalSeconds: 300,
		leaderImbalancePerBrokerPercentage:  10,
		httpIdempotencyWindowMs:             5000, // flag
		httpConsumerIdleTimeoutMs:           300_000,
		httpConsumerSessionTimeoutMs:        10_000,
		httpMaxConcurrent:                   256,
		httpMaxLongPolls:                    9, // file
		httpMaxConsumers:                    100,
		httpMaxBodyBytes:                    16 << 20,
		defaultReplicationFactor:            3,     // default
		logDirFreeSpaceWarn:                 "10%", // default
		logDirFreeSpaceRefuse:               "2%",  // file
		tls:                                 node.TLSConfig{ClientAuth: "none"},
		sasl:                                node.SASLConfig{InterBrokerMechanism: "SCRAM-SHA-512", OAuth: sasl.OAuthConfig{SubClaimName: "sub"}},
		controllerSecurityProtocol:          "PLAINTEXT", // default
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("options\n got %+v\nwant %+v", got, want)
	}

	// FJORD_CONFIG names the file when --config is not given.
	t.Setenv("FJORD_CONFIG", cfg)
	cmd = newServeCommandWith(func(_ context.Context, o serveOptions, _ io.Writer) error {
		got = o
		return nil
	})
	cmd.SetArgs([]string{"--auto-create-topics"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.pprofAddr != "10.0.0.2:6060" {
		t.Errorf("FJORD_PPROF_ADDR not used: pprof-addr %q", got.pprofAddr)
	}
	if got.dataDir != "/from/file" || !got.autoCreateTopics {
		t.Fatalf("with FJORD_CONFIG: %+v; want data dir from the file and auto-create from the flag", got)
	}
}

// TestServeDefaultReplicationFactor: the flag's default is 3, and the
// flag, FJORD_DEFAULT_REPLICATION_FACTOR and the config file's key set it
// in that order of precedence.
func TestServeDefaultReplicationFactor(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "fjord.yaml")
	writeFile(t, cfg, "default-replication-factor: 2\n")
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want int16
	}{
		{"default", nil, "", 3},
		{"file", []string{"--config", cfg}, "", 2},
		{"env beats file", []string{"--config", cfg}, "5", 5},
		{"flag beats env", []string{"--config", cfg, "--default-replication-factor", "1"}, "5", 1},
		{"largest", []string{"--default-replication-factor", "32767"}, "", 32767},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("FJORD_DEFAULT_REPLICATION_FACTOR", tc.env)
			}
			var got serveOptions
			cmd := newServeCommandWith(func(_ context.Context, o serveOptions, _ io.Writer) error {
				got = o
				return nil
			})
			cmd.SetArgs(tc.args)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if got.defaultReplicationFactor != tc.want {
				t.Fatalf("default-replication-factor %d, want %d", got.defaultReplicationFactor, tc.want)
			}
		})
	}
}

func TestServeRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	writeFile(t, file, "x")
	cfg := func(name, content string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, content)
		return p
	}
	unknownKey := cfg("unknown.yaml", "kafka-addr: 127.0.0.1:0\nlistener: PLAINTEXT://:9092\n")
	badYAML := cfg("bad.yaml", "kafka-addr: [127.0.0.1:0\n")
	badValue := cfg("value.yaml", "num-partitions: many\n")
	listValue := cfg("list.yaml", "data-dir:\n  - a\n  - b\n")
	notMap := cfg("notmap.yaml", "- kafka-addr\n")
	emptyFile := cfg("empty", "")
	badVoters := cfg("voters.yaml", "controller-quorum-voters: 1@0.0.0.0:9093\n")
	badRack := cfg("rack.yaml", "rack: \" r1\"\n")
	badSelector := cfg("selector.yaml", "replica-selector: RackAwareReplicaSelector\n")
	hugeRF := cfg("rf.yaml", "default-replication-factor: 99999999999999999999999\n")
	listRF := cfg("rflist.yaml", "default-replication-factor: [3]\n")
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"unknown flag", []string{"serve", "--no-such-flag"}, nil, "unknown flag"},
		{"bad log level", []string{"serve", "--log-level", "loud"}, nil, `invalid argument "loud" for "--log-level" flag: allowed: debug, info, warn, error`},
		{"bad node id", []string{"serve", "--node-id", "x"}, nil, `"--node-id" flag: allowed: an integer from 0 to 2147483647`},
		{"negative node id", []string{"serve", "--node-id", "-1"}, nil, `"--node-id" flag: allowed: an integer from 0`},
		{"zero partitions", []string{"serve", "--num-partitions", "0"}, nil, `"--num-partitions" flag: allowed: an integer from 1`},
		{"negative rebalance delay", []string{"serve", "--group-initial-rebalance-delay-ms", "-1"}, nil, `"--group-initial-rebalance-delay-ms" flag: allowed: an integer from 0 to 300000`},
		{"rebalance delay too long", []string{"serve", "--group-initial-rebalance-delay-ms", "300001"}, nil, `allowed: an integer from 0 to 300000`},
		{"rebalance delay not a number", []string{"serve", "--group-initial-rebalance-delay-ms", "3s"}, nil, `allowed: an integer from 0 to 300000`},
		{"replica lag too short", []string{"serve", "--replica-lag-time-max-ms", "999"}, nil, `"--replica-lag-time-max-ms" flag: allowed: an integer from 1000 to 3600000`},
		{"replica lag too long", []string{"serve", "--replica-lag-time-max-ms", "3600001"}, nil, `allowed: an integer from 1000 to 3600000`},
		{"replica lag not a number", []string{"serve", "--replica-lag-time-max-ms", "10s"}, nil, `allowed: an integer from 1000 to 3600000`},
		{"heartbeat too often", []string{"serve", "--broker-heartbeat-interval-ms", "9"}, nil, `"--broker-heartbeat-interval-ms" flag: allowed: an integer from 10 to 60000`},
		{"heartbeat not a number", []string{"serve", "--broker-heartbeat-interval-ms", "1e3"}, nil, `allowed: an integer from 10 to 60000`},
		{"session too short", []string{"serve", "--broker-session-timeout-ms", "99"}, nil, `"--broker-session-timeout-ms" flag: allowed: an integer from 100 to 600000`},
		{"imbalance check interval 0", []string{"serve", "--leader-imbalance-check-interval-seconds", "0"}, nil, `"--leader-imbalance-check-interval-seconds" flag: allowed: an integer from 1 to 86400`},
		{"imbalance percentage over 100", []string{"serve", "--leader-imbalance-per-broker-percentage", "101"}, nil, `allowed: an integer from 1 to 100`},
		{"rebalance not a bool", []string{"serve", "--auto-leader-rebalance-enable=maybe"}, nil, `auto-leader-rebalance-enable`},
		{"unsynced-writes-in-memory not a bool", []string{"serve", "--unsynced-writes-in-memory=sometimes"}, nil, `unsynced-writes-in-memory`},
		{"transaction max timeout too short", []string{"serve", "--transaction-max-timeout-ms", "999"}, nil, `"--transaction-max-timeout-ms" flag: allowed: an integer from 1000 to 86400000`},
		{"transaction max timeout too long", []string{"serve", "--transaction-max-timeout-ms", "86400001"}, nil, `allowed: an integer from 1000 to 86400000`},
		{"transaction max timeout not a number", []string{"serve", "--transaction-max-timeout-ms", "15m"}, nil, `allowed: an integer from 1000 to 86400000`},
		{"retention check interval zero", []string{"serve", "--log-retention-check-interval-ms", "0"}, nil, `"--log-retention-check-interval-ms" flag: allowed: an integer from 100 to 86400000`},
		{"retention check interval negative", []string{"serve", "--log-retention-check-interval-ms", "-5"}, nil, `allowed: an integer from 100 to 86400000`},
		{"retention check interval not a number", []string{"serve", "--log-retention-check-interval-ms", "5m"}, nil, `allowed: an integer from 100 to 86400000`},
		{"transaction-partition-verification-enable not a bool", []string{"serve", "--transaction-partition-verification-enable=maybe"}, nil, `transaction-partition-verification-enable`},
		{"controller-only", []string{"serve", "--process-roles", "controller"}, nil, `"--process-roles" flag: a controller-only node is not supported`},
		{"a role twice", []string{"serve", "--process-roles", "broker,broker"}, nil, `role "broker" given twice`},
		{"an unknown role", []string{"serve", "--process-roles", "broker,brokr"}, nil, `unknown role "brokr" (allowed: broker, controller`},
		{"no role", []string{"serve", "--process-roles", ""}, nil, `unknown role ""`},
		{"broker-only alone", []string{"serve", "--process-roles", "broker"}, nil, `a broker-only node follows a controller quorum, so it needs controller-quorum-voters`},
		{"broker-only with a voter's id", []string{"serve", "--process-roles", "broker", "--node-id", "1", "--controller-quorum-voters", "1@127.0.0.1:1,2@127.0.0.1:2"}, nil,
			`node-id 1 is one of the controller-quorum-voters (1, 2); a broker-only node needs an id of its own`},
		{"broker-only on port 0", []string{"serve", "--process-roles", "broker", "--node-id", "4", "--controller-quorum-voters", "1@127.0.0.1:1", "--controller-addr", "127.0.0.1:0"}, nil,
			`a broker-only node is sent the metadata log there, so the port must not be 0`},
		{"session overflows", []string{"serve", "--broker-session-timeout-ms", "99999999999"}, nil, `allowed: an integer from 100 to 600000`},
		{"session under three heartbeats", []string{"serve", "--broker-heartbeat-interval-ms", "500", "--broker-session-timeout-ms", "1499"}, nil, `broker-session-timeout-ms 1499 is less than three broker-heartbeat-interval-ms (500)`},
		{"idempotency window too short", []string{"serve", "--http-idempotency-window-ms", "999"}, nil, `"--http-idempotency-window-ms" flag: allowed: an integer from 1000 to 604800000`},
		{"idempotency window too long", []string{"serve", "--http-idempotency-window-ms", "604800001"}, nil, `allowed: an integer from 1000 to 604800000`},
		{"idempotency window overflows", []string{"serve", "--http-idempotency-window-ms", "99999999999999999999"}, nil, `allowed: an integer from 1000 to 604800000`},
		{"idle timeout in seconds", []string{"serve", "--http-consumer-idle-timeout-ms", "5m"}, nil, `"--http-consumer-idle-timeout-ms" flag: allowed: an integer from 1000 to 86400000`},
		{"session under the group minimum", []string{"serve", "--http-consumer-session-timeout-ms", "5999"}, nil, `"--http-consumer-session-timeout-ms" flag: allowed: an integer from 6000 to 1800000`},
		{"session over the group maximum", []string{"serve", "--http-consumer-session-timeout-ms", "1800001"}, nil, `allowed: an integer from 6000 to 1800000`},
		{"session in seconds in env", []string{"serve"}, []string{"FJORD_HTTP_CONSUMER_SESSION_TIMEOUT_MS=10s"}, `FJORD_HTTP_CONSUMER_SESSION_TIMEOUT_MS="10s": allowed: an integer from 6000 to 1800000`},
		{"no concurrent requests", []string{"serve", "--http-max-concurrent", "0"}, nil, `"--http-max-concurrent" flag: allowed: an integer from 1 to 65536`},
		{"negative long-polls", []string{"serve", "--http-max-long-polls", "-5"}, nil, `"--http-max-long-polls" flag: allowed: an integer from 1 to 65536`},
		{"no body", []string{"serve", "--http-max-body-bytes", "0"}, nil, `"--http-max-body-bytes" flag: allowed: an integer from 1024 to 134217728`},
		{"negative body", []string{"serve", "--http-max-body-bytes", "-1"}, nil, `"--http-max-body-bytes" flag: allowed: an integer from 1024 to 134217728`},
		{"absurd body", []string{"serve", "--http-max-body-bytes", "1099511627776"}, nil, `"--http-max-body-bytes" flag: allowed: an integer from 1024 to 134217728`},
		{"too many consumers in env", []string{"serve"}, []string{"FJORD_HTTP_MAX_CONSUMERS=70000"}, `FJORD_HTTP_MAX_CONSUMERS="70000": allowed: an integer from 1 to 65536`},
		{"zero replication factor", []string{"serve", "--default-replication-factor", "0"}, nil, `"--default-replication-factor" flag: allowed: an integer from 1 to 32767`},
		{"negative replication factor", []string{"serve", "--default-replication-factor", "-3"}, nil, `"--default-replication-factor" flag: allowed: an integer from 1 to 32767`},
		{"replication factor above int16", []string{"serve", "--default-replication-factor", "32768"}, nil, `"--default-replication-factor" flag: allowed: an integer from 1 to 32767`},
		{"replication factor not a number", []string{"serve", "--default-replication-factor", "three"}, nil, `"--default-replication-factor" flag: allowed: an integer from 1 to 32767`},
		{"replication factor with a fraction", []string{"serve", "--default-replication-factor=2.5"}, nil, `"--default-replication-factor" flag: allowed: an integer from 1 to 32767`},
		{"replication factor in hex", []string{"serve", "--default-replication-factor", "0x3"}, nil, `"--default-replication-factor" flag: allowed: an integer from 1 to 32767`},
		{"empty replication factor", []string{"serve", "--default-replication-factor="}, nil, `"--default-replication-factor" flag: allowed: an integer from 1 to 32767`},
		{"replication factor zero in env", []string{"serve"}, []string{"FJORD_DEFAULT_REPLICATION_FACTOR=0"}, `FJORD_DEFAULT_REPLICATION_FACTOR="0": allowed: an integer from 1 to 32767`},
		{"replication factor with garbage in env", []string{"serve"}, []string{"FJORD_DEFAULT_REPLICATION_FACTOR=3; rm -rf /"}, `FJORD_DEFAULT_REPLICATION_FACTOR="3; rm -rf /": allowed: an integer from 1 to 32767`},
		{"replication factor overflows in file", []string{"serve", "--config", hugeRF}, nil, `default-replication-factor "99999999999999999999999": allowed: an integer from 1 to 32767`},
		{"replication factor list in file", []string{"serve", "--config", listRF}, nil, `key "default-replication-factor" on line 1: want a single value`},
		{"bad bool", []string{"serve", "--auto-create-topics=maybe"}, nil, `"--auto-create-topics" flag: allowed: true or false`},
		{"protect metrics not a bool", []string{"serve", "--http-protect-metrics-and-health=open"}, nil, `"--http-protect-metrics-and-health" flag: allowed: true or false`},
		{"bad env value", []string{"serve"}, []string{"FJORD_NUM_PARTITIONS=-2"}, `FJORD_NUM_PARTITIONS="-2": allowed: an integer from 1`},
		{"empty data dir", []string{"serve", "--data-dir", ""}, nil, "data-dir is empty"},
		{"data dir is a file", append([]string{"serve", "--data-dir", file}, freePorts...), nil, "opening data directory"},
		{"bad kafka addr", []string{"serve", "--kafka-addr", "9092"}, nil, `kafka-addr "9092": want host:port`},
		{"wildcard without advertised", []string{"serve", "--kafka-addr", "0.0.0.0:9092"}, nil, "set advertised-kafka-addr"},
		{"bad pprof addr", []string{"serve", "--pprof-addr", "6060"}, nil, `pprof-addr "6060": want host:port (port 0 picks a free one), e.g. 127.0.0.1:6060`},
		{"bad pprof addr in env", []string{"serve"}, []string{"FJORD_PPROF_ADDR=localhost"}, `pprof-addr "localhost": want host:port`},
		{"config unknown key", []string{"serve", "--config", unknownKey}, nil, `unknown key "listener" on line 2 (allowed: advertised-kafka-addr, advertised-listeners, allow-everyone-if-no-acl-found, audit-log, audit-log-max-bytes, auto-create-topics,`},
		{"config bad yaml", []string{"serve", "--config", badYAML}, nil, "is not valid YAML"},
		{"config bad value", []string{"serve", "--config", badValue}, nil, `num-partitions "many": allowed: an integer from 1`},
		{"config list value", []string{"serve", "--config", listValue}, nil, `key "data-dir" on line 1: want a single value`},
		{"config not a map", []string{"serve", "--config", notMap}, nil, "want a map of flag names to values"},
		{"config missing", []string{"serve", "--config", filepath.Join(dir, "nope.yaml")}, nil, "no such file"},
		{"voter without port", []string{"serve", "--controller-quorum-voters", "1@a"}, nil,
			`invalid argument "1@a" for "--controller-quorum-voters" flag: entry "1@a": want host:port after the @`},
		{"voters empty", []string{"serve", "--controller-quorum-voters", ""}, nil, `"--controller-quorum-voters" flag: empty: allowed: id@host:port entries`},
		{"voters with a space", []string{"serve", "--controller-quorum-voters", "1@a:1, 2@b:2"}, nil, `entry " 2@b:2" contains white space`},
		{"voter id not a number", []string{"serve", "--controller-quorum-voters", "x@a:1"}, nil, `entry "x@a:1": id "x" is not a node id (allowed: 0 to 2147483647)`},
		{"voter port out of range", []string{"serve", "--controller-quorum-voters", "1@a:65536"}, nil, `entry "1@a:65536": port "65536": allowed: 1 to 65535`},
		{"voter id twice", []string{"serve", "--controller-quorum-voters", "1@a:1,1@b:2"}, nil, `node id 1 is given twice ("1@a:1" and "1@b:2")`},
		{"voter address twice", []string{"serve", "--controller-quorum-voters", "1@a:1,2@a:1"}, nil, `address a:1 is given twice`},
		{"too many voters", []string{"serve", "--controller-quorum-voters", strings.Repeat("1@a:1,", 64) + "1@a:1"}, nil, "65 entries: allowed: at most 64 voters"},
		{"empty voter entry in env", []string{"serve"}, []string{"FJORD_CONTROLLER_QUORUM_VOTERS=1@a:1,,2@b:2"},
			`FJORD_CONTROLLER_QUORUM_VOTERS="1@a:1,,2@b:2": entry 2 of 3 is empty`},
		{"voters in config file", []string{"serve", "--config", badVoters}, nil, `controller-quorum-voters "1@0.0.0.0:9093": entry "1@0.0.0.0:9093": 0.0.0.0 is not an address`},
		{"node not a voter", []string{"serve", "--node-id", "4", "--controller-quorum-voters", "1@127.0.0.1:19093,2@127.0.0.1:29093,3@127.0.0.1:39093"}, nil,
			"node-id 4 is not one of the controller-quorum-voters (1, 2, 3)"},
		{"node not a voter, from env", []string{"serve", "--controller-quorum-voters", "2@127.0.0.1:29093"}, []string{"FJORD_NODE_ID=7"},
			"node-id 7 is not one of the controller-quorum-voters (2)"},
		{"rack with an escape", []string{"serve", "--rack", "r1\x1b[2J"}, nil, `rack "r1\x1b[2J" contains U+001B`},
		{"rack too long", []string{"serve", "--rack", strings.Repeat("r", 256)}, nil, "rack is 256 bytes long (allowed: at most 255)"},
		{"rack with a newline in env", []string{"serve"}, []string{"FJORD_RACK=r1\nr2"}, `rack "r1\nr2" contains U+000A`},
		{"rack with spaces in file", []string{"serve", "--config", badRack}, nil, `rack " r1" starts or ends with a space`},
		{"bad replica selector", []string{"serve", "--replica-selector", "closest"}, nil, `invalid argument "closest" for "--replica-selector" flag: allowed: leader, rack`},
		{"empty replica selector", []string{"serve", "--replica-selector="}, nil, `"--replica-selector" flag: allowed: leader, rack`},
		{"replica selector in other case", []string{"serve", "--replica-selector", "Rack"}, nil, `"--replica-selector" flag: allowed: leader, rack`},
		{"replica selector class name in env", []string{"serve"}, []string{"FJORD_REPLICA_SELECTOR=org.apache.kafka.common.replica.RackAwareReplicaSelector"},
			`FJORD_REPLICA_SELECTOR="org.apache.kafka.common.replica.RackAwareReplicaSelector": allowed: leader, rack`},
		{"replica selector in file", []string{"serve", "--config", badSelector}, nil, `replica-selector "RackAwareReplicaSelector": allowed: leader, rack`},
		{"free space over 100%", []string{"serve", "--log-dir-free-space-refuse", "150%"}, nil,
			`invalid argument "150%" for "--log-dir-free-space-refuse" flag: "150%": want a percentage of the file system from 0% to below 100%`},
		{"free space negative in env", []string{"serve"}, []string{"FJORD_LOG_DIR_FREE_SPACE_WARN=-1"}, `"-1": want a whole number of bytes from 0 to 1 EiB`},
		{"free space without a number", []string{"serve", "--log-dir-free-space-warn", "GiB"}, nil, `"GiB": want a whole number of bytes`},
		{"free space above the disk", []string{"serve", "--data-dir", t.TempDir(), "--kafka-addr", "127.0.0.1:0", "--controller-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
			"--log-dir-free-space-refuse", "1000000TiB"}, nil, "log-dir-free-space-refuse 1099511627776000000 is not below the size of the file system holding the data directory"},
		{"listeners and kafka-addr", []string{"serve", "--listeners", "PLAINTEXT://127.0.0.1:0", "--kafka-addr", "127.0.0.1:1"}, nil, "--kafka-addr and --listeners both set"},
		{"advertised listeners alone", []string{"serve", "--advertised-listeners", "PLAINTEXT://h:1"}, nil, "--advertised-listeners: give --listeners too"},
		{"listener without a name", []string{"serve", "--listeners", "127.0.0.1:9092"}, nil, `listeners entry "127.0.0.1:9092": want NAME://host:port`},
		{"listener with a bad port", []string{"serve", "--listeners", "PLAINTEXT://127.0.0.1:99999"}, nil, "port 0..65535"},
		{"listener without a protocol", []string{"serve", "--listeners", "CLIENT://127.0.0.1:0"}, nil, "listener CLIENT has no security protocol"},
		{"listener protocol unknown in env", []string{"serve", "--listeners", "CLIENT://127.0.0.1:0"}, []string{"FJORD_LISTENER_SECURITY_PROTOCOL_MAP=CLIENT:KERBEROS"}, `unknown security protocol "KERBEROS"`},
		{"inter-broker listener unknown", []string{"serve", "--listeners", "PLAINTEXT://127.0.0.1:0", "--inter-broker-listener-name", "SSL"}, nil, "inter-broker-listener-name SSL is not one of the listeners"},
		{"SSL without a certificate", []string{"serve", "--data-dir", t.TempDir(), "--listeners", "SSL://127.0.0.1:0"}, nil, "ssl-cert-file and ssl-key-file are needed"},
		{"certificate without TLS", []string{"serve", "--data-dir", t.TempDir(), "--ssl-cert-file", file, "--ssl-key-file", file}, nil, "no listener serves TLS"},
		{"controller SSL without a CA", []string{"serve", "--data-dir", t.TempDir(), "--controller-security-protocol", "SSL", "--ssl-cert-file", file, "--ssl-key-file", file, "--super-users", "User:CN=node-1"}, nil,
			"controller-security-protocol SSL: the other nodes' certificates are verified against ssl-ca-file, which is not set"},
		{"controller protocol unknown", []string{"serve", "--controller-security-protocol", "SASL_SSL"}, nil,
			`invalid argument "SASL_SSL" for "--controller-security-protocol" flag: allowed: PLAINTEXT, SSL`},
		{"client auth not known", []string{"serve", "--ssl-client-auth", "maybe"}, nil, `invalid argument "maybe" for "--ssl-client-auth" flag: allowed: none, requested, required`},
		{"client auth without a CA", []string{"serve", "--data-dir", t.TempDir(), "--listeners", "SSL://127.0.0.1:0", "--ssl-cert-file", file, "--ssl-key-file", file, "--ssl-client-auth", "required"}, nil,
			"ssl-client-auth required: client certificates are verified against ssl-ca-file, which is not set"},
		{"certificate not PEM", append([]string{"serve", "--data-dir", t.TempDir(), "--listeners", "SSL://127.0.0.1:0", "--ssl-cert-file", file, "--ssl-key-file", file}, "--controller-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"), nil, "TLS files:"},
		{"mapping rule malformed", []string{"serve", "--ssl-principal-mapping-rules", "RULE:^CN=(.*$"}, nil, "ssl-principal-mapping-rules"},
		{"SASL inter-broker listener without credentials", []string{"serve", "--data-dir", t.TempDir(), "--listeners", "SASL_PLAINTEXT://127.0.0.1:0"}, nil,
			"the inter-broker listener SASL_PLAINTEXT is SASL: give inter-broker-sasl-username and inter-broker-sasl-password-file"},
		{"inter-broker password file missing", []string{"serve", "--inter-broker-sasl-password-file", "/nonexistent/pw"}, nil, "--inter-broker-sasl-password-file: open /nonexistent/pw"},
		{"inter-broker password file empty", []string{"serve", "--inter-broker-sasl-password-file", emptyFile}, nil, "empty password"},
		{"bootstrap users malformed", []string{"serve", "--bootstrap-scram-users", "SCRAM-SHA-512=[name=a,password=hunter2"}, nil, "want SCRAM-SHA-512=[name=NAME,password=PASSWORD]"},
		{"unknown SASL mechanism", []string{"serve", "--data-dir", t.TempDir(), "--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--sasl-enabled-mechanisms", "GSSAPI"}, nil, `"GSSAPI" is not one of`},
		{"OAUTHBEARER without a JWKS", []string{"serve", "--data-dir", t.TempDir(), "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "--sasl-enabled-mechanisms", "OAUTHBEARER"}, nil, "give sasl-oauthbearer-jwks-file"},
		{"negative reauth", []string{"serve", "--connections-max-reauth-ms", "-1"}, nil, `"--connections-max-reauth-ms" flag: allowed: an integer from 0`},
		{"super user without a type", []string{"serve", "--super-users", "admin"}, nil, `--super-users: acl: super.users: "admin" is not Type:Name`},
		{"super user without a type in env", []string{"serve"}, []string{"FJORD_SUPER_USERS=User:admin;broker"}, `"broker" is not Type:Name`},
		{"super user too long", []string{"serve", "--data-dir", t.TempDir(), "--super-users", "User:" + strings.Repeat("x", 5000)}, nil, "super-users: a principal of 5005 bytes (at most 4096)"},
		{"allow everyone not a boolean", []string{"serve", "--allow-everyone-if-no-acl-found", "yes"}, nil, `--allow-everyone-if-no-acl-found "yes": want true or false`},
		{"audit log in a missing directory", append([]string{"serve", "--data-dir", t.TempDir(), "--audit-log", filepath.Join(dir, "no-such-dir", "audit.log")}, freePorts...), nil,
			"audit-log: open " + filepath.Join(dir, "no-such-dir", "audit.log") + ": no such file or directory (its directory must exist"},
		{"audit log is a directory", append([]string{"serve", "--data-dir", t.TempDir(), "--audit-log", dir}, freePorts...), nil, dir + " is not a regular file"},
		{"audit log size too small", []string{"serve", "--audit-log", filepath.Join(dir, "audit.log"), "--audit-log-max-bytes", "1000"}, nil,
			`"--audit-log-max-bytes" flag: allowed: an integer from 65536 to 1099511627776`},
		{"audit log size not a number", []string{"serve", "--audit-log-max-bytes", "100MiB"}, nil, `"--audit-log-max-bytes" flag: allowed: an integer from 65536`},
		{"audit log size negative in file", []string{"serve", "--config", cfg("audit.yaml", "audit-log-max-bytes: -1\n")}, nil, `audit-log-max-bytes "-1": allowed: an integer from 65536`},
		{"audit log size without a log", []string{"serve"}, []string{"FJORD_AUDIT_LOG_MAX_BYTES=1048576"}, "--audit-log-max-bytes: give --audit-log too"},
		{"extra argument", []string{"serve", "extra"}, nil, "unknown command"},
		{"unknown command", []string{"bogus"}, nil, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := fjordCommand(t, tc.args...)
			cmd.Env = append(cmd.Env, tc.env...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("accepted: %s", out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("error does not say %q:\n%s", tc.want, out)
			}
			if n := strings.Count(strings.TrimSpace(string(out)), "\n"); n > 3 {
				t.Errorf("error is %d lines, want a short message:\n%s", n+1, out)
			}
		})
	}
}

func TestServeSecondSignalExitsAtOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cmd, out, done := startServe(t, nil, append([]string{"--data-dir", dir}, freePorts...)...)
	// Two different signals, back to back: the same one twice may be
	// merged into one by the kernel before the process handles it. The
	// second arrives while the clean shutdown runs (it fsyncs, so it
	// takes far longer than handing over a queued signal).
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := <-done
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("serve exited with %v after two signals, want exit status 1\n%s", err, out)
	}
	if !strings.Contains(out.String(), "second signal: exiting without a clean shutdown") {
		t.Errorf("no log line for the second signal:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); err == nil {
		t.Errorf("clean-shutdown marker written although the shutdown was cut short")
	}
}

// The flag's 0 is no delay, which node spells as a negative duration
// (its zero is Kafka's default).
func TestGroupInitialRebalanceDelay(t *testing.T) {
	for ms, want := range map[int32]time.Duration{0: -1, 1: time.Millisecond, 3000: 3 * time.Second} {
		if got := groupInitialRebalanceDelay(ms); got != want {
			t.Errorf("%d ms: %v, want %v", ms, got, want)
		}
	}
}

// serveOptionsFrom runs the serve command's flag handling on args and
// returns the options it would start a node with.
func serveOptionsFrom(t *testing.T, args ...string) (serveOptions, error) {
	t.Helper()
	var got serveOptions
	cmd := newServeCommandWith(func(_ context.Context, o serveOptions, _ io.Writer) error {
		got = o
		return nil
	})
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	return got, err
}

// --controller-quorum-voters from each source, and the controller-addr
// it implies: this node's entry, unless controller-addr was given in any
// source.
func TestServeControllerQuorumVoters(t *testing.T) {
	const list = "1@10.0.0.1:9093,2@10.0.0.2:9094,3@10.0.0.3:9095"
	voters := []node.Voter{{NodeID: 1, Addr: "10.0.0.1:9093"}, {NodeID: 2, Addr: "10.0.0.2:9094"}, {NodeID: 3, Addr: "10.0.0.3:9095"}}
	dir := t.TempDir()
	votersFile := filepath.Join(dir, "voters.yaml")
	writeFile(t, votersFile, "controller-quorum-voters: "+list+"\nnode-id: 3\n")
	bothFile := filepath.Join(dir, "both.yaml")
	writeFile(t, bothFile, "controller-quorum-voters: "+list+"\ncontroller-addr: 127.0.0.1:7000\n")
	for _, tc := range []struct {
		name           string
		args, env      []string
		controllerAddr string
		voters         []node.Voter
	}{
		{"none", nil, nil, node.DefaultControllerAddr, nil},
		{"flag", []string{"--controller-quorum-voters", list}, nil, "10.0.0.1:9093", voters},
		{"flag, node 2", []string{"--node-id", "2", "--controller-quorum-voters", list}, nil, "10.0.0.2:9094", voters},
		{"node id from env", []string{"--controller-quorum-voters", list}, []string{"FJORD_NODE_ID=3"}, "10.0.0.3:9095", voters},
		{"env", nil, []string{"FJORD_CONTROLLER_QUORUM_VOTERS=" + list}, "10.0.0.1:9093", voters},
		{"file", []string{"--config", votersFile}, nil, "10.0.0.3:9095", voters},
		{"flag beats env", []string{"--controller-quorum-voters", "1@h:1"}, []string{"FJORD_CONTROLLER_QUORUM_VOTERS=" + list},
			"h:1", []node.Voter{{NodeID: 1, Addr: "h:1"}}},
		{"explicit controller-addr flag", []string{"--controller-quorum-voters", list, "--controller-addr", "0.0.0.0:9093"}, nil, "0.0.0.0:9093", voters},
		{"explicit controller-addr flag at its default", []string{"--controller-quorum-voters", list, "--controller-addr", node.DefaultControllerAddr}, nil,
			node.DefaultControllerAddr, voters},
		{"explicit controller-addr in env", []string{"--controller-quorum-voters", list}, []string{"FJORD_CONTROLLER_ADDR=127.0.0.1:7001"}, "127.0.0.1:7001", voters},
		{"explicit controller-addr in file", []string{"--config", bothFile}, nil, "127.0.0.1:7000", voters},
		// Left for node.Start to refuse, naming the ids.
		{"not a voter", []string{"--node-id", "9", "--controller-quorum-voters", list}, nil, node.DefaultControllerAddr, voters},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, kv := range tc.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			got, err := serveOptionsFrom(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got.controllerAddr != tc.controllerAddr || !reflect.DeepEqual(got.voters, tc.voters) {
				t.Fatalf("controller-addr %q, voters %v; want %q, %v", got.controllerAddr, got.voters, tc.controllerAddr, tc.voters)
			}
		})
	}
}

// Each source names itself and the setting when the list is refused,
// and quotes at most the start of a hostile value.
func TestServeControllerQuorumVotersRefused(t *testing.T) {
	huge := "1@" + strings.Repeat("h", 100_000) + ":1"
	file := filepath.Join(t.TempDir(), "fjord.yaml")
	writeFile(t, file, "controller-quorum-voters: "+huge+"\n")
	t.Run("file", func(t *testing.T) {
		_, err := serveOptionsFrom(t, "--config", file)
		if err == nil || !strings.Contains(err.Error(), "config file "+file+": controller-quorum-voters \"1@hhh") ||
			!strings.Contains(err.Error(), "... (100004 bytes): entry") || len(err.Error()) > 600 {
			t.Fatalf("error %.700v", err)
		}
	})
	t.Run("env", func(t *testing.T) {
		t.Setenv("FJORD_CONTROLLER_QUORUM_VOTERS", huge)
		_, err := serveOptionsFrom(t)
		if err == nil || !strings.HasPrefix(err.Error(), `FJORD_CONTROLLER_QUORUM_VOTERS="1@hhh`) || len(err.Error()) > 600 {
			t.Fatalf("error %.700v", err)
		}
	})
	// The command line through the real binary, where the root command's
	// flag error function cuts pflag's echo of the value.
	t.Run("flag", func(t *testing.T) {
		out, err := fjordCommand(t, "serve", "--controller-quorum-voters", huge).CombinedOutput()
		if err == nil {
			t.Fatalf("accepted: %.300s", out)
		}
		msg := strings.TrimSpace(string(out))
		if !strings.Contains(msg, `for "--controller-quorum-voters" flag: entry "1@hhh`) || !strings.Contains(msg, "(100004 bytes)") ||
			strings.Contains(msg, "\n") || len(msg) > 600 {
			t.Fatalf("error is %d bytes: %.700s", len(msg), msg)
		}
	})
}

// A node given a voter list of itself alone binds its entry's address
// without --controller-addr, forms a cluster of one, and registers its
// --rack, which the Kafka Metadata API then reports.
func TestServeVoterAndRack(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	own := ln.Addr().String()
	ln.Close()
	dir := filepath.Join(t.TempDir(), "data")
	cmd, out, done := startServe(t, []string{"FJORD_RACK=zone-b"}, "--data-dir", dir, "--node-id", "2",
		"--controller-quorum-voters", "2@"+own, "--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	if got := logValue(t, out.String(), "controller_addr"); got != own {
		t.Errorf("controller_addr=%s, want this node's voter entry %s", got, own)
	}
	waitReady(t, "http://"+logValue(t, out.String(), "http_addr"))
	r := fjord(t, "", "cluster", "describe", "-o", "json", "--brokers", logValue(t, out.String(), "kafka_addr"))
	if r.code != 0 {
		t.Fatalf("cluster describe: %s", r.stderr)
	}
	var d clusterDescription
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Brokers) != 1 || d.Brokers[0].NodeID != 2 || d.Brokers[0].Rack == nil || *d.Brokers[0].Rack != "zone-b" ||
		d.Controller == nil || *d.Controller != 2 {
		t.Fatalf("cluster describe: %s", r.stdout)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := <-done; err != nil {
		t.Fatalf("serve exited with %v\n%s", err, out)
	}
}
