package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/audit"
	"github.com/fjordmq/fjord/internal/sasl"
	"github.com/fjordmq/fjord/internal/testutil"
)

// The API's authentication and authorization with a fake Security: SCRAM
// users in a map, bearer tokens in a map, an authorizer over bindings the
// test sets (the real internal/acl, so Kafka's rules are the real ones),
// and a cluster that is not there (nothing listens on port 1).
//
// Every request is served with a context that is already canceled: any
// call the gateway made to the cluster would fail at once and answer a
// 5xx. So a 401 or 403 proves the refusal came before any Kafka call,
// and an answer other than 401 or 403 proves the request got past its
// checks.

type fakeUsers struct {
	mu    sync.Mutex
	creds map[string]sasl.ScramCredential // SCRAM-SHA-512, by user
}

func (f *fakeUsers) ScramCredential(user, mechanism string) (sasl.ScramCredential, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.creds[user]
	if !ok || mechanism != c.Mechanism {
		return sasl.ScramCredential{}, false
	}
	return c, true
}

// set gives user a fresh credential for password (a new salt: a new
// StoredKey even for the same password).
func (f *fakeUsers) set(t testing.TB, user, password string) {
	t.Helper()
	c, err := sasl.NewCredential(sasl.ScramSHA512, password, sasl.DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creds[user] = c
}

// fakeTokens validates the tokens it holds, valid for an hour; any
// other is expired. skewedToken is User:alice's, 10 s past its expiry,
// which a validator with a clock skew of 30 s accepts (sasl.Validator
// does), and fixedToken expires at fixedExpiry.
type fakeTokens map[string]string

const (
	skewedToken = "skewed-token"
	fixedToken  = "fixed-token"
)

var fixedExpiry = time.Unix(1_900_000_000, 0)

func (f fakeTokens) Validate(token string) (string, time.Time, error) {
	switch token {
	case skewedToken:
		return "User:alice", time.Now().Add(-10 * time.Second), nil
	case fixedToken:
		return "User:alice", fixedExpiry, nil
	}
	if p, ok := f[token]; ok {
		return p, time.Now().Add(time.Hour), nil
	}
	return "", time.Time{}, fmt.Errorf("%w: the token expired", sasl.ErrInvalidToken)
}

type auditLog struct {
	mu     sync.Mutex
	events []audit.Event
}

func (l *auditLog) Record(e audit.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *auditLog) all() []audit.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]audit.Event(nil), l.events...)
}

type authEnv struct {
	t             *testing.T
	api           *API
	mux           *http.ServeMux
	users         *fakeUsers
	verifications atomic.Int64
	authorizer    atomic.Pointer[acl.Authorizer]
	notReady      atomic.Bool
	audit         *auditLog
}

const (
	testUserAlice = "alice"
	testUserBob   = "bob"
	testUserAdmin = "admin"
)

// newAuthEnv starts an API whose Security requires credentials when
// required, with users alice, bob and admin (password <user>-pw), the
// token "alice-token" of User:alice, admin a super user and no binding.
// change edits the Security before the API is made.
func newAuthEnv(t *testing.T, required bool, change ...func(*Security)) *authEnv {
	t.Helper()
	e := &authEnv{t: t, users: &fakeUsers{creds: map[string]sasl.ScramCredential{}}, audit: &auditLog{}}
	for _, u := range []string{testUserAlice, testUserBob, testUserAdmin} {
		e.users.set(t, u, u+"-pw")
	}
	e.grant()
	sec := &Security{
		Required:    required,
		Credentials: e.users,
		Bearer:      fakeTokens{"alice-token": "User:alice"},
		Authorizer: func() (*acl.Authorizer, bool) {
			return e.authorizer.Load(), !e.notReady.Load()
		},
		VerifyPassword: func(c sasl.ScramCredential, pw string) bool {
			e.verifications.Add(1)
			return sasl.VerifyPassword(c, pw)
		},
	}
	for _, f := range change {
		f(sec)
	}
	api, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Security: sec, Audit: e.audit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	e.api, e.mux = api, http.NewServeMux()
	api.Register(e.mux)
	return e
}

// grant makes the authorizer's bindings exactly these (admin a super
// user, allow.everyone.if.no.acl.found off, as on a node that
// authenticates).
func (e *authEnv) grant(bindings ...acl.Binding) {
	e.t.Helper()
	set, err := acl.NewSet(bindings)
	if err != nil {
		e.t.Fatal(err)
	}
	e.authorizer.Store(acl.NewAuthorizer(set, acl.Config{SuperUsers: []string{"User:" + testUserAdmin}}))
}

func allowBinding(principal string, rt acl.ResourceType, name string, op acl.Operation) acl.Binding {
	return acl.Binding{Pattern: acl.ResourcePattern{Type: rt, Name: name, PatternType: acl.PatternLiteral},
		Entry: acl.Entry{Principal: principal, Host: acl.WildcardHost, Operation: op, Permission: acl.PermissionAllow}}
}

func basicAuth(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// answer is a served request's status, headers and JSON error.
type answer struct {
	status int
	header http.Header
	body   errorBody
	raw    string
}

// serveFrom serves one request from remote with the Authorization
// values given, under a canceled context (see the file comment).
func (e *authEnv) serveFrom(remote, method, path, body string, authorization ...string) answer {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
	r.RemoteAddr = remote
	for _, v := range authorization {
		r.Header.Add("Authorization", v)
	}
	w := httptest.NewRecorder()
	e.mux.ServeHTTP(w, r)
	a := answer{status: w.Code, header: w.Header(), raw: w.Body.String()}
	_ = json.Unmarshal(w.Body.Bytes(), &a.body)
	return a
}

func (e *authEnv) serve(method, path, body string, authorization ...string) answer {
	e.t.Helper()
	return e.serveFrom("10.0.0.7:40000", method, path, body, authorization...)
}

// Credentials that cannot be read, or do not log in, are 401 with the
// API's JSON error and the schemes in WWW-Authenticate, whatever the
// route, and cost no password check unless they name a user and a
// password: an unknown user costs one all the same (a decoy), so the
// answer's time does not say whether the user exists.
func TestAuthenticationRefused(t *testing.T) {
	e := newAuthEnv(t, true)
	b64 := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name          string
		authorization []string
		verifications int64 // password checks it may cost
		badToken      bool
	}{
		{"no credentials", nil, 0, false},
		{"empty header", []string{""}, 0, false},
		{"unknown scheme", []string{"Digest username=alice"}, 0, false},
		{"bad base64", []string{"Basic !!!not base64"}, 0, false},
		{"base64 with spaces in it", []string{"Basic YWxp Y2U6YWxpY2UtcHc="}, 0, false},
		{"no colon", []string{b64("alice")}, 0, false},
		{"empty user", []string{b64(":alice-pw")}, 0, false},
		{"empty password", []string{b64("alice:")}, 0, false},
		{"user over 1024 bytes", []string{b64(strings.Repeat("a", 1025) + ":pw")}, 0, false},
		{"not UTF-8", []string{b64("ali\xffce:alice-pw")}, 0, false},
		{"1 MiB header", []string{"Basic " + strings.Repeat("A", 1<<20)}, 0, false},
		{"two headers", []string{basicAuth("alice", "alice-pw"), basicAuth("alice", "alice-pw")}, 0, false},
		{"wrong password", []string{basicAuth("alice", "bob-pw")}, 1, false},
		{"unknown user", []string{basicAuth("mallory", "mallory-pw")}, 1, false},
		{"a colon in the user (it ends the user)", []string{b64("al:ice:alice-pw")}, 1, false},
		{"expired bearer", []string{"Bearer old-token"}, 0, true},
		{"garbage bearer", []string{"Bearer \x00\x01<script>"}, 0, true},
		{"bearer without a token", []string{"Bearer"}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.verifications.Load()
			for _, path := range []string{"/v1/topics", "/v1/topics/t/produce", "/v1/no/such/route"} {
				method := "GET"
				if strings.HasSuffix(path, "produce") {
					method = "POST"
				}
				a := e.serve(method, path, `{"value": "YQ=="}`, tc.authorization...)
				if a.status != http.StatusUnauthorized || a.body.Error != "unauthenticated" || a.body.Message == "" {
					t.Fatalf("%s %s: %d %s, want 401 unauthenticated", method, path, a.status, a.raw)
				}
				if ct := a.header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
				schemes := a.header.Values("WWW-Authenticate")
				if len(schemes) != 2 || schemes[0] != `Basic realm="fjord", charset="UTF-8"` || !strings.HasPrefix(schemes[1], `Bearer realm="fjord"`) {
					t.Errorf("WWW-Authenticate %q, want Basic and Bearer", schemes)
				}
				if got := strings.Contains(schemes[len(schemes)-1], `error="invalid_token"`); got != tc.badToken {
					t.Errorf("WWW-Authenticate %q: invalid_token %v, want %v", schemes, got, tc.badToken)
				}
			}
			if got := e.verifications.Load() - before; got != 3*tc.verifications {
				t.Errorf("%d password checks for 3 requests, want %d", got, 3*tc.verifications)
			}
		})
	}
	// Wrong password and unknown user read the same.
	wrong := e.serve("GET", "/v1/topics", "", basicAuth("alice", "bob-pw"))
	unknown := e.serve("GET", "/v1/topics", "", basicAuth("mallory", "x"))
	if wrong.body != unknown.body {
		t.Errorf("a wrong password answers %+v, an unknown user %+v: they must not differ", wrong.body, unknown.body)
	}
	// The document stays open: it says how to log in.
	if a := e.serve("GET", "/v1/openapi.json", ""); a.status != http.StatusOK {
		t.Errorf("openapi.json without credentials: %d", a.status)
	}
	// The scheme's name is case-insensitive (RFC 7235).
	if a := e.serve("GET", "/v1/cluster", "", "bAsIc "+strings.TrimPrefix(basicAuth("alice", "alice-pw"), "Basic ")); a.status == http.StatusUnauthorized {
		t.Errorf("a lower-case scheme: %d %s", a.status, a.raw)
	}
}

// Basic and Bearer name the principals the Kafka listeners would, and
// the audit log has each login that ran a check and each failure, with
// the client's address and never a password or token.
func TestAuthenticationPrincipalsAndAudit(t *testing.T) {
	e := newAuthEnv(t, true)
	e.grant(allowBinding("User:alice", acl.ResourceTopic, "t", acl.OperationDescribe))
	for _, auth := range []string{basicAuth("alice", "alice-pw"), "Bearer alice-token"} {
		if a := e.serve("GET", "/v1/topics/t", "", auth); a.status == http.StatusUnauthorized || a.status == http.StatusForbidden {
			t.Fatalf("alice (%s) describing t: %d %s", strings.Fields(auth)[0], a.status, a.raw)
		}
		// bob, logged in, has no binding.
	}
	if a := e.serve("GET", "/v1/topics/t", "", basicAuth("bob", "bob-pw")); a.status != http.StatusForbidden {
		t.Fatalf("bob describing t: %d %s, want 403", a.status, a.raw)
	}
	e.serve("GET", "/v1/topics/t", "", basicAuth("alice", "wrong-pw"))
	e.serve("GET", "/v1/topics/t", "", "Bearer stale-token-x1")

	var got []string
	for _, ev := range e.audit.all() {
		if ev.Listener != "HTTP" || ev.Client != "10.0.0.7:40000" || ev.Time.IsZero() {
			t.Errorf("event %+v: want listener HTTP, the client's address and a time", ev)
		}
		for _, secret := range []string{"alice-pw", "bob-pw", "wrong-pw", "alice-token", "stale-token-x1"} {
			if strings.Contains(fmt.Sprintf("%+v", ev), secret) {
				t.Errorf("event %+v holds %q", ev, secret)
			}
		}
		got = append(got, strings.Join([]string{ev.Kind, ev.Result, ev.Principal, ev.Mechanism, ev.API, ev.Operation, ev.ResourceType, ev.Resource}, " "))
	}
	want := []string{
		"authentication success User:alice Basic    ",
		"authentication success User:alice Bearer    ",
		"authentication success User:bob Basic    ",
		"authorization denied User:bob  GET /v1/topics/{topic} DESCRIBE TOPIC t",
		"authentication failure User:alice Basic    ",
		"authentication failure  Bearer    ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Where the node does not authenticate its clients, a request without
// credentials is User:ANONYMOUS and ACLs decide for it; credentials that
// are sent are still checked.
func TestAnonymousWhenNotRequired(t *testing.T) {
	e := newAuthEnv(t, false)
	e.grant(allowBinding("User:ANONYMOUS", acl.ResourceTopic, "open", acl.OperationWrite))
	if a := e.serve("POST", "/v1/topics/open/produce", `{"value": "YQ=="}`); a.status == http.StatusUnauthorized || a.status == http.StatusForbidden {
		t.Errorf("anonymous producing to open (granted): %d %s", a.status, a.raw)
	}
	if a := e.serve("POST", "/v1/topics/closed/produce", `{"value": "YQ=="}`); a.status != http.StatusForbidden || a.body.Error != "forbidden" {
		t.Errorf("anonymous producing to closed: %d %s, want 403", a.status, a.raw)
	}
	if a := e.serve("POST", "/v1/topics/open/produce", `{"value": "YQ=="}`, basicAuth("alice", "nope")); a.status != http.StatusUnauthorized {
		t.Errorf("a wrong password, credentials optional: %d %s, want 401", a.status, a.raw)
	}
	if a := e.serve("POST", "/v1/topics/open/produce", `{"value": "YQ=="}`, basicAuth("alice", "alice-pw")); a.status != http.StatusForbidden {
		t.Errorf("alice (no binding) producing to open: %d %s, want 403: a login is alice, not anonymous", a.status, a.raw)
	}
}

// A verified password is remembered: the second request runs no PBKDF2.
// A changed credential (even for the same password: a new salt) is a
// miss, the old password then fails, failures are never remembered, and
// the cache keeps no more than its bound.
func TestPasswordCache(t *testing.T) {
	e := newAuthEnv(t, true, func(s *Security) { s.MaxCachedPasswords = 2 })
	login := func(user, pw string) int {
		t.Helper()
		return e.serve("GET", "/v1/cluster", "", basicAuth(user, pw)).status
	}
	checks := func(want int64) {
		t.Helper()
		if got := e.verifications.Load(); got != want {
			t.Fatalf("%d password checks so far, want %d", got, want)
		}
	}
	if st := login("alice", "alice-pw"); st == http.StatusUnauthorized {
		t.Fatal("alice refused")
	}
	checks(1)
	for range 3 {
		if st := login("alice", "alice-pw"); st == http.StatusUnauthorized {
			t.Fatal("alice refused")
		}
	}
	checks(1)

	for range 2 {
		if st := login("alice", "wrong"); st != http.StatusUnauthorized {
			t.Fatalf("a wrong password: %d", st)
		}
	}
	checks(3)

	// The same password, set again: a new credential, checked again.
	e.users.set(t, "alice", "alice-pw")
	login("alice", "alice-pw")
	checks(4)
	login("alice", "alice-pw")
	checks(4)
	// A new password: the old one fails (checked, not cached).
	e.users.set(t, "alice", "alice-new")
	if st := login("alice", "alice-pw"); st != http.StatusUnauthorized {
		t.Fatalf("the old password after a change: %d, want 401", st)
	}
	checks(5)
	if st := login("alice", "alice-new"); st == http.StatusUnauthorized {
		t.Fatal("the new password refused")
	}
	checks(6)
	// A removed user is refused whatever the cache holds.
	e.users.mu.Lock()
	delete(e.users.creds, "alice")
	e.users.mu.Unlock()
	if st := login("alice", "alice-new"); st != http.StatusUnauthorized {
		t.Fatalf("a removed user: %d, want 401", st)
	}

	login("bob", "bob-pw")
	login("admin", "admin-pw")
	if n := e.api.guard.cache.len(); n > 2 {
		t.Fatalf("the cache holds %d entries, bound 2", n)
	}
}

// The cache's key is a digest that mixes the user and the password
// unambiguously and is keyed per process.
func TestPasswordCacheDigest(t *testing.T) {
	c1, err := newPasswordCache(10)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := newPasswordCache(10)
	if err != nil {
		t.Fatal(err)
	}
	if c1.digest("ab", "c") == c1.digest("a", "bc") {
		t.Error(`("ab", "c") and ("a", "bc") share a digest`)
	}
	if c1.digest("a", "b") != c1.digest("a", "b") {
		t.Error("a digest is not stable")
	}
	if c1.digest("a", "b") == c2.digest("a", "b") {
		t.Error("two caches share a key")
	}
}

// At most MaxVerifications password checks run at once; a request that
// needs one more is 429 at once (with Retry-After), while a password
// already verified still logs in.
func TestPasswordChecksBounded(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var block atomic.Bool
	e := newAuthEnv(t, true, func(s *Security) {
		s.MaxVerifications = 1
		s.VerifyPassword = func(c sasl.ScramCredential, pw string) bool {
			if block.Load() {
				entered <- struct{}{}
				<-release
			}
			return sasl.VerifyPassword(c, pw)
		}
	})
	if a := e.serve("GET", "/v1/cluster", "", basicAuth("bob", "bob-pw")); a.status == http.StatusUnauthorized {
		t.Fatalf("bob: %d", a.status)
	}
	block.Store(true)
	done := make(chan answer)
	go func() { done <- e.serve("GET", "/v1/cluster", "", basicAuth("alice", "alice-pw")) }()
	<-entered
	a := e.serve("GET", "/v1/cluster", "", basicAuth("admin", "admin-pw"))
	if a.status != http.StatusTooManyRequests || a.body.Error != "too_many_requests" || a.header.Get("Retry-After") == "" {
		t.Errorf("a check past the bound: %d %s (Retry-After %q), want 429 too_many_requests", a.status, a.raw, a.header.Get("Retry-After"))
	}
	if a := e.serve("GET", "/v1/cluster", "", basicAuth("bob", "bob-pw")); a.status == http.StatusUnauthorized || a.status == http.StatusTooManyRequests {
		t.Errorf("bob, verified before: %d %s", a.status, a.raw)
	}
	close(release)
	if a := <-done; a.status == http.StatusUnauthorized || a.status == http.StatusTooManyRequests {
		t.Errorf("alice, whose check ran: %d %s", a.status, a.raw)
	}
}

// A failed login is held back while few are, and answered at once when
// maxDelayedFailures are already held: the delay cannot park the
// goroutines of a flood.
func TestFailureDelayBounded(t *testing.T) {
	e := newAuthEnv(t, true, func(s *Security) { s.FailureDelay = time.Hour })
	g := e.api.guard
	serveLive := func(ctx context.Context) int {
		r := httptest.NewRequestWithContext(ctx, "GET", "/v1/cluster", nil)
		r.Header.Set("Authorization", basicAuth("alice", "wrong"))
		w := httptest.NewRecorder()
		e.mux.ServeHTTP(w, r)
		return w.Code
	}
	// Held: it waits until its client goes away.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() { done <- serveLive(ctx) }()
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(g.delaying) != 1 {
			return fmt.Errorf("%d failures held", len(g.delaying))
		}
		return nil
	})
	cancel()
	if st := <-done; st != http.StatusUnauthorized {
		t.Fatalf("held failure: %d", st)
	}
	// Past the bound: answered at once (an hour's delay would time the
	// test out).
	for range maxDelayedFailures {
		g.delaying <- struct{}{}
	}
	if st := serveLive(context.Background()); st != http.StatusUnauthorized {
		t.Fatalf("failure past the bound: %d", st)
	}
}

// FuzzAuthenticate: whatever the Authorization header holds, authenticate
// never panics, answers either a caller or a refusal (401, or 429), logs
// in only with alice's exact password or token, and says little: a
// refusal's message is short and never repeats the credentials.
func FuzzAuthenticate(f *testing.F) {
	for _, seed := range []string{
		basicAuth("alice", "alice-pw"), basicAuth("alice", "alice-p"), "basic " + base64.StdEncoding.EncodeToString([]byte("alice:alice-pw")),
		"Bearer alice-token", "bearer alice-token==", "Bearer ", "Basic", "", " ", "Basic Og==", "Basic YWxpY2U=",
		"Basic " + strings.Repeat("QUFB", 6000), "Negotiate abc", "Basic \xff\xfe", "Bearer a.b.c\x00",
	} {
		f.Add(seed)
	}
	alice, err := sasl.NewCredential(sasl.ScramSHA512, "alice-pw", sasl.DefaultIterations)
	if err != nil {
		f.Fatal(err)
	}
	users := &fakeUsers{creds: map[string]sasl.ScramCredential{"alice": alice}}
	g, err := newGuard(Security{Required: true, Credentials: users, Bearer: fakeTokens{"alice-token": "User:alice"},
		// The real check is a PBKDF2 per input; this one agrees with it
		// for alice's credential and costs nothing.
		VerifyPassword: func(c sasl.ScramCredential, pw string) bool {
			return string(c.StoredKey) == string(alice.StoredKey) && pw == "alice-pw"
		}}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest("GET", "/v1/topics", nil)
		r.Header["Authorization"] = []string{header}
		c, fail := g.authenticate(r, true)
		if (c == nil) == (fail == nil) {
			t.Fatalf("%q: caller %v and refusal %v", header, c, fail)
		}
		if fail != nil {
			if fail.status != http.StatusUnauthorized && fail.status != http.StatusTooManyRequests {
				t.Fatalf("%q: status %d", header, fail.status)
			}
			if len(fail.msg) > 300 || (len(header) > 12 && strings.Contains(fail.msg, header[6:])) {
				t.Fatalf("%q: message %q", header, fail.msg)
			}
			return
		}
		scheme, rest, _ := strings.Cut(header, " ")
		rest = strings.TrimLeft(rest, " ")
		decoded, _ := base64.StdEncoding.DecodeString(rest)
		okBasic := strings.EqualFold(scheme, "Basic") && string(decoded) == "alice:alice-pw"
		okBearer := strings.EqualFold(scheme, "Bearer") && rest == "alice-token"
		if c.principal != "User:alice" || !(okBasic || okBearer) {
			t.Fatalf("%q logged in as %q", header, c.principal)
		}
	})
}

// A bearer token the validator accepts within its clock skew but whose
// expiry has passed is refused (401 invalid_token), as the Kafka
// listener refuses a session of no lifetime: at its expiry exactly, too.
func TestBearerExpiredWithinSkew(t *testing.T) {
	e := newAuthEnv(t, true)
	a := e.serve("GET", "/v1/cluster", "", "Bearer "+skewedToken)
	if a.status != http.StatusUnauthorized || a.body.Error != "unauthenticated" || !strings.Contains(a.body.Message, "expired") {
		t.Fatalf("a token 10 s past its expiry: %d %s, want 401 naming the expiry", a.status, a.raw)
	}
	if got := strings.Join(a.header.Values("WWW-Authenticate"), " "); !strings.Contains(got, `error="invalid_token"`) {
		t.Errorf("WWW-Authenticate %q, want invalid_token", got)
	}
	events := e.audit.all()
	if last := events[len(events)-1]; last.Result != "failure" || last.Principal != "User:alice" || !strings.Contains(last.Reason, "expired") {
		t.Errorf("last audit event %+v, want alice's failure, expired", last)
	}
	g := e.api.guard
	for _, tc := range []struct {
		now time.Time
		ok  bool
	}{
		{fixedExpiry.Add(-time.Nanosecond), true},
		{fixedExpiry, false},
		{fixedExpiry.Add(time.Second), false},
	} {
		if _, _, fail := g.bearer(fixedToken, tc.now); (fail == nil) != tc.ok {
			t.Errorf("a token expiring at %v, checked at %v: refused %v, want accepted %v", fixedExpiry, tc.now, fail, tc.ok)
		}
	}
}

// A bearer token's login is audited once until the token expires, not
// on every request; each token on its own; failures every time.
func TestBearerSuccessAuditedOncePerToken(t *testing.T) {
	e := newAuthEnv(t, true, func(s *Security) {
		s.Bearer = fakeTokens{"alice-token": "User:alice", "alice-token-2": "User:alice"}
	})
	for range 5 {
		if a := e.serve("GET", "/v1/cluster", "", "Bearer alice-token"); a.status == http.StatusUnauthorized {
			t.Fatalf("alice-token: %d %s", a.status, a.raw)
		}
	}
	e.serve("GET", "/v1/cluster", "", "Bearer alice-token-2")
	e.serve("GET", "/v1/cluster", "", "Bearer gone-token")
	e.serve("GET", "/v1/cluster", "", "Bearer gone-token")
	var got []string
	for _, ev := range e.audit.all() {
		got = append(got, ev.Kind+" "+ev.Result+" "+ev.Principal)
	}
	want := []string{"authentication success User:alice", "authentication success User:alice",
		"authentication failure ", "authentication failure "}
	if !slices.Equal(got, want) {
		t.Errorf("audit events %q, want %q", got, want)
	}
}

// seenTokens forgets a token at its expiry and keeps no more than its
// bound.
func TestSeenTokens(t *testing.T) {
	s, err := newSeenTokens(2)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	exp := now.Add(time.Minute)
	if !s.first("a", exp, now) || s.first("a", exp, now) || s.first("a", exp, exp.Add(-time.Nanosecond)) {
		t.Fatal("a token is first once until its expiry")
	}
	if !s.first("a", exp.Add(time.Hour), exp) {
		t.Fatal("a token seen again at its expiry is first again")
	}
	s.first("b", exp, now)
	s.first("c", exp, now)
	s.first("d", time.Time{}, now)
	if n := s.len(); n > 2 {
		t.Fatalf("%d tokens remembered, bound 2", n)
	}
}

// By default at most half the cores check passwords at once (at least
// one), so that a flood of Basic logins leaves the Kafka listeners CPU.
func TestDefaultMaxVerifications(t *testing.T) {
	e := newAuthEnv(t, true)
	want := max(1, runtime.GOMAXPROCS(0)/2)
	if got := cap(e.api.guard.verifying); got != want {
		t.Fatalf("%d password checks at once, want %d (GOMAXPROCS %d)", got, want, runtime.GOMAXPROCS(0))
	}
}
