// Package listener parses a node's Kafka listeners in Kafka's shapes:
// listeners (NAME://host:port,...), advertised.listeners,
// listener.security.protocol.map (NAME:PROTOCOL,...) and
// inter.broker.listener.name. It is pure: strings in, checked listeners
// out; the node binds them and kafkaserver serves each with its
// protocol.
//
// A listener's name is what a client's connection is known by: Kafka
// answers Metadata, FindCoordinator and DescribeCluster with every
// broker's endpoint for the listener the request came in on, so a client
// that bootstrapped over SASL_SSL is never sent to a PLAINTEXT port.
package listener

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// SecurityProtocol is Kafka's security.protocol, with Kafka's ids (they
// cross the wire in BrokerRegistration and DescribeCluster).
type SecurityProtocol int16

// Kafka's security protocols.
const (
	Plaintext     SecurityProtocol = 0
	SSL           SecurityProtocol = 1
	SASLPlaintext SecurityProtocol = 2
	SASLSSL       SecurityProtocol = 3
)

var protocolNames = map[SecurityProtocol]string{
	Plaintext:     "PLAINTEXT",
	SSL:           "SSL",
	SASLPlaintext: "SASL_PLAINTEXT",
	SASLSSL:       "SASL_SSL",
}

func (p SecurityProtocol) String() string {
	if s, ok := protocolNames[p]; ok {
		return s
	}
	return "SecurityProtocol(" + strconv.Itoa(int(p)) + ")"
}

// TLS reports whether connections are wrapped in TLS.
func (p SecurityProtocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether a connection must authenticate with SASL before
// anything but ApiVersions and the SASL requests is served.
func (p SecurityProtocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

// ParseSecurityProtocol parses Kafka's spelling (case-insensitive, as
// Kafka's SecurityProtocol.forName).
func ParseSecurityProtocol(s string) (SecurityProtocol, error) {
	for p, name := range protocolNames {
		if strings.EqualFold(s, name) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w %q (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", ErrUnknownProtocol, s)
}

// Listener is one named listener of a node.
type Listener struct {
	// Name is the listener name, upper case (Kafka compares them so).
	Name string
	// Bind is the host:port to listen on; an empty host is every
	// interface, port 0 a free port.
	Bind string
	// Advertised is the host:port registered for clients to dial.
	// Empty: the bound address, which then must name a host.
	Advertised string
	// Protocol is the listener's security protocol.
	Protocol SecurityProtocol
}

// Flags are the four settings as a user writes them.
type Flags struct {
	// Listeners is Kafka's listeners: NAME://host:port, comma separated.
	Listeners string
	// Advertised is advertised.listeners, the same shape; each name must
	// be one of Listeners. A listener it leaves out is advertised at its
	// bind address.
	Advertised string
	// ProtocolMap is listener.security.protocol.map: NAME:PROTOCOL,
	// comma separated. Empty: Kafka's default, each protocol's name
	// mapped to itself. A given map replaces the default whole, as in
	// Kafka.
	ProtocolMap string
	// InterBroker is inter.broker.listener.name: the listener the node's
	// own clients (replication, forwarding to the controller, the HTTP
	// API's gateway) dial on other nodes and on this one. Empty: the
	// first of Listeners.
	InterBroker string
}

// Limits on what Parse accepts: a node with more listeners than a dozen
// is a typo, and BrokerRegistration carries at most 16.
const (
	MaxListeners  = 16
	maxNameLength = 64
)

// Errors, each wrapped with the offending value.
var (
	ErrUnknownProtocol = errors.New("unknown security protocol")
	ErrInvalid         = errors.New("invalid listener configuration")
)

// nameRE is Kafka's ListenerName rule in practice: letters, digits and
// underscores (it upper-cases them).
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// Parse checks f and returns the listeners in the order given and the
// inter-broker listener's name.
func Parse(f Flags) ([]Listener, string, error) {
	protocols, err := parseProtocolMap(f.ProtocolMap)
	if err != nil {
		return nil, "", err
	}
	listeners, err := parseURIs("listeners", f.Listeners)
	if err != nil {
		return nil, "", err
	}
	if len(listeners) == 0 {
		return nil, "", fmt.Errorf("%w: listeners is empty (want e.g. PLAINTEXT://127.0.0.1:9092)", ErrInvalid)
	}
	ports := map[uint16]string{}
	for i := range listeners {
		l := &listeners[i]
		p, ok := protocols[l.Name]
		if !ok {
			return nil, "", fmt.Errorf("%w: listener %s has no security protocol: name it in listener-security-protocol-map (e.g. %s:SASL_SSL) or name the listener after its protocol",
				ErrInvalid, l.Name, l.Name)
		}
		l.Protocol = p
		_, port, _ := SplitHostPort(l.Bind)
		if other, dup := ports[port]; dup && port != 0 {
			return nil, "", fmt.Errorf("%w: listeners %s and %s both bind port %d", ErrInvalid, other, l.Name, port)
		}
		ports[port] = l.Name
	}
	advertised, err := parseURIs("advertised-listeners", f.Advertised)
	if err != nil {
		return nil, "", err
	}
	for _, a := range advertised {
		i := indexOf(listeners, a.Name)
		if i < 0 {
			return nil, "", fmt.Errorf("%w: advertised-listeners names %s, which is not one of the listeners", ErrInvalid, a.Name)
		}
		host, port, _ := SplitHostPort(a.Bind)
		if host == "" || IsUnspecified(host) || port == 0 {
			return nil, "", fmt.Errorf("%w: advertised listener %s://%s: want a host clients can dial and a port 1..65535", ErrInvalid, a.Name, a.Bind)
		}
		listeners[i].Advertised = a.Bind
	}
	for _, l := range listeners {
		if l.Advertised != "" {
			continue
		}
		if host, _, _ := SplitHostPort(l.Bind); host == "" || IsUnspecified(host) {
			return nil, "", fmt.Errorf("%w: listener %s://%s listens on every interface, which clients cannot dial: give it an advertised listener",
				ErrInvalid, l.Name, l.Bind)
		}
	}
	inter := strings.ToUpper(f.InterBroker)
	if inter == "" {
		inter = listeners[0].Name
	} else if indexOf(listeners, inter) < 0 {
		return nil, "", fmt.Errorf("%w: inter-broker-listener-name %s is not one of the listeners", ErrInvalid, f.InterBroker)
	}
	return listeners, inter, nil
}

// Find returns the listener named name (case-insensitive).
func Find(ls []Listener, name string) (Listener, bool) {
	if i := indexOf(ls, strings.ToUpper(name)); i >= 0 {
		return ls[i], true
	}
	return Listener{}, false
}

func indexOf(ls []Listener, name string) int {
	for i, l := range ls {
		if l.Name == name {
			return i
		}
	}
	return -1
}

// parseURIs parses NAME://host:port,... (whitespace around entries is
// ignored; an empty string is none).
func parseURIs(flag, s string) ([]Listener, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []Listener
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		name, addr, ok := strings.Cut(entry, "://")
		if !ok {
			return nil, fmt.Errorf("%w: %s entry %q: want NAME://host:port", ErrInvalid, flag, entry)
		}
		if len(name) > maxNameLength || !nameRE.MatchString(name) {
			return nil, fmt.Errorf("%w: %s entry %q: a listener name is 1 to %d letters, digits or underscores", ErrInvalid, flag, entry, maxNameLength)
		}
		name = strings.ToUpper(name)
		if _, _, err := SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%w: %s entry %q: want NAME://host:port with a port 0..65535 (%v)", ErrInvalid, flag, entry, err)
		}
		if indexOf(out, name) >= 0 {
			return nil, fmt.Errorf("%w: %s names %s twice", ErrInvalid, flag, name)
		}
		out = append(out, Listener{Name: name, Bind: addr})
		if len(out) > MaxListeners {
			return nil, fmt.Errorf("%w: %s has more than %d listeners", ErrInvalid, flag, MaxListeners)
		}
	}
	return out, nil
}

// parseProtocolMap parses NAME:PROTOCOL,...; empty is Kafka's default.
func parseProtocolMap(s string) (map[string]SecurityProtocol, error) {
	m := map[string]SecurityProtocol{}
	if strings.TrimSpace(s) == "" {
		for p, name := range protocolNames {
			m[name] = p
		}
		return m, nil
	}
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		name, proto, ok := strings.Cut(entry, ":")
		if !ok || len(name) > maxNameLength || !nameRE.MatchString(name) {
			return nil, fmt.Errorf("%w: listener-security-protocol-map entry %q: want NAME:PROTOCOL, e.g. CLIENT:SASL_SSL", ErrInvalid, entry)
		}
		p, err := ParseSecurityProtocol(proto)
		if err != nil {
			return nil, fmt.Errorf("%w: listener-security-protocol-map entry %q: %v", ErrInvalid, entry, err)
		}
		name = strings.ToUpper(name)
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("%w: listener-security-protocol-map names %s twice", ErrInvalid, name)
		}
		m[name] = p
		if len(m) > MaxListeners {
			return nil, fmt.Errorf("%w: listener-security-protocol-map has more than %d entries", ErrInvalid, MaxListeners)
		}
	}
	return m, nil
}

// SplitHostPort is net.SplitHostPort with the port checked to be a
// number from 0 to 65535 (service names are not accepted: an address in
// a config file should say what it binds).
func SplitHostPort(addr string) (string, uint16, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return "", 0, errors.New("bad port")
	}
	return host, uint16(port), nil
}

// IsUnspecified reports whether host is 0.0.0.0 or ::, an address to
// bind that no client can dial.
func IsUnspecified(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}
