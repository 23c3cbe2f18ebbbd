package node

// The node's authorizer: Kafka's ACLs on every Kafka API (issue 20,
// slice 3). The bindings are in the metadata log; what is here is the
// static part Kafka keeps in broker config, super.users and
// allow.everyone.if.no.acl.found, and the readiness rule.
//
// Authorization is on once a listener authenticates clients (SASL, or
// SSL that requires a certificate), or when the operator sets either
// setting. Then allow.everyone.if.no.acl.found defaults to false: a
// principal may do only what a binding allows, and the nodes' own
// principal must be a super user, as in Kafka. A node whose inter-broker
// listener is SASL is one itself (its inter-broker user is added to the
// super users): the nodes need every right their requests carry (they
// forward every client's admin change), and a cluster upgraded to this
// version keeps working without new settings.
//
// On a node that authenticates nobody and sets neither, authorization
// is off, as in a Kafka broker without an authorizer: every principal is
// User:ANONYMOUS, so bindings could tell no one apart, and the first
// binding on the cluster would take CLUSTER_ACTION from the nodes
// themselves (Kafka's rule that one binding on a resource takes it from
// everyone it does not name) and stop their replication. The ACL APIs
// answer SECURITY_DISABLED there.

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/kafkaserver"
	"github.com/fjordmq/fjord/internal/listener"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/tlsconf"
)

// AuthzConfig is the node's authorizer configuration (Kafka's
// StandardAuthorizer settings).
type AuthzConfig struct {
	// SuperUsers is super.users: principals ("User:admin") allowed
	// everything, compared as strings (acl.ParseSuperUsers parses
	// Kafka's ';'-separated value).
	SuperUsers []string
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found. Nil:
	// true when no listener authenticates its clients (every principal
	// is User:ANONYMOUS, so ACLs could tell no one apart), false when
	// one does.
	AllowEveryoneIfNoACLFound *bool
}

// checkAuthz checks the super users' shape.
func (c *Config) checkAuthz() error {
	for _, u := range c.Authz.SuperUsers {
		if len(u) > acl.MaxPrincipalBytes {
			return fmt.Errorf("%w: super-users: a principal of %d bytes (at most %d)", ErrInvalidConfig, len(u), acl.MaxPrincipalBytes)
		}
		if typ, name, ok := acl.ParsePrincipal(u); !ok || typ == "" || name == "" {
			return fmt.Errorf("%w: super-users %q: want Type:Name principals separated by ';' (User:admin;User:broker)", ErrInvalidConfig, u)
		}
	}
	return nil
}

// authenticates reports whether some listener of the node authenticates
// its clients: a SASL listener, or an SSL one that requires a client
// certificate.
func (c *Config) authenticates() bool {
	ls, _ := c.kafkaListeners()
	for _, l := range ls {
		switch {
		case l.Protocol.SASL():
			return true
		case l.Protocol == listener.SSL:
			if auth, _ := tlsconf.ParseClientAuth(c.TLS.ClientAuth); auth == tlsconf.ClientAuthRequired {
				return true
			}
		}
	}
	return false
}

// allowEveryoneIfNoACLFound is AuthzConfig.AllowEveryoneIfNoACLFound,
// or its default.
func (c *Config) allowEveryoneIfNoACLFound() bool {
	if v := c.Authz.AllowEveryoneIfNoACLFound; v != nil {
		return *v
	}
	return !c.authenticates()
}

// authorizes reports whether the node authorizes requests (see the
// file comment).
func (c *Config) authorizes() bool {
	return c.authenticates() || len(c.Authz.SuperUsers) > 0 || c.Authz.AllowEveryoneIfNoACLFound != nil
}

// aclConfig is the Kafka listener's authorization, nil when it is off:
// the static settings, and Ready, which holds requests of principals
// other than super users until this process's registration is in the
// image (so the image has replayed the metadata log past every binding
// committed before the node started, as Kafka's authorizer waits for the
// log it saw at startup).
func (n *Node) aclConfig() *kafkaserver.ACLConfig {
	if !n.cfg.authorizes() {
		return nil
	}
	allow := n.cfg.allowEveryoneIfNoACLFound()
	supers := slices.Clone(n.cfg.Authz.SuperUsers)
	own, known := n.interBrokerPrincipal()
	if known && own != kafkaserver.Anonymous.String() && !slices.Contains(supers, own) {
		supers = append(supers, own)
	}
	cfg := &kafkaserver.ACLConfig{
		Config: acl.Config{SuperUsers: supers, AllowEveryoneIfNoACLFound: allow},
		Ready: func(img *metadata.Image) bool {
			b, ok := img.Brokers[n.cfg.NodeID]
			return ok && b.IncarnationID == n.incarnation
		},
	}
	if known && !allow && !slices.Contains(supers, own) {
		n.log.Warn("the node's own principal is not a super user: with allow.everyone.if.no.acl.found off, "+
			"replication, forwarding and the HTTP gateway need bindings for it (CLUSTER_ACTION on the cluster, and more); "+
			"prefer a SASL or mTLS inter-broker listener to naming User:ANONYMOUS a super user",
			slog.String("principal", own), slog.Any("super_users", supers))
	}
	if slices.Contains(supers, kafkaserver.Anonymous.String()) {
		for _, l := range n.unauthenticatedListeners() {
			n.log.Warn("User:ANONYMOUS is a super user: every client of this listener passes every ACL check",
				slog.String("listener", l))
		}
	}
	return cfg
}

// unauthenticatedListeners names the listeners whose clients are
// User:ANONYMOUS: PLAINTEXT, and SSL without required certificates.
func (n *Node) unauthenticatedListeners() []string {
	auth, _ := tlsconf.ParseClientAuth(n.cfg.TLS.ClientAuth)
	var out []string
	for _, b := range n.listeners {
		if !b.Protocol.SASL() && (b.Protocol != listener.SSL || auth != tlsconf.ClientAuthRequired) {
			out = append(out, b.Name)
		}
	}
	return out
}

// interBrokerPrincipal is the principal the node's own clients have on
// its inter-broker listener, when the node can tell: its SASL user, or
// User:ANONYMOUS on a plaintext listener. A certificate's principal
// depends on the mapping rules; it is not worked out here.
func (n *Node) interBrokerPrincipal() (string, bool) {
	switch b := n.interBroker(); {
	case b.Protocol.SASL():
		return "User:" + n.cfg.SASL.InterBrokerUser, true
	case b.Protocol == listener.Plaintext:
		return kafkaserver.Anonymous.String(), true
	}
	return "", false
}
