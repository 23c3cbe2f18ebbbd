package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/testcluster"
)

// aclOverHTTP is TestACLs' acceptance over the HTTP API of node n
// (issue 20: "... can do exactly that and nothing else ... over Kafka and
// over HTTP"): alice, with Basic credentials, produces to a-1, consumes
// it in g1 and commits, and is refused (403) b-1, group g2, deleting
// a-1 and creating b-2; she lists the a- topics only; a request without
// credentials is 401; admin, a super user, passes where she does not.
// It leaves g1 without members, as the subtests after it need.
func aclOverHTTP(t *testing.T, n *testcluster.Node, admin *aclActor) {
	ctx := testContext(t, 2*time.Minute)
	base := "http://" + n.HTTPAddr()
	do := func(user, method, path, body string, out any) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+user+"-secret")))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if out != nil && resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(raw, out); err != nil {
				t.Fatalf("%s %s: %v in %s", method, path, err, raw)
			}
		}
		return resp.StatusCode, string(raw)
	}
	expect := func(user, method, path, body string, want int) {
		t.Helper()
		if st, raw := do(user, method, path, body, nil); st != want {
			t.Errorf("%s: %s %s: %d %s, want %d", user, method, path, st, raw, want)
		}
	}

	expect("", "GET", "/v1/topics", "", http.StatusUnauthorized)
	expect("alice", "POST", "/v1/topics/a-1/produce", `{"key": "http", "value": "ZnJvbSBodHRw"}`, http.StatusOK)
	expect("alice", "POST", "/v1/topics/b-1/produce", `{"value": "ZnJvbSBodHRw"}`, http.StatusForbidden)
	expect("alice", "GET", "/v1/topics/a-1/consume?group=g2&auto_offset_reset=earliest", "", http.StatusForbidden)
	expect("alice", "DELETE", "/v1/topics/a-1", "", http.StatusForbidden)
	expect("alice", "POST", "/v1/topics", `{"name": "b-2", "partitions": 1}`, http.StatusForbidden)
	expect("alice", "GET", "/v1/topics/b-1", "", http.StatusForbidden)

	var listed struct {
		Topics []struct{ Name string } `json:"topics"`
	}
	names := func(user string) []string {
		t.Helper()
		if st, raw := do(user, "GET", "/v1/topics", "", &listed); st != http.StatusOK {
			t.Fatalf("%s listing topics: %d %s", user, st, raw)
		}
		var out []string
		for _, tp := range listed.Topics {
			out = append(out, tp.Name)
		}
		return out
	}
	if got := names("alice"); !slices.Contains(got, "a-1") || slices.ContainsFunc(got, func(n string) bool { return !strings.HasPrefix(n, "a-") }) {
		t.Errorf("alice lists topics %v over HTTP, want the a- topics only", got)
	}
	if got := names("admin"); !slices.Contains(got, "b-1") || !slices.Contains(got, "a-1") {
		t.Errorf("admin lists topics %v over HTTP, want b-1 and a-1 among them", got)
	}

	// A member of g1 over HTTP: consume until the record produced above
	// comes (the first answers are the group's join), commit what it
	// read, and leave.
	var next map[string]int64
	eventually(t, time.Minute, func() error {
		var c struct {
			Records     []struct{ Key *string } `json:"records"`
			NextOffsets map[string]int64        `json:"next_offsets"`
		}
		st, raw := do("alice", "GET", "/v1/topics/a-1/consume?group=g1&timeout_ms=1000", "", &c)
		if st != http.StatusOK {
			return fmt.Errorf("consume: %d %s", st, raw)
		}
		if !slices.ContainsFunc(c.Records, func(r struct{ Key *string }) bool { return r.Key != nil && *r.Key == "http" }) {
			return fmt.Errorf("consume: no record keyed http yet (%d records)", len(c.Records))
		}
		next = c.NextOffsets
		return nil
	})
	commit, _ := json.Marshal(map[string]any{"group": "g1", "offsets": next})
	expect("alice", "POST", "/v1/topics/a-1/commit", string(commit), http.StatusOK)
	committed, err := committedOffsets(ctx, admin.adm, "g1")
	if err != nil {
		t.Fatal(err)
	}
	for ps, want := range next {
		p, _ := strconv.ParseInt(ps, 10, 32)
		if o, ok := committed[history.TopicPartition{Topic: "a-1", Partition: int32(p)}]; !ok || o.At != want {
			t.Errorf("g1's commit of a-1 partition %d after alice's HTTP commit: %s, want %d", p, describeCommit(o, ok), want)
		}
	}
	expect("alice", "DELETE", "/v1/topics/a-1/consume?group=g1", "", http.StatusOK)

	// admin passes what alice may not (nothing destructive: the
	// subtests after this one delete a-1 and g1 themselves).
	expect("admin", "GET", "/v1/topics/b-1", "", http.StatusOK)
	expect("admin", "POST", "/v1/topics/b-1/produce", `{"value": "ZnJvbSBodHRw"}`, http.StatusOK)
	expect("admin", "GET", "/v1/groups/g-other", "", http.StatusOK)
	expect("alice", "GET", "/v1/groups/g-other", "", http.StatusForbidden)
}
