package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/fjordmq/fjord/internal/listener"
	"github.com/fjordmq/fjord/internal/sasl"
	"github.com/fjordmq/fjord/internal/testutil"
)

// A node with a SASL listener (SCRAM and OAUTHBEARER) and
// --http-protect-metrics-and-health: its HTTP API takes Basic
// credentials of a user created in the metadata log
// (AlterUserScramCredentials) and bearer tokens of the listeners' JWKS,
// refuses requests without credentials, and applies a binding created
// with CreateAcls; /metrics and /readyz need credentials and DESCRIBE on
// the cluster, /healthz credentials only; /v1/openapi.json stays open;
// and the node warns at start that Basic passwords cross its plain HTTP
// listener in cleartext.
func TestHTTPAuthOnASASLNode(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	jwksFile := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwksFile, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1").WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	carolToken, err := jwt.Signed(signer).Claims(jwt.Claims{Subject: "carol", IssuedAt: jwt.NewNumericDate(time.Now()),
		Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(t, filepath.Join(dir, "data"))
	cfg.KafkaAddr = ""
	cfg.Listeners = []listener.Listener{{Name: "SASL_PLAINTEXT", Bind: "127.0.0.1:0", Protocol: listener.SASLPlaintext}}
	cfg.SASL = SASLConfig{
		EnabledMechanisms: []string{sasl.ScramSHA512, sasl.OAuthBearer},
		OAuth:             sasl.OAuthConfig{JWKSFile: jwksFile},
		InterBrokerUser:   "broker", InterBrokerPassword: "broker-secret",
		BootstrapUsers: []ScramUser{{Mechanism: sasl.ScramSHA512, Name: "broker", Password: "broker-secret"}},
	}
	cfg.HTTP.ProtectMetricsAndHealth = true
	logs := &testutil.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	n := startNode(t, cfg)
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "plain HTTP (no --http-tls)") {
		t.Errorf("no warning of cleartext credentials over plain HTTP in the start's log:\n%.2000s", logs.String())
	}
	base := "http://" + n.HTTPAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The node's own user is a super user: it makes alice and t.
	adm := kadm.NewClient(newClient(t, n, kgo.SASL(kscram.Auth{User: "broker", Pass: "broker-secret"}.AsSha512Mechanism())))
	if rs, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"}}); err != nil || rs.Error() != nil {
		t.Fatalf("creating alice: %v %v", err, rs.Error())
	}
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil || r.Err != nil {
		t.Fatalf("creating t: %v %v", err, r.Err)
	}

	type answer struct {
		status int
		header http.Header
		body   string
	}
	do := func(method, path, authorization, body string) answer {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header, string(raw)}
	}
	basic := func(user, password string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	}
	alice, broker, carol := basic("alice", "alice-secret"), basic("broker", "broker-secret"), "Bearer "+carolToken
	// until waits for path to answer want: alice's credential and the
	// bindings reach the image a moment after their request answers,
	// and the authorizer is ready once the node's registration has.
	until := func(method, path, authorization, body string, want int) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, func() error {
			if a := do(method, path, authorization, body); a.status != want {
				return fmt.Errorf("%s %s: %d %s, want %d", method, path, a.status, a.body, want)
			}
			return nil
		})
	}

	a := do("GET", "/v1/cluster", "", "")
	if a.status != http.StatusUnauthorized || !strings.Contains(a.body, `"unauthenticated"`) {
		t.Fatalf("no credentials: %d %s, want 401", a.status, a.body)
	}
	if got := a.header.Values("WWW-Authenticate"); len(got) != 2 || !strings.HasPrefix(got[0], "Basic ") || !strings.HasPrefix(got[1], "Bearer ") {
		t.Errorf("WWW-Authenticate %q, want Basic and Bearer", got)
	}
	until("GET", "/v1/cluster", alice, "", http.StatusOK)
	if a := do("GET", "/v1/cluster", basic("alice", "wrong"), ""); a.status != http.StatusUnauthorized {
		t.Errorf("a wrong password: %d %s", a.status, a.body)
	}
	if a := do("GET", "/v1/cluster", basic("mallory", "x"), ""); a.status != http.StatusUnauthorized {
		t.Errorf("an unknown user: %d %s", a.status, a.body)
	}
	if a := do("POST", "/v1/topics/t/produce", alice, `{"value": "YQ=="}`); a.status != http.StatusForbidden || !strings.Contains(a.body, `WRITE topic \"t\"`) {
		t.Errorf("alice producing to t without a binding: %d %s, want 403 naming WRITE topic t", a.status, a.body)
	}
	until("GET", "/v1/cluster", carol, "", http.StatusOK)
	if a := do("GET", "/v1/topics/t", carol, ""); a.status != http.StatusForbidden {
		t.Errorf("carol (bearer) describing t without a binding: %d %s", a.status, a.body)
	}
	if a := do("GET", "/v1/cluster", "Bearer "+carolToken+"x", ""); a.status != http.StatusUnauthorized || !strings.Contains(strings.Join(a.header.Values("WWW-Authenticate"), " "), "invalid_token") {
		t.Errorf("a bearer token with a bad signature: %d %s %q", a.status, a.body, a.header.Values("WWW-Authenticate"))
	}

	acls := kadm.NewACLs().Allow("User:alice").Topics("t").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	carolACL := kadm.NewACLs().Allow("User:carol").Topics("t").Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	for _, b := range []*kadm.ACLBuilder{acls, carolACL} {
		rs, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Err != nil {
				t.Fatalf("CreateAcls: %v", r.Err)
			}
		}
	}
	until("POST", "/v1/topics/t/produce", alice, `{"value": "YQ=="}`, http.StatusOK)
	until("GET", "/v1/topics/t", carol, "", http.StatusOK)

	// The node's endpoints, protected.
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		if a := do("GET", path, "", ""); a.status != http.StatusUnauthorized {
			t.Errorf("%s without credentials: %d %s", path, a.status, a.body)
		}
		if a := do("GET", path, basic("alice", "wrong"), ""); a.status != http.StatusUnauthorized {
			t.Errorf("%s with a wrong password: %d %s", path, a.status, a.body)
		}
	}
	for _, path := range []string{"/metrics", "/readyz"} {
		if a := do("GET", path, alice, ""); a.status != http.StatusForbidden {
			t.Errorf("%s as alice (no DESCRIBE on the cluster): %d %s", path, a.status, a.body)
		}
	}
	// Liveness needs a login, no ACL (nor a ready authorizer).
	if a := do("GET", "/healthz", alice, ""); a.status != http.StatusOK {
		t.Errorf("/healthz as alice (logged in, no binding): %d %s", a.status, a.body)
	}
	if a := do("GET", "/metrics", broker, ""); a.status != http.StatusOK || !strings.Contains(a.body, "fjord_http_requests_total") {
		t.Errorf("/metrics as the super user broker: %d %.200s", a.status, a.body)
	}
	if a := do("GET", "/healthz", broker, ""); a.status != http.StatusOK {
		t.Errorf("/healthz as broker: %d %s", a.status, a.body)
	}
	if a := do("GET", "/v1/openapi.json", "", ""); a.status != http.StatusOK {
		t.Errorf("/v1/openapi.json without credentials: %d", a.status)
	}
}

// The cleartext warning is given exactly when a listener authenticates
// its clients and the HTTP listener has no TLS.
func TestCleartextHTTPWarning(t *testing.T) {
	saslListeners := []listener.Listener{{Name: "SASL_PLAINTEXT", Bind: "127.0.0.1:0", Protocol: listener.SASLPlaintext}}
	for _, tc := range []struct {
		name      string
		listeners []listener.Listener
		httpTLS   bool
		warn      bool
	}{
		{"plaintext listener, plain HTTP", nil, false, false},
		{"SASL listener, plain HTTP", saslListeners, false, true},
		{"SASL listener, HTTP TLS", saslListeners, true, false},
	} {
		cfg := Config{KafkaAddr: "127.0.0.1:0", Listeners: tc.listeners}
		if tc.listeners != nil {
			cfg.KafkaAddr = ""
		}
		cfg.TLS.HTTP = tc.httpTLS
		if got := cleartextHTTPWarning(&cfg) != ""; got != tc.warn {
			t.Errorf("%s: warning %v, want %v", tc.name, got, tc.warn)
		}
	}
}
