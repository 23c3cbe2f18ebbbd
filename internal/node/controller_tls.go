package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/fjordmq/fjord/internal/controller"
	"github.com/fjordmq/fjord/internal/tlsconf"
)

// The controller port's security (--controller-security-protocol):
// PLAINTEXT, or SSL, mutual TLS with the node's certificate
// (controller/transport_tls.go). Kafka names the controller listener's
// protocol in listener.security.protocol.map; Fjord's controller port is
// one, so it has a setting of its own.
//
// Who may speak to the quorum: a peer whose certificate the CA file
// verifies and whose principal (ssl.principal.mapping.rules applied, as
// on the SSL listeners) is a super user. The CA check alone is not
// enough: the CA that signs the nodes' certificates usually signs the
// clients' too, and a client must not vote or read the metadata log.
// The nodes' own principals are super users anyway on a cluster that
// authorizes (authz.go), so SSL asks for no new list.

// Controller security protocols (Config.ControllerSecurityProtocol).
const (
	ControllerPlaintext = "PLAINTEXT"
	ControllerSSL       = "SSL"
)

// controllerSSL reports whether the controller port is mutual TLS.
func (c Config) controllerSSL() bool {
	return strings.EqualFold(c.ControllerSecurityProtocol, ControllerSSL)
}

// checkControllerSecurity checks controller-security-protocol and what
// SSL needs.
func (c Config) checkControllerSecurity() error {
	switch strings.ToUpper(c.ControllerSecurityProtocol) {
	case "", ControllerPlaintext:
		return nil
	case ControllerSSL:
	default:
		return fmt.Errorf("%w: controller-security-protocol %q: allowed: PLAINTEXT or SSL", ErrInvalidConfig, c.ControllerSecurityProtocol)
	}
	switch {
	case c.TLS.CertFile == "" || c.TLS.KeyFile == "":
		return fmt.Errorf("%w: controller-security-protocol SSL: the controller port presents this node's certificate, so ssl-cert-file and ssl-key-file are needed", ErrInvalidConfig)
	case c.TLS.CAFile == "":
		return fmt.Errorf("%w: controller-security-protocol SSL: the other nodes' certificates are verified against ssl-ca-file, which is not set", ErrInvalidConfig)
	case len(c.Authz.SuperUsers) == 0:
		return fmt.Errorf("%w: controller-security-protocol SSL: only super users may speak to the controller quorum: name the nodes' certificate principals in super-users (e.g. User:CN=node-1)", ErrInvalidConfig)
	}
	return nil
}

// controllerTLS is the controller's transport security, nil for
// PLAINTEXT. REQUIRES: openTLS done.
func (n *Node) controllerTLS() *controller.TransportTLS {
	if !n.cfg.controllerSSL() {
		return nil
	}
	supers := slices.Clone(n.cfg.Authz.SuperUsers)
	store, mapper := n.tls, n.principals
	return &controller.TransportTLS{
		Server: store.ServerConfig(tlsconf.ClientAuthRequired),
		Client: func(addr string) *tls.Config {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			return store.ClientConfig(host)
		},
		Admit: func(cs tls.ConnectionState) error { return admitController(mapper, supers, cs) },
	}
}

// admitController is the controller port's Admit: the verified peer
// certificate's principal must be one of supers.
func admitController(mapper *tlsconf.PrincipalMapper, supers []string, cs tls.ConnectionState) error {
	p, ok, err := mapper.Principal(cs)
	switch {
	case err != nil:
		return err
	case !ok:
		return errors.New("no verified client certificate")
	case !slices.Contains(supers, p):
		return fmt.Errorf("principal %s is not a super user (only nodes may speak to the controller quorum)", p)
	}
	return nil
}
