package controller

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/tlsconf"
)

// tlsPKI is a test CA and the principals its Admit takes, as the node's
// super users.
type tlsPKI struct {
	t      *testing.T
	ca     *tlsconf.CA
	admits []string
}

func newTLSPKI(t *testing.T, admits ...string) *tlsPKI {
	t.Helper()
	ca, err := tlsconf.NewCA("fjord test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &tlsPKI{t: t, ca: ca, admits: admits}
}

// issue is a certificate for CN=name valid for 127.0.0.1, as client and
// server.
func (p *tlsPKI) issue(name string) (certPEM, keyPEM []byte) {
	p.t.Helper()
	certPEM, keyPEM, err := p.ca.Issue(tlsconf.IssueOptions{CommonName: name, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		Client: true, Server: true})
	if err != nil {
		p.t.Fatal(err)
	}
	return certPEM, keyPEM
}

// transport is the TransportTLS a node with CN=name builds (node's
// controller_tls.go): a tlsconf Store, client certificates required,
// Admit taking the principals of p.admits.
func (p *tlsPKI) transport(name string) *TransportTLS {
	p.t.Helper()
	dir := p.t.TempDir()
	certPEM, keyPEM := p.issue(name)
	files, err := tlsconf.WriteFiles(dir, name, certPEM, keyPEM)
	if err != nil {
		p.t.Fatal(err)
	}
	caFiles, err := tlsconf.WriteFiles(dir, "ca", p.ca.CertPEM(), nil)
	if err != nil {
		p.t.Fatal(err)
	}
	files.CAFile = caFiles.CertFile
	store, err := tlsconf.Load(files, tlsconf.Options{})
	if err != nil {
		p.t.Fatal(err)
	}
	return &TransportTLS{
		Server: store.ServerConfig(tlsconf.ClientAuthRequired),
		Client: func(addr string) *tls.Config {
			host, _, _ := net.SplitHostPort(addr)
			return store.ClientConfig(host)
		},
		Admit: func(cs tls.ConnectionState) error {
			principal, ok := tlsconf.Principal(cs)
			if !ok || !slices.Contains(p.admits, principal) {
				return fmt.Errorf("principal %q is not a node's", principal)
			}
			return nil
		},
	}
}

// clientConfig is a plain crypto/tls client that trusts p's CA and
// presents certPEM (none when nil).
func (p *tlsPKI) clientConfig(certPEM, keyPEM []byte) *tls.Config {
	p.t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(p.ca.Certificate())
	cfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
	if certPEM != nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			p.t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// closedWithin reports whether conn's peer closes it (or fails it)
// within 5 s, reading and discarding what comes.
func closedWithin(conn net.Conn) error {
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("still open after 5s")
	}
	return nil
}

// A controller port with mutual TLS hands Raft a connection from a node
// whose certificate Admit takes, and closes, before anything reaches
// Raft: a plaintext connection (a node without TLS, or before it), bytes
// that are not a ClientHello, no client certificate, a certificate of
// another CA, and one of the right CA whose principal Admit refuses (a
// client's). The refusals are logged, rate-limited.
func TestTransportTLSMux(t *testing.T) {
	pki := newTLSPKI(t, "User:CN=node-1", "User:CN=node-2")
	var logs testutil.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m1, err := newMuxLayer("127.0.0.1:0", log, pki.transport("node-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Close()
	m1.setQuorumID(quorumID{}) // unknown: the hello admits any id
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := m1.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	m2, err := newMuxLayer("127.0.0.1:0", log, pki.transport("node-2"))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	addr := m1.Addr().String()

	garbage := bytes.Repeat([]byte{0xff}, 64)
	hello := append(append([]byte{quorumHelloByte}, make([]byte, quorumIDLen)...), 0)
	clientPEM, clientKey := pki.issue("client-1")
	other := newTLSPKI(t)
	otherPEM, otherKey := other.issue("node-3")
	for _, tc := range []struct {
		name string
		tls  *tls.Config // nil: plaintext
		send []byte
	}{
		{"plaintext hello and Raft bytes", nil, append(hello, garbage...)},
		{"plaintext join request", nil, []byte("\xf1{\"node_id\":7,\"addr\":\"127.0.0.1:1\"}\n")},
		{"garbage instead of a ClientHello", nil, garbage},
		{"a TLS record header and garbage", nil, append([]byte{0x16, 0x03, 0x01, 0x00, 0x40}, garbage...)},
		{"no client certificate", pki.clientConfig(nil, nil), hello},
		{"a certificate of another CA", pki.clientConfig(otherPEM, otherKey), hello},
		{"a client's certificate of the right CA", pki.clientConfig(clientPEM, clientKey), hello},
		{"a client's certificate again", pki.clientConfig(clientPEM, clientKey), hello},
	} {
		var conn net.Conn
		if tc.tls == nil {
			conn, err = net.Dial("tcp", addr)
		} else {
			// A TLS 1.3 client finishes its handshake before the server
			// judges its certificate: the refusal is an alert or a close
			// after it.
			conn, err = tls.Dial("tcp", addr, tc.tls)
		}
		if err != nil {
			if tc.tls == nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			continue // refused in the handshake
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write(tc.send) // may fail: the server has closed
		if tcp, ok := conn.(*net.TCPConn); ok {
			tcp.CloseWrite()
		}
		if err := closedWithin(conn); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		conn.Close()
	}

	// The node's own Dial gets through, and is the first connection Raft
	// accepts: none of the refused ones got there.
	c, err := m2.Dial(raft.ServerAddress(addr), 5*time.Second)
	if err != nil {
		t.Fatalf("Dial with an admitted certificate: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte{0, 'p', 'i', 'n', 'g'}); err != nil {
		t.Fatal(err)
	}
	var got net.Conn
	select {
	case got = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("Raft accepted no connection from the admitted node")
	}
	defer got.Close()
	got.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 5)
	if _, err := io.ReadFull(got, buf); err != nil || string(buf) != "\x00ping" {
		t.Fatalf("Raft read %q, %v; want the dialer's bytes \"\\x00ping\"", buf, err)
	}
	if _, ok := got.(*tls.Conn); !ok {
		t.Fatalf("Raft's connection is a %T, want a *tls.Conn", got)
	}
	if _, err := got.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf[:4]); err != nil || string(buf[:4]) != "pong" {
		t.Fatalf("dialer read %q, %v", buf[:4], err)
	}
	select {
	case extra := <-accepted:
		t.Fatalf("Raft accepted a second connection from %s", extra.RemoteAddr())
	default:
	}
	for msg, want := range map[string]int{
		// The client's certificate came twice: logged once.
		"may not speak to the controller quorum": 1,
		// plaintext and garbage (one key for the host), no certificate,
		// another CA: the first of the host logged.
		"no TLS handshake with a certificate this node trusts": 1,
	} {
		if n := strings.Count(logs.String(), msg); n != want {
			t.Errorf("%q logged %d times, want %d:\n%s", msg, n, want, logs.String())
		}
	}
}

// A broker-only node's join request over TLS: the voter admits it as an
// observer; the same request in plaintext, or with a client's
// certificate, is closed unanswered and adds no one.
func TestTransportTLSJoin(t *testing.T) {
	pki := newTLSPKI(t, "User:CN=node-1", "User:CN=node-7")
	c := openForJoin(t, Config{NodeID: 1, TLS: pki.transport("node-1")})
	leading(t, c)
	req := joinRequest{NodeID: 7, Addr: "127.0.0.1:1"}
	if resp, err := askToJoin(c.Addr(), req, nil); err == nil {
		t.Fatalf("plaintext join answered %+v, want the connection closed", resp)
	}
	// The right CA, a principal the voter does not admit.
	if resp, err := askToJoin(c.Addr(), req, pki.transport("client-1")); err == nil {
		t.Fatalf("join with a client's certificate answered %+v, want the connection closed", resp)
	}
	if obs := c.observers(); len(obs) != 0 {
		t.Fatalf("observers %v after refused joins, want none", obs)
	}
	resp, err := askToJoin(c.Addr(), req, pki.transport("node-7"))
	for err == nil && resp.Error == "not the leader" {
		leading(t, c)
		resp, err = askToJoin(c.Addr(), req, pki.transport("node-7"))
	}
	if err != nil || resp.Error != "" {
		t.Fatalf("join over TLS: %+v, %v", resp, err)
	}
	if obs := c.observers(); !slices.Equal(obs, []int32{7}) {
		t.Fatalf("observers %v, want [7]", obs)
	}
}

// Three voters over mutual TLS elect a leader and commit: every voter
// has the cluster id the leader committed, and a Barrier commits.
func TestTransportTLSQuorumOfThree(t *testing.T) {
	pki := newTLSPKI(t, "User:CN=node-1", "User:CN=node-2", "User:CN=node-3")
	addrs := loopbackAddrs(t, 3)
	var voters []Voter
	for i, a := range addrs {
		voters = append(voters, Voter{NodeID: int32(i + 1), Addr: a})
	}
	var cs []*Controller
	for i, a := range addrs {
		cs = append(cs, openForJoin(t, Config{NodeID: int32(i + 1), Addr: a, Voters: voters,
			TLS: pki.transport(fmt.Sprintf("node-%d", i+1))}))
	}
	var lead *Controller
	testutil.Eventually(t, 20*time.Second, func() error {
		id := cs[0].ControllerID()
		for i, c := range cs {
			if got := c.ControllerID(); got < 0 || got != id {
				return fmt.Errorf("voter %d names controller %d, voter 1 %d", i+1, got, id)
			}
		}
		lead = cs[id-1]
		return nil
	})
	if err := lead.raft.Barrier(10 * time.Second).Error(); err != nil {
		t.Fatalf("commit over TLS: %v", err)
	}
	for _, c := range cs {
		withClusterID(t, c)
	}
	if a, b, c := cs[0].Image().ClusterID, cs[1].Image().ClusterID, cs[2].Image().ClusterID; a != b || b != c {
		t.Fatalf("cluster ids %q %q %q, want one", a, b, c)
	}
}

// A TransportTLS without Admit is refused: a mux that verified
// certificates but admitted every one would let clients vote.
func TestTransportTLSNeedsAdmit(t *testing.T) {
	sec := newTLSPKI(t).transport("node-1")
	sec.Admit = nil
	if _, err := Open(context.Background(), Config{NodeID: 1, Dir: t.TempDir(), Addr: "127.0.0.1:0", TopicConfigs: testConfigs, TLS: sec}); err == nil {
		t.Fatal("Open with a TransportTLS without Admit succeeded")
	}
}
