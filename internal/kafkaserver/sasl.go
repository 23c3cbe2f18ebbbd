package kafkaserver

// SaslHandshake: v0-1 advertised, v1 served. A v0 handshake (whose
// tokens would follow unframed, outside SaslAuthenticate) is answered
// UNSUPPORTED_VERSION and the connection closes: Kafka 4 dropped it
// (KIP-896), and every client this project tests sends v1. v0 stays in
// ApiVersions because librdkafka before 2.1 (kcat's) checks the range
// for v0 before it uses SASL at all ("SASL Handshake not supported by
// broker") and then sends v1 anyway; the trick Kafka played for Produce
// v0-2 (KAFKA-API.md trap 1).
// SaslAuthenticate: v0-2 (v1 adds session_lifetime_ms, KIP-368; v2 is
// flexible).
//
// A connection on a SASL_PLAINTEXT or SASL_SSL listener is served
// ApiVersions, SaslHandshake and SaslAuthenticate only until it has
// authenticated; any other request closes it (Kafka's
// IllegalSaslStateException), as does a new connection that has not
// authenticated within saslAuthTimeout, or a frame larger than a SASL
// token can be before it has. The handshake names a mechanism among the
// listener's (UNSUPPORTED_SASL_MECHANISM, and the connection closes,
// otherwise); SaslAuthenticate carries the exchange's messages
// (internal/sasl) until it is done or fails. A failure is answered
// SASL_AUTHENTICATION_FAILED with a message that does not say whether the
// user exists, held back connection.failed.authentication.delay.ms
// (100 ms, Kafka's) to slow guessing, and the connection closes after
// it.
//
// The two requests are handled on the connection's reader goroutine, not
// a goroutine of their own: the exchange's state belongs to the reader,
// and the next frame must be read against the state the last one left
// (authenticated or not). No other request of the connection is in
// flight before authentication, so nothing waits behind them; a
// re-authentication (below) costs one SCRAM step, microseconds, or one
// PBKDF2 for PLAIN.
//
// Re-authentication (KIP-368): a session lasts connections.max.reauth.ms
// (Config.MaxReauth; 0: forever) or until the OAUTHBEARER token
// expires, whichever is first, and SaslAuthenticate v1+ tells the client
// (session_lifetime_ms). The client re-authenticates on the same
// connection with SaslHandshake and SaslAuthenticate, as the same
// principal with the same mechanism; a connection whose session has
// ended and that sends anything else is closed.

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/audit"
	"github.com/fjordmq/fjord/internal/sasl"
)

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
	// defaultSASLAuthTimeout bounds the time from a connection's start
	// (after its TLS handshake) to its authentication. Kafka has no such
	// bound beyond its idle timeout; a node that holds every half-open
	// SASL connection for ten minutes lets a flood of them pin memory.
	defaultSASLAuthTimeout = 10 * time.Second
	// defaultFailedAuthDelay is Kafka's
	// connection.failed.authentication.delay.ms.
	defaultFailedAuthDelay = 100 * time.Millisecond
	// maxUnauthenticatedFrameBytes bounds a request before
	// authentication: a SASL token (sasl.DefaultMaxMessageBytes) and
	// its request's header. Kafka's sasl.server.max.receive.size is
	// 512 KiB; smaller here, because the first chunk of a frame is
	// allocated when its size is read.
	maxUnauthenticatedFrameBytes = sasl.DefaultMaxMessageBytes + 1024
)

var saslAPIs = []api{
	{key: saslHandshakeKey, minVersion: 0, maxVersion: 1, handle: handleSaslHandshake},
	{key: saslAuthenticateKey, minVersion: 0, maxVersion: 2, handle: handleSaslAuthenticate},
}

// Why a SASL connection is closed (logged at debug, like other bad
// clients).
var (
	errSASLState        = errors.New("request before SASL authentication")
	errSASLFailed       = errors.New("SASL authentication failed")
	errSASLTimeout      = errors.New("not authenticated in time")
	errSessionExpired   = errors.New("SASL session expired without re-authentication")
	errUnauthorizedSize = errors.New("frame larger than a SASL token before authentication")
)

// saslConn is a SASL listener connection's authentication. The reader
// goroutine owns it; authenticated is also read by the timer that closes
// a connection slow to authenticate.
type saslConn struct {
	server *sasl.Server
	// exchange is the exchange in progress (after SaslHandshake,
	// until done or failed); mechanism its mechanism.
	exchange  *sasl.Exchange
	mechanism string
	// done: the connection authenticated at least once; user and
	// mechanism of that first time bind any re-authentication.
	done          bool
	user          string
	userMechanism string
	// expires is when the session ends (KIP-368); zero: never.
	expires time.Time
	// closing: the last answer refused the connection; the reader reads
	// no further request and the connection closes after the answer.
	closing bool

	authenticated atomic.Bool
}

// saslAllows reports whether a request of key may be served now.
func (c *conn) saslAllows(key int16) error {
	sc := c.sasl
	if sc == nil {
		return nil
	}
	switch key {
	case saslHandshakeKey, saslAuthenticateKey:
		return nil
	case apiVersionsKey:
		if !sc.done || sc.exchange == nil {
			return nil
		}
	default:
		if !sc.done {
			return errSASLState
		}
		if sc.exchange != nil {
			// A re-authentication in progress: Kafka's clients send
			// nothing else meanwhile.
			return errSASLState
		}
		if !sc.expires.IsZero() && !time.Now().Before(sc.expires) {
			return errSessionExpired
		}
		return nil
	}
	return errSASLState
}

func handleSaslHandshake(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.SASLHandshakeRequest)
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	c := req.conn
	if c == nil || c.sasl == nil {
		// Kafka answers SaslHandshake on a listener without SASL so.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil, nil
	}
	sc := c.sasl
	resp.SupportedMechanisms = sc.server.Mechanisms()
	refuse := func(code int16) (kmsg.Response, func(), error) {
		resp.ErrorCode = code
		sc.closing = true
		return resp, nil, nil
	}
	if req.version < 1 {
		return refuse(kerr.UnsupportedVersion.Code)
	}
	if sc.exchange != nil {
		return refuse(kerr.IllegalSaslState.Code) // a second handshake mid-exchange
	}
	if sc.done && r.Mechanism != sc.userMechanism {
		// KIP-368: a re-authentication keeps its mechanism.
		return refuse(kerr.IllegalSaslState.Code)
	}
	ex, err := sc.server.Start(r.Mechanism)
	if err != nil {
		return refuse(kerr.UnsupportedSaslMechanism.Code)
	}
	sc.exchange, sc.mechanism = ex, r.Mechanism
	return resp, nil, nil
}

func handleSaslAuthenticate(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.SASLAuthenticateRequest)
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c := req.conn
	if c == nil || c.sasl == nil || c.sasl.exchange == nil {
		// Before a handshake, or on a listener without SASL.
		msg := "SaslAuthenticate before SaslHandshake"
		resp.ErrorCode, resp.ErrorMessage = kerr.IllegalSaslState.Code, &msg
		if c != nil && c.sasl != nil {
			c.sasl.closing = true
		}
		return resp, nil, nil
	}
	sc := c.sasl
	// fail answers msg to the client; the audit log gets reason and the
	// principal if the exchange established one.
	fail := func(code int16, msg, reason, principal string) (kmsg.Response, func(), error) {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		sc.exchange, sc.closing = nil, true
		req.sl.delay = s.failedAuthDelay
		s.metrics.saslFailures.WithLabelValues(c.listener.Name).Inc()
		c.auditAuthentication(audit.ResultFailure, sc.mechanism, principal, reason)
		return resp, nil, nil
	}
	reply, done, err := sc.exchange.Step(r.SASLAuthBytes)
	if err != nil {
		code := kerr.SaslAuthenticationFailed.Code
		if errors.Is(err, sasl.ErrIllegalState) {
			code = kerr.IllegalSaslState.Code
		}
		var se *sasl.Error
		if errors.As(err, &se) && se.Reason != "" {
			s.log.Debug("kafkaserver: SASL authentication failed", "listener", c.listener.Name, "remote", c.remote,
				"mechanism", sc.mechanism, "reason", se.Reason)
		}
		return fail(code, err.Error(), saslAuditReason(sc.mechanism, err), "") // the client-safe message (sasl.Error)
	}
	resp.SASLAuthBytes = reply
	if !done {
		return resp, nil, nil
	}
	ex := sc.exchange
	sc.exchange = nil
	if sc.done && ex.User() != sc.user {
		return fail(kerr.SaslAuthenticationFailed.Code, "Cannot change principals during re-authentication",
			"re-authentication as another principal than the connection's "+sasl.UserPrincipal(sc.user), ex.Principal())
	}
	now := time.Now()
	lifetime := s.cfg.MaxReauth
	if exp := ex.Expiry(); !exp.IsZero() {
		if d := exp.Sub(now); lifetime <= 0 || d < lifetime {
			lifetime = max(d, 0)
		}
		if lifetime == 0 {
			// A token accepted within the clock skew past its expiry:
			// 0 would tell the client "no re-authentication".
			return fail(kerr.SaslAuthenticationFailed.Code, "Authentication failed: the token has expired",
				"token expired (accepted within the clock skew)", ex.Principal())
		}
	}
	sc.expires = time.Time{}
	if lifetime > 0 {
		sc.expires = now.Add(lifetime)
		resp.SessionLifetimeMillis = lifetime.Milliseconds()
	}
	if !sc.done {
		sc.done, sc.user, sc.userMechanism = true, ex.User(), sc.mechanism
		typ, name, _ := strings.Cut(ex.Principal(), ":")
		c.setPrincipal(Principal{Type: typ, Name: name})
		sc.authenticated.Store(true)
	}
	s.metrics.saslSuccesses.WithLabelValues(c.listener.Name).Inc()
	c.auditAuthentication(audit.ResultSuccess, sc.mechanism, ex.Principal(), "")
	return resp, nil, nil
}

// startAuthTimer closes the connection if it has not authenticated
// within the server's time; the returned func stops the timer.
func (c *conn) startAuthTimer() func() bool {
	if c.sasl == nil {
		return func() bool { return false }
	}
	t := time.AfterFunc(c.s.saslAuthTimeout, func() {
		if !c.sasl.authenticated.Load() {
			c.s.log.Debug("kafkaserver: closing connection", "remote", c.remote, "err", errSASLTimeout)
			c.close()
		}
	})
	return t.Stop
}
