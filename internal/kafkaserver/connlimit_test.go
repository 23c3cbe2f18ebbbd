package kafkaserver

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/testutil"
)

// connImage is an image of brokers registered at hosts (broker i+1 at
// hosts[i]) with the cluster-default connection configs cfg.
func connImage(cfg map[string]string, hosts ...string) *metadata.Image {
	img := metadata.Empty(testConfigs)
	for i, h := range hosts {
		img.Brokers[int32(i+1)] = metadata.Broker{NodeID: int32(i + 1), Host: h, Port: 9092}
	}
	img.BrokerConfigs = map[int32]map[string]string{-1: cfg}
	return img
}

var (
	addrA = netip.MustParseAddr("10.0.0.1")
	addrB = netip.MustParseAddr("10.0.0.2")
	addrC = netip.MustParseAddr("10.0.0.3")
)

// The decision alone: the per-address limit (its override, else
// max.connections.per.ip) and max.connections, per-address first.
func TestConnPolicyDecide(t *testing.T) {
	for _, tc := range []struct {
		name            string
		cfg             map[string]string
		addr            netip.Addr
		total, fromAddr int
		want            refusal
	}{
		{"no limits", nil, addrA, 1 << 20, 1 << 20, admitted},
		{"below per-ip", map[string]string{"max.connections.per.ip": "5"}, addrA, 4, 4, admitted},
		{"at per-ip", map[string]string{"max.connections.per.ip": "5"}, addrA, 5, 5, refusedMaxConnectionsPerIP},
		{"per-ip 0", map[string]string{"max.connections.per.ip": "0"}, addrA, 0, 0, refusedMaxConnectionsPerIP},
		{"override above", map[string]string{"max.connections.per.ip": "5", "max.connections.per.ip.overrides": "10.0.0.1:100"}, addrA, 50, 50, admitted},
		{"override 0", map[string]string{"max.connections.per.ip.overrides": "10.0.0.1:0"}, addrA, 0, 0, refusedMaxConnectionsPerIP},
		{"override of another", map[string]string{"max.connections.per.ip.overrides": "10.0.0.1:0"}, addrB, 0, 0, admitted},
		{"override by name matches nothing", map[string]string{"max.connections.per.ip": "1", "max.connections.per.ip.overrides": "host-a.example:100"}, addrA, 1, 1, refusedMaxConnectionsPerIP},
		{"below max", map[string]string{"max.connections": "3"}, addrA, 2, 0, admitted},
		{"at max", map[string]string{"max.connections": "3"}, addrA, 3, 0, refusedMaxConnections},
		{"both reached: per-ip named", map[string]string{"max.connections": "3", "max.connections.per.ip": "3"}, addrA, 3, 3, refusedMaxConnectionsPerIP},
		{"an override does not lift max", map[string]string{"max.connections": "3", "max.connections.per.ip.overrides": "10.0.0.1:100"}, addrA, 3, 3, refusedMaxConnections},
	} {
		p := newConnPolicy(connImage(tc.cfg), 1, nil)
		if got := p.decide(tc.addr, tc.total, tc.fromAddr); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, refusalReasons[got], refusalReasons[tc.want])
		}
	}
}

// Counting: admissions count per address until released; a refused one
// counts nothing; an address's entry goes with its last connection.
func TestConnLimiterCounts(t *testing.T) {
	img := connImage(map[string]string{
		"max.connections":                  "6",
		"max.connections.per.ip":           "2",
		"max.connections.per.ip.overrides": "10.0.0.3:3",
	})
	l := newConnLimiter(1)
	admit := func(addr netip.Addr, want refusal) connTicket {
		t.Helper()
		tk, r := l.admit(img, addr)
		if r != want {
			t.Fatalf("admit %s: %q, want %q", addr, refusalReasons[r], refusalReasons[want])
		}
		return tk
	}
	a1, a2 := admit(addrA, admitted), admit(addrA, admitted)
	admit(addrA, refusedMaxConnectionsPerIP)
	b1 := admit(addrB, admitted)
	c := []connTicket{admit(addrC, admitted), admit(addrC, admitted), admit(addrC, admitted)} // the override
	admit(addrC, refusedMaxConnectionsPerIP)
	if total, addrs := l.counts(); total != 6 || addrs != 3 {
		t.Fatalf("counts %d over %d addresses, want 6 over 3", total, addrs)
	}
	admit(addrB, refusedMaxConnections)
	l.release(a1)
	admit(addrA, admitted) // a slot freed
	l.release(a2)
	l.release(b1)
	for _, tk := range c {
		l.release(tk)
	}
	if total, addrs := l.counts(); total != 1 || addrs != 1 {
		t.Fatalf("counts %d over %d addresses, want 1 over 1 (emptied addresses deleted)", total, addrs)
	}

	// Bounded: thousands of addresses come and go, nothing stays.
	open := map[netip.Addr]connTicket{}
	unlimited := connImage(nil)
	for i := range 5000 {
		addr := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		tk, _ := l.admit(unlimited, addr)
		open[addr] = tk
	}
	if total, addrs := l.counts(); total != 5001 || addrs != 5001 {
		t.Fatalf("counts %d over %d, want 5001", total, addrs)
	}
	for _, tk := range open {
		l.release(tk)
	}
	if total, addrs := l.counts(); total != 1 || addrs != 1 {
		t.Fatalf("after releasing: counts %d over %d addresses, want 1 over 1", total, addrs)
	}
}

// Registered brokers' IP literals are exempt: never refused, never
// counted, even at a limit of 0. A broker registered by name is not.
// The set follows the image; a ticket keeps what it was admitted as.
func TestConnLimiterExemptsBrokers(t *testing.T) {
	cfg := map[string]string{"max.connections": "1", "max.connections.per.ip": "0"}
	img := connImage(cfg, "10.0.0.1", "::ffff:10.0.0.2", "broker-3.example")
	l := newConnLimiter(1)
	var tickets []connTicket
	for range 10 {
		for _, addr := range []netip.Addr{addrA, addrB} {
			tk, r := l.admit(img, addr)
			if r != admitted || tk.counted {
				t.Fatalf("broker address %s: %q, counted %v", addr, refusalReasons[r], tk.counted)
			}
			tickets = append(tickets, tk)
		}
	}
	if _, r := l.admit(img, addrC); r != refusedMaxConnectionsPerIP {
		t.Fatalf("a client: %q, want refused", refusalReasons[r])
	}
	if total, addrs := l.counts(); total != 0 || addrs != 0 {
		t.Fatalf("exempt connections counted: %d over %d", total, addrs)
	}

	// A client admitted, then its address registers as a broker: the
	// release still balances.
	open := connImage(nil)
	tk, _ := l.admit(open, addrC)
	registered := connImage(nil, "10.0.0.3")
	if _, r := l.admit(registered, addrC); r != admitted {
		t.Fatal("the registered address refused")
	}
	l.release(tk)
	for _, tk := range tickets {
		l.release(tk)
	}
	if total, addrs := l.counts(); total != 0 || addrs != 0 {
		t.Fatalf("after release: %d over %d", total, addrs)
	}
}

// The policy is built once per image, and its parsed limits are reused
// by a later image whose connection configs did not change.
func TestConnPolicyFollowsTheImage(t *testing.T) {
	l := newConnLimiter(1)
	cfg := map[string]string{"max.connections.per.ip.overrides": "10.0.0.1:3"}
	img1 := connImage(cfg)
	p1 := l.policyFor(img1)
	if l.policyFor(img1) != p1 {
		t.Fatal("policy rebuilt for the same image")
	}
	img2 := connImage(maps.Clone(cfg), "10.0.0.9") // a broker registers
	p2 := l.policyFor(img2)
	if p2 == p1 || !p2.isExempt(netip.MustParseAddr("10.0.0.9")) {
		t.Fatal("the new image's brokers are not exempt")
	}
	if reflect.ValueOf(p2.limits.PerIPOverrides).Pointer() != reflect.ValueOf(p1.limits.PerIPOverrides).Pointer() {
		t.Fatal("unchanged overrides parsed again")
	}
	img3 := connImage(map[string]string{"max.connections.per.ip.overrides": "10.0.0.1:4"})
	if got := l.policyFor(img3).limits.PerIPLimit(addrA); got != 4 {
		t.Fatalf("changed override: %d, want 4", got)
	}
	// This broker's own value wins over the default.
	img3.BrokerConfigs[1] = map[string]string{"max.connections.per.ip.overrides": "10.0.0.1:9"}
	if got := newConnPolicy(img3, 1, nil).limits.PerIPLimit(addrA); got != 9 {
		t.Fatalf("broker's own override: %d, want 9", got)
	}
	if got := newConnPolicy(img3, 2, nil).limits.PerIPLimit(addrA); got != 4 {
		t.Fatalf("another broker's override applied: %d, want the default's 4", got)
	}
}

// The WARN: the first refusal at once, then at most once per interval
// with the count since the line before.
func TestRefusalLog(t *testing.T) {
	var g refusalLog
	t0 := time.Unix(1000, 0)
	if report, n, since := g.note(t0); !report || n != 1 || !since.IsZero() {
		t.Fatalf("first: %v %d %v", report, n, since)
	}
	for i := range 5000 {
		if report, _, _ := g.note(t0.Add(time.Duration(i) * time.Millisecond)); report {
			t.Fatalf("refusal %d logged within the interval", i)
		}
	}
	if report, n, since := g.note(t0.Add(refusalLogInterval)); !report || n != 5001 || !since.Equal(t0) {
		t.Fatalf("after the interval: %v %d %v, want the 5001 since t0", report, n, since)
	}
}

func TestRemoteAddr(t *testing.T) {
	for in, want := range map[string]string{
		"::ffff:127.0.0.2": "127.0.0.2",
		"127.0.0.2":        "127.0.0.2",
		"2001:db8::1":      "2001:db8::1",
	} {
		nc := addrConn{remote: &net.TCPAddr{IP: net.ParseIP(in), Port: 5, Zone: "eth0"}}
		if got := remoteAddr(nc); got != netip.MustParseAddr(want) {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	if got := remoteAddr(addrConn{remote: &net.UnixAddr{Name: "x"}}); got.IsValid() {
		t.Errorf("unix socket: %s, want the zero Addr", got)
	}
}

type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// setBrokerDefaults replaces the harness's cluster-default broker
// configs with cfg, as a committed IncrementalAlterConfigs would.
func setBrokerDefaults(c *memController, cfg map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.cloneLocked()
	next.BrokerConfigs = map[int32]map[string]string{-1: cfg}
	c.img = next
}

// tryDialFrom dials the harness from local address from (any 127/8
// address works on Linux's loopback: it is a source, not a listener).
func tryDialFrom(t *testing.T, addr, from string) (*rawConn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("wire-test"))}, nil
}

func dialFrom(t *testing.T, addr, from string) *rawConn {
	t.Helper()
	c, err := tryDialFrom(t, addr, from)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	return c
}

// expectRefusedFrom dials the harness from local address from and
// expects the connection closed without an answer to an ApiVersions (a
// reset, or EOF). On loopback the reset can come before connect
// returns, which fails the dial with ECONNRESET: refused too.
func expectRefusedFrom(t *testing.T, addr, from string) {
	t.Helper()
	c, err := tryDialFrom(t, addr, from)
	if errors.Is(err, syscall.ECONNRESET) {
		return
	}
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.nc.Write(c.fmt.AppendRequest(nil, apiVersionsReq(3), 1)) // may fail: the reset can come first
	frame, err := c.readFrame()
	if err == nil {
		t.Fatalf("refused connection answered (%d bytes)", len(frame))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("refused connection still open after 10 s")
	}
}

// Over a real listener: past max.connections.per.ip the connection is
// closed unanswered, counted and logged once; open connections keep
// working; a closed one frees its slot; 127.0.0.1, the registered
// broker's host, is exempt from both limits.
func TestConnectionLimitsAtAccept(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs testutil.Buffer
	h := newWireHarness(t, withConfig(func(c *Config) {
		c.Metrics = reg
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	}))
	refusedCount := func(r refusal) float64 {
		var m dto.Metric
		if err := h.srv.metrics.connectionsRefused[r].Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	setBrokerDefaults(h.ctrl, map[string]string{"max.connections.per.ip": "2"})
	first, second := dialFrom(t, h.addr, "127.0.0.2"), dialFrom(t, h.addr, "127.0.0.2")
	first.roundTrip(apiVersionsReq(3))
	second.roundTrip(apiVersionsReq(3))
	for range 3 {
		expectRefusedFrom(t, h.addr, "127.0.0.2")
	}
	if n := refusedCount(refusedMaxConnectionsPerIP); n != 3 {
		t.Fatalf("refused counter %v, want 3", n)
	}
	first.roundTrip(apiVersionsReq(3)) // open ones still answered
	for range 5 {
		h.dialFor(t).roundTrip(apiVersionsReq(3)) // 127.0.0.1: exempt
	}
	first.nc.Close()
	testutil.Eventually(t, 10*time.Second, func() error {
		if total, _ := h.srv.connLimits.counts(); total != 1 {
			return fmt.Errorf("%d counted connections, want 1 after a close", total)
		}
		return nil
	})
	dialFrom(t, h.addr, "127.0.0.2").roundTrip(apiVersionsReq(3))

	// max.connections: the two from 127.0.0.2 hold both slots; another
	// address is refused under it; 127.0.0.1 still connects.
	setBrokerDefaults(h.ctrl, map[string]string{"max.connections": "2"})
	expectRefusedFrom(t, h.addr, "127.0.0.3")
	if n := refusedCount(refusedMaxConnections); n != 1 {
		t.Fatalf("max_connections refusals %v, want 1", n)
	}
	h.dialFor(t).roundTrip(apiVersionsReq(3))
	second.roundTrip(apiVersionsReq(3))
	if got := strings.Count(logs.String(), "refused connections past max.connections.per.ip"); got != 1 {
		t.Fatalf("%d WARN lines for 3 per-ip refusals, want 1:\n%s", got, logs.String())
	}
	if got := strings.Count(logs.String(), "refused connections past max.connections "); got != 1 {
		t.Fatalf("%d WARN lines for max.connections, want 1:\n%s", got, logs.String())
	}
}
