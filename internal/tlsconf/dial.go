package tlsconf

import (
	"context"
	"crypto/tls"
	"net"
)

// DialContext dials addr (host:port) with TLS as a client of the store:
// the server's certificate is checked against the trust store for host,
// whether host is a name or an IP address, and the store's certificate
// is presented if the server asks. Its signature is kgo.Dialer's.
//
// Why not kgo.DialTLSConfig(ClientConfig("")): ClientConfig verifies in
// VerifyConnection against the name it was given, falling back to the
// name the handshake sent in SNI, and crypto/tls sends no SNI for an IP
// address, so a broker dialed at 10.0.0.4 could not be verified. Here
// the name is the dialed host, always.
func (s *Store) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	d := &tls.Dialer{Config: s.ClientConfig(host)}
	return d.DialContext(ctx, network, addr)
}
