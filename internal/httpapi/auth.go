package httpapi

// Authentication (issue 20, slice 4): the HTTP API answers to the same
// principals as the Kafka listeners.
//
//	Authorization: Basic base64(user:password)   checked against the user's
//	                                             SCRAM credential in the
//	                                             node's metadata image;
//	                                             principal User:<user>
//	Authorization: Bearer <jwt>                  checked by the node's
//	                                             OAUTHBEARER validator;
//	                                             principal as the Kafka
//	                                             listener names it
//
// The gateway still speaks Kafka to its node as the node's own principal
// (a super user): what reaches the ACLs is the principal established
// here, which every route checks itself (authz.go, AUTHZ.md) before it
// asks the cluster anything.
//
// When the node authenticates its Kafka clients (Security.Required: a
// SASL listener, or SSL requiring client certificates), every /v1
// request but /v1/openapi.json must carry credentials: none, or wrong
// ones, is 401 with WWW-Authenticate. Otherwise a request without
// credentials is User:ANONYMOUS, as a PLAINTEXT Kafka client is, and
// credentials that are sent are still checked: a wrong password is never
// quietly taken for anonymous.
//
// Cost. A password check is a PBKDF2 (sasl.VerifyPassword, about 1.8 ms
// at 4096 iterations), which is the point of a salted credential and too
// much per request: a verified password is remembered (auth_cache.go)
// until the user's credential changes. What cannot be remembered, wrong
// passwords, is bounded instead: at most MaxVerifications checks run at
// once (by default half the cores, at least one), and a request past
// them is answered 429 at once rather than queued, so a flood of guesses
// costs the node at most that many cores, leaves the rest to the Kafka
// listeners (whose SCRAM exchanges cost the same PBKDF2), and never
// holds the goroutines of every connection. A failed login is held
// back FailureDelay (Kafka's connection.failed.authentication.delay.ms)
// only while fewer than maxDelayedFailures are being held, so the delay
// slows a guesser down without letting a flood park goroutines.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/audit"
	"github.com/fjordmq/fjord/internal/sasl"
)

// TokenValidator checks a bearer token: the node's OAUTHBEARER
// validator, so that a token a Kafka client may log in with works over
// HTTP with the same principal. Validate is called from any number of
// request goroutines at once; err says why for the operator (it is
// audited, not sent to the client).
type TokenValidator interface {
	Validate(token string) (principal string, expiry time.Time, err error)
}

// Security is how the API authenticates and authorizes its callers. The
// node builds it from its listeners, its metadata image and its Kafka
// listener's authorizer (internal/node/http_auth.go), so the two
// protocols decide alike. A nil Config.Security turns both off: every
// request is served, as before the HTTP API knew principals.
type Security struct {
	// Required: every request must authenticate (the node authenticates
	// its Kafka clients). Without it a request with no credentials is
	// User:ANONYMOUS.
	Required bool
	// Credentials finds a user's SCRAM credential (the node's latest
	// metadata image). Nil: no user can log in with Basic.
	Credentials sasl.Credentials
	// Bearer checks bearer tokens. Nil: they are refused (401).
	Bearer TokenValidator
	// Authorizer returns the authorizer of the node's latest metadata
	// image, nil when authorization is off (everything is allowed), and
	// whether it is ready: until it is, only super users are allowed
	// (others are answered 503 with Retry-After). It is asked once per
	// request, so a change of ACLs applies to HTTP as it applies to
	// Kafka, and every check of one request decides by one image.
	Authorizer func() (a *acl.Authorizer, ready bool)
	// MaxVerifications bounds the password checks (PBKDF2) running at
	// once (default: half of GOMAXPROCS, at least 1, so that a flood of
	// Basic logins leaves the other cores to the Kafka listeners); past
	// it a request that needs one is answered 429.
	MaxVerifications int
	// FailureDelay holds back the answer to a failed login (default
	// DefaultFailureDelay; negative: none).
	FailureDelay time.Duration
	// MaxCachedPasswords bounds the verified-password cache (default
	// DefaultMaxCachedPasswords).
	MaxCachedPasswords int
	// VerifyPassword checks a password against a credential (default
	// sasl.VerifyPassword); tests count the checks with it.
	VerifyPassword func(sasl.ScramCredential, string) bool
}

// Defaults of Security's zero fields, and bounds.
const (
	// DefaultFailureDelay is Kafka's connection.failed.authentication.delay.ms.
	DefaultFailureDelay       = 100 * time.Millisecond
	DefaultMaxCachedPasswords = 10_000
	// maxDelayedFailures bounds the failed logins held back at once;
	// past it a failure is answered at once.
	maxDelayedFailures = 64
	// maxAuthorizationBytes bounds the Authorization header this code
	// reads: a user name (1024 bytes at most, as the node's users), a
	// password and base64 fit in far less, and so does a JWT with many
	// claims. The node's listener refuses headers over 64 KiB before
	// this; the bound keeps a larger one (another server's settings)
	// from being decoded at all.
	maxAuthorizationBytes = 16 << 10
	// maxUserBytes is the node's bound on a SCRAM user name.
	maxUserBytes = 1024
	// realm names the protection space in WWW-Authenticate.
	realm = "fjord"
	// listenerName is what the audit log calls this listener.
	listenerName = "HTTP"
)

// defaultMaxVerifications is MaxVerifications' default: half the cores
// Go may use, at least one.
func defaultMaxVerifications() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// guard is the API's Security at work: the cache and the bounds.
type guard struct {
	sec   Security
	cache *passwordCache
	// tokens remembers the bearer tokens whose login was audited.
	tokens *seenTokens
	// verifying holds a token per password check running; delaying
	// one per failed login being held back.
	verifying, delaying chan struct{}
	// decoy is checked for a user that does not exist, so that an
	// unknown user costs what a wrong password costs and the answer's
	// time does not tell them apart.
	decoy sasl.ScramCredential
	audit audit.Recorder
	log   *slog.Logger
}

func newGuard(sec Security, rec audit.Recorder, log *slog.Logger) (*guard, error) {
	if sec.MaxVerifications <= 0 {
		sec.MaxVerifications = defaultMaxVerifications()
	}
	if sec.FailureDelay == 0 {
		sec.FailureDelay = DefaultFailureDelay
	}
	if sec.MaxCachedPasswords <= 0 {
		sec.MaxCachedPasswords = DefaultMaxCachedPasswords
	}
	if sec.VerifyPassword == nil {
		sec.VerifyPassword = sasl.VerifyPassword
	}
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, err
	}
	decoy, err := sasl.NewCredential(sasl.ScramSHA512, base64.StdEncoding.EncodeToString(secret[:]), sasl.DefaultIterations)
	if err != nil {
		return nil, err
	}
	cache, err := newPasswordCache(sec.MaxCachedPasswords)
	if err != nil {
		return nil, err
	}
	tokens, err := newSeenTokens(defaultMaxSeenTokens)
	if err != nil {
		return nil, err
	}
	return &guard{sec: sec, cache: cache, tokens: tokens, verifying: make(chan struct{}, sec.MaxVerifications),
		delaying: make(chan struct{}, maxDelayedFailures), decoy: decoy, audit: rec, log: log}, nil
}

// caller is who sent a request, as authenticated, and the authorizer its
// checks decide by (authz.go).
type caller struct {
	principal string
	host      netip.Addr
	// client is the remote address as the server saw it, for the audit
	// log.
	client string
	// route is the route pattern, for the audit log.
	route string
	// authorizer is nil when authorization is off; ready as
	// Security.Authorizer said.
	authorizer *acl.Authorizer
	ready      bool
}

type callerKey struct{}

// anonymous is Kafka's principal of an unauthenticated client.
const anonymous = "User:ANONYMOUS"

// callerOf is the request's caller. A request that did not pass through
// authenticated (the API without Security) is an anonymous caller whom
// nothing restricts.
func callerOf(r *http.Request) *caller {
	if c, ok := r.Context().Value(callerKey{}).(*caller); ok {
		return c
	}
	return &caller{principal: anonymous, client: r.RemoteAddr, ready: true}
}

// principalOf is the principal of the request whose context ctx is
// (callerOf), for code that has the context and not the request.
func principalOf(ctx context.Context) string {
	if c, ok := ctx.Value(callerKey{}).(*caller); ok {
		return c.principal
	}
	return anonymous
}

// authFailure is a request refused before it reached its route.
type authFailure struct {
	status int // 401, or 429 when the checks are saturated
	code   string
	msg    string // for the client
	// reason is for the operator (audit, debug log): it may name the
	// user, never the password or token.
	reason string
	// claimed is the principal the request claimed to be, if it said.
	claimed   string
	mechanism string
	// badToken: a bearer token was refused (RFC 6750's invalid_token).
	badToken bool
	// presented: the request carried credentials (a failed login, held
	// back and audited), not merely none.
	presented bool
}

// remoteHost is the address of r's client, for host-filtered bindings
// (the zero Addr, which matches only "*" hosts, when it cannot be
// read). The TCP peer's, as the Kafka listener's: a proxy's headers
// (X-Forwarded-For) are the client's word and are not taken.
func remoteHost(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// authenticated authenticates each request before next, which then
// finds the caller with callerOf. With required, a request must carry
// credentials whatever Security.Required says (the node's protected
// endpoints).
func (a *API) authenticated(route string, required bool, next http.HandlerFunc) http.HandlerFunc {
	if a.guard == nil {
		return next
	}
	g := a.guard
	return func(w http.ResponseWriter, r *http.Request) {
		c, fail := g.authenticate(r, required || g.sec.Required)
		if fail != nil {
			g.refuse(w, r, fail)
			return
		}
		c.route = route
		if g.sec.Authorizer != nil {
			c.authorizer, c.ready = g.sec.Authorizer()
		}
		next(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	}
}

// authenticate establishes who sent r.
func (g *guard) authenticate(r *http.Request, required bool) (*caller, *authFailure) {
	c := &caller{principal: anonymous, host: remoteHost(r), client: r.RemoteAddr, ready: true}
	values := r.Header.Values("Authorization")
	switch {
	case len(values) == 0:
		if required {
			return nil, &authFailure{status: http.StatusUnauthorized, code: "unauthenticated",
				msg: "this node authenticates its clients: send Authorization: Basic (a SCRAM user and its password)" + g.bearerHint(), reason: "no credentials"}
		}
		return c, nil
	case len(values) > 1:
		// Which one would count is a guess a proxy and this node could
		// make differently.
		return nil, malformedAuth("", "%d Authorization headers; send one", len(values))
	case len(values[0]) > maxAuthorizationBytes:
		return nil, malformedAuth("", "the Authorization header is %d bytes, more than %d", len(values[0]), maxAuthorizationBytes)
	}
	scheme, rest, _ := strings.Cut(values[0], " ")
	rest = strings.TrimLeft(rest, " ")
	var principal, mechanism string
	var fail *authFailure
	verified := true
	switch {
	case strings.EqualFold(scheme, "Basic"):
		mechanism = "Basic"
		principal, verified, fail = g.basic(rest)
	case strings.EqualFold(scheme, "Bearer"):
		mechanism = "Bearer"
		principal, verified, fail = g.bearer(rest, time.Now())
	default:
		want := "Basic"
		if g.sec.Bearer != nil {
			want = "Basic or Bearer"
		}
		// The scheme is not repeated: a client that put its secret
		// where the scheme goes would read it back in logs.
		return nil, malformedAuth("", "the Authorization scheme is not one this node takes: want %s", want)
	}
	if fail != nil {
		fail.mechanism = mechanism
		return nil, fail
	}
	if verified {
		// A password found in the cache is not a new login: only
		// checks that ran are audited. Nor is a bearer token already
		// seen: a token is audited once until it expires (seenTokens).
		g.record(audit.Event{Kind: audit.KindAuthentication, Result: audit.ResultSuccess, Principal: principal,
			Client: r.RemoteAddr, Mechanism: mechanism})
	}
	c.principal = principal
	return c, nil
}

func (g *guard) bearerHint() string {
	if g.sec.Bearer != nil {
		return ", or Authorization: Bearer (an OAUTHBEARER token)"
	}
	return ""
}

// malformedAuth is the refusal of credentials that cannot be read.
func malformedAuth(claimed, format string, args ...any) *authFailure {
	msg := fmt.Sprintf(format, args...)
	return &authFailure{status: http.StatusUnauthorized, code: "unauthenticated", msg: "malformed credentials: " + msg,
		reason: "malformed credentials: " + msg, claimed: claimed, presented: true}
}

// badLogin is the refusal of a user and password that do not match. It
// does not say whether the user exists, as Kafka's PLAIN does not.
func badLogin(user, reason string) *authFailure {
	return &authFailure{status: http.StatusUnauthorized, code: "unauthenticated", msg: "authentication failed: invalid username or password",
		reason: reason, claimed: sasl.UserPrincipal(user), presented: true}
}

// basic checks Basic credentials (RFC 7617): base64 of user:password,
// UTF-8, the user without a colon. verified is false when the password
// was found in the cache.
func (g *guard) basic(encoded string) (principal string, verified bool, fail *authFailure) {
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return "", false, malformedAuth("", "Basic credentials are not base64")
	}
	if !utf8.Valid(raw) {
		return "", false, malformedAuth("", "Basic credentials are not UTF-8")
	}
	user, password, ok := strings.Cut(string(raw), ":")
	clear(raw)
	switch {
	case !ok:
		return "", false, malformedAuth("", "Basic credentials have no ':' between user and password")
	case user == "":
		return "", false, malformedAuth("", "Basic credentials name no user")
	case len(user) > maxUserBytes:
		return "", false, malformedAuth("", "the user name is %d bytes, more than %d", len(user), maxUserBytes)
	case password == "":
		return "", false, malformedAuth(sasl.UserPrincipal(user), "Basic credentials have an empty password")
	}
	cred, found := g.credential(user)
	digest := g.cache.digest(user, password)
	if found && g.cache.verified(digest, cred) {
		return sasl.UserPrincipal(user), false, nil
	}
	select {
	case g.verifying <- struct{}{}:
	default:
		return "", false, &authFailure{status: http.StatusTooManyRequests, code: "too_many_requests",
			msg:    fmt.Sprintf("%d password checks are running; try again", cap(g.verifying)),
			reason: "password checks saturated", claimed: sasl.UserPrincipal(user)}
	}
	var matched bool
	if found {
		matched = g.sec.VerifyPassword(cred, password)
	} else {
		g.sec.VerifyPassword(g.decoy, password)
	}
	<-g.verifying
	switch {
	case !found:
		return "", false, badLogin(user, fmt.Sprintf("Basic: unknown user %q (no SCRAM credential)", clip(user, 256)))
	case !matched:
		return "", false, badLogin(user, fmt.Sprintf("Basic: wrong password for user %q (checked against its %s credential)", clip(user, 256), cred.Mechanism))
	}
	g.cache.remember(digest, cred)
	return sasl.UserPrincipal(user), true, nil
}

// credential is the SCRAM credential a password is checked against, as
// Kafka's PLAIN does: the user's SCRAM-SHA-512 one, else its
// SCRAM-SHA-256 one.
func (g *guard) credential(user string) (sasl.ScramCredential, bool) {
	if g.sec.Credentials == nil {
		return sasl.ScramCredential{}, false
	}
	for _, mechanism := range [...]string{sasl.ScramSHA512, sasl.ScramSHA256} {
		if c, ok := g.sec.Credentials.ScramCredential(user, mechanism); ok && c.Mechanism == mechanism {
			return c, true
		}
	}
	return sasl.ScramCredential{}, false
}

// bearer checks a bearer token (RFC 6750's b64token) at now. first is
// whether this is the token's first login since it was last remembered
// (seenTokens): only that one is audited.
//
// The validator accepts a token up to its clock skew (30 s) past its
// expiry, as a JWT library does; the Kafka listener then refuses a
// session whose lifetime would be zero or less (kafkaserver/sasl.go), so
// a token is never used at or after its expiry. The same rule holds
// here: a token with an expiry that now is not before is refused.
func (g *guard) bearer(token string, now time.Time) (principal string, first bool, fail *authFailure) {
	if g.sec.Bearer == nil {
		return "", false, &authFailure{status: http.StatusUnauthorized, code: "unauthenticated",
			msg:    "bearer tokens are not accepted: this node has no OAUTHBEARER validator (sasl-oauthbearer-jwks-file or -url); use Basic",
			reason: "Bearer: no validator configured", presented: true}
	}
	if !isB64Token(token) {
		f := malformedAuth("", "a bearer token is letters, digits and -._~+/ with = at the end")
		f.badToken = true
		return "", false, f
	}
	principal, expiry, err := g.sec.Bearer.Validate(token)
	if err != nil {
		reason := err.Error()
		var se *sasl.Error
		if errors.As(err, &se) {
			reason = se.Reason
		}
		return "", false, &authFailure{status: http.StatusUnauthorized, code: "unauthenticated", msg: "authentication failed: invalid bearer token",
			reason: "Bearer: " + reason, badToken: true, presented: true}
	}
	if !expiry.IsZero() && !now.Before(expiry) {
		return "", false, &authFailure{status: http.StatusUnauthorized, code: "unauthenticated", msg: "authentication failed: the bearer token has expired",
			reason: "Bearer: token expired (accepted within the clock skew)", claimed: principal, badToken: true, presented: true}
	}
	return principal, g.tokens.first(token, expiry, now), nil
}

// isB64Token reports whether s is RFC 6750's b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}

// refuse answers a request that did not authenticate: 401 with the
// schemes this node takes (RFC 7235), or 429. A failed login is audited
// and held back (bounded: see the file comment).
func (g *guard) refuse(w http.ResponseWriter, r *http.Request, f *authFailure) {
	g.record(audit.Event{Kind: audit.KindAuthentication, Result: audit.ResultFailure, Principal: f.claimed,
		Client: r.RemoteAddr, Mechanism: f.mechanism, Reason: f.reason})
	if f.status == http.StatusUnauthorized {
		w.Header().Add("WWW-Authenticate", `Basic realm="`+realm+`", charset="UTF-8"`)
		if g.sec.Bearer != nil {
			bearer := `Bearer realm="` + realm + `"`
			if f.badToken {
				bearer += `, error="invalid_token"`
			}
			w.Header().Add("WWW-Authenticate", bearer)
		}
		if f.presented {
			g.holdBack(r.Context())
		}
	} else {
		w.Header().Set("Retry-After", "1")
	}
	if r.ContentLength != 0 {
		// The body is not read: see limit.
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, f.status, errorBody{Error: f.code, Message: f.msg})
}

// holdBack waits FailureDelay when fewer than maxDelayedFailures
// failures are waiting, else not at all.
func (g *guard) holdBack(ctx context.Context) {
	if g.sec.FailureDelay < 0 {
		return
	}
	select {
	case g.delaying <- struct{}{}:
	default:
		return
	}
	defer func() { <-g.delaying }()
	t := time.NewTimer(g.sec.FailureDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// record passes ev to the audit log, if there is one, with the listener
// and the time; a failure or denial is also logged at debug.
func (g *guard) record(ev audit.Event) {
	if ev.Result != audit.ResultSuccess && g.log.Enabled(context.Background(), slog.LevelDebug) {
		var attrs []any
		for _, kv := range [...][2]string{{"principal", ev.Principal}, {"client", ev.Client}, {"mechanism", ev.Mechanism},
			{"reason", ev.Reason}, {"api", ev.API}, {"operation", ev.Operation}, {"resource_type", ev.ResourceType}, {"resource", ev.Resource}} {
			if kv[1] != "" {
				attrs = append(attrs, kv[0], kv[1])
			}
		}
		g.log.Debug("httpapi: "+ev.Kind+" "+ev.Result, attrs...)
	}
	if g.audit == nil {
		return
	}
	ev.Time, ev.Listener = time.Now(), listenerName
	g.audit.Record(ev)
}
