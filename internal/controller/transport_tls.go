package controller

import (
	"crypto/tls"
	"errors"
	"net"
	"time"
)

// Mutual TLS on the controller port (issue 20; DESIGN.md section 26, "As
// built: the controller's transport over mutual TLS"). Without it the
// port is plaintext: anyone who reaches it reads the metadata log
// (salted SCRAM credentials included) and a node that reaches it
// follows the log, or stands for election, without authenticating.
//
// With TransportTLS every connection of the port, Raft's and join
// requests alike, is TLS first and the muxLayer's bytes (join.go's
// diagram) second:
//
//	accept -> TLS handshake (client certificate required and verified)
//	       -> Admit(connection state) -> first byte: hello | join | ...
//
// The handshake runs in route's goroutine under joinReadTimeout, never
// in the accept loop, so a peer that connects and sends nothing holds
// one goroutine for a few seconds and no one else's accept. Verifying
// the certificate against the CA is not enough: the CA that signs the
// nodes' certificates usually signs the clients' too (one --ssl-ca-file
// serves both), and a client with a certificate must not vote in the
// quorum or follow the metadata log. Admit is where the node says who
// may: it maps the certificate to its principal with
// ssl.principal.mapping.rules and requires a super user, which the
// nodes' own principals are on an authorizing cluster.
//
// The dialing side (Dial for Raft, askToJoin for an observer's join)
// does the handshake before writing its first byte, verifying the
// server's certificate for the dialed address's host, as the
// inter-broker clients do. It does not apply Admit to the server: the
// server's certificate is verified for the address the voter list
// names, which is what a voter's identity is.

// TransportTLS secures the controller port with mutual TLS. Its configs
// and Admit are called from the transport's goroutines, several at once.
type TransportTLS struct {
	// Server is the accepting side's configuration. It must require and
	// verify client certificates (tlsconf's ServerConfig with
	// ClientAuthRequired); Admit sees only verified ones.
	Server *tls.Config
	// Client returns the configuration for dialing addr (host:port): it
	// verifies the server's certificate for addr's host and presents
	// this node's certificate (tlsconf's ClientConfig of the host).
	Client func(addr string) *tls.Config
	// Admit decides whether the verified peer of an accepted connection
	// may speak Raft or ask to join; an error refuses it (and is
	// logged). Required.
	Admit func(tls.ConnectionState) error
}

func (t *TransportTLS) check() error {
	if t.Server == nil || t.Client == nil || t.Admit == nil {
		return errors.New("TransportTLS needs Server, Client and Admit")
	}
	return nil
}

// serverHandshake does the accepting side's handshake on c and Admit,
// within timeout. It returns the TLS connection, or the reason to refuse
// c and the kind of the refusal (for refusalLog's key).
func (t *TransportTLS) serverHandshake(c net.Conn, timeout time.Duration) (net.Conn, string, error) {
	tc := tls.Server(c, t.Server)
	c.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		return nil, "tls-handshake", err
	}
	c.SetDeadline(time.Time{})
	if err := t.Admit(tc.ConnectionState()); err != nil {
		return nil, "tls-admit", err
	}
	return tc, "", nil
}

// dial opens a connection to addr within timeout (0: none, as
// net.DialTimeout), TLS when t is set, the handshake done within
// timeout too (0: joinReadTimeout). A nil t dials plain TCP.
func (t *TransportTLS) dial(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil || t == nil {
		return c, err
	}
	if timeout <= 0 {
		timeout = joinReadTimeout
	}
	tc := tls.Client(c, t.Client(addr))
	c.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return tc, nil
}
