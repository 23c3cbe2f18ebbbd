// Package sasl is the server side of Kafka's SASL authentication: the
// mechanisms PLAIN (RFC 4616), SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802,
// RFC 7677; KIP-84) and OAUTHBEARER (RFC 7628; KIP-255, KIP-768). It is
// pure logic: it reads no socket and knows nothing of the wire. The
// connection layer passes it the auth_bytes of each SaslAuthenticate
// request (or each raw token after a SaslHandshake v0) and sends back what
// Step returns.
//
// # An exchange
//
//	SaslHandshake{mechanism}       -> Server.Start(mechanism)
//	SaslAuthenticate{auth_bytes}   -> Exchange.Step(auth_bytes)
//	                               <- reply, done, err
//	... until done or err
//
// The messages each mechanism exchanges (C: client, S: server):
//
//	PLAIN         C: [authzid] NUL authcid NUL passwd     S: (empty), done
//	SCRAM-SHA-*   C: n,,n=user,r=cnonce                   S: r=cnonce+snonce,s=salt,i=4096
//	              C: c=biws,r=cnonce+snonce,p=proof       S: v=signature, done
//	OAUTHBEARER   C: n,,\x01auth=Bearer <jwt>\x01\x01     S: (empty), done
//	  bad token   S: {"status":"invalid_token"}           C: \x01   -> err
//
// # Failures and what the connection layer answers
//
// Step's errors are *Error values. Error() is the text the client may
// read (SaslAuthenticate's error_message), in Kafka's words: it never
// says whether a user exists, nor tells a wrong password from an unknown
// user. Reason says why, for the broker's log only. The sentinel (errors.Is) picks the
// Kafka error code:
//
//	ErrUnsupportedMechanism  SaslHandshake UNSUPPORTED_SASL_MECHANISM (33), with Mechanisms()
//	ErrAuthenticationFailed  SaslAuthenticate SASL_AUTHENTICATION_FAILED (58), then close
//	ErrMalformedMessage      SaslAuthenticate SASL_AUTHENTICATION_FAILED (58), then close
//	ErrMessageTooLarge       SaslAuthenticate SASL_AUTHENTICATION_FAILED (58), then close
//	ErrIllegalState          ILLEGAL_SASL_STATE (34), then close
//
// A failed exchange stays failed: every later Step returns the same
// error. Kafka closes the connection after sending the failure response.
//
// # Credentials
//
// Fjord stores no password: a user has a ScramCredential per SCRAM
// mechanism (KIP-554's salt, StoredKey, ServerKey and iterations, what
// AlterUserScramCredentials writes to the metadata log). PLAIN checks a
// password by salting it with the user's SCRAM-SHA-512 credential, or
// SCRAM-SHA-256's when it has no SHA-512 one (VerifyPassword).
//
// # Threads
//
//   - Server is immutable after New: Start may be called from any
//     goroutine at once.
//   - An Exchange belongs to the goroutine that reads its connection's
//     requests; it is not safe for concurrent use. It holds no resources:
//     an abandoned exchange needs no cleanup.
//   - Credentials.ScramCredential is called from the goroutine calling
//     Step, many at once.
//   - Validator may be shared by any number of goroutines (the Kafka
//     listeners and the HTTP API). It has no goroutine of its own: a
//     Validate call that finds the key set due for a refresh does the
//     refresh, reading the JWKS file or fetching the JWKS URL, while other
//     callers keep using the keys they had.
//
// Slices passed to Step are not retained past the call; replies are owned
// by the caller.
package sasl

import (
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Mechanism names as Kafka spells them (sasl.enabled.mechanisms).
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
)

// DefaultMaxMessageBytes bounds one client message. The largest honest
// message is an OAUTHBEARER token, a few KB even with many claims; Kafka
// bounds the whole SaslAuthenticate request at 512 KiB
// (sasl.server.max.receive.size), but nothing needs that much here.
const DefaultMaxMessageBytes = 64 << 10

// Expected failures. Step and Start return them wrapped (errors.Is).
var (
	// ErrUnsupportedMechanism: the mechanism is not enabled on this
	// listener, or (CredentialFromSaltedPassword) is not a SCRAM one.
	ErrUnsupportedMechanism = errors.New("sasl: unsupported SASL mechanism")
	// ErrAuthenticationFailed: the client proved nothing: unknown user,
	// wrong password or proof, a token that does not validate, an
	// authorization id that is not the authenticated user, a refused
	// extension (SCRAM tokenauth).
	ErrAuthenticationFailed = errors.New("sasl: authentication failed")
	// ErrMalformedMessage: a client message that is not in the
	// mechanism's grammar, including an empty one.
	ErrMalformedMessage = errors.New("sasl: malformed SASL message")
	// ErrMessageTooLarge: a client message longer than
	// Config.MaxMessageBytes. It fails the exchange unread.
	ErrMessageTooLarge = errors.New("sasl: SASL message too large")
	// ErrIllegalState: a message after the exchange completed.
	ErrIllegalState = errors.New("sasl: unexpected SASL message")
	// ErrUnacceptableCredential: a SCRAM credential outside Kafka's
	// limits (AlterUserScramCredentials' UNACCEPTABLE_CREDENTIAL, 93).
	ErrUnacceptableCredential = errors.New("sasl: unacceptable credential")
	// ErrInvalidToken: Validator.Validate refused a bearer token. Its
	// message says why (expired, wrong audience, ...), which RFC 6750
	// lets an HTTP API tell the client.
	ErrInvalidToken = errors.New("sasl: invalid token")
	// ErrJWKSUnavailable: NewValidator could not load a usable JSON Web
	// Key Set from the file or URL.
	ErrJWKSUnavailable = errors.New("sasl: JWKS unavailable")
)

// Error is how a Step fails.
type Error struct {
	// Kind is one of the sentinel errors above.
	Kind error
	// Message is what the client may be told: Kafka's wording, never
	// saying whether the user exists.
	Message string
	// Reason is why, for the broker's log. It may name the user and the
	// check that failed, so it must never reach the client.
	Reason string
}

// Error returns Message, so that an error passed on as it is leaks
// nothing.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Kind.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Kind }

// Kafka's wording for the client.
const (
	msgInvalidPassword = "Authentication failed: Invalid username or password"
	msgAuthzidMismatch = "Authentication failed: Client requested an authorization id that is different from username"
)

// msgInvalidCredentials is what Kafka tells a client whose mechanism
// threw a plain SaslException (a SCRAM failure, a malformed message):
// the same words whatever went wrong.
func msgInvalidCredentials(mechanism string) string {
	return "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism
}

// UserPrincipal is Kafka's KafkaPrincipal string for a user name.
func UserPrincipal(name string) string { return "User:" + name }

// Credentials gives a user's stored SCRAM credential for a mechanism
// (ScramSHA256 or ScramSHA512). It is called from any goroutine, many at
// once, once per SCRAM or PLAIN authentication. The returned credential's
// slices are only read.
type Credentials interface {
	ScramCredential(user, mechanism string) (ScramCredential, bool)
}

// Config is a listener's SASL configuration.
type Config struct {
	// Mechanisms are those enabled, in the order SaslHandshake lists
	// them (sasl.enabled.mechanisms).
	Mechanisms []string
	// Credentials are required for PLAIN and SCRAM.
	Credentials Credentials
	// Validator checks OAUTHBEARER tokens; required for OAUTHBEARER. One
	// Validator may serve every listener and the HTTP API, so that they
	// share one copy of the keys.
	Validator *Validator
	// MaxMessageBytes bounds one client message; 0 is
	// DefaultMaxMessageBytes.
	MaxMessageBytes int
}

// Server starts exchanges for one listener's configuration.
type Server struct {
	mechanisms      []string
	credentials     Credentials
	validator       *Validator
	maxMessageBytes int
	// decoySecret keys the decoy credential of an unknown user
	// (decoyCredential), so that it is the same at every attempt but
	// nobody can compute it.
	decoySecret [32]byte
	// scramNonce, if set, replaces the SCRAM server nonce: tests use it
	// to replay a fixed transcript.
	scramNonce func() string
}

// New checks cfg and returns its Server.
func New(cfg Config) (*Server, error) {
	if len(cfg.Mechanisms) == 0 {
		return nil, errors.New("sasl: no mechanism enabled")
	}
	for i, m := range cfg.Mechanisms {
		switch m {
		case Plain, ScramSHA256, ScramSHA512:
			if cfg.Credentials == nil {
				return nil, fmt.Errorf("sasl: %s needs Credentials", m)
			}
		case OAuthBearer:
			if cfg.Validator == nil {
				return nil, fmt.Errorf("sasl: %s needs a Validator", m)
			}
		default:
			return nil, fmt.Errorf("%w: %q", ErrUnsupportedMechanism, m)
		}
		if slices.Contains(cfg.Mechanisms[:i], m) {
			return nil, fmt.Errorf("sasl: mechanism %s listed twice", m)
		}
	}
	if cfg.MaxMessageBytes < 0 {
		return nil, fmt.Errorf("sasl: MaxMessageBytes %d < 0", cfg.MaxMessageBytes)
	}
	s := &Server{
		mechanisms:      slices.Clone(cfg.Mechanisms),
		credentials:     cfg.Credentials,
		validator:       cfg.Validator,
		maxMessageBytes: cfg.MaxMessageBytes,
	}
	if s.maxMessageBytes == 0 {
		s.maxMessageBytes = DefaultMaxMessageBytes
	}
	if _, err := rand.Read(s.decoySecret[:]); err != nil {
		return nil, fmt.Errorf("sasl: decoy secret: %w", err)
	}
	return s, nil
}

// Mechanisms returns the enabled mechanisms, for SaslHandshake's
// response. The caller owns the slice.
func (s *Server) Mechanisms() []string { return slices.Clone(s.mechanisms) }

// Start begins one exchange with mechanism, as a SaslHandshake names it
// (exactly: Kafka compares names case-sensitively).
func (s *Server) Start(mechanism string) (*Exchange, error) {
	if !slices.Contains(s.mechanisms, mechanism) {
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedMechanism, mechanism)
	}
	x := &Exchange{mechanism: mechanism, maxMessageBytes: s.maxMessageBytes}
	switch mechanism {
	case Plain:
		x.session = &plainSession{server: s}
	case ScramSHA256, ScramSHA512:
		x.session = newScramSession(s, mechanism)
	case OAuthBearer:
		x.session = &oauthSession{validator: s.validator}
	default:
		panic(fmt.Sprintf("sasl: enabled mechanism %q has no session", mechanism))
	}
	return x, nil
}

// session is one mechanism's side of an exchange. Exchange guarantees
// that step is not called again after it returned an error or done.
type session interface {
	step(msg []byte) (reply []byte, out *outcome, err *Error)
}

// outcome is a successful exchange's result.
type outcome struct {
	user   string
	expiry time.Time
}

// Exchange is one authentication in progress. See the package doc for
// its threads.
type Exchange struct {
	mechanism       string
	maxMessageBytes int
	session         session

	// Invariant: at most one of out and err is set, and once set neither
	// changes.
	out *outcome
	err *Error
}

// Mechanism returns the exchange's mechanism.
func (x *Exchange) Mechanism() string { return x.mechanism }

// Step consumes one client message and returns the server's reply. done
// is true when the client has authenticated; reply is then the last
// server message (SCRAM's server signature; empty for PLAIN and
// OAUTHBEARER), which the connection layer still sends. A reply with
// done false and no error is a challenge: the client answers it with the
// next message (OAUTHBEARER's error challenge is one: its answer fails
// the exchange).
//
// err is an *Error; see the package doc for what to answer.
func (x *Exchange) Step(msg []byte) (reply []byte, done bool, err error) {
	switch {
	case x.err != nil:
		return nil, false, x.err
	case x.out != nil:
		return nil, false, &Error{
			Kind:    ErrIllegalState,
			Message: "Unexpected SASL message after authentication completed",
			Reason:  fmt.Sprintf("%s message of %d bytes after the exchange completed", x.mechanism, len(msg)),
		}
	case len(msg) > x.maxMessageBytes:
		x.err = &Error{
			Kind:    ErrMessageTooLarge,
			Message: fmt.Sprintf("Authentication failed: SASL message of %d bytes is larger than the maximum %d", len(msg), x.maxMessageBytes),
			Reason:  fmt.Sprintf("%s message of %d bytes > max %d", x.mechanism, len(msg), x.maxMessageBytes),
		}
		return nil, false, x.err
	}
	reply, out, serr := x.session.step(msg)
	if serr != nil {
		x.err = serr
		return nil, false, x.err
	}
	x.out = out
	return reply, out != nil, nil
}

// Principal returns the authenticated principal, Kafka's "User:name", or
// "" before the exchange is done.
func (x *Exchange) Principal() string {
	if x.out == nil {
		return ""
	}
	return UserPrincipal(x.out.user)
}

// User returns the authenticated user's name (the principal without its
// "User:" type), or "" before the exchange is done.
func (x *Exchange) User() string {
	if x.out == nil {
		return ""
	}
	return x.out.user
}

// Expiry returns when the credential that authenticated expires: an
// OAUTHBEARER token's exp. It is zero for PLAIN and SCRAM, whose
// credentials do not expire, and before the exchange is done. The
// connection layer derives SaslAuthenticate's session_lifetime_ms from
// it (KIP-368).
func (x *Exchange) Expiry() time.Time {
	if x.out == nil {
		return time.Time{}
	}
	return x.out.expiry
}

// malformed is the failure of a message outside mechanism's grammar.
func malformed(mechanism, format string, args ...any) *Error {
	return &Error{
		Kind:    ErrMalformedMessage,
		Message: msgInvalidCredentials(mechanism),
		Reason:  mechanism + ": " + fmt.Sprintf(format, args...),
	}
}
