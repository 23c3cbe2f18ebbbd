package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"
)

// minVersion is the oldest protocol Fjord speaks, on both sides: TLS 1.0
// and 1.1 are deprecated (RFC 8996), and Kafka's default
// ssl.enabled.protocols stopped offering them in 2.5.
const minVersion = tls.VersionTLS12

// ClientAuth is Kafka's ssl.client.auth: whether a server asks its
// clients for a certificate.
type ClientAuth int8

const (
	// ClientAuthNone asks for no certificate ("none", Kafka's default).
	ClientAuthNone ClientAuth = iota
	// ClientAuthRequested asks for one; a client may send none, but one
	// it sends must verify against the CA file ("requested": Java's
	// setWantClientAuth, which also fails the handshake on a bad
	// certificate rather than ignoring it).
	ClientAuthRequested
	// ClientAuthRequired refuses a client without a certificate that
	// verifies against the CA file ("required").
	ClientAuthRequired
	numClientAuths
)

// ParseClientAuth parses Kafka's spellings of ssl.client.auth, ignoring
// case as Kafka's SslClientAuth.forConfig does. "" is "none", Kafka's
// value when the setting is absent.
func ParseClientAuth(s string) (ClientAuth, error) {
	switch strings.ToLower(s) {
	case "", "none":
		return ClientAuthNone, nil
	case "requested":
		return ClientAuthRequested, nil
	case "required":
		return ClientAuthRequired, nil
	}
	return 0, fmt.Errorf("tlsconf: ssl.client.auth %q is none of none, requested, required", s)
}

// String returns Kafka's spelling.
func (a ClientAuth) String() string {
	switch a {
	case ClientAuthNone:
		return "none"
	case ClientAuthRequested:
		return "requested"
	case ClientAuthRequired:
		return "required"
	}
	return fmt.Sprintf("ClientAuth(%d)", int(a))
}

func (a ClientAuth) tlsType() tls.ClientAuthType {
	switch a {
	case ClientAuthNone:
		return tls.NoClientCert
	case ClientAuthRequested:
		return tls.VerifyClientCertIfGiven
	case ClientAuthRequired:
		return tls.RequireAndVerifyClientCert
	}
	panic(fmt.Sprintf("tlsconf: %v", a))
}

// ServerConfig returns the configuration of a listener that presents
// the Store's certificate and treats client certificates as auth says,
// verifying them against the Store's CA file.
//
// The returned config only dispatches: its GetConfigForClient hands each
// handshake the config built for the snapshot in force (once per
// snapshot, not per handshake), so a reload reaches new handshakes and
// leaves open connections alone. Fields set on the returned config are
// therefore not used by handshakes. On a Store without CertFile every
// handshake fails with ErrNoCertificate.
//
// Resumed sessions: crypto/tls re-verifies a resumed client's chains
// against the current config's ClientCAs and time, so a CA removed from
// the CA file stops resumptions too, not only new full handshakes.
func (s *Store) ServerConfig(auth ClientAuth) *tls.Config {
	if auth < 0 || auth >= numClientAuths {
		panic(fmt.Sprintf("tlsconf: ServerConfig(%v)", auth))
	}
	return &tls.Config{
		MinVersion: minVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := s.snapshot().server[auth]
			if c == nil {
				return nil, ErrNoCertificate
			}
			return c, nil
		},
	}
}

// newServerConfig is one snapshot's config for one ClientAuth.
func newServerConfig(cert *tls.Certificate, roots *x509.CertPool, auth ClientAuth, now func() time.Time) *tls.Config {
	clientCAs := roots
	if clientCAs == nil && auth != ClientAuthNone {
		// Without a CA file, trust no client certificate. A nil
		// ClientCAs would make crypto/tls verify against the system's
		// roots: any publicly issued certificate would be a client.
		clientCAs = x509.NewCertPool()
	}
	return &tls.Config{
		MinVersion:   minVersion,
		Certificates: []tls.Certificate{*cert},
		ClientAuth:   auth.tlsType(),
		ClientCAs:    clientCAs,
		Time:         now,
	}
}

// ClientConfig returns the configuration of a client (inter-broker
// dialing) that verifies the server's certificate for serverName
// against the Store's CA file (the system's roots without one) and
// presents the Store's certificate when the server asks for one (none
// on a Store without CertFile).
//
// Both read the snapshot in force at each handshake, so one config may
// be kept and reused across reloads. That is why the verification is
// VerifyConnection's and InsecureSkipVerify is set: crypto/tls's own
// verification reads RootCAs, fixed when the config is made.
// VerifyConnection does the same verification (chain to a root, time,
// server-auth usage, host name) and also runs on resumed sessions.
//
// serverName may be "" for a caller that sets the name per dial by
// cloning the config (as tls.Dial does); the name sent in SNI is then
// verified, which for an IP address is none: such a handshake fails
// with ErrNoServerName. Pass IP addresses here.
func (s *Store) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:         minVersion,
		ServerName:         serverName,
		InsecureSkipVerify: true, // see VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyServer(cs, serverName, s.snapshot().roots, s.opts.Now())
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cert := s.snapshot().cert; cert != nil {
				// Sent even if the server's list of acceptable CAs
				// does not name ours: its refusal ("unknown
				// authority") says more than sending nothing would.
				return cert, nil
			}
			return &tls.Certificate{}, nil
		},
	}
}

// verifyServer is crypto/tls's verification of a server's chain
// (handshake_client.go, verifyServerCertificate) against roots.
func verifyServer(cs tls.ConnectionState, serverName string, roots *x509.CertPool, now time.Time) error {
	if serverName == "" {
		serverName = cs.ServerName
	}
	if serverName == "" {
		return ErrNoServerName
	}
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tlsconf: the server sent no certificate")
	}
	opts := x509.VerifyOptions{
		Roots:         roots,
		CurrentTime:   now,
		DNSName:       serverName,
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("tlsconf: server certificate: %w", err)
	}
	return nil
}
