package sasl

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Reference: RFC 7519 section 4.1 (exp, nbf, iat, aud, iss), RFC 8725
// section 3.1 (algorithm allow-list), Kafka's ValidatorAccessTokenValidator.
func TestValidate(t *testing.T) {
	now := newFakeNow()
	k := keys()
	v, _ := fileValidator(t, now, nil, append(standardJWKS(),
		// An HMAC key in the set: skipped, and in any case no HS* token
		// is parsed.
		jose.JSONWebKey{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "hmac-1", Algorithm: "HS256"},
		publicJWK(k.rsa2, "rsa-512-only", "RS512"),
	)...)
	at := now.Now()
	valid := claims(at, nil)
	tamperedPayload := func() string {
		a := strings.Split(sign(t, k.rsa, jose.RS256, "rsa-1", valid), ".")
		b := strings.Split(sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"sub": "admin"})), ".")
		return a[0] + "." + b[1] + "." + a[2]
	}
	for _, tc := range []struct {
		name  string
		token string
		// sub is "" for a refused token.
		sub string
	}{
		{"RS256", sign(t, k.rsa, jose.RS256, "rsa-1", valid), "alice"},
		{"PS384", sign(t, k.rsa, jose.PS384, "rsa-1", valid), "alice"},
		{"ES256", sign(t, k.ec, jose.ES256, "ec-1", valid), "alice"},
		{"ES384", sign(t, k.ec384, jose.ES384, "ec384-1", valid), "alice"},
		{"EdDSA", sign(t, k.ed, jose.EdDSA, "ed-1", valid), "alice"},
		{"no kid: every fitting key tried", sign(t, k.ec, jose.ES256, "", valid), "alice"},
		{"aud a single string", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"aud": "kafka"})), "alice"},
		{"one of several audiences", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"aud": []string{"x", "kafka"}})), "alice"},
		{"expired within the skew", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"exp": at.Add(-29 * time.Second).Unix()})), "alice"},
		{"nbf within the skew", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"nbf": at.Add(29 * time.Second).Unix()})), "alice"},
		{"no iat, no nbf", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"iat": nil, "nbf": nil})), "alice"},
		{"sub trimmed", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"sub": " alice "})), "alice"},

		{"expired", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"exp": at.Add(-31 * time.Second).Unix()})), ""},
		{"not yet valid", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"nbf": at.Add(time.Minute).Unix()})), ""},
		{"issued in the future", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"iat": at.Add(time.Minute).Unix()})), ""},
		{"no exp", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"exp": nil})), ""},
		{"exp not a number", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"exp": "tomorrow"})), ""},
		{"wrong audience", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"aud": "other"})), ""},
		{"no audience", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"aud": nil})), ""},
		{"wrong issuer", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"iss": "https://evil.example"})), ""},
		{"no sub", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"sub": nil})), ""},
		{"blank sub", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"sub": "  "})), ""},
		{"sub not a string", sign(t, k.rsa, jose.RS256, "rsa-1", claims(at, map[string]any{"sub": 42})), ""},
		{"unknown kid", sign(t, k.rsa, jose.RS256, "rsa-9", valid), ""},
		{"bad signature: another key, same kid", sign(t, k.rsa2, jose.RS256, "rsa-1", valid), ""},
		{"payload swapped", tamperedPayload(), ""},
		{"key of another type", sign(t, k.ec, jose.ES256, "rsa-1", valid), ""},
		{"curve not the algorithm's", sign(t, k.ec, jose.ES256, "ec384-1", valid), ""},
		{"algorithm not the key's", sign(t, k.rsa2, jose.RS256, "rsa-512-only", valid), ""},
		{"alg none", unsecured(t, valid), ""},
		{"HS256 with a key in the set", sign(t, []byte("0123456789abcdef0123456789abcdef"), jose.HS256, "hmac-1", valid), ""},
		{"HS256 keyed by the RSA public key", sign(t, []byte(jwksJSON(t, publicJWK(k.rsa, "rsa-1", ""))), jose.HS256, "rsa-1", valid), ""},
		{"garbage", "not.a.token", ""},
		{"empty", "", ""},
		{"JSON serialization", `{"payload":"e30","signatures":[]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			principal, expiry, err := v.Validate(tc.token)
			if tc.sub == "" {
				if !errors.Is(err, ErrInvalidToken) || principal != "" || !expiry.IsZero() {
					t.Fatalf("Validate = %q %v %v, want ErrInvalidToken", principal, expiry, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if principal != "User:"+tc.sub {
				t.Fatalf("principal %q", principal)
			}
		})
	}
}

func TestValidateExpiryAndOptions(t *testing.T) {
	now := newFakeNow()
	k := keys()
	exp := now.Now().Add(17 * time.Minute).Truncate(time.Second)
	v, _ := fileValidator(t, now, func(c *OAuthConfig) {
		c.SubClaimName = "client_id"
		c.ExpectedAudience = nil
		c.ExpectedIssuer = ""
		c.ClockSkew = 5 * time.Second
	}, standardJWKS()...)
	tok := sign(t, k.rsa, jose.RS256, "rsa-1", claims(now.Now(), map[string]any{
		"client_id": "svc-orders", "exp": exp.Unix(), "aud": "anything", "iss": "anyone"}))
	principal, expiry, err := v.Validate(tok)
	if err != nil || principal != "User:svc-orders" || !expiry.Equal(exp) {
		t.Fatalf("Validate = %q %v %v", principal, expiry, err)
	}
	now.Advance(17*time.Minute + 6*time.Second)
	if _, _, err := v.Validate(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("6 s past exp with 5 s skew: %v", err)
	}
}

func bearer(token string) []byte { return []byte("n,,\x01auth=Bearer " + token + "\x01\x01") }

// Reference: RFC 7628 section 3.1 (client initial response) and 3.2.2
// (error challenge), Kafka's OAuthBearerClientInitialResponse and
// OAuthBearerSaslServer.
func TestOAuthBearer(t *testing.T) {
	now := newFakeNow()
	k := keys()
	v, _ := fileValidator(t, now, nil, standardJWKS()...)
	s := newTestServer(t, &memCredentials{}, v)
	exp := now.Now().Add(time.Hour).Truncate(time.Second)
	good := sign(t, k.rsa, jose.RS256, "rsa-1", claims(now.Now(), map[string]any{"exp": exp.Unix()}))
	expired := sign(t, k.rsa, jose.RS256, "rsa-1", claims(now.Now(), map[string]any{"exp": now.Now().Add(-time.Hour).Unix()}))
	odd := sign(t, k.rsa, jose.RS256, "rsa-1", claims(now.Now(), map[string]any{"sub": "a,b=c"}))
	for _, tc := range []struct {
		name string
		msg  string
		// outcome: "ok", "challenge" (then the exchange fails on
		// %x01), or the sentinel's text for a failure at once.
		want    string
		message string
	}{
		{"valid", string(bearer(good)), "ok", ""},
		{"scheme in any case", "n,,\x01auth=BEARER " + good + "\x01\x01", "ok", ""},
		{"several spaces", "n,,\x01auth=Bearer   " + good + "\x01\x01", "ok", ""},
		{"extensions ignored", "n,,\x01auth=Bearer " + good + "\x01traceId=abc 123\x01logicalCluster=lkc-1\x01\x01", "ok", ""},
		{"extension before auth", "n,,\x01x=y\x01auth=Bearer " + good + "\x01\x01", "ok", ""},
		{"authzid is the subject", "n,a=alice,\x01auth=Bearer " + good + "\x01\x01", "ok", ""},
		{"escaped authzid", "n,a=a=2Cb=3Dc,\x01auth=Bearer " + odd + "\x01\x01", "ok", ""},
		{"authzid of another", "n,a=bob,\x01auth=Bearer " + good + "\x01\x01", ErrAuthenticationFailed.Error(),
			"Authentication failed: Client requested an authorization id (bob) that is different from the token's principal name (alice)"},
		{"expired token", string(bearer(expired)), "challenge", invalidTokenChallenge},
		{"garbage token", string(bearer("abc.def.ghi")), "challenge", invalidTokenChallenge},
		{"empty", "", ErrMalformedMessage.Error(), msgInvalidCredentials(OAuthBearer)},
		{"just %x01", "\x01", ErrMalformedMessage.Error(), ""},
		{"no gs2 header", "\x01auth=Bearer " + good + "\x01\x01", ErrMalformedMessage.Error(), ""},
		{"channel binding flag y", "y,,\x01auth=Bearer " + good + "\x01\x01", ErrMalformedMessage.Error(), ""},
		{"gs2 field not a=", "n,b=x,\x01auth=Bearer " + good + "\x01\x01", ErrMalformedMessage.Error(), ""},
		{"bad authzid escape", "n,a=a=2X,\x01auth=Bearer " + good + "\x01\x01", ErrMalformedMessage.Error(), ""},
		{"empty a=", "n,a=,\x01auth=Bearer " + good + "\x01\x01", ErrMalformedMessage.Error(), ""},
		{"no auth", "n,,\x01x=y\x01\x01", ErrMalformedMessage.Error(), ""},
		{"no kvpairs", "n,,\x01\x01", ErrMalformedMessage.Error(), ""},
		{"auth twice", "n,,\x01auth=Bearer " + good + "\x01auth=Bearer x\x01\x01", ErrMalformedMessage.Error(), ""},
		{"not Bearer", "n,,\x01auth=Basic " + good + "\x01\x01", ErrMalformedMessage.Error(), ""},
		{"no space", "n,,\x01auth=Bearer" + good + "\x01\x01", ErrMalformedMessage.Error(), ""},
		{"no token", "n,,\x01auth=Bearer \x01\x01", ErrMalformedMessage.Error(), ""},
		{"token with a space", "n,,\x01auth=Bearer " + good + " x\x01\x01", ErrMalformedMessage.Error(), ""},
		{"no final %x01", "n,,\x01auth=Bearer " + good + "\x01", ErrMalformedMessage.Error(), ""},
		{"no %x01 at all", "n,,auth=Bearer " + good, ErrMalformedMessage.Error(), ""},
		{"key with a digit", "n,,\x01auth=Bearer " + good + "\x01k1=v\x01\x01", ErrMalformedMessage.Error(), ""},
		{"empty value", "n,,\x01auth=Bearer " + good + "\x01k=\x01\x01", ErrMalformedMessage.Error(), ""},
		{"value with NUL", "n,,\x01auth=Bearer " + good + "\x01k=a\x00b\x01\x01", ErrMalformedMessage.Error(), ""},
		{"trailing garbage", string(bearer(good)) + "x", ErrMalformedMessage.Error(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := start(t, s, OAuthBearer)
			reply, done, err := x.Step([]byte(tc.msg))
			switch tc.want {
			case "ok":
				if err != nil || !done || len(reply) != 0 {
					t.Fatalf("Step = %q %v %v", reply, done, err)
				}
				if !strings.HasPrefix(x.Principal(), "User:") || x.Expiry().IsZero() {
					t.Fatalf("principal %q expiry %v", x.Principal(), x.Expiry())
				}
			case "challenge":
				if err != nil || done || string(reply) != invalidTokenChallenge {
					t.Fatalf("Step = %q %v %v, want the error challenge", reply, done, err)
				}
				reply, done, err = x.Step([]byte{0x01})
				e := wantKind(t, err, ErrAuthenticationFailed)
				if e.Message != tc.message || reply != nil || done {
					t.Fatalf("after %%x01: %q %v message %q", reply, done, e.Message)
				}
				checkFailed(t, x, err)
			default:
				if err == nil || err.(*Error).Kind.Error() != tc.want {
					t.Fatalf("Step = %q %v %v, want %s", reply, done, err, tc.want)
				}
				if e := err.(*Error); tc.message != "" && e.Message != tc.message {
					t.Fatalf("message %q, want %q", e.Message, tc.message)
				}
				checkFailed(t, x, err)
			}
		})
	}

	// The principal and the expiry of a valid token.
	x := start(t, s, OAuthBearer)
	if _, done, err := x.Step(bearer(good)); err != nil || !done {
		t.Fatal(err)
	}
	if x.Principal() != "User:alice" || x.User() != "alice" || !x.Expiry().Equal(exp) {
		t.Fatalf("principal %q expiry %v, want %v", x.Principal(), x.Expiry(), exp)
	}
}

// After the error challenge, an answer other than %x01 fails the
// exchange too (Kafka would take it as a new initial response).
func TestOAuthBearerChallengeAnswer(t *testing.T) {
	now := newFakeNow()
	v, _ := fileValidator(t, now, nil, standardJWKS()...)
	s := newTestServer(t, &memCredentials{}, v)
	good := sign(t, keys().rsa, jose.RS256, "rsa-1", claims(now.Now(), nil))
	for _, answer := range [][]byte{bearer(good), {}, {0x01, 0x01}, {0x00}} {
		x := start(t, s, OAuthBearer)
		if reply, _, err := x.Step(bearer("x.y.z")); err != nil || string(reply) != invalidTokenChallenge {
			t.Fatalf("no challenge: %q %v", reply, err)
		}
		_, done, err := x.Step(answer)
		e := wantKind(t, err, ErrAuthenticationFailed)
		if done || e.Message != invalidTokenChallenge || !strings.Contains(e.Reason, "not %x01") {
			t.Fatalf("answer %q: %v %+v", answer, done, e)
		}
		checkFailed(t, x, err)
	}
}

func TestNewValidatorConfig(t *testing.T) {
	path := t.TempDir() + "/jwks.json"
	writeJWKS(t, path, standardJWKS()...)
	for _, tc := range []struct {
		name string
		cfg  OAuthConfig
		want error // nil: any error
	}{
		{"neither source", OAuthConfig{}, nil},
		{"both sources", OAuthConfig{JWKSFile: path, JWKSURL: "https://idp.example/jwks"}, nil},
		{"not http", OAuthConfig{JWKSURL: "file:///etc/jwks.json"}, nil},
		{"no host", OAuthConfig{JWKSURL: "https:///jwks"}, nil},
		{"negative skew", OAuthConfig{JWKSFile: path, ClockSkew: -time.Second}, nil},
		{"negative refresh", OAuthConfig{JWKSFile: path, RefreshInterval: -time.Second}, nil},
		{"missing file", OAuthConfig{JWKSFile: path + ".missing"}, ErrJWKSUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := NewValidator(tc.cfg)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("NewValidator = %v, %v; want an error %v", v, err, tc.want)
			}
		})
	}
	v, err := NewValidator(OAuthConfig{JWKSFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if v.subClaim != "sub" || v.skew != DefaultClockSkew || v.keys.refreshInterval != DefaultFileRefreshInterval || v.now == nil {
		t.Fatalf("defaults: %q %v %v", v.subClaim, v.skew, v.keys.refreshInterval)
	}
}
