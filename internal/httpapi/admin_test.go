package httpapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/testutil"
)

// groupOffsetJSON is a row of GET /v1/groups/{group}'s offsets.
type groupOffsetJSON struct {
	Topic       string   `json:"topic"`
	Partition   int32    `json:"partition"`
	Committed   *int64   `json:"committed"`
	LogStart    *int64   `json:"log_start"`
	LogEnd      *int64   `json:"log_end"`
	Lag         *int64   `json:"lag"`
	LagBytes    *int64   `json:"lag_bytes"`
	LagSeconds  *float64 `json:"lag_seconds"`
	RecordsLost *int64   `json:"records_lost"`
	Member      *string  `json:"member"`
}

// Topics through the API: create, list, describe (partitions, offsets,
// configs), delete; and their errors.
func TestTopicAdmin(t *testing.T) {
	e := newEnv(t)
	var created struct {
		Name       string `json:"name"`
		Partitions int    `json:"partitions"`
		Error      string `json:"error"`
	}
	body := `{"name": "payments", "partitions": 3, "configs": {"retention.ms": "3600000"}}`
	if st := e.do("POST", "/v1/topics", body, &created); st != 201 || created.Name != "payments" || created.Partitions != 3 {
		t.Fatalf("create: %d %+v", st, created)
	}
	var res result
	if st := e.do("POST", "/v1/topics", body, &res); st != 409 || res.Error != "topic_exists" {
		t.Fatalf("create again: %d %+v", st, res)
	}
	// Two records in partition 1, for the offsets.
	for i := range 2 {
		if st := e.do("POST", "/v1/topics/payments/produce", fmt.Sprintf(`{"value": %q, "partition": 1}`, b64(fmt.Sprint(i))), &res); st != 200 {
			t.Fatalf("produce: %d %+v", st, res)
		}
	}

	var listed struct {
		Topics []struct {
			Name       string `json:"name"`
			Partitions int    `json:"partitions"`
		} `json:"topics"`
	}
	if st := e.do("GET", "/v1/topics", "", &listed); st != 200 || len(listed.Topics) != 1 || listed.Topics[0].Name != "payments" || listed.Topics[0].Partitions != 3 {
		t.Fatalf("list: %d %+v", st, listed)
	}
	// The first idempotent produce creates the API's idempotency index,
	// an internal topic listed only when asked for.
	if st := e.do("POST", "/v1/topics/payments/produce", `{"value": "YQ==", "partition": 0, "idempotency_key": "k"}`, &res); st != 200 {
		t.Fatalf("idempotent produce: %d %+v", st, res)
	}
	if st := e.do("GET", "/v1/topics?internal=true", "", &listed); st != 200 || len(listed.Topics) != 2 || listed.Topics[0].Name != "__fjord_http_idempotency" {
		t.Fatalf("list with internal topics: %d %+v", st, listed)
	}

	var described struct {
		Name       string `json:"name"`
		Partitions []struct {
			Partition      int32   `json:"partition"`
			Leader         int32   `json:"leader"`
			ISR            []int32 `json:"isr"`
			LogStartOffset *int64  `json:"log_start_offset"`
			LogEndOffset   *int64  `json:"log_end_offset"`
		} `json:"partitions"`
		Configs map[string]string `json:"configs"`
	}
	if st := e.do("GET", "/v1/topics/payments", "", &described); st != 200 || len(described.Partitions) != 3 {
		t.Fatalf("describe: %d %+v", st, described)
	}
	p1 := described.Partitions[1]
	if p1.Partition != 1 || p1.Leader != 1 || len(p1.ISR) != 1 || *p1.LogStartOffset != 0 || *p1.LogEndOffset != 2 {
		t.Fatalf("partition 1: %+v", p1)
	}
	if described.Configs["retention.ms"] != "3600000" {
		t.Fatalf("configs %v lack retention.ms=3600000", described.Configs)
	}

	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/v1/topics", `{"name": "bad name!"}`, 400, "invalid_topic"},
		{"POST", "/v1/topics", `{"name": "x", "partitions": 0}`, 400, "bad_partitions"},
		{"POST", "/v1/topics", `{"name": "x", "replication_factor": 0}`, 400, "bad_replication_factor"},
		{"POST", "/v1/topics", `{"name": "x", "configs": {"retention.ms": "soon"}}`, 400, "invalid_topic"},
		{"POST", "/v1/topics", `{"name": "x", "color": "blue"}`, 400, "malformed_json"},
		{"POST", "/v1/topics", `[1, 2]`, 400, "malformed_json"},
		{"GET", "/v1/topics/nope", "", 404, "unknown_topic"},
		{"DELETE", "/v1/topics/nope", "", 404, "unknown_topic"},
	} {
		var res result
		if st := e.do(tc.method, tc.path, tc.body, &res); st != tc.status || res.Error != tc.code {
			t.Errorf("%s %s %s: %d %+v, want %d %q", tc.method, tc.path, tc.body, st, res, tc.status, tc.code)
		}
	}
	if topics, err := e.adm.ListTopicsWithInternal(context.Background()); err != nil || len(topics) != 2 {
		t.Fatalf("topics on the node: %v, %v (want payments and the idempotency index)", topics.Names(), err)
	}
	if st := e.do("GET", "/v1/topics", "", &listed); st != 200 || len(listed.Topics) != 1 {
		t.Fatalf("bad creates created something: %+v", listed)
	}

	var deleted map[string]string
	if st := e.do("DELETE", "/v1/topics/payments", "", &deleted); st != 200 || deleted["deleted"] != "payments" {
		t.Fatalf("delete: %d %v", st, deleted)
	}
	var gone result
	if st := e.do("GET", "/v1/topics/payments", "", &gone); st != 404 || gone.Error != "unknown_topic" {
		t.Fatalf("describe right after delete: %d %+v", st, gone)
	}
}

// The cluster, and a consumer group with a live member: its assignment,
// committed offsets and lag.
func TestClusterAndGroups(t *testing.T) {
	testStart := time.Now()
	e := newEnv(t)
	var cluster struct {
		ClusterID  string `json:"cluster_id"`
		Controller int32  `json:"controller"`
		Nodes      []struct {
			NodeID int32  `json:"node_id"`
			Host   string `json:"host"`
			Port   int32  `json:"port"`
		} `json:"nodes"`
	}
	if st := e.do("GET", "/v1/cluster", "", &cluster); st != 200 || cluster.ClusterID != e.n.ClusterID() || len(cluster.Nodes) != 1 || cluster.Nodes[0].NodeID != 1 {
		t.Fatalf("cluster: %d %+v", st, cluster)
	}

	e.createTopic("orders", 2)
	ctx := context.Background()
	for i := range 5 { // three records in partition 0, two in 1
		var res result
		if st := e.do("POST", "/v1/topics/orders/produce", fmt.Sprintf(`{"value": "dg==", "partition": %d}`, i%2), &res); st != 200 {
			t.Fatalf("produce: %d %+v", st, res)
		}
	}
	// A member of "billing" that has read and committed partition 0's
	// first two records only.
	if _, err := e.adm.CommitOffsets(ctx, "billing", kadm.Offsets{"orders": {0: {Topic: "orders", Partition: 0, At: 2, LeaderEpoch: -1}}}); err != nil {
		t.Fatal(err)
	}
	member, err := kgo.NewClient(kgo.SeedBrokers(e.n.KafkaAddr().String()), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.ClientID("billing-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	go member.PollFetches(ctx) // joins the group

	type groupJSON struct {
		Group   string `json:"group"`
		State   string `json:"state"`
		Members []struct {
			MemberID    string             `json:"member_id"`
			ClientID    string             `json:"client_id"`
			Assignments map[string][]int32 `json:"assignments"`
		} `json:"members"`
		Offsets []groupOffsetJSON `json:"offsets"`
	}
	var g groupJSON
	testutil.Eventually(t, 20*time.Second, func() error {
		if st := e.do("GET", "/v1/groups/billing", "", &g); st != 200 || g.State != "Stable" || len(g.Members) != 1 {
			return fmt.Errorf("group %d %+v", st, g)
		}
		return nil
	})
	m := g.Members[0]
	if m.ClientID != "billing-1" || len(m.Assignments["orders"]) != 2 {
		t.Fatalf("member %+v", m)
	}
	// Both assigned partitions, the one without a commit too (null
	// committed offset and lag).
	if o := g.Offsets; len(o) != 2 || o[0].Partition != 0 || *o[0].Committed != 2 || *o[0].LogEnd != 3 || *o[0].Lag != 1 || *o[0].Member != m.MemberID ||
		o[1].Partition != 1 || o[1].Committed != nil || o[1].Lag != nil || o[1].LogEnd == nil || *o[1].Member != m.MemberID {
		t.Fatalf("offsets %+v", g.Offsets)
	}
	// Where the leader says the commit stands: one record (a batch) of
	// log behind, produced during this test; no gap. Without a commit,
	// nothing to say.
	if o := g.Offsets[0]; o.LogStart == nil || *o.LogStart != 0 || o.LagBytes == nil || *o.LagBytes <= 0 ||
		o.LagSeconds == nil || *o.LagSeconds < 0 || *o.LagSeconds > time.Since(testStart).Seconds() || o.RecordsLost == nil || *o.RecordsLost != 0 {
		t.Errorf("partition 0's lag: log start %v, bytes %v, seconds %v, lost %v", o.LogStart, o.LagBytes, o.LagSeconds, o.RecordsLost)
	}
	if o := g.Offsets[1]; o.LogStart != nil || o.LagBytes != nil || o.LagSeconds != nil || o.RecordsLost != nil {
		t.Errorf("partition 1 has no commit, yet lag figures: %+v", o)
	}
	var listed struct {
		Groups []struct {
			Group string `json:"group"`
			State string `json:"state"`
		} `json:"groups"`
	}
	if st := e.do("GET", "/v1/groups", "", &listed); st != 200 || len(listed.Groups) != 1 || listed.Groups[0].Group != "billing" {
		t.Fatalf("groups: %d %+v", st, listed)
	}
	var res result
	if st := e.do("GET", "/v1/groups/nobody", "", &res); st != 404 || res.Error != "unknown_group" {
		t.Fatalf("unknown group: %d %+v", st, res)
	}
}
