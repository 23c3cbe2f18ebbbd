package httpapi

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/metadata"
)

// routeAuthz is one route's row of AUTHZ.md, as a test: a request, the
// bindings alice needs for it (each one needed: without any of them it is
// 403 naming that one), and none for a route that needs only a login.
type routeAuthz struct {
	pattern      string // the route's pattern in apiRoutes
	method, path string
	body         string
	needs        []acl.Binding
	// deniedAs, when set, is what a refusal names instead of the need
	// missing: Kafka's two-step checks (CLUSTER CREATE, else TOPIC
	// CREATE) answer the narrow one.
	deniedAs *acl.Binding
}

func topicGrant(op acl.Operation, topic string) acl.Binding {
	return allowBinding("User:alice", acl.ResourceTopic, topic, op)
}

func groupGrant(op acl.Operation, group string) acl.Binding {
	return allowBinding("User:alice", acl.ResourceGroup, group, op)
}

func clusterGrant(op acl.Operation) acl.Binding {
	return allowBinding("User:alice", acl.ResourceCluster, acl.ClusterName, op)
}

func ptr[T any](v T) *T { return &v }

var routeAuthzCases = []routeAuthz{
	{"POST /v1/topics/{topic}/produce", "POST", "/v1/topics/t/produce", `{"value": "YQ=="}`,
		[]acl.Binding{topicGrant(acl.OperationWrite, "t")}, nil},
	{"GET /v1/topics/{topic}/partitions/{partition}/records", "GET", "/v1/topics/t/partitions/0/records", "",
		[]acl.Binding{topicGrant(acl.OperationRead, "t")}, nil},
	{"GET /v1/topics/{topic}/consume", "GET", "/v1/topics/t/consume?group=g", "",
		[]acl.Binding{groupGrant(acl.OperationRead, "g"), topicGrant(acl.OperationRead, "t")}, nil},
	{"DELETE /v1/topics/{topic}/consume", "DELETE", "/v1/topics/t/consume?group=g", "",
		[]acl.Binding{groupGrant(acl.OperationRead, "g"), topicGrant(acl.OperationRead, "t")}, nil},
	{"POST /v1/topics/{topic}/commit", "POST", "/v1/topics/t/commit", `{"group": "g", "offsets": {"0": 1}}`,
		[]acl.Binding{groupGrant(acl.OperationRead, "g"), topicGrant(acl.OperationRead, "t")}, nil},
	{"POST /v1/topics/{topic}/ack", "POST", "/v1/topics/t/ack", `{"group": "g", "generation": 1, "offsets": {"0": [1]}}`,
		[]acl.Binding{groupGrant(acl.OperationRead, "g"), topicGrant(acl.OperationRead, "t")}, nil},
	{"POST /v1/topics/{topic}/nack", "POST", "/v1/topics/t/nack", `{"group": "g", "generation": 1, "partition": 0, "offset": 1}`,
		[]acl.Binding{groupGrant(acl.OperationRead, "g"), topicGrant(acl.OperationRead, "t")}, nil},
	{"POST /v1/topics/{topic}/seek", "POST", "/v1/topics/t/seek", `{"group": "g", "partition": 0, "offset": 1}`,
		[]acl.Binding{groupGrant(acl.OperationRead, "g"), topicGrant(acl.OperationRead, "t")}, nil},
	{"GET /v1/topics", "GET", "/v1/topics", "", nil, nil},
	{"POST /v1/topics", "POST", "/v1/topics", `{"name": "t"}`,
		[]acl.Binding{topicGrant(acl.OperationCreate, "t")}, nil},
	{"POST /v1/topics", "POST", "/v1/topics", `{"name": "t"}`,
		[]acl.Binding{clusterGrant(acl.OperationCreate)}, ptr(topicGrant(acl.OperationCreate, "t"))},
	{"GET /v1/topics/{topic}", "GET", "/v1/topics/t", "",
		[]acl.Binding{topicGrant(acl.OperationDescribe, "t")}, nil},
	{"PATCH /v1/topics/{topic}", "PATCH", "/v1/topics/t", `{"partitions": 2, "configs": {"retention.ms": "1000"}}`,
		[]acl.Binding{topicGrant(acl.OperationAlter, "t"), topicGrant(acl.OperationAlterConfigs, "t")}, nil},
	{"PATCH /v1/topics/{topic}", "PATCH", "/v1/topics/t", `{"configs": {"retention.ms": null}}`,
		[]acl.Binding{topicGrant(acl.OperationAlterConfigs, "t")}, nil},
	{"DELETE /v1/topics/{topic}", "DELETE", "/v1/topics/t", "",
		[]acl.Binding{topicGrant(acl.OperationDelete, "t")}, nil},
	{"DELETE /v1/topics/{topic}", "DELETE", "/v1/topics/t", "",
		[]acl.Binding{clusterGrant(acl.OperationDelete)}, ptr(topicGrant(acl.OperationDelete, "t"))},
	{"GET /v1/cluster", "GET", "/v1/cluster", "", nil, nil},
	{"GET /v1/groups", "GET", "/v1/groups", "", nil, nil},
	{"GET /v1/groups/{group}", "GET", "/v1/groups/g", "",
		[]acl.Binding{groupGrant(acl.OperationDescribe, "g")}, nil},
	{"DELETE /v1/groups/{group}", "DELETE", "/v1/groups/g", "",
		[]acl.Binding{groupGrant(acl.OperationDelete, "g")}, nil},
	{"POST /v1/groups/{group}/reset-offsets", "POST", "/v1/groups/g/reset-offsets", `{"topics": [{"topic": "t"}, {"topic": "u"}], "to": "earliest", "dry_run": true}`,
		[]acl.Binding{groupGrant(acl.OperationRead, "g"), topicGrant(acl.OperationRead, "t"), topicGrant(acl.OperationRead, "u")}, nil},
	{"GET /v1/groups/{group}/poison", "GET", "/v1/groups/g/poison", "",
		[]acl.Binding{groupGrant(acl.OperationDescribe, "g")}, nil},
	{"PUT /v1/groups/{group}/poison/{topic}", "PUT", "/v1/groups/g/poison/t", `{"policy": "pause", "max_attempts": 3}`,
		[]acl.Binding{groupGrant(acl.OperationAlterConfigs, "g"), topicGrant(acl.OperationDescribe, "t")}, nil},
	{"PUT /v1/groups/{group}/poison/{topic}", "PUT", "/v1/groups/g/poison/t", `{"policy": "dlq", "max_attempts": 3, "dlq_topic": "t-dead"}`,
		[]acl.Binding{groupGrant(acl.OperationAlterConfigs, "g"), topicGrant(acl.OperationRead, "t"), topicGrant(acl.OperationWrite, "t-dead")}, nil},
	{"DELETE /v1/groups/{group}/poison/{topic}", "DELETE", "/v1/groups/g/poison/t", "",
		[]acl.Binding{groupGrant(acl.OperationAlterConfigs, "g")}, nil},
	{"POST /v1/groups/{group}/resume", "POST", "/v1/groups/g/resume", `{"topic": "t", "partition": 0}`,
		[]acl.Binding{groupGrant(acl.OperationRead, "g"), topicGrant(acl.OperationRead, "t")}, nil},
}

// Every route, as in AUTHZ.md: alice with exactly the bindings it needs
// gets past the checks; without any one of them (or with none: bob) it
// is 403 naming that operation and resource, before any call to the
// cluster (the context is canceled: see auth_internal_test.go) and with
// no side effect in the gateway (no consumer instance, no cached topic,
// no policy store opened), and the denial is audited under the route's
// pattern; admin, a super user, gets past them with no binding; a DENY
// beats the bindings. A route missing from the table fails the test.
func TestRouteAuthorization(t *testing.T) {
	covered := map[string]bool{}
	for _, rc := range routeAuthzCases {
		covered[rc.pattern] = true
	}
	for _, rt := range apiRoutes {
		if p := rt.method + " " + rt.path; !covered[p] {
			t.Errorf("route %s has no authorization case", p)
		}
	}

	e := newAuthEnv(t, true)
	alice, bob, admin := basicAuth("alice", "alice-pw"), basicAuth("bob", "bob-pw"), basicAuth("admin", "admin-pw")
	passes := func(a answer) bool {
		return a.status != http.StatusUnauthorized && a.status != http.StatusForbidden && a.body.Error != "authorizer_not_ready"
	}
	noSideEffects := func(t *testing.T) {
		t.Helper()
		e.api.consumers.mu.Lock()
		instances := len(e.api.consumers.m)
		e.api.consumers.mu.Unlock()
		e.api.producedTopics.Lock()
		cached := len(e.api.producedTopics.m)
		e.api.producedTopics.Unlock()
		e.api.policyStore.Lock()
		opened := e.api.policyStore.s != nil
		e.api.policyStore.Unlock()
		if instances != 0 || cached != 0 || opened {
			t.Errorf("a refused request left %d consumer instances, %d cached topics, policy store opened %v", instances, cached, opened)
		}
	}
	refused := func(t *testing.T, who string, a answer, rc routeAuthz, missing acl.Binding) {
		t.Helper()
		if rc.deniedAs != nil {
			missing = *rc.deniedAs
		}
		want := strings.ToLower(missing.Pattern.Type.String()) + ` "` + missing.Pattern.Name + `"`
		if a.status != http.StatusForbidden || a.body.Error != "forbidden" ||
			!strings.Contains(a.body.Message, missing.Entry.Operation.String()+" "+want) {
			t.Errorf("%s: %d %s, want 403 forbidden naming %s %s", who, a.status, a.raw, missing.Entry.Operation, want)
		}
		if strings.Contains(a.body.Message, "alice") || strings.Contains(a.body.Message, "bob") {
			t.Errorf("%s: the 403 names the principal: %s", who, a.body.Message)
		}
		events := e.audit.all()
		last := events[len(events)-1]
		if last.Kind != "authorization" || last.Result != "denied" || last.API != rc.pattern || last.Resource != missing.Pattern.Name ||
			last.Operation != missing.Entry.Operation.String() {
			t.Errorf("%s: last audit event %+v, want the denial on route %s", who, last, rc.pattern)
		}
		noSideEffects(t)
	}
	for _, rc := range routeAuthzCases {
		t.Run(rc.method+" "+rc.path+" "+rc.body, func(t *testing.T) {
			e.grant(rc.needs...)
			if a := e.serve(rc.method, rc.path, rc.body, alice); !passes(a) {
				t.Errorf("alice with %v: %d %s", rc.needs, a.status, a.raw)
			}
			if a := e.serve(rc.method, rc.path, rc.body, admin); !passes(a) {
				t.Errorf("admin (super user): %d %s", a.status, a.raw)
			}
			if len(rc.needs) == 0 {
				if a := e.serve(rc.method, rc.path, rc.body, bob); !passes(a) {
					t.Errorf("bob (logged in, no binding): %d %s", a.status, a.raw)
				}
				return
			}
			refused(t, "bob", e.serve(rc.method, rc.path, rc.body, bob), rc, rc.needs[0])
			for i, missing := range rc.needs {
				rest := append(append([]acl.Binding(nil), rc.needs[:i]...), rc.needs[i+1:]...)
				e.grant(rest...)
				refused(t, "alice without "+missing.String(), e.serve(rc.method, rc.path, rc.body, alice), rc, missing)
				// A DENY of the one needed, beside the ALLOW, wins.
				deny := missing
				deny.Entry.Permission = acl.PermissionDeny
				e.grant(append(rest, missing, deny)...)
				refused(t, "alice denied "+missing.String(), e.serve(rc.method, rc.path, rc.body, alice), rc, missing)
			}
		})
	}
}

// Names are bound by ACLs as Kafka binds them: a PREFIXED allow covers
// every topic it starts, a literal DENY one of them, and a binding for a
// host only that client address.
func TestRouteAuthorizationPatternsAndHosts(t *testing.T) {
	e := newAuthEnv(t, true)
	alice := basicAuth("alice", "alice-pw")
	prefixed := acl.Binding{Pattern: acl.ResourcePattern{Type: acl.ResourceTopic, Name: "a-", PatternType: acl.PatternPrefixed},
		Entry: acl.Entry{Principal: "User:alice", Host: acl.WildcardHost, Operation: acl.OperationWrite, Permission: acl.PermissionAllow}}
	deny := allowBinding("User:alice", acl.ResourceTopic, "a-deny", acl.OperationWrite)
	deny.Entry.Permission = acl.PermissionDeny
	fromHost := allowBinding("User:alice", acl.ResourceTopic, "h", acl.OperationWrite)
	fromHost.Entry.Host = "10.0.0.7"
	e.grant(prefixed, deny, fromHost)
	for _, tc := range []struct {
		topic, remote string
		allowed       bool
	}{
		{"a-1", "10.0.0.8:1", true},
		{"a-deny", "10.0.0.8:1", false},
		{"b-1", "10.0.0.8:1", false},
		{"h", "10.0.0.7:1", true},
		{"h", "[::ffff:10.0.0.7]:1", true},
		{"h", "10.0.0.8:1", false},
	} {
		a := e.serveFrom(tc.remote, "POST", "/v1/topics/"+tc.topic+"/produce", `{"value": "YQ=="}`, alice)
		if got := a.status != http.StatusForbidden; got != tc.allowed || a.status == http.StatusUnauthorized {
			t.Errorf("alice from %s producing to %s: %d %s, want allowed %v", tc.remote, tc.topic, a.status, a.raw, tc.allowed)
		}
	}
}

// Until the node's image has the bindings committed before it started,
// only super users get past a check; others are 503 with Retry-After,
// the listing routes too (an empty list would read as "nothing there").
func TestRouteAuthorizationUntilReady(t *testing.T) {
	e := newAuthEnv(t, true)
	e.grant(topicGrant(acl.OperationWrite, "t"))
	e.notReady.Store(true)
	for _, r := range [][2]string{{"POST", "/v1/topics/t/produce"}, {"GET", "/v1/topics"}, {"GET", "/v1/groups"}} {
		a := e.serve(r[0], r[1], `{"value": "YQ=="}`, basicAuth("alice", "alice-pw"))
		if a.status != http.StatusServiceUnavailable || a.body.Error != "authorizer_not_ready" || a.header.Get("Retry-After") == "" {
			t.Errorf("alice %s %s before ready: %d %s (Retry-After %q), want 503 authorizer_not_ready", r[0], r[1], a.status, a.raw, a.header.Get("Retry-After"))
		}
		if a := e.serve(r[0], r[1], `{"value": "YQ=="}`, basicAuth("admin", "admin-pw")); a.body.Error == "authorizer_not_ready" || a.status == http.StatusForbidden {
			t.Errorf("admin %s %s before ready: %d %s", r[0], r[1], a.status, a.raw)
		}
	}
	e.notReady.Store(false)
	if a := e.serve("POST", "/v1/topics/t/produce", `{"value": "YQ=="}`, basicAuth("alice", "alice-pw")); a.body.Error == "authorizer_not_ready" || a.status == http.StatusForbidden {
		t.Errorf("alice once ready: %d %s", a.status, a.raw)
	}
}

// Protect (the node's /metrics and health) needs credentials even where
// the API does not, and DESCRIBE on the cluster.
func TestProtect(t *testing.T) {
	e := newAuthEnv(t, false)
	e.grant(clusterGrant(acl.OperationDescribe))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", e.api.Protect("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("fjord_up 1\n"))
	})))
	e.mux = mux
	for _, tc := range []struct {
		who, auth string
		want      int
	}{
		{"nobody", "", http.StatusUnauthorized},
		{"alice (DESCRIBE on the cluster)", basicAuth("alice", "alice-pw"), http.StatusOK},
		{"bob", basicAuth("bob", "bob-pw"), http.StatusForbidden},
		{"admin", basicAuth("admin", "admin-pw"), http.StatusOK},
	} {
		var auth []string
		if tc.auth != "" {
			auth = []string{tc.auth}
		}
		if a := e.serve("GET", "/metrics", "", auth...); a.status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.who, a.status, a.raw, tc.want)
		}
	}
}

// AUTHZ.md has a row for every route.
func TestAuthzTableCoversEveryRoute(t *testing.T) {
	raw, err := os.ReadFile("AUTHZ.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range apiRoutes {
		if row := "| `" + rt.method + " " + rt.path + "` |"; !strings.Contains(string(raw), row) {
			t.Errorf("AUTHZ.md has no row %s", row)
		}
	}
}

// DELETE of a topic needs DESCRIBE on it as well as DELETE, as Kafka's
// DeleteTopics: DELETE implies an allowed DESCRIBE, but a DENY of
// DESCRIBE refuses the delete (403 naming DESCRIBE); DELETE on the
// cluster passes whatever the topic's bindings.
func TestDeleteTopicNeedsDescribe(t *testing.T) {
	e := newAuthEnv(t, true)
	alice := basicAuth("alice", "alice-pw")
	denyDescribe := topicGrant(acl.OperationDescribe, "t")
	denyDescribe.Entry.Permission = acl.PermissionDeny
	e.grant(topicGrant(acl.OperationDelete, "t"), denyDescribe)
	if a := e.serve("DELETE", "/v1/topics/t", "", alice); a.status != http.StatusForbidden || !strings.Contains(a.body.Message, `DESCRIBE topic "t"`) {
		t.Errorf("ALLOW DELETE, DENY DESCRIBE: %d %s, want 403 naming DESCRIBE", a.status, a.raw)
	}
	e.grant(topicGrant(acl.OperationDelete, "t"))
	if a := e.serve("DELETE", "/v1/topics/t", "", alice); a.status == http.StatusForbidden || a.status == http.StatusUnauthorized {
		t.Errorf("ALLOW DELETE (implying DESCRIBE): %d %s", a.status, a.raw)
	}
	e.grant(clusterGrant(acl.OperationDelete), denyDescribe)
	if a := e.serve("DELETE", "/v1/topics/t", "", alice); a.status == http.StatusForbidden || a.status == http.StatusUnauthorized {
		t.Errorf("DELETE on the cluster: %d %s", a.status, a.raw)
	}
}

// A dlq policy copies records out of its topic: setting one needs READ
// on it, where a pause policy needs DESCRIBE.
func TestDeadLetterPolicyNeedsRead(t *testing.T) {
	e := newAuthEnv(t, true)
	alice := basicAuth("alice", "alice-pw")
	e.grant(groupGrant(acl.OperationAlterConfigs, "g"), topicGrant(acl.OperationDescribe, "t"), topicGrant(acl.OperationWrite, "t-dead"))
	a := e.serve("PUT", "/v1/groups/g/poison/t", `{"policy": "dlq", "max_attempts": 3, "dlq_topic": "t-dead"}`, alice)
	if a.status != http.StatusForbidden || !strings.Contains(a.body.Message, `READ topic "t"`) {
		t.Errorf("a dlq policy with DESCRIBE on the topic: %d %s, want 403 naming READ", a.status, a.raw)
	}
	if a := e.serve("PUT", "/v1/groups/g/poison/t", `{"policy": "pause", "max_attempts": 3}`, alice); a.status == http.StatusForbidden {
		t.Errorf("a pause policy with DESCRIBE on the topic: %d %s", a.status, a.raw)
	}
}

// HEAD on the reads that long-poll is 405, with Allow, and runs nothing:
// a GET pattern would serve it, consuming records for a body thrown
// away. Other GETs keep HEAD.
func TestHeadOnReadsNotAllowed(t *testing.T) {
	e := newAuthEnv(t, true)
	alice := basicAuth("alice", "alice-pw")
	e.grant(groupGrant(acl.OperationRead, "g"), topicGrant(acl.OperationRead, "t"))
	for _, path := range []string{"/v1/topics/t/consume?group=g", "/v1/topics/t/partitions/0/records?offset=0"} {
		a := e.serve("HEAD", path, "", alice)
		if a.status != http.StatusMethodNotAllowed || !strings.Contains(a.header.Get("Allow"), "GET") {
			t.Errorf("HEAD %s: %d (Allow %q), want 405 allowing GET", path, a.status, a.header.Get("Allow"))
		}
		if a := e.serve("HEAD", path, ""); a.status != http.StatusUnauthorized {
			t.Errorf("HEAD %s without credentials: %d, want 401", path, a.status)
		}
	}
	e.api.consumers.mu.Lock()
	n := len(e.api.consumers.m)
	e.api.consumers.mu.Unlock()
	if n != 0 {
		t.Errorf("a HEAD started %d consumer instances", n)
	}
	if a := e.serve("GET", "/v1/topics/t/consume?group=g", "", alice); a.status == http.StatusMethodNotAllowed {
		t.Errorf("GET consume: %d %s", a.status, a.raw)
	}
}

// ProtectLiveness (the node's /healthz) needs a login only: no ACL, and
// not a ready authorizer, so a liveness probe is not answered 503 while
// the node catches up with the cluster's ACLs.
func TestProtectLiveness(t *testing.T) {
	e := newAuthEnv(t, false)
	e.notReady.Store(true)
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", e.api.ProtectLiveness("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})))
	e.mux = mux
	for _, tc := range []struct {
		who, auth string
		want      int
	}{
		{"nobody", "", http.StatusUnauthorized},
		{"a wrong password", basicAuth("bob", "nope"), http.StatusUnauthorized},
		{"bob (no binding, authorizer not ready)", basicAuth("bob", "bob-pw"), http.StatusOK},
		{"admin", basicAuth("admin", "admin-pw"), http.StatusOK},
	} {
		var auth []string
		if tc.auth != "" {
			auth = []string{tc.auth}
		}
		if a := e.serve("GET", "/healthz", "", auth...); a.status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.who, a.status, a.raw, tc.want)
		}
	}
}

// The poison-policy topic holds every group's policies: over HTTP as
// over Kafka, a topic grant on it is not enough; changing it needs ALTER
// on the cluster, reading it DESCRIBE_CONFIGS.
func TestPolicyTopicNeedsTheCluster(t *testing.T) {
	e := newAuthEnv(t, true)
	alice := basicAuth("alice", "alice-pw")
	policies := metadata.ConsumerPoliciesTopic
	wildcard := func(op acl.Operation) acl.Binding { return topicGrant(op, "*") }
	e.grant(wildcard(acl.OperationWrite), wildcard(acl.OperationRead))
	produce := `{"value": "eA=="}`
	if a := e.serve("POST", "/v1/topics/"+policies+"/produce", produce, alice); a.status != http.StatusForbidden || !strings.Contains(a.body.Message, "cluster") {
		t.Errorf("produce to the policy topic with WRITE on *: %d %s, want 403 naming the cluster", a.status, a.raw)
	}
	if a := e.serve("GET", "/v1/topics/"+policies+"/partitions/0/records", "", alice); a.status != http.StatusForbidden {
		t.Errorf("read the policy topic with READ on *: %d %s, want 403", a.status, a.raw)
	}
	// Any other topic is the wildcard's.
	if a := e.serve("POST", "/v1/topics/other/produce", produce, alice); a.status == http.StatusForbidden || a.status == http.StatusUnauthorized {
		t.Errorf("produce to another topic with WRITE on *: %d %s", a.status, a.raw)
	}
	e.grant(wildcard(acl.OperationWrite), wildcard(acl.OperationRead), clusterGrant(acl.OperationAlter), clusterGrant(acl.OperationDescribeConfigs))
	if a := e.serve("POST", "/v1/topics/"+policies+"/produce", produce, alice); a.status == http.StatusForbidden || a.status == http.StatusUnauthorized {
		t.Errorf("produce to the policy topic with ALTER on the cluster: %d %s", a.status, a.raw)
	}
	if a := e.serve("GET", "/v1/topics/"+policies+"/partitions/0/records", "", alice); a.status == http.StatusForbidden || a.status == http.StatusUnauthorized {
		t.Errorf("read the policy topic with DESCRIBE_CONFIGS on the cluster: %d %s", a.status, a.raw)
	}
}
