package node

// The node's Kafka listeners and their TLS.
//
// A node has one or more named listeners (Config.Listeners, Kafka's
// listeners / advertised.listeners / listener.security.protocol.map), or,
// when none are given, the one PLAINTEXT listener of KafkaAddr. One of
// them is the inter-broker listener: it is registered as the broker's
// Host and Port, other nodes' replication and forwarding dial it, and so
// does this node's own HTTP gateway. Every listener is registered by
// name, so a client is answered with the endpoints of the listener it
// came in on.
//
// TLS material is one certificate, key and trust store for the node
// (Config.TLS), shared by its SSL and SASL_SSL listeners, the HTTP
// listener when it serves TLS, and the node's own clients of the
// inter-broker listener. The files are re-read when they change
// (internal/tlsconf), so rotating a certificate needs no restart:
// handshakes after the change get the new one, connections made before
// keep theirs.

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/kafkaserver"
	"github.com/fjordmq/fjord/internal/listener"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/tlsconf"
)

// TLSConfig is the node's TLS material and how it is used. Field names
// follow Kafka's ssl.* settings.
type TLSConfig struct {
	// CertFile and KeyFile are the node's certificate (PEM, a chain
	// allowed) and its private key: what SSL and SASL_SSL listeners and
	// the HTTPS listener present, and what the node presents as a client
	// to other nodes' SSL listeners that ask for one.
	CertFile, KeyFile string
	// CAFile is the trust store (PEM): the CAs that sign clients'
	// certificates on SSL listeners, and other nodes' certificates when
	// this node dials them. Empty: clients' certificates cannot be
	// verified (ClientAuth must be none) and other nodes are verified
	// against the system's roots.
	CAFile string
	// ClientAuth is ssl.client.auth for SSL listeners: "none" (the
	// default), "requested" or "required". A verified client
	// certificate names the connection's principal. SASL_SSL listeners
	// never ask for one: the principal is the SASL user's, as in Kafka.
	ClientAuth string
	// PrincipalMappingRules is ssl.principal.mapping.rules, applied to a
	// client certificate's subject. Empty: DEFAULT (User:<the subject's
	// distinguished name>).
	PrincipalMappingRules string
	// HTTP serves the HTTP listener over TLS with CertFile and KeyFile.
	HTTP bool
}

// kafkaListeners is the node's listeners and the inter-broker one's
// name: Config.Listeners, or the PLAINTEXT listener of KafkaAddr.
func (c Config) kafkaListeners() ([]listener.Listener, string) {
	if len(c.Listeners) > 0 {
		inter := c.InterBrokerListener
		if inter == "" {
			inter = c.Listeners[0].Name
		}
		return c.Listeners, inter
	}
	return []listener.Listener{{
		Name:       kafkaserver.DefaultListenerName,
		Bind:       c.KafkaAddr,
		Advertised: c.AdvertisedKafkaAddr,
		Protocol:   listener.Plaintext,
	}}, kafkaserver.DefaultListenerName
}

// checkListeners checks Listeners, InterBrokerListener and TLS as
// validate does for the other fields.
func (c Config) checkListeners() error {
	if len(c.Listeners) > 0 && (c.KafkaAddr != "" || c.AdvertisedKafkaAddr != "") {
		return fmt.Errorf("%w: listeners replace kafka-addr and advertised-kafka-addr: leave those empty", ErrInvalidConfig)
	}
	for i, l := range c.Listeners {
		if _, _, err := listener.SplitHostPort(l.Bind); err != nil || l.Name == "" {
			return fmt.Errorf("%w: listener %s://%s: want a name and host:port", ErrInvalidConfig, l.Name, l.Bind)
		}
		for _, other := range c.Listeners[:i] {
			if other.Name == l.Name {
				return fmt.Errorf("%w: listener %s named twice", ErrInvalidConfig, l.Name)
			}
		}
		if l.Advertised == "" {
			if host, _, _ := listener.SplitHostPort(l.Bind); host == "" || listener.IsUnspecified(host) {
				return fmt.Errorf("%w: listener %s://%s listens on every interface, which clients cannot dial: give it an advertised listener", ErrInvalidConfig, l.Name, l.Bind)
			}
		}
	}
	if len(c.Listeners) == 0 {
		if c.InterBrokerListener != "" && c.InterBrokerListener != kafkaserver.DefaultListenerName {
			return fmt.Errorf("%w: inter-broker-listener-name %s: without listeners the node has one, PLAINTEXT", ErrInvalidConfig, c.InterBrokerListener)
		}
	} else if _, ok := listener.Find(c.Listeners, c.InterBrokerListener); !ok && c.InterBrokerListener != "" {
		return fmt.Errorf("%w: inter-broker-listener-name %s is not one of the listeners", ErrInvalidConfig, c.InterBrokerListener)
	}
	ls, _ := c.kafkaListeners()
	needTLS := c.TLS.HTTP || c.controllerSSL()
	for _, l := range ls {
		needTLS = needTLS || l.Protocol.TLS()
	}
	auth, err := tlsconf.ParseClientAuth(c.TLS.ClientAuth)
	if err != nil {
		return fmt.Errorf("%w: ssl-client-auth: %v", ErrInvalidConfig, err)
	}
	if _, err := tlsconf.ParseMappingRules(cmp.Or(c.TLS.PrincipalMappingRules, tlsconf.DefaultMappingRules)); err != nil {
		return fmt.Errorf("%w: ssl-principal-mapping-rules: %v", ErrInvalidConfig, err)
	}
	switch {
	case needTLS && (c.TLS.CertFile == "" || c.TLS.KeyFile == ""):
		return fmt.Errorf("%w: a listener serves TLS (SSL, SASL_SSL or http-tls), so ssl-cert-file and ssl-key-file are needed", ErrInvalidConfig)
	case !needTLS && (c.TLS.CertFile != "" || c.TLS.KeyFile != "" || c.TLS.CAFile != ""):
		return fmt.Errorf("%w: ssl-cert-file, ssl-key-file or ssl-ca-file is set but no listener serves TLS: add an SSL or SASL_SSL listener, or http-tls", ErrInvalidConfig)
	case auth != tlsconf.ClientAuthNone && c.TLS.CAFile == "":
		return fmt.Errorf("%w: ssl-client-auth %s: client certificates are verified against ssl-ca-file, which is not set", ErrInvalidConfig, c.TLS.ClientAuth)
	}
	return nil
}

// boundListener is a listener and its socket.
type boundListener struct {
	listener.Listener
	ln net.Listener
	// host and port are what the listener is registered with.
	host string
	port int32
}

// bindListeners binds every Kafka listener and works out the endpoint
// each is registered with. On an error it closes what it bound.
func (c Config) bindListeners() ([]boundListener, error) {
	ls, _ := c.kafkaListeners()
	var out []boundListener
	fail := func(err error) ([]boundListener, error) {
		for _, b := range out {
			b.ln.Close()
		}
		return nil, err
	}
	for _, l := range ls {
		ln, err := net.Listen("tcp", l.Bind)
		if err != nil {
			return fail(fmt.Errorf("%s: %w", c.listenerFlag(l), err))
		}
		b := boundListener{Listener: l, ln: ln}
		out = append(out, b)
		host, port, err := advertisedEndpoint(l, ln.Addr())
		if err != nil {
			return fail(fmt.Errorf("%s: %w", c.listenerFlag(l), err))
		}
		out[len(out)-1].host, out[len(out)-1].port = host, port
	}
	return out, nil
}

// listenerFlag names the setting a listener came from, for errors.
func (c Config) listenerFlag(l listener.Listener) string {
	if len(c.Listeners) == 0 {
		return "kafka-addr " + l.Bind
	}
	return "listener " + l.Name + "://" + l.Bind
}

// advertisedEndpoint is the host and port registered for l: its
// advertised address if given, else its bind host with the port it
// actually bound (so port 0 works).
func advertisedEndpoint(l listener.Listener, bound net.Addr) (string, int32, error) {
	if l.Advertised != "" {
		host, port, err := listener.SplitHostPort(l.Advertised)
		return host, int32(port), err
	}
	host, _, err := listener.SplitHostPort(l.Bind)
	if err != nil {
		return "", 0, err
	}
	tcp, ok := bound.(*net.TCPAddr)
	if !ok || tcp.Port <= 0 || tcp.Port > 65535 {
		return "", 0, fmt.Errorf("bound %v, not a TCP port", bound)
	}
	if host == "" || listener.IsUnspecified(host) {
		// validate refuses this; kept so the function stands alone.
		return "", 0, fmt.Errorf("%w: no advertised host for %s", ErrInvalidConfig, l.Bind)
	}
	return host, int32(tcp.Port), nil
}

// interBroker returns the inter-broker listener among ls.
func (n *Node) interBroker() boundListener {
	_, name := n.cfg.kafkaListeners()
	for _, b := range n.listeners {
		if b.Name == name {
			return b
		}
	}
	panic(fmt.Sprintf("node: inter-broker listener %s is not bound", name))
}

// registration is this node's BrokerRecord: the inter-broker listener as
// its Host and Port, every listener by name.
func (n *Node) registration() metadata.BrokerRecord {
	inter := n.interBroker()
	rec := metadata.BrokerRecord{NodeID: n.cfg.NodeID, Host: inter.host, Port: inter.port, Rack: n.cfg.Rack, IncarnationID: n.incarnation}
	for _, b := range n.listeners {
		rec.Listeners = append(rec.Listeners, metadata.Endpoint{Name: b.Name, Host: b.host, Port: b.port, SecurityProtocol: int16(b.Protocol)})
	}
	return rec
}

// openTLS loads the node's TLS material, if any listener uses it.
func (n *Node) openTLS() error {
	if n.cfg.TLS.CertFile == "" && n.cfg.TLS.CAFile == "" {
		return nil
	}
	store, err := tlsconf.Load(tlsconf.Files{CertFile: n.cfg.TLS.CertFile, KeyFile: n.cfg.TLS.KeyFile, CAFile: n.cfg.TLS.CAFile}, tlsconf.Options{
		OnReload: func() { n.log.Info("TLS certificate files changed: new connections get the new certificate") },
		OnReloadError: func(err error) {
			n.log.Error("TLS certificate files changed but cannot be loaded: the previous ones stay in use", "err", err)
		},
	})
	if err != nil {
		return fmt.Errorf("%w: TLS files: %v", ErrInvalidConfig, err)
	}
	mapper, err := tlsconf.ParseMappingRules(cmp.Or(n.cfg.TLS.PrincipalMappingRules, tlsconf.DefaultMappingRules))
	if err != nil {
		return fmt.Errorf("%w: ssl-principal-mapping-rules: %v", ErrInvalidConfig, err)
	}
	n.tls, n.principals = store, mapper
	return nil
}

// listenerConfig is how kafkaserver serves b.
func (n *Node) listenerConfig(b boundListener) kafkaserver.ListenerConfig {
	lc := kafkaserver.ListenerConfig{Name: b.Name, Protocol: b.Protocol}
	if b.Protocol.SASL() {
		lc.SASL = n.sasl
	}
	if !b.Protocol.TLS() {
		return lc
	}
	auth := tlsconf.ClientAuthNone
	if b.Protocol == listener.SSL {
		auth, _ = tlsconf.ParseClientAuth(n.cfg.TLS.ClientAuth) // checked by validate
	}
	lc.TLS = n.tls.ServerConfig(auth)
	lc.SSLPrincipal = n.sslPrincipal
	return lc
}

// sslPrincipal names a client certificate's principal with the mapping
// rules. A subject no rule maps fails the connection, as in Kafka.
func (n *Node) sslPrincipal(cs tls.ConnectionState) (kafkaserver.Principal, error) {
	p, ok, err := n.principals.Principal(cs)
	if err != nil {
		return kafkaserver.Principal{}, err
	}
	if !ok {
		return kafkaserver.Anonymous, nil
	}
	typ, name, _ := strings.Cut(p, ":")
	return kafkaserver.Principal{Type: typ, Name: name}, nil
}

// interBrokerOpts are the options of this node's own clients of the
// inter-broker listener (peers, the HTTP gateway): TLS when it is SSL or
// SASL_SSL, SASL when it is SASL_PLAINTEXT or SASL_SSL.
func (n *Node) interBrokerOpts() []kgo.Opt {
	inter := n.interBroker()
	var opts []kgo.Opt
	if inter.Protocol.TLS() {
		opts = append(opts, kgo.Dialer(n.tls.DialContext))
	}
	if inter.Protocol.SASL() {
		opts = append(opts, n.interBrokerSASL())
	}
	return opts
}

// interBrokerAddr is where this node's own clients dial it.
func (n *Node) interBrokerAddr() string {
	inter := n.interBroker()
	return net.JoinHostPort(inter.host, strconv.Itoa(int(inter.port)))
}
