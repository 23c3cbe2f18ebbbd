package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/freeport"
	"github.com/fjordmq/fjord/internal/listener"
	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/tlsconf"
)

// Three nodes whose controller port is mutual TLS (and whose
// inter-broker listener is SSL with client certificates required) form
// one quorum and create a replicated topic every node sees; the
// controller port refuses a plaintext join request, unanswered.
func TestControllerSSLCluster(t *testing.T) {
	pki := newNodePKI(t)
	ports, err := freeport.Take("127.0.0.1", 3)
	if err != nil {
		t.Fatal(err)
	}
	voters := make([]Voter, 3)
	for i := range voters {
		voters[i] = Voter{NodeID: int32(i + 1), Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i]))}
	}
	supers := []string{"User:CN=node-1", "User:CN=node-2", "User:CN=node-3", "User:CN=client"}
	nodes := make([]*Node, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range nodes {
		dir := t.TempDir()
		files := pki.write(t, dir, "node", tlsconf.IssueOptions{CommonName: fmt.Sprintf("node-%d", i+1),
			IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, Client: true, ValidFor: time.Hour})
		cfg := testConfig(t, dir)
		cfg.NodeID, cfg.ControllerAddr, cfg.Voters = int32(i+1), voters[i].Addr, voters
		cfg.KafkaAddr, cfg.HTTPAddr = "", ""
		cfg.Listeners = []listener.Listener{{Name: "SSL", Bind: "127.0.0.1:0", Protocol: listener.SSL}}
		cfg.TLS = TLSConfig{CertFile: files.CertFile, KeyFile: files.KeyFile, CAFile: pki.caFile, ClientAuth: "required"}
		cfg.Authz.SuperUsers = supers
		cfg.ControllerSecurityProtocol = "SSL"
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			nodes[i], errs[i] = Start(ctx, cfg)
		})
	}
	wg.Wait()
	for i, n := range nodes {
		if n != nil {
			t.Cleanup(func() { n.Close() })
		}
		if errs[i] != nil {
			t.Fatalf("node %d: %v", i+1, errs[i])
		}
	}

	_, b := brokerClient(t, nodes[controllerOf(t, nodes, -1)-1], kgo.DialTLSConfig(pki.clientTLS(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createTopic(t, ctx, b, "over-mtls", 2, 3)
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, n := range nodes {
			if tp, ok := n.ctrl.Image().Topics["over-mtls"]; !ok || len(tp.Partitions) != 2 {
				return fmt.Errorf("node %d's image lacks over-mtls with 2 partitions", n.cfg.NodeID)
			}
		}
		return nil
	})

	// A join request in plaintext on the TLS port: closed, no answer.
	conn, err := net.Dial("tcp", voters[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte("\xf1{\"node_id\":9,\"addr\":\"127.0.0.1:1\"}\n")); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("a plaintext join request kept the TLS controller port's connection open")
	}
	if strings.Contains(string(got), "{") {
		t.Fatalf("a plaintext join request was answered: %q", got)
	}
}

// --controller-security-protocol's refusals, before anything starts.
func TestControllerSecurityProtocolRefused(t *testing.T) {
	pki := newNodePKI(t)
	ssl := []listener.Listener{{Name: "SSL", Bind: "127.0.0.1:0", Protocol: listener.SSL}}
	withCA := TLSConfig{CertFile: pki.node.CertFile, KeyFile: pki.node.KeyFile, CAFile: pki.caFile}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"unknown protocol", func(c *Config) { c.ControllerSecurityProtocol = "SASL_SSL" }, `controller-security-protocol "SASL_SSL": allowed: PLAINTEXT or SSL`},
		{"SSL without files", func(c *Config) {
			c.ControllerSecurityProtocol, c.Authz.SuperUsers = "SSL", []string{"User:CN=node"}
		}, "controller-security-protocol SSL: the controller port presents this node's certificate, so ssl-cert-file and ssl-key-file are needed"},
		{"SSL without a CA", func(c *Config) {
			c.ControllerSecurityProtocol, c.Authz.SuperUsers = "SSL", []string{"User:CN=node"}
			c.TLS = TLSConfig{CertFile: pki.node.CertFile, KeyFile: pki.node.KeyFile}
		}, "verified against ssl-ca-file, which is not set"},
		{"SSL without super users", func(c *Config) {
			c.ControllerSecurityProtocol, c.TLS = "SSL", withCA
			c.KafkaAddr, c.Listeners = "", ssl
		}, "name the nodes' certificate principals in super-users"},
	} {
		cfg := testConfig(t, t.TempDir())
		tc.edit(&cfg)
		n, err := Start(context.Background(), cfg)
		if err == nil {
			n.Close()
			t.Errorf("%s: started", tc.name)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidConfig and %q", tc.name, err, tc.want)
		}
	}
	// The files alone, for the controller port and no listener: taken.
	cfg := testConfig(t, t.TempDir())
	cfg.ControllerSecurityProtocol, cfg.TLS, cfg.Authz.SuperUsers = "ssl", withCA, []string{"User:CN=node"}
	if err := cfg.validate(); err != nil {
		t.Errorf("SSL controller port with files, a CA and super users: %v", err)
	}
}
