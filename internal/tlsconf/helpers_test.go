package tlsconf

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/clock"
)

// testTimeout bounds every network wait of these tests; a handshake on
// loopback takes a millisecond.
const testTimeout = 10 * time.Second

func newTestCA(t *testing.T, name string) *CA {
	t.Helper()
	ca, err := NewCA(name, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func issue(t *testing.T, ca *CA, opts IssueOptions) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(opts)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

// serverOptions is a certificate for the test server at 127.0.0.1.
func serverOptions() IssueOptions {
	return IssueOptions{CommonName: "broker", DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true}
}

func serialOf(t *testing.T, certPEM []byte) *big.Int {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber
}

func writeFiles(t *testing.T, dir, name string, certPEM, keyPEM []byte) Files {
	t.Helper()
	files, err := WriteFiles(dir, name, certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeInPlace rewrites path keeping its inode (truncate and write), as
// an editor or `cat new > file` does.
func writeInPlace(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// testStore is a Store on a fake clock, recording its callbacks.
type testStore struct {
	*Store
	clock *clock.Fake

	cbMu     sync.Mutex // guards reloads, failures
	reloads  int
	failures []error
}

func loadTestStore(t *testing.T, files Files) *testStore {
	t.Helper()
	ts := &testStore{clock: clock.NewFake(time.Now())}
	s, err := Load(files, Options{
		Now: ts.clock.Now,
		OnReload: func() {
			ts.cbMu.Lock()
			defer ts.cbMu.Unlock()
			ts.reloads++
		},
		OnReloadError: func(err error) {
			ts.cbMu.Lock()
			defer ts.cbMu.Unlock()
			ts.failures = append(ts.failures, err)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ts.Store = s
	return ts
}

// tick moves the store's clock past its check interval, so the next
// handshake looks at the files.
func (ts *testStore) tick() { ts.clock.Advance(defaultCheckInterval) }

func (ts *testStore) counts() (reloads int, failures []error) {
	ts.cbMu.Lock()
	defer ts.cbMu.Unlock()
	return ts.reloads, append([]error(nil), ts.failures...)
}

// echoServer accepts TLS connections with config and echoes what they
// send. Each handshake's result goes to states (the server's
// ConnectionState) or handshakeErrs.
type echoServer struct {
	addr          string
	states        chan tls.ConnectionState
	handshakeErrs chan error
}

func startEchoServer(t *testing.T, config *tls.Config) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	es := &echoServer{addr: ln.Addr().String(), states: make(chan tls.ConnectionState, 64), handshakeErrs: make(chan error, 64)}
	var wg sync.WaitGroup
	var connsMu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		connsMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		connsMu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			raw, err := ln.Accept()
			if err != nil {
				return // closed by Cleanup
			}
			connsMu.Lock()
			conns = append(conns, raw)
			connsMu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn := tls.Server(raw, config)
				conn.SetDeadline(time.Now().Add(testTimeout))
				if err := conn.Handshake(); err != nil {
					conn.Close()
					select {
					case es.handshakeErrs <- err:
					default: // a test that does not look; never block Cleanup
					}
					return
				}
				select {
				case es.states <- conn.ConnectionState():
				default:
				}
				io.Copy(conn, conn)
				conn.Close()
			}()
		}
	}()
	return es
}

// state returns the server's ConnectionState of the next successful
// handshake.
func (es *echoServer) state(t *testing.T) tls.ConnectionState {
	t.Helper()
	select {
	case cs := <-es.states:
		return cs
	case <-time.After(testTimeout):
		t.Fatal("no handshake completed on the server")
		return tls.ConnectionState{}
	}
}

// handshakeErr returns the server's error of the next failed handshake.
func (es *echoServer) handshakeErr(t *testing.T) error {
	t.Helper()
	select {
	case err := <-es.handshakeErrs:
		return err
	case <-time.After(testTimeout):
		t.Fatal("no handshake failed on the server")
		return nil
	}
}

// dial connects to es with config and completes the handshake, or
// returns its error (the client's view; with TLS 1.3 a client
// certificate refused by the server shows on the first read, which dial
// does, by an echo).
func dial(t *testing.T, es *echoServer, config *tls.Config) (*tls.Conn, error) {
	t.Helper()
	d := &net.Dialer{Timeout: testTimeout}
	conn, err := tls.DialWithDialer(d, "tcp", es.addr, config)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { conn.Close() })
	if err := echo(conn, "hello"); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// echo sends msg and reads it back.
func echo(conn *tls.Conn, msg string) error {
	conn.SetDeadline(time.Now().Add(testTimeout))
	if _, err := conn.Write([]byte(msg)); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, got); err != nil {
		return err
	}
	if !bytes.Equal(got, []byte(msg)) {
		return errors.New("echo: got " + string(got))
	}
	return nil
}

// clientConfig is a plain crypto/tls client trusting ca, presenting
// cert and key if given.
func clientConfig(t *testing.T, ca *CA, certPEM, keyPEM []byte) *tls.Config {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	c := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
	if certPEM != nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		// Always sent: with Certificates, crypto/tls sends nothing when
		// the server's acceptable CAs do not name the issuer, and the
		// server's verification would go untested.
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &pair, nil
		}
	}
	return c
}

func mustDial(t *testing.T, es *echoServer, config *tls.Config) *tls.Conn {
	t.Helper()
	conn, err := dial(t, es, config)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	return conn
}

func peerSerial(conn *tls.Conn) *big.Int {
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// serverFiles writes a server certificate and key issued by ca, and ca's
// certificate as CA file, into a new directory.
func serverFiles(t *testing.T, ca *CA) (Files, []byte) {
	t.Helper()
	dir := t.TempDir()
	certPEM, keyPEM := issue(t, ca, serverOptions())
	files, err := WriteFiles(dir, "broker", certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	files.CAFile = filepath.Join(dir, "ca.crt")
	writeFile(t, files.CAFile, ca.CertPEM())
	return files, certPEM
}

// Subjects built attribute by attribute, for DistinguishedName's tests.

type testATV struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// testRDNSET's name ends in SET, so encoding/asn1 encodes it as a SET OF
// (sorted, as DER wants).
type testRDNSET []testATV

var (
	oidCN     = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidSerial = asn1.ObjectIdentifier{2, 5, 4, 5}
	oidC      = asn1.ObjectIdentifier{2, 5, 4, 6}
	oidL      = asn1.ObjectIdentifier{2, 5, 4, 7}
	oidST     = asn1.ObjectIdentifier{2, 5, 4, 8}
	oidStreet = asn1.ObjectIdentifier{2, 5, 4, 9}
	oidO      = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidOU     = asn1.ObjectIdentifier{2, 5, 4, 11}
	oidTitle  = asn1.ObjectIdentifier{2, 5, 4, 12}
	oidPostal = asn1.ObjectIdentifier{2, 5, 4, 17}
	oidEmail  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	oidDC     = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	oidUID    = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
)

func attr(oid asn1.ObjectIdentifier, tag int, value string) testATV {
	return testATV{Type: oid, Value: asn1.RawValue{Class: asn1.ClassUniversal, Tag: tag, Bytes: []byte(value)}}
}

func utf8Attr(oid asn1.ObjectIdentifier, value string) testATV {
	return attr(oid, asn1.TagUTF8String, value)
}

// subjectDER encodes a Name whose RDNs are rdns, most significant first
// (as certificates store them; printed last to first).
func subjectDER(t *testing.T, rdns ...testRDNSET) []byte {
	t.Helper()
	if rdns == nil {
		rdns = []testRDNSET{}
	}
	der, err := asn1.Marshal(rdns)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// certWithSubject is a client certificate issued by ca whose subject is
// exactly rawSubject, parsed by crypto/x509 as a handshake would.
func certWithSubject(t *testing.T, ca *CA, rawSubject []byte) *x509.Certificate {
	t.Helper()
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		RawSubject:   rawSubject,
		// Java refuses a certificate with neither subject nor SAN.
		DNSNames:    []string{"client.example"},
		NotBefore:   time.Now().Add(-time.Hour),
		NotAfter:    time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
