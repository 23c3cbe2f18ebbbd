package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"
)

func TestParseClientAuth(t *testing.T) {
	for in, want := range map[string]ClientAuth{
		"": ClientAuthNone, "none": ClientAuthNone, "NONE": ClientAuthNone,
		"requested": ClientAuthRequested, "Requested": ClientAuthRequested,
		"required": ClientAuthRequired, "REQUIRED": ClientAuthRequired,
	} {
		got, err := ParseClientAuth(in)
		if got != want || err != nil {
			t.Errorf("ParseClientAuth(%q) = %v, %v; want %v", in, got, err, want)
		}
		if in != "" && got.String() != want.String() {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
	for _, in := range []string{"require", "want", "need", " none", "true"} {
		if got, err := ParseClientAuth(in); err == nil {
			t.Errorf("ParseClientAuth(%q) = %v, want an error", in, got)
		}
	}
}

// TestServerClientAuth: each ssl.client.auth against a client without a
// certificate, with one the CA file trusts, and with one it does not.
func TestServerClientAuth(t *testing.T) {
	ca := newTestCA(t, "ca")
	other := newTestCA(t, "other")
	files, _ := serverFiles(t, ca)
	ts := loadTestStore(t, files)
	trustedCert, trustedKey := issue(t, ca, IssueOptions{CommonName: "alice", Client: true})
	untrustedCert, untrustedKey := issue(t, other, IssueOptions{CommonName: "mallory", Client: true})

	type outcome int
	const (
		anonymous outcome = iota // accepted, no principal
		alice                    // accepted as User:CN=alice
		refused
	)
	for _, tc := range []struct {
		auth                     ClientAuth
		none, trusted, untrusted outcome
	}{
		{ClientAuthNone, anonymous, anonymous, anonymous}, // a certificate is not asked for, so not sent
		{ClientAuthRequested, anonymous, alice, refused},
		{ClientAuthRequired, refused, alice, refused},
	} {
		t.Run(tc.auth.String(), func(t *testing.T) {
			es := startEchoServer(t, ts.ServerConfig(tc.auth))
			for name, client := range map[string]struct {
				certPEM, keyPEM []byte
				want            outcome
			}{
				"no certificate": {nil, nil, tc.none},
				"trusted":        {trustedCert, trustedKey, tc.trusted},
				"untrusted":      {untrustedCert, untrustedKey, tc.untrusted},
			} {
				_, err := dial(t, es, clientConfig(t, ca, client.certPEM, client.keyPEM))
				if client.want == refused {
					if err == nil {
						t.Errorf("%s: accepted, want refused", name)
					} else {
						es.handshakeErr(t)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				principal, ok := Principal(es.state(t))
				switch {
				case client.want == anonymous && ok:
					t.Errorf("%s: principal %q, want none", name, principal)
				case client.want == alice && principal != "User:CN=alice":
					t.Errorf("%s: principal %q, %v; want User:CN=alice", name, principal, ok)
				}
			}
		})
	}
}

func TestServerRefusesOldProtocols(t *testing.T) {
	ca := newTestCA(t, "ca")
	files, _ := serverFiles(t, ca)
	ts := loadTestStore(t, files)
	es := startEchoServer(t, ts.ServerConfig(ClientAuthNone))
	for _, version := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		c := clientConfig(t, ca, nil, nil)
		c.MinVersion, c.MaxVersion = version, version
		if _, err := dial(t, es, c); err == nil {
			t.Errorf("TLS %x accepted", version)
		} else {
			es.handshakeErr(t)
		}
	}
	c := clientConfig(t, ca, nil, nil)
	c.MaxVersion = tls.VersionTLS12
	if conn := mustDial(t, es, c); conn.ConnectionState().Version != tls.VersionTLS12 {
		t.Errorf("version %x, want TLS 1.2", conn.ConnectionState().Version)
	}
	es.state(t)
}

// TestInterBroker: a Store's ClientConfig against a Store's
// ServerConfig, both sides verifying.
func TestInterBroker(t *testing.T) {
	ca := newTestCA(t, "ca")
	files, _ := serverFiles(t, ca)
	server := loadTestStore(t, files)
	es := startEchoServer(t, server.ServerConfig(ClientAuthRequired))

	dir := t.TempDir()
	certPEM, keyPEM := issue(t, ca, IssueOptions{CommonName: "broker-2", Client: true, Server: true})
	clientFiles := writeFiles(t, dir, "broker-2", certPEM, keyPEM)
	clientFiles.CAFile = files.CAFile
	client := loadTestStore(t, clientFiles)

	mustDial(t, es, client.ClientConfig("127.0.0.1"))
	if p, ok := Principal(es.state(t)); p != "User:CN=broker-2" || !ok {
		t.Errorf("principal %q, %v", p, ok)
	}

	// The name is checked: the server's certificate is not for this one.
	if _, err := dial(t, es, client.ClientConfig("other.example")); err == nil {
		t.Error("accepted a certificate for another host")
	} else {
		es.handshakeErr(t)
	}
}

func TestClientConfigVerifiesAgainstCAFile(t *testing.T) {
	ca := newTestCA(t, "ca")
	other := newTestCA(t, "other")
	files, _ := serverFiles(t, other) // a server the client's CA did not sign
	server := loadTestStore(t, files)
	es := startEchoServer(t, server.ServerConfig(ClientAuthNone))

	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	writeFile(t, caFile, ca.CertPEM())
	client := loadTestStore(t, Files{CAFile: caFile}) // trust store only: valid for a client
	config := client.ClientConfig("127.0.0.1")
	if _, err := dial(t, es, config); err == nil {
		t.Fatal("accepted a server the CA file does not trust")
	}
	es.handshakeErr(t)

	// The same config, kept, follows the CA file.
	writeFiles(t, dir, "ca", append(ca.CertPEM(), other.CertPEM()...), nil)
	client.tick()
	mustDial(t, es, config)
	es.state(t)
}

func TestClientConfigServerName(t *testing.T) {
	ca := newTestCA(t, "ca")
	files, _ := serverFiles(t, ca)
	server := loadTestStore(t, files)
	es := startEchoServer(t, server.ServerConfig(ClientAuthNone))
	client := loadTestStore(t, Files{CAFile: files.CAFile})

	// "" with an IP address: nothing to verify against (IPs are not sent
	// in SNI), so refused rather than unchecked.
	if _, err := dial(t, es, client.ClientConfig("")); !errors.Is(err, ErrNoServerName) {
		t.Errorf("dial: %v, want ErrNoServerName", err)
	} else {
		es.handshakeErr(t)
	}

	// "" with a host name set per dial by a clone (as dialers do): the
	// SNI name is verified.
	raw, err := net.DialTimeout("tcp", es.addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	c := client.ClientConfig("").Clone()
	c.ServerName = "localhost"
	conn := tls.Client(raw, c)
	defer conn.Close()
	if err := echo(conn, "x"); err != nil {
		t.Fatalf("localhost by SNI: %v", err)
	}
	es.state(t)
}

func TestTrustStoreOnlyStore(t *testing.T) {
	ca := newTestCA(t, "ca")
	files, _ := serverFiles(t, ca)
	client := loadTestStore(t, Files{CAFile: files.CAFile})

	// As a client, it presents no certificate: fine when requested...
	server := loadTestStore(t, files)
	requested := startEchoServer(t, server.ServerConfig(ClientAuthRequested))
	mustDial(t, requested, client.ClientConfig("127.0.0.1"))
	if p, ok := Principal(requested.state(t)); ok {
		t.Errorf("principal %q, want none", p)
	}
	// ...refused when required.
	required := startEchoServer(t, server.ServerConfig(ClientAuthRequired))
	if _, err := dial(t, required, client.ClientConfig("127.0.0.1")); err == nil {
		t.Error("accepted without a certificate")
	} else {
		required.handshakeErr(t)
	}

	// As a server it has nothing to present.
	es := startEchoServer(t, client.ServerConfig(ClientAuthNone))
	if _, err := dial(t, es, clientConfig(t, ca, nil, nil)); err == nil {
		t.Error("a server without a certificate accepted a handshake")
	}
	if err := es.handshakeErr(t); !errors.Is(err, ErrNoCertificate) {
		t.Errorf("server: %v, want ErrNoCertificate", err)
	}
}

// TestClientAuthWithoutCAFile: a server without a CA file trusts no
// client certificate; in particular not the system's roots.
func TestClientAuthWithoutCAFile(t *testing.T) {
	ca := newTestCA(t, "ca")
	files, _ := serverFiles(t, ca)
	files.CAFile = ""
	ts := loadTestStore(t, files)
	es := startEchoServer(t, ts.ServerConfig(ClientAuthRequired))
	certPEM, keyPEM := issue(t, ca, IssueOptions{CommonName: "alice", Client: true})
	if _, err := dial(t, es, clientConfig(t, ca, certPEM, keyPEM)); err == nil {
		t.Error("accepted a client certificate with no CA file")
	} else {
		es.handshakeErr(t)
	}
	if c := ts.current.Load().server[ClientAuthRequired]; c.ClientCAs == nil {
		t.Error("ClientCAs nil: crypto/tls would use the system's roots")
	}
}

// TestServerConfigPerSnapshot: handshakes share the config built for the
// snapshot; a reload builds new ones.
func TestServerConfigPerSnapshot(t *testing.T) {
	ca := newTestCA(t, "ca")
	files, _ := serverFiles(t, ca)
	ts := loadTestStore(t, files)
	get := ts.ServerConfig(ClientAuthRequested).GetConfigForClient
	first, err := get(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := get(&tls.ClientHelloInfo{}); again != first {
		t.Error("a second handshake got another config")
	}
	if first.MinVersion != tls.VersionTLS12 || first.ClientAuth != tls.VerifyClientCertIfGiven {
		t.Errorf("config: MinVersion %x ClientAuth %v", first.MinVersion, first.ClientAuth)
	}
	certPEM, keyPEM := issue(t, ca, serverOptions())
	writeFiles(t, filepath.Dir(files.CertFile), "broker", certPEM, keyPEM)
	ts.tick()
	if after, _ := get(&tls.ClientHelloInfo{}); after == first {
		t.Error("the reload kept the old config")
	}
}

// TestServerCertificateTime: the server's config uses Options.Now, so a
// test clock that says a client certificate expired is obeyed.
func TestServerCertificateTime(t *testing.T) {
	ca := newTestCA(t, "ca")
	files, _ := serverFiles(t, ca)
	ts := loadTestStore(t, files)
	es := startEchoServer(t, ts.ServerConfig(ClientAuthRequired))
	certPEM, keyPEM := issue(t, ca, IssueOptions{CommonName: "alice", Client: true, ValidFor: time.Hour})
	mustDial(t, es, clientConfig(t, ca, certPEM, keyPEM))
	es.state(t)
	ts.clock.Advance(2 * time.Hour)
	// The server's own certificate is valid for a year; the client's
	// expired an hour ago by the store's clock.
	if _, err := dial(t, es, clientConfig(t, ca, certPEM, keyPEM)); err == nil {
		t.Error("accepted an expired client certificate")
	} else if err := es.handshakeErr(t); !errors.As(err, new(x509.CertificateInvalidError)) {
		t.Errorf("server: %v, want an expired certificate", err)
	}
}
