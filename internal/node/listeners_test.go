package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/listener"
	"github.com/fjordmq/fjord/internal/tlsconf"
)

// nodePKI writes a CA, a node certificate for 127.0.0.1 (server and
// client use) and a client certificate into dir.
type nodePKI struct {
	ca           *tlsconf.CA
	caFile       string
	node, client tlsconf.Files
	pool         *x509.CertPool
}

func newNodePKI(t *testing.T) nodePKI {
	t.Helper()
	dir := t.TempDir()
	ca, err := tlsconf.NewCA("node test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := nodePKI{ca: ca, caFile: filepath.Join(dir, "ca.pem"), pool: x509.NewCertPool()}
	if err := os.WriteFile(p.caFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	p.pool.AppendCertsFromPEM(ca.CertPEM())
	p.node = p.write(t, dir, "node", tlsconf.IssueOptions{CommonName: "node", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, Client: true, ValidFor: time.Hour})
	p.client = p.write(t, dir, "client", tlsconf.IssueOptions{CommonName: "client", Client: true, ValidFor: time.Hour})
	return p
}

func (p nodePKI) write(t *testing.T, dir, name string, o tlsconf.IssueOptions) tlsconf.Files {
	t.Helper()
	certPEM, keyPEM, err := p.ca.Issue(o)
	if err != nil {
		t.Fatal(err)
	}
	f, err := tlsconf.WriteFiles(dir, name, certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (p nodePKI) clientTLS(t *testing.T) *tls.Config {
	t.Helper()
	c, err := tls.LoadX509KeyPair(p.client.CertFile, p.client.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: p.pool, Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS12}
}

// A node whose only Kafka listener is SSL with client certificates
// required, and whose HTTP listener serves HTTPS: its HTTP gateway dials
// the SSL listener with the node's certificate (a produce through HTTPS
// lands), a Kafka client with a certificate reads it back over SSL, and
// the broker is registered with its SSL listener by name.
func TestSSLOnlyNodeAndHTTPS(t *testing.T) {
	pki := newNodePKI(t)
	cfg := testConfig(t, t.TempDir())
	cfg.KafkaAddr = ""
	cfg.Listeners = []listener.Listener{{Name: "SSL", Bind: "127.0.0.1:0", Protocol: listener.SSL}}
	cfg.TLS = TLSConfig{CertFile: pki.node.CertFile, KeyFile: pki.node.KeyFile, CAFile: pki.caFile, ClientAuth: "required", HTTP: true}
	// Required client certificates turn allow.everyone.if.no.acl.found
	// off: the node's own principal (its certificate's, which the HTTP
	// gateway acts as) and the test's client must be super users.
	cfg.Authz.SuperUsers = []string{"User:CN=node", "User:CN=client", "User:web"}
	// A node that authenticates its Kafka clients has its HTTP API
	// require credentials too: a SCRAM user, there from the start.
	cfg.SASL.BootstrapUsers = []ScramUser{{Mechanism: "SCRAM-SHA-512", Name: "web", Password: "web-secret"}}
	n := startNode(t, cfg)

	img := n.ctrl.Image()
	b := img.Brokers[1]
	if len(b.Listeners) != 1 || b.Listeners[0].Name != "SSL" || b.Listeners[0].SecurityProtocol != int16(listener.SSL) ||
		fmt.Sprintf("%s:%d", b.Host, b.Port) != n.KafkaAddr().String() {
		t.Fatalf("registration %+v, want the SSL listener %s alone", b, n.KafkaAddr())
	}

	httpc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequest("POST", "https://"+n.HTTPAddr().String()+"/v1/topics/tls-http/produce",
		strings.NewReader(`{"key": "k", "value": "aGVsbG8gb3ZlciB0bHM="}`))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("web", "web-secret")
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTPS produce: %d %s", resp.StatusCode, body)
	}
	// Plain HTTP on the HTTPS port is not served.
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + n.HTTPAddr().String() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP served on the HTTPS listener")
		}
	}

	cl := newClient(t, n, kgo.DialTLSConfig(pki.clientTLS(t)), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tls-http": {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	recs := fs.Records()
	if len(recs) != 1 || string(recs[0].Key) != "k" || string(recs[0].Value) != "hello over tls" {
		t.Fatalf("read over SSL: %v", recs)
	}
	// Without a client certificate the listener refuses.
	plain := &tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12}
	bad, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr().String()), kgo.DialTLSConfig(plain), kgo.RetryTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := kadm.NewClient(bad).BrokerMetadata(ctx); err == nil {
		t.Error("a client without a certificate was served by a listener that requires one")
	}
}

// A node with a PLAINTEXT and an SSL listener answers each client with
// the endpoints of the listener it came in on.
func TestListenersAnswerTheirOwnEndpoints(t *testing.T) {
	pki := newNodePKI(t)
	cfg := testConfig(t, t.TempDir())
	cfg.KafkaAddr = ""
	cfg.HTTPAddr = ""
	cfg.Listeners = []listener.Listener{
		{Name: "INTERNAL", Bind: "127.0.0.1:0", Protocol: listener.Plaintext},
		{Name: "CLIENT", Bind: "127.0.0.1:0", Protocol: listener.SSL},
	}
	cfg.TLS = TLSConfig{CertFile: pki.node.CertFile, KeyFile: pki.node.KeyFile}
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"INTERNAL", nil},
		{"CLIENT", []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12})}},
	} {
		addr := n.ListenerAddr(tc.name).String()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, tc.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		cl.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(md.Brokers) != 1 || fmt.Sprintf("%s:%d", md.Brokers[0].Host, md.Brokers[0].Port) != addr {
			t.Errorf("%s: brokers %+v, want this listener's %s", tc.name, md.Brokers, addr)
		}
	}
	if n.KafkaAddr().String() != n.ListenerAddr("INTERNAL").String() {
		t.Errorf("KafkaAddr %s is not the inter-broker (first) listener %s", n.KafkaAddr(), n.ListenerAddr("INTERNAL"))
	}
}

// Bad listener, TLS and SASL settings are refused before anything is bound,
// each naming the setting.
func TestListenerConfigRefused(t *testing.T) {
	pki := newNodePKI(t)
	ssl := []listener.Listener{{Name: "SSL", Bind: "127.0.0.1:0", Protocol: listener.SSL}}
	saslOnly := []listener.Listener{{Name: "SASL_PLAINTEXT", Bind: "127.0.0.1:0", Protocol: listener.SASLPlaintext}}
	files := TLSConfig{CertFile: pki.node.CertFile, KeyFile: pki.node.KeyFile}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"listeners and kafka-addr", func(c *Config) { c.Listeners = ssl; c.TLS = files }, "leave those empty"},
		{"SSL without files", func(c *Config) { c.KafkaAddr = ""; c.Listeners = ssl }, "ssl-cert-file and ssl-key-file are needed"},
		{"files without TLS", func(c *Config) { c.TLS = files }, "no listener serves TLS"},
		{"https without files", func(c *Config) { c.TLS.HTTP = true }, "ssl-cert-file and ssl-key-file are needed"},
		{"client auth unknown", func(c *Config) { c.KafkaAddr = ""; c.Listeners = ssl; c.TLS = files; c.TLS.ClientAuth = "always" }, "ssl-client-auth"},
		{"client auth without CA", func(c *Config) { c.KafkaAddr = ""; c.Listeners = ssl; c.TLS = files; c.TLS.ClientAuth = "requested" }, "ssl-ca-file, which is not set"},
		{"listener twice", func(c *Config) {
			c.KafkaAddr = ""
			c.Listeners = []listener.Listener{{Name: "A", Bind: "127.0.0.1:0"}, {Name: "A", Bind: "127.0.0.1:0"}}
		}, "named twice"},
		{"listener on every interface", func(c *Config) {
			c.KafkaAddr = ""
			c.Listeners = []listener.Listener{{Name: "A", Bind: "0.0.0.0:0"}}
		}, "give it an advertised listener"},
		{"inter-broker unknown", func(c *Config) { c.InterBrokerListener = "SSL" }, "without listeners the node has one, PLAINTEXT"},
		{"SASL inter-broker without credentials", func(c *Config) {
			c.KafkaAddr = ""
			c.Listeners = saslOnly
		}, "give inter-broker-sasl-username and inter-broker-sasl-password-file"},
		{"inter-broker credentials without SASL", func(c *Config) { c.SASL.InterBrokerUser, c.SASL.InterBrokerPassword = "b", "p" }, "is not SASL"},
		{"unknown mechanism", func(c *Config) {
			c.KafkaAddr, c.Listeners = "", saslOnly
			c.SASL = SASLConfig{EnabledMechanisms: []string{"GSSAPI"}, InterBrokerUser: "b", InterBrokerPassword: "p"}
		}, `"GSSAPI" is not one of`},
		{"inter-broker mechanism not enabled", func(c *Config) {
			c.KafkaAddr, c.Listeners = "", saslOnly
			c.SASL = SASLConfig{EnabledMechanisms: []string{"SCRAM-SHA-256"}, InterBrokerUser: "b", InterBrokerPassword: "p"}
		}, "SCRAM-SHA-512 is not among sasl-enabled-mechanisms"},
		{"OAUTHBEARER without a JWKS", func(c *Config) {
			c.KafkaAddr, c.Listeners = "", saslOnly
			c.SASL = SASLConfig{EnabledMechanisms: []string{"OAUTHBEARER", "SCRAM-SHA-512"}, InterBrokerUser: "b", InterBrokerPassword: "p"}
		}, "give sasl-oauthbearer-jwks-file"},
		{"mechanisms without a SASL listener", func(c *Config) { c.SASL.EnabledMechanisms = []string{"PLAIN"} }, "no listener is SASL_PLAINTEXT or SASL_SSL"},
		{"negative reauth", func(c *Config) { c.SASL.MaxReauth = -time.Second }, "connections-max-reauth-ms"},
		{"bootstrap user without a password", func(c *Config) {
			c.SASL.BootstrapUsers = []ScramUser{{Mechanism: "SCRAM-SHA-512", Name: "b"}}
		}, "bootstrap-scram-users"},
		{"bad mapping rule", func(c *Config) { c.TLS.PrincipalMappingRules = "RULE:x" }, "ssl-principal-mapping-rules"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			tc.edit(&cfg)
			_, err := Start(context.Background(), cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start: %v, want ErrInvalidConfig naming %q", err, tc.want)
			}
		})
	}
	// Files that do not load: refused at start, naming the files.
	cfg := testConfig(t, t.TempDir())
	cfg.KafkaAddr = ""
	cfg.Listeners = ssl
	cfg.TLS = TLSConfig{CertFile: pki.node.CertFile, KeyFile: pki.client.KeyFile}
	if _, err := Start(context.Background(), cfg); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "TLS files") {
		t.Fatalf("a key that is not the certificate's: %v, want ErrInvalidConfig about the TLS files", err)
	}
}

// Kafka's --add-scram syntax, and what it refuses without showing the
// password.
func TestParseBootstrapUsers(t *testing.T) {
	got, err := ParseBootstrapUsers(" SCRAM-SHA-512=[name=broker,password=s3cr=t]\tSCRAM-SHA-256=[name=alice,password=a] ")
	if err != nil {
		t.Fatal(err)
	}
	want := []ScramUser{{Mechanism: "SCRAM-SHA-512", Name: "broker", Password: "s3cr=t"}, {Mechanism: "SCRAM-SHA-256", Name: "alice", Password: "a"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if users, err := ParseBootstrapUsers(""); err != nil || users != nil {
		t.Fatalf("empty: %v, %v", users, err)
	}
	for _, bad := range []string{
		"SCRAM-SHA-1=[name=a,password=b]",
		"SCRAM-SHA-512=[name=,password=b]",
		"SCRAM-SHA-512=[password=hunter2,name=a]",
		"SCRAM-SHA-512=[name=a,password=hunter2",
		"SCRAM-SHA-512=name=a,password=hunter2",
	} {
		_, err := ParseBootstrapUsers(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: the error shows the password: %v", bad, err)
		}
	}
}
