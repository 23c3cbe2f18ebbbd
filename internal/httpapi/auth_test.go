package httpapi_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/httpapi"
	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/sasl"
	"github.com/fjordmq/fjord/internal/testutil"
)

// scramUsers is a fixed set of SCRAM-SHA-512 credentials.
type scramUsers map[string]sasl.ScramCredential

func (u scramUsers) ScramCredential(user, mechanism string) (sasl.ScramCredential, bool) {
	c, ok := u[user]
	return c, ok && c.Mechanism == mechanism
}

// securedGateway is an API with a Security of the test's own (users
// alice, bob and admin, admin a super user, the bindings of grant) in front
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
	for _, u := range []string{"alice", "bob", "admin"} {
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
	return bindingFor("User:alice", pt, rt, name, op)
}

func bindingFor(principal string, pt acl.PatternType, rt acl.ResourceType, name string, op acl.Operation) acl.Binding {
	return acl.Binding{Pattern: acl.ResourcePattern{Type: rt, Name: name, PatternType: pt},
		Entry: acl.Entry{Principal: principal, Host: acl.WildcardHost, Operation: op, Permission: acl.PermissionAllow}}
}

// readers are the bindings that let each of users consume topic in
// group.
func readers(group, topic string, users ...string) []acl.Binding {
	var out []acl.Binding
	for _, u := range users {
		out = append(out, bindingFor("User:"+u, acl.PatternLiteral, acl.ResourceGroup, group, acl.OperationRead),
			bindingFor("User:"+u, acl.PatternLiteral, acl.ResourceTopic, topic, acl.OperationRead))
	}
	return out
}

// consumeUntil consumes at path as user until n records came, and
// returns the last answer's generation.
func (g *securedGateway) consumeUntil(user, path string, n int) int32 {
	g.t.Helper()
	got := 0
	var gen int32
	testutil.Eventually(g.t, 30*time.Second, func() error {
		var c ackAnswer
		if st := g.do(user, "GET", path, "", &c); st != 200 {
			return fmt.Errorf("%s consuming: %d %s", user, st, c.Error)
		}
		got += len(c.Records)
		gen = c.Generation
		if got < n {
			return fmt.Errorf("%d of %d records", got, n)
		}
		return nil
	})
	return gen
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

// A consumer instance is its principal's (consume.go): bob, with the
// same rights on the group and topic as alice, neither acknowledges,
// commits through, seeks nor closes alice's default instance (to him it
// does not exist: 404 unknown_consumer, or the commit from outside the
// group that the coordinator refuses while alice is a member), and his
// own default instance is another member, not hers.
func TestConsumerInstancesArePrincipals(t *testing.T) {
	g := newSecuredGateway(t)
	e := g.e
	e.createTopic("ct", 1)
	e.produceN("ct", 0, 3)
	g.grant(readers("cg", "ct", "alice", "bob")...)
	gen := g.consumeUntil("alice", "/v1/topics/ct/consume?group=cg&ack_mode=records&auto_offset_reset=earliest&timeout_ms=200", 3)

	var res ackResult
	ack := fmt.Sprintf(`{"group": "cg", "generation": %d, "offsets": {"0": [0, 1, 2]}}`, gen)
	if st := g.do("bob", "POST", "/v1/topics/ct/ack", ack, &res); st != 404 || res.Error != "unknown_consumer" {
		t.Errorf("bob acking alice's records: %d %+v, want 404 unknown_consumer", st, res)
	}
	if st := g.do("bob", "POST", "/v1/topics/ct/nack", fmt.Sprintf(`{"group": "cg", "generation": %d, "partition": 0, "offset": 0}`, gen), &res); st != 404 || res.Error != "unknown_consumer" {
		t.Errorf("bob nacking alice's record: %d %+v, want 404 unknown_consumer", st, res)
	}
	if st := g.do("bob", "DELETE", "/v1/topics/ct/consume?group=cg", "", &res); st != 404 || res.Error != "unknown_consumer" {
		t.Errorf("bob closing alice's default instance: %d %+v, want 404 unknown_consumer", st, res)
	}
	if st := g.do("bob", "POST", "/v1/topics/ct/commit", `{"group": "cg", "offsets": {"0": 3}}`, &res); st != 409 {
		t.Errorf("bob committing in alice's group: %d %+v, want 409 (not through her instance)", st, res)
	}
	if st := g.do("bob", "POST", "/v1/topics/ct/seek", `{"group": "cg", "partition": 0, "to": "latest"}`, &res); st != 409 {
		t.Errorf("bob seeking in alice's group: %d %+v, want 409 (not through her instance)", st, res)
	}
	if got := e.committedAt("cg", "ct", 0); got == 3 {
		t.Fatalf("bob moved alice's group's commit to %d", got)
	}
	// Her instance is untouched: her acks of what it delivered count.
	if st := g.do("alice", "POST", "/v1/topics/ct/ack", ack, &res); st != 200 || res.Committed["0"] != 3 {
		t.Fatalf("alice acking: %d %+v", st, res)
	}
	// Bob's default instance is his own: it may commit offsets where
	// hers acknowledges records (one instance would be 409
	// ack_mode_mismatch).
	var c ackAnswer
	if st := g.do("bob", "GET", "/v1/topics/ct/consume?group=cg&ack_mode=offsets&timeout_ms=0", "", &c); st != 200 {
		t.Fatalf("bob's own default instance: %d %s", st, c.Error)
	}
	for _, user := range []string{"bob", "alice"} {
		if st := g.do(user, "DELETE", "/v1/topics/ct/consume?group=cg", "", &res); st != 200 {
			t.Errorf("%s closing the own default instance: %d %+v", user, st, res)
		}
	}
}

// A nack that dead-letters a record needs, at that moment, WRITE on the
// dead-letter topic for the nacking principal: a policy set by someone
// who could is not enough once the right is gone (403, nothing written,
// the attempt not counted).
func TestNackDeadLetterNeedsWrite(t *testing.T) {
	g := newSecuredGateway(t)
	e := g.e
	e.createTopic("nt", 1)
	e.produceN("nt", 0, 1)
	if st := g.do("admin", "PUT", "/v1/groups/ng/poison/nt", `{"policy": "dlq", "max_attempts": 1, "dlq_topic": "nt-dead"}`, nil); st != 200 {
		t.Fatalf("admin setting the dlq policy: %d", st)
	}
	g.grant(readers("ng", "nt", "alice")...)
	gen := g.consumeUntil("alice", "/v1/topics/nt/consume?group=ng&ack_mode=records&auto_offset_reset=earliest&timeout_ms=200", 1)
	nack := fmt.Sprintf(`{"group": "ng", "generation": %d, "partition": 0, "offset": 0, "reason": "bad"}`, gen)
	var res struct {
		Action   string `json:"action"`
		Attempts int32  `json:"attempts"`
		Error    string `json:"error"`
		Message  string `json:"message"`
	}
	if st := g.do("alice", "POST", "/v1/topics/nt/nack", nack, &res); st != 403 || !strings.Contains(res.Message, `WRITE topic "nt-dead"`) {
		t.Fatalf("alice dead-lettering without WRITE on nt-dead: %d %+v, want 403", st, res)
	}
	if end := e.endOffset("nt-dead", 0); end != 0 {
		t.Fatalf("nt-dead has %d records after a refused nack", end)
	}
	g.grant(append(readers("ng", "nt", "alice"), binding(acl.PatternLiteral, acl.ResourceTopic, "nt-dead", acl.OperationWrite))...)
	if st := g.do("alice", "POST", "/v1/topics/nt/nack", nack, &res); st != 200 || res.Action != "dead_lettered" || res.Attempts != 1 {
		t.Fatalf("alice dead-lettering with WRITE on nt-dead: %d %+v, want dead_lettered at attempt 1", st, res)
	}
	if end := e.endOffset("nt-dead", 0); end != 1 {
		t.Fatalf("nt-dead has %d records, want 1", end)
	}
}

// Idempotency keys are their principal's: alice and bob producing with
// the same key write two records (not one answered twice, nor a 422 for
// a key "reused"), and each one's retry answers that one's record.
func TestIdempotencyKeysArePrincipals(t *testing.T) {
	g := newSecuredGateway(t)
	e := g.e
	e.createTopic("it", 1)
	var grants []acl.Binding
	for _, u := range []string{"alice", "bob"} {
		grants = append(grants, bindingFor("User:"+u, acl.PatternLiteral, acl.ResourceTopic, "it", acl.OperationWrite))
	}
	g.grant(grants...)
	produce := func(user, value string) result {
		t.Helper()
		var r result
		body := fmt.Sprintf(`{"value": %q, "idempotency_key": "k"}`, b64(value))
		testutil.Eventually(t, 30*time.Second, func() error { // the index loads in the background
			if st := g.do(user, "POST", "/v1/topics/it/produce", body, &r); st != 200 {
				return fmt.Errorf("%s producing: %d %+v", user, st, r)
			}
			return nil
		})
		return r
	}
	alice := produce("alice", "from alice")
	bob := produce("bob", "from bob")
	if alice.Offset == bob.Offset {
		t.Fatalf("alice and bob with the same key: both answered offset %d", alice.Offset)
	}
	if again := produce("alice", "from alice"); again.Offset != alice.Offset {
		t.Errorf("alice's retry: offset %d, want %d", again.Offset, alice.Offset)
	}
	if again := produce("bob", "from bob"); again.Offset != bob.Offset {
		t.Errorf("bob's retry: offset %d, want %d", again.Offset, bob.Offset)
	}
	if end := e.endOffset("it", 0); end != 2 {
		t.Errorf("log end %d, want 2: one record each", end)
	}
}
