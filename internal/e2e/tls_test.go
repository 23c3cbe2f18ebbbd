package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/tlsconf"
)

// e2ePKI is a CA and the files of the certificates a test hands to nodes
// and clients: the node's (server and client use, for 127.0.0.1), a
// client's (alice), and a client certificate of another CA (mallory).
type e2ePKI struct {
	dir                   string
	ca                    *tlsconf.CA
	caFile                string
	node, alice, stranger tlsconf.Files
}

func newE2EPKI(t *testing.T) e2ePKI {
	t.Helper()
	dir := t.TempDir()
	ca, err := tlsconf.NewCA("fjord e2e CA", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlsconf.NewCA("stranger CA", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := e2ePKI{dir: dir, ca: ca, caFile: filepath.Join(dir, "ca.pem")}
	if err := os.WriteFile(p.caFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	p.node = p.issue(t, ca, "node", tlsconf.IssueOptions{CommonName: "fjord-node", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}, Server: true, Client: true, ValidFor: 24 * time.Hour})
	p.alice = p.issue(t, ca, "alice", tlsconf.IssueOptions{CommonName: "alice", Client: true, ValidFor: 24 * time.Hour})
	p.stranger = p.issue(t, other, "mallory", tlsconf.IssueOptions{CommonName: "mallory", Client: true, ValidFor: 24 * time.Hour})
	return p
}

func (p e2ePKI) issue(t *testing.T, ca *tlsconf.CA, name string, o tlsconf.IssueOptions) tlsconf.Files {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(o)
	if err != nil {
		t.Fatal(err)
	}
	f, err := tlsconf.WriteFiles(p.dir, name, certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// serveArgs are a node's TLS flags with ssl-client-auth auth.
func (p e2ePKI) serveArgs(auth string) []string {
	return []string{"--ssl-cert-file", p.node.CertFile, "--ssl-key-file", p.node.KeyFile, "--ssl-ca-file", p.caFile, "--ssl-client-auth", auth}
}

// startNode starts a node with a PLAINTEXT listener and an SSL one
// whose ssl-client-auth is auth, and returns it and the SSL address.
//
// With client certificates required, allow.everyone.if.no.acl.found is
// off, so the node has super users as an operator would set them:
// User:ANONYMOUS, the principal of the PLAINTEXT inter-broker listener
// (the node's own clients and the test's setup), and alice's
// certificate (User:CN=alice), because the TLS tests are about
// authentication only (what ACLs allow is acl_test.go's). Without
// required certificates nobody is authenticated, everyone is allowed,
// and the setting changes nothing.
func (p e2ePKI) startNode(t *testing.T, auth string) (*testcluster.Node, addr) {
	t.Helper()
	n := testcluster.Start(t, testcluster.Options{
		Listeners: []testcluster.Listener{{Name: "SSL", Protocol: "SSL"}},
		Args:      append(p.serveArgs(auth), "--super-users", "User:ANONYMOUS;User:CN=alice"),
	})
	return n, addr(n.ListenerAddr("SSL"))
}

// clientTLS is a Go TLS configuration trusting roots and presenting
// client (nil: none).
func (p e2ePKI) clientTLS(t *testing.T, client *tlsconf.Files, roots string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(roots)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", roots)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if client != nil {
		c, err := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}

// presentAlways makes cfg present its certificate whatever CAs the
// server says it accepts: Go's client otherwise sends none when its
// certificate is not signed by one of them, and the refusal would be for
// a missing certificate rather than an untrusted one.
func presentAlways(cfg *tls.Config) *tls.Config {
	cert := cfg.Certificates[0]
	cfg.Certificates = nil
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	return cfg
}

// rdkSSL is librdkafka's configuration of an mTLS client.
func (p e2ePKI) rdkSSL(client tlsconf.Files) kafka.ConfigMap {
	return kafka.ConfigMap{
		"security.protocol":        "ssl",
		"ssl.ca.location":          p.caFile,
		"ssl.certificate.location": client.CertFile,
		"ssl.key.location":         client.KeyFile,
	}
}

// addr is a brokers of one address.
type addr string

func (a addr) Brokers() string { return string(a) }

// TestTLSClients: a node whose SSL listener requires client
// certificates (mTLS). franz-go, Sarama and librdkafka produce to it,
// consume in a group and commit, all over TLS; kcat lists, produces and
// consumes; every client is sent the SSL listener's address, never the
// PLAINTEXT one. Refused, each with its client's error: no client
// certificate, another CA's certificate, a client that does not trust
// the node's CA, and plaintext Kafka on the TLS port.
func TestTLSClients(t *testing.T) {
	t.Parallel()
	pki := newE2EPKI(t)
	n, ssl := pki.startNode(t, "required")
	adm := newAdmin(t, n) // setup and checks over PLAINTEXT
	good := pki.clientTLS(t, &pki.alice, pki.caFile)
	tlsOpts := []kgo.Opt{kgo.DialTLSConfig(good)}

	t.Run("franz-go", func(t *testing.T) {
		ctx := testContext(t, time.Minute)
		cl := newClient(t, ssl, kgo.DialTLSConfig(good))
		md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(md.Brokers) != 1 || fmt.Sprintf("%s:%d", md.Brokers[0].Host, md.Brokers[0].Port) != string(ssl) {
			t.Fatalf("brokers over SSL: %+v, want the SSL listener %s", md.Brokers, ssl)
		}
		groupRunOver(ctx, t, adm, ssl, tlsOpts, "tls-franz", "g-franz", func(want int) []history.Record {
			return franzGroupConsume(ctx, t, ssl, tlsOpts, "tls-franz", "g-franz", want)
		})
	})

	t.Run("sarama", func(t *testing.T) {
		ctx := testContext(t, time.Minute)
		cfg := saramaConfig(sarama.NewConfig().Version)
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = good
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		groupRunOver(ctx, t, adm, ssl, tlsOpts, "tls-sarama", "g-sarama", func(want int) []history.Record {
			return saramaGroupConsume(ctx, t, ssl, cfg, "tls-sarama", "g-sarama", want)
		})
	})

	t.Run("librdkafka", func(t *testing.T) {
		ctx := testContext(t, time.Minute)
		groupRunOver(ctx, t, adm, ssl, tlsOpts, "tls-librdkafka", "g-librdkafka", func(want int) []history.Record {
			return rdkGroupConsume(ctx, t, ssl, "tls-librdkafka", "g-librdkafka", pki.rdkSSL(pki.alice), want)
		})
	})

	t.Run("kcat", func(t *testing.T) {
		ctx := testContext(t, time.Minute)
		const topic = "tls-kcat"
		createTopic(ctx, t, adm, topic, 1)
		sec := []string{"-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + pki.caFile,
			"-X", "ssl.certificate.location=" + pki.alice.CertFile, "-X", "ssl.key.location=" + pki.alice.KeyFile}
		list := string(runKcat(ctx, t, nil, append([]string{"-b", string(ssl), "-X", "broker.address.family=v4", "-L"}, sec...)...))
		if !strings.Contains(list, string(ssl)) {
			t.Fatalf("kcat -L over SSL does not name the SSL listener %s:\n%s", ssl, list)
		}
		var lines []string
		for i := range 50 {
			lines = append(lines, fmt.Sprintf("k%d:kcat over tls %d", i, i))
		}
		runKcat(ctx, t, []byte(strings.Join(lines, "\n")+"\n"), append([]string{"-b", string(ssl), "-X", "broker.address.family=v4", "-P", "-t", topic, "-K:"}, sec...)...)
		got := kcatConsume(t, ssl, topic, sec...)
		recs := got[history.TopicPartition{Topic: topic}]
		if len(recs) != len(lines) {
			t.Fatalf("kcat read %d records over SSL, produced %d", len(recs), len(lines))
		}
		for i, r := range recs {
			if want := fmt.Sprintf("k%d:kcat over tls %d", i, i); string(r.Key)+":"+string(r.Value) != want || r.Offset != int64(i) {
				t.Fatalf("record %d: offset %d %s:%s, want %s", i, r.Offset, r.Key, r.Value, want)
			}
		}
	})

	t.Run("fjord CLI", func(t *testing.T) {
		ctx := testContext(t, time.Minute)
		sec := []string{"--brokers", string(ssl), "--security-protocol", "SSL", "--ssl-ca-file", pki.caFile,
			"--ssl-cert-file", pki.alice.CertFile, "--ssl-key-file", pki.alice.KeyFile}
		run := func(stdin string, args ...string) string {
			t.Helper()
			cmd := exec.CommandContext(ctx, testcluster.Binary(t), append(args, sec...)...)
			cmd.Stdin = strings.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("fjord %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		run("", "topic", "create", "tls-cli", "--partitions", "1")
		run("one\ntwo\nthree\n", "produce", "tls-cli")
		if out := run("", "consume", "tls-cli", "--from-beginning", "--max-messages", "3"); !strings.Contains(out, "one\ntwo\nthree\n") {
			t.Fatalf("fjord consume over SSL printed:\n%s", out)
		}
		// Plaintext settings against the SSL listener: a clear error.
		cmd := exec.CommandContext(ctx, testcluster.Binary(t), "topic", "list", "--brokers", string(ssl))
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "cannot reach") {
			t.Fatalf("fjord topic list in plaintext against the SSL listener: %v\n%s", err, out)
		}
	})

	t.Run("refused", func(t *testing.T) {
		ctx := testContext(t, time.Minute)
		ping := func(cfg *tls.Config) error {
			cl, err := kgo.NewClient(kgo.SeedBrokers(string(ssl)), kgo.DialTLSConfig(cfg), kgo.DialTimeout(3*time.Second))
			if err != nil {
				return err
			}
			defer cl.Close()
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			return cl.Ping(pctx)
		}
		for _, tc := range []struct {
			name string
			cfg  *tls.Config
			want string
		}{
			{"no client certificate", pki.clientTLS(t, nil, pki.caFile), "certificate required"},
			{"another CA's certificate", presentAlways(pki.clientTLS(t, &pki.stranger, pki.caFile)), "unknown certificate authority"},
			{"untrusted node", pki.clientTLS(t, &pki.alice, pki.stranger.CertFile), "certificate signed by unknown authority"},
		} {
			err := ping(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("franz-go, %s: %v, want an error naming %q", tc.name, err, tc.want)
			}
		}
		// Plaintext Kafka on the TLS port: no answer, the client gives up.
		plain, err := kgo.NewClient(kgo.SeedBrokers(string(ssl)), kgo.DialTimeout(3*time.Second), kgo.RequestTimeoutOverhead(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = plain.Ping(pctx)
		cancel()
		plain.Close()
		if err == nil {
			t.Error("a plaintext franz-go client was served on the SSL listener")
		}

		// Sarama without a client certificate: its client cannot fetch
		// metadata.
		cfg := saramaConfig(sarama.NewConfig().Version)
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = pki.clientTLS(t, nil, pki.caFile)
		cfg.Metadata.Retry.Max = 0
		cfg.Net.DialTimeout = 3 * time.Second
		if c, err := sarama.NewClient([]string{string(ssl)}, cfg); err == nil {
			c.Close()
			t.Error("Sarama without a client certificate connected")
		} else if !errors.Is(err, sarama.ErrOutOfBrokers) {
			t.Errorf("Sarama without a client certificate: %v, want %v", err, sarama.ErrOutOfBrokers)
		}

		// librdkafka trusting another CA: its metadata request fails and
		// it logs the certificate check.
		conf := pki.rdkSSL(pki.alice)
		conf["ssl.ca.location"] = pki.stranger.CertFile
		conf["bootstrap.servers"] = string(ssl)
		conf["broker.address.family"] = "v4"
		conf["go.logs.channel.enable"] = true
		p, err := kafka.NewProducer(&conf)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		logs := watchRdkLogs(t, "untrusting producer", p.Logs())
		if _, err := p.GetMetadata(nil, true, 5000); err == nil {
			t.Error("librdkafka trusting another CA got metadata")
		}
		eventually(t, 10*time.Second, func() error {
			if !logs.contains("certificate verify failed") {
				return errors.New(`librdkafka logged no "certificate verify failed"`)
			}
			return nil
		})
	})
}

// TestTLSInterBroker: three nodes whose inter-broker listener is SSL
// with client certificates required, so replication and forwarding to
// the controller can only work if every node dials the others with TLS
// and its certificate. A topic of three replicas takes acks=all writes
// over TLS with all three in the ISR; the leader is SIGKILLed; writes
// go on through the new leader; every acknowledged record is read back
// once, over TLS.
func TestTLSInterBroker(t *testing.T) {
	t.Parallel()
	pki := newE2EPKI(t)
	// super.users as in a Kafka cluster whose SSL listener requires
	// certificates (allow.everyone.if.no.acl.found is then off): the
	// nodes' own certificate, User:CN=fjord-node, the principal of
	// replication and forwarding; alice's, the test's client (the test
	// is about TLS, not ACLs); and User:ANONYMOUS for the harness's
	// PLAINTEXT listener (setup, and its leader checks).
	c := testcluster.StartCluster(t, testcluster.ClusterOptions{Nodes: 3, Node: testcluster.Options{
		Listeners:           []testcluster.Listener{{Name: "SSL", Protocol: "SSL"}},
		InterBrokerListener: "SSL",
		Args:                append(pki.serveArgs("required"), "--super-users", "User:CN=fjord-node;User:CN=alice;User:ANONYMOUS"),
	}})
	c.LogTailsOnFailure(t)
	ctx := testContext(t, 2*time.Minute)
	good := pki.clientTLS(t, &pki.alice, pki.caFile)
	var ssl []string
	for _, n := range c.Nodes() {
		ssl = append(ssl, n.ListenerAddr("SSL"))
	}
	seeds := addr(strings.Join(ssl, ","))
	failoverOver(ctx, t, c, seeds, []kgo.Opt{kgo.DialTLSConfig(good)}, "tls-interbroker", "SSL")
}

// failoverOver is the inter-broker tests' check, the listener's clients
// (b, opts) doing all the work: a topic of three replicas with all three
// in the ISR (so the followers replicate over the inter-broker listener),
// 500 acks=all records, a SIGKILL of the leader, 500 more through the new
// one, and every acknowledged record read back once over the listener.
func failoverOver(ctx context.Context, t *testing.T, c *testcluster.Cluster, b brokers, opts []kgo.Opt, topic, listener string) {
	t.Helper()
	adm := newAdmin(t, c)
	createTopic(ctx, t, adm, topic, 1, "min.insync.replicas=2")
	eventually(t, 30*time.Second, func() error {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		if isr := md.Topics[topic].Partitions[0].ISR; len(isr) != 3 {
			return fmt.Errorf("ISR %v, want all three (followers replicate over %s)", isr, listener)
		}
		return nil
	})
	checker := history.NewChecker()
	producer := newClient(t, b, append(slices.Clone(opts), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(30*time.Second))...)
	produce := func(from, to int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			v := fmt.Appendf(nil, "%s %05d", topic, i)
			checker.Sent(topic, nil, v)
			recs = append(recs, &kgo.Record{Value: v})
		}
		for _, r := range producer.ProduceSync(ctx, recs...) {
			if r.Err != nil {
				t.Fatalf("produce over %s: %v", listener, r.Err)
			}
			checker.Acked(history.Record{Topic: r.Record.Topic, Partition: r.Record.Partition, Offset: r.Record.Offset, Value: r.Record.Value})
		}
	}
	produce(0, 500)
	leader := c.Leader(t, topic, 0)
	c.Kill(leader)
	produce(500, 1000)
	if now := c.Leader(t, topic, 0); now == leader {
		t.Fatalf("leader still %d after it was killed", now)
	}

	reader := newClient(t, b, append(slices.Clone(opts), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))...)
	got := make(map[history.TopicPartition][]history.Record)
	for n := 0; n < 1000; {
		fs := reader.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading over %s: %v", listener, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			tp := history.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			got[tp] = append(got[tp], history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: r.Value})
			n++
		})
	}
	sum, err := checker.Verify(got)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Acked != 1000 || sum.Read != 1000 {
		t.Fatalf("%v; want all 1000 acknowledged and read back once", sum)
	}
}

// TestTLSCertificateRotation: the node's certificate files are replaced
// while a producer writes over TLS. New connections get the new
// certificate within seconds, without a restart; a connection opened
// before keeps its certificate and is still served; the producer sees no
// error, and every record it was acknowledged is read back once.
func TestTLSCertificateRotation(t *testing.T) {
	t.Parallel()
	pki := newE2EPKI(t)
	n, ssl := pki.startNode(t, "none")
	ctx := testContext(t, 2*time.Minute)
	roots := pki.clientTLS(t, nil, pki.caFile)
	serial := func() string {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", string(ssl), roots)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	old, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", string(ssl), roots)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	apiVersions(t, old, 1)

	const topic = "tls-rotation"
	createTopic(ctx, t, newAdmin(t, n), topic, 2)
	checker := history.NewChecker()
	producer := newClient(t, ssl, kgo.DialTLSConfig(roots), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	stop := make(chan struct{})
	produced := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				produced <- nil
				return
			default:
			}
			v := fmt.Appendf(nil, "rotation %06d", i)
			checker.Sent(topic, nil, v)
			r := producer.ProduceSync(ctx, &kgo.Record{Value: v})[0]
			if r.Err != nil {
				produced <- fmt.Errorf("record %d: %w", i, r.Err)
				return
			}
			checker.Acked(history.Record{Topic: topic, Partition: r.Record.Partition, Offset: r.Record.Offset, Value: v})
		}
	}()

	// Rotate: a new certificate and key for the same names, written
	// atomically over the old files.
	certPEM, keyPEM, err := pki.ca.Issue(tlsconf.IssueOptions{CommonName: "fjord-node", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}, Server: true, Client: true, ValidFor: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tlsconf.WriteFiles(pki.dir, "node", certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	var after string
	eventually(t, 15*time.Second, func() error {
		if after = serial(); after == before {
			return fmt.Errorf("new connections still get certificate %s", before)
		}
		return nil
	})
	// The connection from before: still served, on its old certificate.
	apiVersions(t, old, 2)
	if got := old.ConnectionState().PeerCertificates[0].SerialNumber.String(); got != before {
		t.Errorf("the old connection's certificate changed to %s", got)
	}
	close(stop)
	if err := <-produced; err != nil {
		t.Fatalf("producer over TLS during the rotation: %v", err)
	}
	sum, err := checker.Verify(readAll(ctx, t, n, topic))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Acked == 0 || sum.Read != sum.Acked {
		t.Fatalf("%v; want every acknowledged record read back once", sum)
	}
	t.Logf("certificate %s replaced by %s; %d records acknowledged across the rotation", before, after, sum.Acked)
}

// apiVersions sends ApiVersions v3 on c and checks the answer.
func apiVersions(t *testing.T, c net.Conn, corr int32) {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "fjord-e2e", "1"
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("e2e")).AppendRequest(nil, req, corr)); err != nil {
		t.Fatalf("ApiVersions on an open TLS connection: %v", err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("ApiVersions on an open TLS connection: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatalf("ApiVersions on an open TLS connection: %v", err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		t.Fatalf("ApiVersions answer for correlation id %d, want %d", got, corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(body[4:]); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions answer: %v, error %d", err, resp.ErrorCode)
	}
}
