package httpapi_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/httpapi"
	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/sasl"
)

// scramUsers is a fixed set of SCRAM-SHA-512 credentials.
type scramUsers map[string]sasl.ScramCredential

func (u scramUsers) ScramCredential(user, mechanism string) (sasl.ScramCredential, bool) {
	c, ok := u[user]
	return c, ok && c.Mechanism == mechanism
}

// securedGateway is an API with a Security of the test's own (users
// alice and admin, admin a super user, the bindings of grant) in front
// of a real node that authorizes nothing itself: what the answers leave
// out, the API's checks left out.
type securedGateway struct {
	t          *testing.T
	e          *env
	url        string
	authorizer atomic.Pointer[acl.Authorizer]
}

func newSecuredGateway(t *testing.T) *securedGateway {
	t.Helper()
	e := newEnvWith(t, node.Config{NodeID: 1, DataDir: t.TempDir(), AutoCreateTopics: true,
		KafkaAddr: "127.0.0.1:0", ControllerAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	g := &securedGateway{t: t, e: e}
	g.grant()
	users := scramUsers{}
	for _, u := range []string{"alice", "admin"} {
		c, err := sasl.NewCredential(sasl.ScramSHA512, u+"-pw", sasl.DefaultIterations)
		if err != nil {
			t.Fatal(err)
		}
		users[u] = c
	}
	api, err := httpapi.New(httpapi.Config{Brokers: []string{e.n.KafkaAddr().String()}, InternalClientID: e.n.InternalClientID(),
		Security: &httpapi.Security{Required: true, Credentials: users,
			Authorizer: func() (*acl.Authorizer, bool) { return g.authorizer.Load(), true }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	mux := http.NewServeMux()
	api.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	g.url = srv.URL
	return g
}

func (g *securedGateway) grant(bindings ...acl.Binding) {
	g.t.Helper()
	set, err := acl.NewSet(bindings)
	if err != nil {
		g.t.Fatal(err)
	}
	g.authorizer.Store(acl.NewAuthorizer(set, acl.Config{SuperUsers: []string{"User:admin"}}))
}

// do sends a request as user and decodes the answer into out.
func (g *securedGateway) do(user, method, path, body string, out any) int {
	g.t.Helper()
	req, err := http.NewRequest(method, g.url+path, strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+user+"-pw")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			g.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp.StatusCode
}

func binding(pt acl.PatternType, rt acl.ResourceType, name string, op acl.Operation) acl.Binding {
	return acl.Binding{Pattern: acl.ResourcePattern{Type: rt, Name: name, PatternType: pt},
		Entry: acl.Entry{Principal: "User:alice", Host: acl.WildcardHost, Operation: op, Permission: acl.PermissionAllow}}
}

// What an answer lists is what the caller may describe, as Kafka's
// Metadata, ListGroups and OffsetFetch of every topic filter it; a
// topic's configs need DESCRIBE_CONFIGS; a missing topic is created by a
// produce only for a caller who may create it; and what alice is granted
// she can do end to end.
func TestAuthorizationFiltersAnswers(t *testing.T) {
	g := newSecuredGateway(t)
	e := g.e
	for _, topic := range []string{"a-1", "a-2", "b-1"} {
		e.createTopic(topic, 1)
	}
	e.commitKafka("g1", "a-1", map[int32]int64{0: 0})
	e.commitKafka("g1", "b-1", map[int32]int64{0: 0})
	e.commitKafka("g2", "b-1", map[int32]int64{0: 0})
	g.grant(
		binding(acl.PatternPrefixed, acl.ResourceTopic, "a-", acl.OperationWrite),
		binding(acl.PatternPrefixed, acl.ResourceTopic, "a-", acl.OperationRead),
		binding(acl.PatternLiteral, acl.ResourceGroup, "g1", acl.OperationRead),
	)

	topics := func(user string) []string {
		t.Helper()
		var out struct {
			Topics []struct{ Name string } `json:"topics"`
		}
		if st := g.do(user, "GET", "/v1/topics", "", &out); st != 200 {
			t.Fatalf("%s listing topics: %d", user, st)
		}
		var names []string
		for _, tp := range out.Topics {
			names = append(names, tp.Name)
		}
		return names
	}
	if got := topics("alice"); !slices.Equal(got, []string{"a-1", "a-2"}) {
		t.Errorf("alice lists topics %v, want [a-1 a-2]", got)
	}
	if got := topics("admin"); !slices.Equal(got, []string{"a-1", "a-2", "b-1"}) {
		t.Errorf("admin lists topics %v, want [a-1 a-2 b-1]", got)
	}

	groups := func(user string) []string {
		t.Helper()
		var out struct {
			Groups []struct{ Group string } `json:"groups"`
		}
		if st := g.do(user, "GET", "/v1/groups", "", &out); st != 200 {
			t.Fatalf("%s listing groups: %d", user, st)
		}
		var names []string
		for _, gr := range out.Groups {
			names = append(names, gr.Group)
		}
		return names
	}
	if got := groups("alice"); !slices.Equal(got, []string{"g1"}) {
		t.Errorf("alice lists groups %v, want [g1]", got)
	}
	if got := groups("admin"); !slices.Equal(got, []string{"g1", "g2"}) {
		t.Errorf("admin lists groups %v, want [g1 g2]", got)
	}

	offsetTopics := func(user string) []string {
		t.Helper()
		var out struct {
			Offsets []struct{ Topic string } `json:"offsets"`
		}
		if st := g.do(user, "GET", "/v1/groups/g1", "", &out); st != 200 {
			t.Fatalf("%s describing g1: %d", user, st)
		}
		var names []string
		for _, o := range out.Offsets {
			names = append(names, o.Topic)
		}
		return names
	}
	if got := offsetTopics("alice"); !slices.Equal(got, []string{"a-1"}) {
		t.Errorf("alice sees g1's offsets of %v, want [a-1] (b-1 is not hers to describe)", got)
	}
	if got := offsetTopics("admin"); !slices.Equal(got, []string{"a-1", "b-1"}) {
		t.Errorf("admin sees g1's offsets of %v, want [a-1 b-1]", got)
	}

	var described struct {
		Name    string            `json:"name"`
		Configs map[string]string `json:"configs"`
	}
	if st := g.do("alice", "GET", "/v1/topics/a-1", "", &described); st != 200 || described.Name != "a-1" || described.Configs != nil {
		t.Errorf("alice describing a-1 without DESCRIBE_CONFIGS: %d %+v, want its configs null", st, described)
	}

	// A produce to a missing topic creates it only with CREATE.
	if st := g.do("alice", "POST", "/v1/topics/a-new/produce", `{"value": "YQ=="}`, nil); st != 404 {
		t.Errorf("alice producing to the missing a-new without CREATE: %d, want 404", st)
	}
	if got := topics("admin"); slices.Contains(got, "a-new") {
		t.Errorf("a produce without CREATE created a-new: %v", got)
	}
	g.grant(
		binding(acl.PatternPrefixed, acl.ResourceTopic, "a-", acl.OperationWrite),
		binding(acl.PatternPrefixed, acl.ResourceTopic, "a-", acl.OperationRead),
		binding(acl.PatternPrefixed, acl.ResourceTopic, "a-", acl.OperationCreate),
		binding(acl.PatternPrefixed, acl.ResourceTopic, "a-", acl.OperationAlterConfigs),
		binding(acl.PatternLiteral, acl.ResourceGroup, "g1", acl.OperationRead),
	)
	if st := g.do("alice", "POST", "/v1/topics/a-new/produce", `{"value": "YQ=="}`, nil); st != 200 {
		t.Errorf("alice producing to the missing a-new with CREATE: %d, want 200", st)
	}
	if got := topics("alice"); !slices.Contains(got, "a-new") {
		t.Errorf("alice's produce with CREATE did not create a-new: %v", got)
	}
	if st := g.do("alice", "GET", "/v1/topics/a-1", "", &described); st != 200 || described.Configs["retention.ms"] == "" {
		t.Errorf("alice describing a-1 with ALTER_CONFIGS (implying DESCRIBE_CONFIGS): %d %+v, want its configs", st, described)
	}

	// What she is granted works end to end; the rest is refused.
	var produced struct {
		Offset int64 `json:"offset"`
	}
	if st := g.do("alice", "POST", "/v1/topics/a-1/produce", `{"value": "aGk="}`, &produced); st != 200 {
		t.Fatalf("alice producing to a-1: %d", st)
	}
	var read struct {
		Records []struct{ Value string } `json:"records"`
	}
	if st := g.do("alice", "GET", "/v1/topics/a-1/partitions/0/records?offset=0", "", &read); st != 200 || len(read.Records) != 1 || read.Records[0].Value != "aGk=" {
		t.Errorf("alice reading a-1: %d %+v", st, read)
	}
	if st := g.do("alice", "POST", "/v1/topics/a-1/commit", `{"group": "g1", "offsets": {"0": 1}}`, nil); st != 200 {
		t.Errorf("alice committing a-1 in g1: %d", st)
	}
	if got := e.committedAt("g1", "a-1", 0); got != 1 {
		t.Errorf("g1's commit of a-1 is %d, want 1", got)
	}
	if st := g.do("alice", "POST", "/v1/topics/b-1/commit", `{"group": "g1", "offsets": {"0": 1}}`, nil); st != 403 {
		t.Errorf("alice committing b-1 in g1: %d, want 403", st)
	}
	if got := e.committedAt("g1", "b-1", 0); got != 0 {
		t.Errorf("g1's commit of b-1 moved to %d after a refusal", got)
	}
	if st := g.do("alice", "POST", "/v1/topics/b-1/produce", `{"value": "aGk="}`, nil); st != 403 {
		t.Errorf("alice producing to b-1: %d, want 403", st)
	}
	if end := e.endOffset("b-1", 0); end != 0 {
		t.Errorf("b-1 has %d records after a refused produce", end)
	}
}
