package tlsconf

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"
)

// DialContext verifies a server dialed by IP address (no SNI) and by
// name, and refuses one whose certificate names neither.
func TestDialContextVerifiesTheDialedHost(t *testing.T) {
	ca, err := NewCA("dial test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPEM, keyPEM, err := ca.Issue(IssueOptions{CommonName: "node", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}, Server: true, ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	files, err := WriteFiles(dir, "node", certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	caFiles, err := WriteFiles(dir, "ca", ca.CertPEM(), nil)
	if err != nil {
		t.Fatal(err)
	}
	server, err := Load(files, Options{})
	if err != nil {
		t.Fatal(err)
	}
	client, err := Load(Files{CAFile: caFiles.CertFile}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server.ServerConfig(ClientAuthNone))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.(*tls.Conn).Handshake()
				c.Write([]byte{1})
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, host := range []string{"127.0.0.1", "localhost"} {
		c, err := client.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
		if err != nil {
			t.Fatalf("dialing %s: %v", host, err)
		}
		c.Close()
	}
	// A certificate that names only localhost does not verify for the
	// IP address dialed.
	certPEM, keyPEM, err = ca.Issue(IssueOptions{CommonName: "named", DNSNames: []string{"localhost"}, Server: true, ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	named, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer named.Close()
	go func() {
		for {
			c, err := named.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); c.(*tls.Conn).Handshake() }()
		}
	}()
	if c, err := client.DialContext(ctx, "tcp", named.Addr().String()); err == nil {
		c.Close()
		t.Error("a certificate for localhost alone verified for 127.0.0.1")
	}
	if _, err := client.DialContext(ctx, "tcp", "no-port"); err == nil {
		t.Error("an address without a port was dialed")
	}
}
