package kafkaserver

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/listener"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/tlsconf"
)

// testPKI is a CA, a server certificate for 127.0.0.1 and a client
// certificate it signed, and a client certificate of another CA.
type testPKI struct {
	pool             *x509.CertPool
	server           tls.Certificate
	client, stranger tls.Certificate
	// unmapped is signed by the CA but named CN=refused, which the
	// listener's SSLPrincipal maps to no principal.
	unmapped tls.Certificate
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	issue := func(ca *tlsconf.CA, o tlsconf.IssueOptions) tls.Certificate {
		certPEM, keyPEM, err := ca.Issue(o)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ca, err := tlsconf.NewCA("fjord test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlsconf.NewCA("another CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.CertPEM()) {
		t.Fatal("CA certificate does not parse")
	}
	return testPKI{
		pool:     pool,
		server:   issue(ca, tlsconf.IssueOptions{CommonName: "node", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, ValidFor: time.Hour}),
		client:   issue(ca, tlsconf.IssueOptions{CommonName: "alice", Client: true, ValidFor: time.Hour}),
		stranger: issue(other, tlsconf.IssueOptions{CommonName: "mallory", Client: true, ValidFor: time.Hour}),
		unmapped: issue(ca, tlsconf.IssueOptions{CommonName: "refused", Client: true, ValidFor: time.Hour}),
	}
}

// sslListener is an SSL listener named SSL that asks for client
// certificates as auth says and names their principal User:CN.
func (p testPKI) sslListener(auth tls.ClientAuthType) ListenerConfig {
	return ListenerConfig{
		Name:     "SSL",
		Protocol: listener.SSL,
		TLS:      &tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool, ClientAuth: auth, MinVersion: tls.VersionTLS12},
		SSLPrincipal: func(cs tls.ConnectionState) (Principal, error) {
			if len(cs.PeerCertificates) == 0 {
				return Anonymous, nil
			}
			if cn := cs.PeerCertificates[0].Subject.CommonName; cn != "refused" {
				return Principal{Type: "User", Name: cn}, nil
			}
			return Principal{}, errors.New("no rule maps CN=refused")
		},
	}
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// dialTLS dials the harness's listener with TLS and returns the
// connection, or the handshake's error.
func (h *wireHarness) dialTLS(cfg *tls.Config) (*rawConn, error) {
	h.t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", h.addr, cfg)
	if err != nil {
		return nil, err
	}
	// A TLS 1.3 client learns that its certificate was refused only
	// when it reads: one round trip tells.
	h.t.Cleanup(func() { nc.Close() })
	return &rawConn{t: h.t, nc: nc, br: bufio.NewReader(nc), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("wire-test"))}, nil
}

// An SSL listener serves requests over TLS; a client certificate names
// the connection's principal; Metadata answers each broker's endpoint
// on the listener the request came in on, and leaves out brokers that
// have none.
func TestSSLListenerServesAndNamesPrincipal(t *testing.T) {
	pki := newTestPKI(t)
	var seen Principal
	h := newWireHarness(t, withListener(pki.sslListener(tls.RequireAndVerifyClientCert)))
	host, portStr, _ := net.SplitHostPort(h.addr)
	port, _ := strconv.Atoi(portStr)
	h.ctrl.mu.Lock()
	h.ctrl.img.Brokers = map[int32]metadata.Broker{
		1: {NodeID: 1, Host: "10.0.0.1", Port: 9092, Listeners: []metadata.Endpoint{
			{Name: "PLAINTEXT", Host: "10.0.0.1", Port: 9092},
			{Name: "SSL", Host: host, Port: int32(port), SecurityProtocol: 1},
		}},
		2: {NodeID: 2, Host: "10.0.0.2", Port: 9092, Listeners: []metadata.Endpoint{
			{Name: "PLAINTEXT", Host: "10.0.0.2", Port: 9092},
		}},
	}
	h.ctrl.mu.Unlock()

	c, err := h.dialTLS(&tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{pki.client}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 || resp.Brokers[0].Host != host || resp.Brokers[0].Port != int32(port) {
		t.Fatalf("brokers over SSL: %+v, want node 1 at its SSL endpoint %s alone", resp.Brokers, h.addr)
	}
	h.srv.mu.Lock()
	for c := range h.srv.mu.conns {
		seen = c.Principal()
	}
	h.srv.mu.Unlock()
	if seen != (Principal{Type: "User", Name: "alice"}) {
		t.Fatalf("principal %v, want User:alice", seen)
	}
}

// Refused at the handshake: no client certificate where one is
// required, one of another CA, one whose subject maps to no principal,
// a client that does not trust the server, TLS 1.1, and plaintext Kafka on the TLS port; each is counted,
// and the listener goes on serving a good client after them.
func TestSSLListenerRefuses(t *testing.T) {
	pki := newTestPKI(t)
	h := newWireHarness(t, withListener(pki.sslListener(tls.RequireAndVerifyClientCert)))
	good := &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{pki.client}, MinVersion: tls.VersionTLS12}

	refused := func(name string, cfg *tls.Config) {
		t.Helper()
		c, err := h.dialTLS(cfg)
		if err == nil {
			// TLS 1.3: the server's refusal of the client's
			// certificate arrives on the first read.
			c.send(apiVersionsReq(3))
			_, err = c.readFrame()
		}
		if err == nil {
			t.Errorf("%s: served, want the handshake refused", name)
		}
	}
	refused("no client certificate", &tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12})
	refused("another CA's certificate", &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{pki.stranger}, MinVersion: tls.VersionTLS12})
	refused("a certificate no rule maps", &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{pki.unmapped}, MinVersion: tls.VersionTLS12})
	refused("TLS 1.1", &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{pki.client}, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
	if _, err := h.dialTLS(&tls.Config{Certificates: []tls.Certificate{pki.client}, MinVersion: tls.VersionTLS12}); err == nil {
		t.Error("a client that does not trust the server's CA completed a handshake")
	}

	// Plaintext Kafka on the TLS port: the server reads a record header
	// that is not TLS and closes.
	plain := h.dial()
	plain.send(apiVersionsReq(3))
	plain.expectClosed()

	c, err := h.dialTLS(good)
	if err != nil {
		t.Fatal(err)
	}
	if resp := c.roundTrip(apiVersionsReq(3)).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions over TLS after the refusals: error %d", resp.ErrorCode)
	}
	if n := counterValue(t, h.srv.metrics.tlsHandshakeFailures.WithLabelValues("SSL")); n < 5 {
		t.Errorf("fjord_kafka_tls_handshake_failures_total{listener=SSL} = %v after 6 refused handshakes, want at least 5 (the untrusting client fails on its side)", n)
	}
}

// A handshake that never finishes (a client that connects and sends
// nothing, or half a ClientHello) is closed after the handshake timeout,
// and garbage instead of a ClientHello is closed at once.
func TestSSLHandshakeBounded(t *testing.T) {
	pki := newTestPKI(t)
	h := newWireHarness(t, withListener(pki.sslListener(tls.NoClientCert)), withServer(func(s *Server) {
		s.tlsHandshakeTimeout = 200 * time.Millisecond
	}))
	for _, tc := range []struct {
		name string
		send []byte
	}{
		{"silent", nil},
		{"half a ClientHello", []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00}},
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
	} {
		nc, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if len(tc.send) > 0 {
			if _, err := nc.Write(tc.send); err != nil {
				t.Fatal(err)
			}
		}
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		// Whatever the server answers (an alert), it then closes: read
		// to the end.
		_, err = io.Copy(io.Discard, nc)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s: connection still open after 5 s, want closed after the 200 ms handshake timeout", tc.name)
		}
	}
	c, err := h.dialTLS(&tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	if resp := c.roundTrip(apiVersionsReq(3)).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions over TLS: error %d", resp.ErrorCode)
	}
}

// ServeListener refuses what it cannot serve: TLS without a
// configuration, and SASL until it is built.
func TestServeListenerRefusesConfig(t *testing.T) {
	srv := New(Config{NodeID: 1, TopicConfigs: testConfigs}, nil, nil, nil, nil)
	defer srv.Close()
	for _, lc := range []ListenerConfig{
		{Name: "SSL", Protocol: listener.SSL},
		{Name: "SASL_PLAINTEXT", Protocol: listener.SASLPlaintext},
	} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.ServeListener(l, lc); err == nil {
			t.Errorf("ServeListener(%+v) served", lc)
		}
		if _, err := net.Dial("tcp", l.Addr().String()); err == nil {
			t.Errorf("ServeListener(%+v) left its listener open", lc)
		}
	}
}
