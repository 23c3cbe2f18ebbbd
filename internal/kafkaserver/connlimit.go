package kafkaserver

// Connection limits, enforced at accept: Kafka's max.connections,
// max.connections.per.ip and max.connections.per.ip.overrides, dynamic
// broker configs in the metadata image (this broker's own value, else
// the cluster default; metadata.ConnectionLimits).
//
// Refusing. The accept loop takes the socket from the kernel and, past a
// limit, closes it at once: nothing is read, no goroutine is started and
// no buffer allocated for it, so a flood of connections costs the node
// one accept and one close each, on the accept loop's goroutine. The
// close is a reset (SO_LINGER 0), not a FIN: a refused connection then
// leaves no socket in TIME_WAIT on the node (a FIN would hold one for a
// minute per refusal, 300,000 of them under 5,000 attempts a second).
// Kafka clients treat both as the broker closing the connection and
// reconnect after their backoff. Connections already open are never
// touched: lowering a limit below the connections open refuses new ones
// until enough have closed.
//
// Kafka refuses past the per-IP limit the same way. Past max.connections
// Kafka instead stops accepting until a slot frees (its acceptor blocks),
// which makes every new connection, a broker's included, wait in the
// listen backlog behind a flood; Fjord refuses those too, which the issue
// asks for ("refused cleanly") and which keeps the backlog moving.
//
// Exempt: connections whose remote address is the IP literal of a
// registered broker's listener host (metadata.Broker.Host), i.e. other
// Fjord nodes' followers, forwarded requests and coordinators, and this
// node's own clients (the HTTP gateway) when they dial its advertised
// address. They are neither refused nor counted, so a client flood can
// never cut replication, and max.connections bounds client connections
// alone (Kafka counts its inter-broker listener's but never refuses them,
// closing a client connection instead, KIP-402; Fjord has one listener,
// so the address is what tells a peer apart). A broker registered by host
// name is not recognized (nothing is resolved on the accept path): give
// its address an override. A peer whose connections leave from another
// address than the one it advertises (NAT, a second interface) is not
// recognized either.
//
// The policy (limits and exempt set) is rebuilt when the image changes,
// detected by the image pointer on each accept, so an accept costs an
// atomic load, a map lookup or two and a short critical section for the
// counts, never a walk of the image.

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
)

// refusal is why a connection was refused, or admitted.
type refusal uint8

const (
	admitted refusal = iota
	refusedMaxConnections
	refusedMaxConnectionsPerIP
	refusedConnectionCreationRate
	numRefusals
)

// refusalReasons are the reason label values of
// fjord_connections_refused_total, by refusal.
var refusalReasons = [numRefusals]string{
	admitted:                      "",
	refusedMaxConnections:         "max_connections",
	refusedMaxConnectionsPerIP:    "max_connections_per_ip",
	refusedConnectionCreationRate: "connection_creation_rate",
}

// refusalConfigs name the config each refusal enforces, for the log.
var refusalConfigs = [numRefusals]string{
	refusedMaxConnections:         metadata.MaxConnectionsConfig,
	refusedMaxConnectionsPerIP:    metadata.MaxConnectionsPerIPConfig,
	refusedConnectionCreationRate: "the connection_creation_rate client quota",
}

// refusalLogInterval is how often at most each reason logs its WARN: a
// flood must not fill the disk with a line per connection.
const refusalLogInterval = time.Minute

// connPolicy is the limits and the exempt addresses under one image.
// Immutable once built; shared by every accept loop.
type connPolicy struct {
	img    *metadata.Image // the image it was read from
	raw    [3]rawConfig    // the configs' values, to reuse limits when they did not change
	limits metadata.ConnectionLimits
	// exempt holds the IP literals of registered brokers' hosts.
	exempt map[netip.Addr]struct{}
}

type rawConfig struct {
	value string
	set   bool
}

var connectionConfigs = [3]string{
	metadata.MaxConnectionsConfig, metadata.MaxConnectionsPerIPConfig, metadata.MaxConnectionsPerIPOverridesConfig,
}

// newConnPolicy reads node's connection limits and the exempt addresses
// from img. prev, when not nil, is the policy of an earlier image: its
// parsed limits are reused when the configs did not change, so an image
// change that is not about them (a topic, an ISR) does not parse up to
// 64 KiB of overrides again.
func newConnPolicy(img *metadata.Image, node int32, prev *connPolicy) *connPolicy {
	p := &connPolicy{img: img, exempt: make(map[netip.Addr]struct{}, len(img.Brokers))}
	for i, name := range connectionConfigs {
		v, _, ok := img.BrokerConfig(node, name)
		p.raw[i] = rawConfig{v, ok}
	}
	if prev != nil && prev.raw == p.raw {
		p.limits = prev.limits
	} else {
		p.limits = img.ConnectionLimits(node)
	}
	for _, b := range img.Brokers {
		if addr, err := netip.ParseAddr(b.Host); err == nil {
			p.exempt[addr.Unmap().WithZone("")] = struct{}{}
		}
	}
	return p
}

// isExempt reports whether connections from addr bypass the limits.
func (p *connPolicy) isExempt(addr netip.Addr) bool {
	_, ok := p.exempt[addr]
	return ok
}

// decide says whether a connection from addr, not exempt, may be
// admitted while total counted connections are open, fromAddr of them
// from addr. The per-address limit is checked first: when both are
// reached the refusal names the one specific to the address. Pure.
func (p *connPolicy) decide(addr netip.Addr, total, fromAddr int) refusal {
	if n := p.limits.PerIPLimit(addr); n != metadata.NoConnectionLimit && fromAddr >= n {
		return refusedMaxConnectionsPerIP
	}
	if n := p.limits.MaxConnections; n != metadata.NoConnectionLimit && total >= n {
		return refusedMaxConnections
	}
	return admitted
}

// connTicket is an admitted connection's place in the counts, handed
// back to release when it ends. counted is fixed at admission: an
// address that becomes exempt (or stops being) while the connection is
// open must not unbalance the counts.
type connTicket struct {
	addr    netip.Addr
	counted bool
}

// connLimiter counts the listener's connections and admits or refuses
// new ones. Threads: admit and release may be called from any goroutine
// (every accept loop admits; each connection's goroutine releases).
type connLimiter struct {
	node   int32
	policy atomic.Pointer[connPolicy]

	mu struct {
		sync.Mutex
		// total is the counted (not exempt) connections open.
		// Invariant: total == the sum of perIP's values.
		total int
		// perIP is the counted connections open per remote address.
		// Invariant: every value >= 1; an address is deleted when its
		// last connection ends, so the map never holds more entries than
		// there are open connections.
		perIP map[netip.Addr]int
		// logs rate-limits each reason's WARN.
		logs [numRefusals]refusalLog
	}
}

func newConnLimiter(node int32) *connLimiter {
	l := &connLimiter{node: node}
	l.mu.perIP = make(map[netip.Addr]int)
	return l
}

// policyFor returns the policy of img, building it on the first accept
// under a new image. Two accept loops may build it at once; either
// result is right.
func (l *connLimiter) policyFor(img *metadata.Image) *connPolicy {
	p := l.policy.Load()
	if p != nil && p.img == img {
		return p
	}
	np := newConnPolicy(img, l.node, p)
	l.policy.Store(np)
	return np
}

// admit decides for a connection from addr under img's configs. An
// admitted connection is counted until release(ticket).
func (l *connLimiter) admit(img *metadata.Image, addr netip.Addr) (connTicket, refusal) {
	p := l.policyFor(img)
	if p.isExempt(addr) {
		return connTicket{addr: addr}, admitted
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := p.decide(addr, l.mu.total, l.mu.perIP[addr]); r != admitted {
		return connTicket{}, r
	}
	l.mu.total++
	l.mu.perIP[addr]++
	return connTicket{addr: addr, counted: true}, admitted
}

// release ends an admitted connection's place in the counts.
func (l *connLimiter) release(t connTicket) {
	if !t.counted {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.mu.perIP[t.addr]
	if n < 1 || l.mu.total < 1 {
		panic("kafkaserver: connection released twice: " + t.addr.String())
	}
	l.mu.total--
	if n == 1 {
		delete(l.mu.perIP, t.addr)
	} else {
		l.mu.perIP[t.addr] = n - 1
	}
}

// noteRefusal counts a refusal for the rate-limited log: report says
// whether to log now, count how many were refused for r since the last
// line (this one included), since when that line was (zero: none).
func (l *connLimiter) noteRefusal(r refusal, now time.Time) (report bool, count int64, since time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.logs[r].note(now)
}

// counts returns the counted connections open and the addresses holding
// them (tests).
func (l *connLimiter) counts() (total, addresses int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.total, len(l.mu.perIP)
}

// refusalLog rate-limits one reason's WARN: the first refusal logs at
// once, later ones at most once per refusalLogInterval, with the count
// refused since the line before. A flood that stops between two lines
// leaves its last count unlogged; fjord_connections_refused_total has it.
type refusalLog struct {
	last  time.Time // zero: never logged
	count int64     // refused since last
}

func (g *refusalLog) note(now time.Time) (report bool, count int64, since time.Time) {
	g.count++
	if !g.last.IsZero() && now.Sub(g.last) < refusalLogInterval {
		return false, 0, time.Time{}
	}
	count, since = g.count, g.last
	g.count, g.last = 0, now
	return true, count, since
}

// remoteAddr is the address a connection is counted under: its remote
// IP, IPv4-mapped IPv6 unmapped and without a zone, as the configs
// name it. A connection that is not TCP counts under the zero Addr.
func remoteAddr(nc net.Conn) netip.Addr {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap().WithZone("")
	}
	return netip.Addr{}
}

// refuse closes a connection past a limit, counts it and logs at most
// once a minute per reason. Runs on the accept loop: nothing here may
// block on the client.
//
// Counted and logged before the close, so whoever sees the connection
// closed also sees it counted.
func (s *Server) refuse(nc net.Conn, addr netip.Addr, r refusal) {
	s.metrics.connectionsRefused[r].Inc()
	if report, count, since := s.connLimits.noteRefusal(r, time.Now()); report {
		attrs := []any{slog.Int64("refused", count), slog.String("from", addr.String())}
		if !since.IsZero() {
			attrs = append(attrs, slog.Time("since", since))
		}
		s.log.Warn("kafkaserver: refused connections past "+refusalConfigs[r]+" (logged at most once a minute)", attrs...)
	}
	if tcp, ok := nc.(*net.TCPConn); ok {
		tcp.SetLinger(0) // a reset: no TIME_WAIT left behind (see the file comment)
	}
	nc.Close()
}
