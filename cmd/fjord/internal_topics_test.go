package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Issue 12: `fjord topic delete __consumer_offsets` wiped every group's
// committed offsets. The node refuses it, and the CLI prints the node's
// reason (the topic named as internal) on one line; so for growing the
// topic or changing a config that would drop its records, and for the
// HTTP gateway's idempotency index.
func TestInternalTopicsRefusedByTheCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topic := topicName("internal-cli")
	ok(t, "", "topic", "create", topic, "--partitions", "1")
	group := topicName("internal-cli-group")
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: topic, Partition: 0, At: 42, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, group, commit); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}

	// An idempotent HTTP produce creates the gateway's index.
	resp, err := http.Post("http://"+sharedNode(t).HTTPAddr().String()+"/v1/topics/"+topic+"/produce", "application/json",
		strings.NewReader(`{"value": "YQ==", "idempotency_key": "k"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("idempotent HTTP produce: %s", resp.Status)
	}

	for _, name := range []string{"__consumer_offsets", "__fjord_http_idempotency", "__transaction_state"} {
		fails(t, `topic "`+name+`" is internal to Fjord: deleting it would lose`, "topic", "delete", name, "--brokers", brokers(t))
	}
	for _, name := range []string{"__consumer_offsets", "__fjord_http_idempotency"} {
		r := fails(t, `topic "`+name+`" is internal to Fjord: its partition count is fixed`, "topic", "alter", name, "--partitions", "60", "--brokers", brokers(t))
		if strings.Contains(r.stderr, "warning") {
			t.Errorf("a refused growth warned of what it would change:\n%s", r.stderr)
		}
	}
	fails(t, `topic "__fjord_http_idempotency" is internal to Fjord: its records may not be deleted sooner`,
		"topic", "alter", "__fjord_http_idempotency", "--config", "retention.ms=1000", "--brokers", brokers(t))
	fails(t, `topic "__consumer_offsets" is internal to Fjord and must stay compacted`,
		"topic", "alter", "__consumer_offsets", "--config", "cleanup.policy=delete", "--brokers", brokers(t))
	fails(t, `topic "__consumer_offsets" is internal to Fjord and must stay compacted`,
		"topic", "alter", "__consumer_offsets", "--delete-config", "cleanup.policy", "--brokers", brokers(t))

	fetched, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	if o, found := fetched.Lookup(topic, 0); !found || o.At != 42 {
		t.Errorf("%s's offset after the refused commands: %+v (found %v), want 42", group, o, found)
	}
	ok(t, "", "topic", "describe", "__consumer_offsets") // reading stays allowed
}
