package sasl

// OAUTHBEARER (RFC 7628; KIP-255, KIP-768): the client sends a JWT, the
// server checks it against the identity provider's public keys.
//
//	C: n,[a=authzid],\x01auth=Bearer <jwt>\x01[key=value\x01...]\x01
//	S: (empty)                                              done
//
// or, when the token does not validate:
//
//	S: {"status":"invalid_token"}     the error challenge (RFC 7628 3.2.2)
//	C: \x01                           the client's dummy answer
//	   -> SASL_AUTHENTICATION_FAILED, error_message {"status":"invalid_token"}
//
// as Kafka's OAuthBearerSaslServer does: an invalid token is answered with
// a challenge, not an error, and the exchange fails only on the client's
// \x01. (Kafka would parse any other answer as a fresh initial response;
// Fjord fails the exchange whatever the answer, since no client sends
// anything else.) The challenge never says what was wrong with the
// token; the broker's log does (Error.Reason).
//
// Kafka's grammar (OAuthBearerClientInitialResponse), which is RFC 7628's
// narrowed: the gs2 flag is "n" (no channel binding); the authzid is a
// saslname; keys are [A-Za-z]+ and values [\x21-\x7E \t\r\n]+; auth is
// required and is "<scheme> <token>" with the scheme "bearer" in any case
// and the token [-_.a-zA-Z0-9]+. Other keys are SASL extensions (KIP-342),
// which Kafka's default validator accepts unread; Fjord ignores them.

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// invalidTokenChallenge is Kafka's error challenge for a token that does
// not validate (OAuthBearerValidatorCallbackHandler's "invalid_token",
// with no scope and no openid-configuration).
const invalidTokenChallenge = `{"status":"invalid_token"}`

type oauthSession struct {
	validator *Validator
	// challenged is the failure to report once the client answers the
	// error challenge; nil until the challenge has been sent.
	challenged *Error
}

func (o *oauthSession) step(msg []byte) ([]byte, *outcome, *Error) {
	if o.challenged != nil {
		e := o.challenged
		if len(msg) != 1 || msg[0] != 0x01 {
			e.Reason += fmt.Sprintf("; the client answered the error challenge with %d bytes, not %%x01", len(msg))
		}
		return nil, nil, e
	}
	token, authzid, err := parseOAuthInitialResponse(msg)
	if err != nil {
		return nil, nil, malformed(OAuthBearer, "%v", err)
	}
	sub, expiry, err := o.validator.validate(token)
	if err != nil {
		o.challenged = &Error{Kind: ErrAuthenticationFailed, Message: invalidTokenChallenge, Reason: "OAUTHBEARER: " + err.Error()}
		return []byte(invalidTokenChallenge), nil, nil
	}
	if authzid != "" && authzid != sub {
		// Kafka's words, which name both: the token was valid, so its
		// subject is no secret from this client.
		return nil, nil, &Error{Kind: ErrAuthenticationFailed,
			Message: fmt.Sprintf("Authentication failed: Client requested an authorization id (%s) that is different from the token's principal name (%s)", authzid, sub),
			Reason:  fmt.Sprintf("OAUTHBEARER: token of %q asked for authorization id %q", sub, authzid)}
	}
	return []byte{}, &outcome{user: sub, expiry: expiry}, nil
}

// parseOAuthInitialResponse returns the bearer token and the decoded
// authorization id ("" if none) of a client initial response.
func parseOAuthInitialResponse(msg []byte) (token, authzid string, err error) {
	rest, ok := bytes.CutPrefix(msg, []byte("n,"))
	if !ok {
		return "", "", errors.New(`client first message does not start with "n,"`)
	}
	gs2authzid, rest, ok := bytes.Cut(rest, []byte(","))
	if !ok {
		return "", "", errors.New("no end to the gs2 header")
	}
	if len(gs2authzid) > 0 {
		raw, ok := bytes.CutPrefix(gs2authzid, []byte("a="))
		if !ok {
			return "", "", fmt.Errorf("gs2 header field %q is not a=authzid", gs2authzid)
		}
		if authzid, ok = decodeSaslName(raw); !ok {
			return "", "", fmt.Errorf("authzid %q is not a saslname", raw)
		}
	}
	// rest = \x01 (key=value \x01)* \x01
	if len(rest) < 2 || rest[0] != 0x01 || rest[len(rest)-1] != 0x01 {
		return "", "", errors.New("kvpairs not framed by %x01")
	}
	pairs := rest[1 : len(rest)-1]
	if len(pairs) > 0 && pairs[len(pairs)-1] != 0x01 {
		return "", "", errors.New("last kvpair not ended by %x01")
	}
	seen := make(map[string]bool)
	var auth []byte
	for _, kv := range bytes.Split(pairs, []byte{0x01}) {
		if len(kv) == 0 {
			continue // the empty field after the last kvpair's %x01
		}
		key, value, ok := bytes.Cut(kv, []byte("="))
		if !ok || !isOAuthKey(key) || !isOAuthValue(value) {
			return "", "", fmt.Errorf("kvpair %q is not key=value", kv)
		}
		if seen[string(key)] {
			return "", "", fmt.Errorf("key %q given twice", key)
		}
		seen[string(key)] = true
		if string(key) == "auth" {
			auth = value
		}
	}
	if auth == nil {
		return "", "", errors.New("no auth kvpair")
	}
	scheme, tok, ok := bytes.Cut(auth, []byte(" "))
	tok = bytes.TrimLeft(tok, " ")
	if !ok || !strings.EqualFold(string(scheme), "bearer") || !isBearerToken(tok) {
		return "", "", errors.New(`auth is not "Bearer <token>"`)
	}
	return string(tok), authzid, nil
}

// decodeSaslName decodes RFC 5802's saslname: ASCII but NUL, "=" and ","
// (Kafka's [\x01-\x7F]), with "=2C" for "," and "=3D" for "=".
func decodeSaslName(b []byte) (string, bool) {
	var out strings.Builder
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '=' && bytes.HasPrefix(b[i:], []byte("=2C")):
			out.WriteByte(',')
			i += 2
		case c == '=' && bytes.HasPrefix(b[i:], []byte("=3D")):
			out.WriteByte('=')
			i += 2
		case c == 0 || c > 0x7f || c == '=' || c == ',':
			return "", false
		default:
			out.WriteByte(c)
		}
	}
	return out.String(), len(b) > 0
}

func isOAuthKey(b []byte) bool {
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return len(b) > 0
}

func isOAuthValue(b []byte) bool {
	for _, c := range b {
		if !(0x21 <= c && c <= 0x7e || c == ' ' || c == '\t' || c == '\r' || c == '\n') {
			return false
		}
	}
	return len(b) > 0
}

// isBearerToken checks Kafka's token characters: a JWS compact
// serialization's base64url segments and dots.
func isBearerToken(b []byte) bool {
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return len(b) > 0
}

// OAuthConfig says where a Validator finds the identity provider's keys
// and what a token must claim. Its names follow Kafka's
// sasl.oauthbearer.* broker settings.
type OAuthConfig struct {
	// JWKSFile is a JSON Web Key Set file, re-read when it changes. At
	// most one of JWKSFile and JWKSURL is set, and one must be.
	JWKSFile string
	// JWKSURL is a JSON Web Key Set fetched over HTTP(S)
	// (sasl.oauthbearer.jwks.endpoint.url). Use https outside tests.
	JWKSURL string
	// HTTPClient fetches JWKSURL; nil is a client with a 10 s timeout.
	HTTPClient *http.Client
	// ExpectedAudience, if set, is the audiences of which a token's aud
	// must name one (sasl.oauthbearer.expected.audience).
	ExpectedAudience []string
	// ExpectedIssuer, if set, must be a token's iss
	// (sasl.oauthbearer.expected.issuer).
	ExpectedIssuer string
	// SubClaimName is the claim that names the principal; "" is "sub"
	// (sasl.oauthbearer.sub.claim.name).
	SubClaimName string
	// ClockSkew is how far exp, nbf and iat may be off; 0 is 30 s
	// (sasl.oauthbearer.clock.skew.seconds).
	ClockSkew time.Duration
	// RefreshInterval is how often the keys are looked at again: the URL
	// fetched (0 is an hour, sasl.oauthbearer.jwks.endpoint.refresh.ms),
	// or the file's modification time checked (0 is a minute: a stat is
	// cheap, and a removed key should stop working soon). A token
	// signed by a key not in the set also refreshes it, at most once
	// every 10 s.
	RefreshInterval time.Duration
	// Now is the time tokens are checked at; nil is time.Now.
	Now func() time.Time
}

// Defaults of OAuthConfig.
const (
	DefaultClockSkew           = 30 * time.Second
	DefaultURLRefreshInterval  = time.Hour
	DefaultFileRefreshInterval = time.Minute
	// unknownKeyRefreshInterval bounds the refreshes that tokens signed
	// by unknown keys cause, so that a client sending made-up key ids
	// cannot make the broker hammer the identity provider.
	unknownKeyRefreshInterval = 10 * time.Second
	// jwksFetchTimeout bounds one fetch of JWKSURL with the default
	// HTTPClient.
	jwksFetchTimeout = 10 * time.Second
)

// allowedAlgorithms are the JWS algorithms a token may be signed with:
// the asymmetric ones. "none" would accept any token; an HMAC one
// (HS256, ...) would need a secret shared with the identity provider,
// and with a public key taken for the secret lets anyone sign.
var allowedAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// Validator checks JWTs against a JSON Web Key Set: for OAUTHBEARER, and
// for the HTTP API's bearer tokens. Safe for concurrent use; see the
// package doc's Threads.
type Validator struct {
	keys     *keySource
	audience jwt.Audience
	issuer   string
	subClaim string
	skew     time.Duration
	now      func() time.Time
}

// NewValidator checks cfg and loads the key set once, so that a wrong
// file name or URL fails at startup: ErrJWKSUnavailable if it cannot be
// read or holds no usable signature key.
func NewValidator(cfg OAuthConfig) (*Validator, error) {
	if (cfg.JWKSFile == "") == (cfg.JWKSURL == "") {
		return nil, errors.New("sasl: OAuthConfig needs exactly one of JWKSFile and JWKSURL")
	}
	if cfg.ClockSkew < 0 || cfg.RefreshInterval < 0 {
		return nil, fmt.Errorf("sasl: negative ClockSkew %v or RefreshInterval %v", cfg.ClockSkew, cfg.RefreshInterval)
	}
	v := &Validator{
		audience: jwt.Audience(cfg.ExpectedAudience),
		issuer:   cfg.ExpectedIssuer,
		subClaim: cfg.SubClaimName,
		skew:     cfg.ClockSkew,
		now:      cfg.Now,
	}
	if v.subClaim == "" {
		v.subClaim = "sub"
	}
	if v.skew == 0 {
		v.skew = DefaultClockSkew
	}
	if v.now == nil {
		v.now = time.Now
	}
	var loader jwksLoader
	refresh := cfg.RefreshInterval
	if cfg.JWKSFile != "" {
		loader = &fileLoader{path: cfg.JWKSFile}
		if refresh == 0 {
			refresh = DefaultFileRefreshInterval
		}
	} else {
		u, err := url.Parse(cfg.JWKSURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("sasl: JWKSURL %q is not an http(s) URL", cfg.JWKSURL)
		}
		client := cfg.HTTPClient
		if client == nil {
			client = &http.Client{Timeout: jwksFetchTimeout}
		}
		loader = &urlLoader{url: cfg.JWKSURL, client: client}
		if refresh == 0 {
			refresh = DefaultURLRefreshInterval
		}
	}
	keys, err := newKeySource(loader, refresh, v.now)
	if err != nil {
		return nil, err
	}
	v.keys = keys
	return v, nil
}

// Validate checks a JWT (its signature by a key of the set, its
// algorithm, exp, nbf, iat, aud and iss) and returns its principal,
// Kafka's "User:<subject>", and its expiry. Errors wrap ErrInvalidToken
// and say what was wrong.
func (v *Validator) Validate(token string) (principal string, expiry time.Time, err error) {
	sub, expiry, err := v.validate(token)
	if err != nil {
		return "", time.Time{}, err
	}
	return UserPrincipal(sub), expiry, nil
}

func invalidToken(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidToken, fmt.Sprintf(format, args...))
}

// validate is Validate returning the bare subject.
func (v *Validator) validate(token string) (sub string, expiry time.Time, err error) {
	tok, err := jwt.ParseSigned(token, allowedAlgorithms)
	if err != nil {
		// Also where "none" and the HMAC algorithms are refused.
		return "", time.Time{}, invalidToken("%v", err)
	}
	if len(tok.Headers) != 1 {
		return "", time.Time{}, invalidToken("%d signatures", len(tok.Headers))
	}
	kid, alg := tok.Headers[0].KeyID, jose.SignatureAlgorithm(tok.Headers[0].Algorithm)
	keys := v.keys.lookup(kid, alg)
	if len(keys) == 0 {
		return "", time.Time{}, invalidToken("no %s key with kid %q in the key set", alg, clip(kid))
	}
	verified := false
	for _, k := range keys {
		if tok.Claims(k.Key) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return "", time.Time{}, invalidToken("signature does not verify with the %s key(s) of kid %q", alg, clip(kid))
	}
	// The signature is verified: the payload can be read.
	var claims jwt.Claims
	var all map[string]any
	if err := tok.UnsafeClaimsWithoutVerification(&claims, &all); err != nil {
		return "", time.Time{}, invalidToken("claims: %v", err)
	}
	if claims.Expiry == nil {
		return "", time.Time{}, invalidToken("no exp claim")
	}
	expected := jwt.Expected{Issuer: v.issuer, AnyAudience: v.audience, Time: v.now()}
	if err := claims.ValidateWithLeeway(expected, v.skew); err != nil {
		return "", time.Time{}, invalidToken("%v (iss %q, aud %q, exp %v)", err, claims.Issuer, claims.Audience, claims.Expiry.Time())
	}
	s, _ := all[v.subClaim].(string)
	// Kafka trims the subject and refuses an empty one.
	if sub = strings.TrimSpace(s); sub == "" {
		return "", time.Time{}, invalidToken("no %s claim, or not a non-empty string", v.subClaim)
	}
	return sub, claims.Expiry.Time(), nil
}

// clip shortens a client's string for an error message: a key id may be
// as long as the message that carried it.
func clip(s string) string {
	const maxLen = 64
	if len(s) <= maxLen {
		return s
	}
	return s[:maxLen] + "..."
}

// keyFitsAlgorithm reports whether key can verify alg: RSA for RS* and
// PS*, the named curve for ES*, Ed25519 for EdDSA.
func keyFitsAlgorithm(key any, alg jose.SignatureAlgorithm) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		switch alg {
		case jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512:
			return true
		}
	case *ecdsa.PublicKey:
		switch alg {
		case jose.ES256:
			return k.Curve == elliptic.P256()
		case jose.ES384:
			return k.Curve == elliptic.P384()
		case jose.ES512:
			return k.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == jose.EdDSA
	}
	return false
}
