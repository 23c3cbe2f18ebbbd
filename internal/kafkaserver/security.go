package kafkaserver

// Listeners and who a connection is.
//
// A Server serves any number of named listeners (ServeListener), each
// with Kafka's security protocol: PLAINTEXT, SSL (TLS, with an optional
// client certificate), SASL_PLAINTEXT, SASL_SSL. A connection carries its
// listener's name, because Metadata, FindCoordinator, DescribeCluster and
// the leader hints of Produce and Fetch answer with each broker's
// endpoint for that listener (Kafka's rule: a client that came in over
// SASL_SSL must never be sent to a PLAINTEXT port), and its principal,
// Kafka's "Type:Name": User:ANONYMOUS until it authenticates, the client
// certificate's subject on an SSL listener that asked for one.
//
// TLS is handshaken on the connection's own goroutine, never the accept
// loop, under a deadline (defaultTLSHandshakeTimeout): a client that opens a
// connection and sends nothing, or garbage, costs one goroutine for at
// most that long and is then closed. Fetch answers on a TLS connection
// are copied through the node (sendfile cannot encrypt): canSendfile is
// false for a *tls.Conn.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/fjordmq/fjord/internal/audit"
	"github.com/fjordmq/fjord/internal/listener"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/sasl"
)

// defaultTLSHandshakeTimeout bounds a new connection's TLS handshake
// (Server.tlsHandshakeTimeout, shorter in tests).
const defaultTLSHandshakeTimeout = 10 * time.Second

// DefaultListenerName is the listener Serve serves: Kafka's default
// listener name, which a node of one listener registers.
const DefaultListenerName = "PLAINTEXT"

// Principal is Kafka's KafkaPrincipal: a type ("User") and a name.
type Principal struct {
	Type, Name string
}

// Anonymous is the principal of a connection that has not authenticated
// (Kafka's KafkaPrincipal.ANONYMOUS).
var Anonymous = Principal{Type: "User", Name: "ANONYMOUS"}

func (p Principal) String() string { return p.Type + ":" + p.Name }

// ListenerConfig is one listener's name and security.
type ListenerConfig struct {
	// Name is the listener's name as registered (upper case). Empty:
	// DefaultListenerName.
	Name string
	// Protocol is its security protocol.
	Protocol listener.SecurityProtocol
	// TLS is the server's TLS configuration; required when Protocol is
	// SSL or SASL_SSL, ignored otherwise. Its ClientAuth decides whether
	// clients present certificates (ssl.client.auth).
	TLS *tls.Config
	// SSLPrincipal names the principal of a TLS connection from its
	// verified client certificate (ssl.principal.mapping.rules):
	// Anonymous without one. An error (a subject no rule maps) fails the
	// connection, as in Kafka. nil: every connection is Anonymous.
	SSLPrincipal func(tls.ConnectionState) (Principal, error)
	// SASL authenticates the connections of a SASL_PLAINTEXT or
	// SASL_SSL listener (sasl.go): the enabled mechanisms and where
	// credentials come from. Required for those protocols, ignored
	// otherwise.
	SASL *sasl.Server
}

func (lc *ListenerConfig) check() error {
	if lc.Name == "" {
		lc.Name = DefaultListenerName
	}
	if lc.Protocol.TLS() && lc.TLS == nil {
		return fmt.Errorf("kafkaserver: listener %s is %s but has no TLS configuration", lc.Name, lc.Protocol)
	}
	if lc.Protocol.SASL() != (lc.SASL != nil) {
		return fmt.Errorf("kafkaserver: listener %s is %s: a SASL configuration is needed exactly for SASL_PLAINTEXT and SASL_SSL", lc.Name, lc.Protocol)
	}
	return nil
}

// wrap returns nc as the listener serves it: in TLS for SSL and SASL_SSL
// (not yet handshaken; handshake does that on the connection's
// goroutine).
func (lc *ListenerConfig) wrap(nc net.Conn) net.Conn {
	if lc.Protocol.TLS() {
		return tls.Server(nc, lc.TLS)
	}
	return nc
}

// errTLSHandshake: the client's TLS handshake failed or timed out.
var errTLSHandshake = errors.New("TLS handshake failed")

// handshake completes a TLS connection's handshake and names its
// principal from the client's certificate. A plaintext connection has
// nothing to do.
func (c *conn) handshake() error {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.s.tlsHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.s.metrics.tlsHandshakeFailures.WithLabelValues(c.listener.Name).Inc()
		c.auditTLS(audit.ResultFailure, "", err)
		return fmt.Errorf("%w: %v", errTLSHandshake, err)
	}
	if f := c.listener.SSLPrincipal; f != nil {
		cs := tc.ConnectionState()
		p, err := f(cs)
		if err != nil {
			c.s.metrics.tlsHandshakeFailures.WithLabelValues(c.listener.Name).Inc()
			c.auditTLS(audit.ResultFailure, "", fmt.Errorf("client certificate: %w", err))
			return fmt.Errorf("%w: client certificate: %v", errTLSHandshake, err)
		}
		c.setPrincipal(p)
		if len(cs.PeerCertificates) > 0 {
			c.auditTLS(audit.ResultSuccess, p.String(), nil)
		}
	}
	return nil
}

// endpoint is where req's client dials broker b: b's endpoint on the
// listener req came in on. A request without a connection (a test's, or
// one made inside the node) gets the inter-broker endpoint.
func (req *request) endpoint(b metadata.Broker) (host string, port int32, ok bool) {
	if req.conn == nil {
		return b.Host, b.Port, true
	}
	return b.Endpoint(req.conn.listener.Name)
}

// logHandshakeFailure logs a failed handshake at debug only: a bad
// client is the client's problem, and louder would let one fill the
// operator's disk; the metric counts them.
func (c *conn) logHandshakeFailure(err error) {
	c.s.log.Debug("kafkaserver: TLS handshake failed", slog.String("listener", c.listener.Name),
		slog.String("remote", c.remote), slog.Any("err", err))
}
