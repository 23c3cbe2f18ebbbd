package kafkaserver

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kplain "github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/fjordmq/fjord/internal/listener"
	"github.com/fjordmq/fjord/internal/sasl"
)

// staticCredentials is a sasl.Credentials of a map (the node's reads the
// metadata image).
type staticCredentials map[string]sasl.ScramCredential // user+"/"+mechanism

func (c staticCredentials) ScramCredential(user, mechanism string) (sasl.ScramCredential, bool) {
	cred, ok := c[user+"/"+mechanism]
	return cred, ok
}

// saslHarness is a wire harness whose listener is SASL_PLAINTEXT with
// SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN, and user alice (password
// "alice-secret") with credentials for both SCRAMs.
func saslHarness(t *testing.T, opts ...harnessOpt) *wireHarness {
	t.Helper()
	creds := staticCredentials{}
	for _, m := range []string{sasl.ScramSHA512, sasl.ScramSHA256} {
		c, err := sasl.NewCredential(m, "alice-secret", sasl.DefaultIterations)
		if err != nil {
			t.Fatal(err)
		}
		creds["alice/"+m] = c
	}
	srv, err := sasl.New(sasl.Config{Mechanisms: []string{sasl.ScramSHA512, sasl.ScramSHA256, sasl.Plain}, Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	lc := ListenerConfig{Name: "SASL_PLAINTEXT", Protocol: listener.SASLPlaintext, SASL: srv}
	return newWireHarness(t, append([]harnessOpt{withListener(lc), withServer(func(s *Server) { s.failedAuthDelay = 0 })}, opts...)...)
}

// saslClient is a franz-go client of h authenticating with mech.
func (h *wireHarness) saslClient(t *testing.T, mech kgo.Opt, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(h.addr), mech, kgo.RetryTimeout(2 * time.Second), kgo.RequestRetries(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// A real client authenticates with each mechanism and is then served;
// the connection's principal is the user; the wrong password, an
// unknown user and a mechanism the listener lacks are refused with
// Kafka's errors, and the listener keeps serving.
func TestSASLAuthenticates(t *testing.T) {
	h := saslHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		mech kgo.Opt
	}{
		{"SCRAM-SHA-512", kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())},
		{"SCRAM-SHA-256", kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())},
		{"PLAIN", kgo.SASL(kplain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())},
	} {
		cl := h.saslClient(t, tc.mech)
		if _, err := kadm.NewClient(cl).BrokerMetadata(ctx); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	h.srv.mu.Lock()
	for c := range h.srv.mu.conns {
		if p := c.Principal(); p != (Principal{Type: "User", Name: "alice"}) {
			t.Errorf("an authenticated connection's principal is %v, want User:alice", p)
		}
	}
	h.srv.mu.Unlock()

	for _, tc := range []struct {
		name string
		mech kgo.Opt
		want error
	}{
		{"wrong password", kgo.SASL(kscram.Auth{User: "alice", Pass: "guess"}.AsSha512Mechanism()), kerr.SaslAuthenticationFailed},
		{"unknown user", kgo.SASL(kscram.Auth{User: "mallory", Pass: "guess"}.AsSha512Mechanism()), kerr.SaslAuthenticationFailed},
		{"PLAIN wrong password", kgo.SASL(kplain.Auth{User: "alice", Pass: "guess"}.AsMechanism()), kerr.SaslAuthenticationFailed},
	} {
		cl := h.saslClient(t, tc.mech)
		_, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if n := counterValue(t, h.srv.metrics.saslFailures.WithLabelValues("SASL_PLAINTEXT")); n < 3 {
		t.Errorf("fjord_kafka_sasl_authentication_failures_total = %v after 3 refusals", n)
	}

	// A mechanism the listener lacks, by hand: UNSUPPORTED_SASL_MECHANISM
	// with the listener's list, then the connection closes.
	c := h.dial()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "GSSAPI"
	resp := c.roundTrip(hs).(*kmsg.SASLHandshakeResponse)
	if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(resp.SupportedMechanisms, ",") != "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN" {
		t.Errorf("handshake for GSSAPI: error %d, mechanisms %v", resp.ErrorCode, resp.SupportedMechanisms)
	}
	c.expectClosed()
}

// Before authentication a connection is served ApiVersions and the SASL
// requests only: anything else closes it, as does a SaslAuthenticate
// before the handshake, a frame larger than a token, a second handshake
// mid-exchange, or not authenticating in time.
func TestSASLBeforeAuthentication(t *testing.T) {
	h := saslHarness(t, withServer(func(s *Server) { s.saslAuthTimeout = 300 * time.Millisecond }))

	c := h.dial()
	if resp := c.roundTrip(apiVersionsReq(3)).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions before authentication: error %d", resp.ErrorCode)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	c.send(md)
	c.expectClosed()

	c = h.dial()
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version, auth.SASLAuthBytes = 2, []byte("n,,n=alice,r=abc")
	if resp := c.roundTrip(auth).(*kmsg.SASLAuthenticateResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("SaslAuthenticate before the handshake: error %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
	}
	c.expectClosed()

	c = h.dial()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, sasl.ScramSHA512
	if resp := c.roundTrip(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", resp.ErrorCode)
	}
	if resp := c.roundTrip(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("a second handshake mid-exchange: error %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
	}
	c.expectClosed()

	c = h.dial()
	big := kmsg.NewPtrSASLAuthenticateRequest()
	big.Version, big.SASLAuthBytes = 2, make([]byte, maxUnauthenticatedFrameBytes)
	c.send(hs)
	c.recv(hs, c.corr)
	c.write(c.fmt.AppendRequest(nil, big, 99))
	c.expectClosed()

	// Silence after connecting: closed after the authentication timeout.
	nc, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatal("read a byte from a connection that sent nothing")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("a connection that never authenticated still open after %v", time.Since(start))
	}

	// And a client that authenticates is served after all of that.
	cl := h.saslClient(t, kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).BrokerMetadata(ctx); err != nil {
		t.Fatal(err)
	}
}

// KIP-368: with connections.max.reauth.ms set, SaslAuthenticate tells
// the client its session lifetime; franz-go re-authenticates on the same
// connection before it ends and goes on being served; a connection that
// does not re-authenticate is closed at its next request.
func TestSASLReauthentication(t *testing.T) {
	h := saslHarness(t, withConfig(func(c *Config) { c.MaxReauth = 1500 * time.Millisecond }))
	var conns atomic.Int32
	cl := h.saslClient(t, kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			conns.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, host)
		}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// DescribeCluster, not Metadata, which kgo may answer from its
	// cache without a request.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); <-tick.C {
		req := kmsg.NewPtrDescribeClusterRequest()
		if _, err := req.RequestWith(ctx, cl); err != nil {
			t.Fatalf("served through re-authentications: %v", err)
		}
	}
	if n := counterValue(t, h.srv.metrics.saslSuccesses.WithLabelValues("SASL_PLAINTEXT")); n < 3 {
		t.Errorf("%v authentications over 4 s of 1.5 s sessions, want at least 3 (re-authentications)", n)
	}
	// The seed connection and the broker's: re-authentication reuses
	// them rather than reconnecting.
	if n := conns.Load(); n > 2 {
		t.Errorf("the client dialed %d connections, want at most 2 (re-authenticated in place)", n)
	}

	// By hand: authenticate, let the session lapse, send Metadata.
	c := h.dial()
	scramAuthenticate(t, c, "alice", "alice-secret")
	time.Sleep(1600 * time.Millisecond)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	c.send(md)
	c.expectClosed()
}

// scramAuthenticate runs a SCRAM-SHA-512 exchange on c by hand with
// franz-go's client session.
func scramAuthenticate(t *testing.T, c *rawConn, user, pass string) {
	t.Helper()
	if code := scramAttempt(t, c, user, pass); code != 0 {
		t.Fatalf("SCRAM-SHA-512 as %s: error %d", user, code)
	}
}

// SaslHandshake v0 is advertised (old librdkafka looks for it) but
// refused: UNSUPPORTED_VERSION, and the connection closes.
func TestSaslHandshakeV0Refused(t *testing.T) {
	h := saslHarness(t)
	c := h.dial()
	versions := c.roundTrip(apiVersionsReq(3)).(*kmsg.ApiVersionsResponse)
	for _, k := range versions.ApiKeys {
		if k.ApiKey == saslHandshakeKey && (k.MinVersion != 0 || k.MaxVersion != 1) {
			t.Errorf("SaslHandshake advertised v%d-%d, want v0-1", k.MinVersion, k.MaxVersion)
		}
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 0, sasl.ScramSHA512
	if resp := c.roundTrip(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Errorf("SaslHandshake v0: error %d, want UNSUPPORTED_VERSION", resp.ErrorCode)
	}
	c.expectClosed()
}

// On a listener without SASL, SaslHandshake is answered
// ILLEGAL_SASL_STATE, as Kafka does, and the connection stays usable.
func TestSaslHandshakeOnPlaintext(t *testing.T) {
	h := newWireHarness(t)
	c := h.dial()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, sasl.ScramSHA512
	if resp := c.roundTrip(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("error %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
	}
	if resp := c.roundTrip(apiVersionsReq(3)).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Errorf("ApiVersions after: error %d", resp.ErrorCode)
	}
}
