package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/poison"
	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 18, point 1: a SIGKILL of the node at every step between a
// poison record's dead-letter write (or pause) and the commit past it
// loses nothing, and duplicates at most what at-least-once allows (a
// second dead-letter copy). Each case arms one failpoint
// (internal/failpoint): the node kills itself there, once; the test
// restarts it and carries on as a client would, then checks that every
// record of the source partition was either acknowledged or is in the
// dead-letter topic, that the commit is past all of them, and how many
// copies the dead-letter topic has.
func TestPoisonCrashes(t *testing.T) {
	for _, tc := range []struct {
		failpoint string
		policy    string
		// maxCopies is how many dead-letter copies of the poison record
		// may exist: a crash after the copy and before the commit
		// redelivers the record, and it is copied again.
		maxCopies int
	}{
		{"poison.dead-letter-written", "dlq", 2},
		{"poison.dead-letter-committed", "dlq", 1},
		{"poison.pause-written", "pause", 1},
		{"poison.resume-dead-letter-written", "pause", 2},
		{"poison.skip-committed", "pause", 1},
	} {
		t.Run(tc.failpoint, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "fired")
			n := testcluster.Start(t, testcluster.Options{Env: []string{"FJORD_FAILPOINT=" + tc.failpoint + "@" + marker}})
			c := &crashClient{t: t, n: n, topic: "src", group: "g"}
			c.setup(tc.policy)
			c.run(tc.failpoint, marker)
			c.check(tc.maxCopies)
		})
	}
}

type crashClient struct {
	t     *testing.T
	n     *testcluster.Node
	topic string
	group string
	gen   int32
}

// call sends a JSON request to the node's HTTP API; err is a transport
// error (the node died under the request).
func (c *crashClient) call(method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+c.n.HTTPAddr()+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, nil
}

func (c *crashClient) must(method, path string, body, out any) {
	c.t.Helper()
	st, err := c.call(method, path, body, out)
	if err != nil || st != 200 {
		c.t.Fatalf("%s %s: %d %v (%+v)", method, path, st, err, out)
	}
}

func (c *crashClient) kafka() (*kgo.Client, *kadm.Client) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.n.Brokers()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// setup: three records (1 is the poison one), and the policy.
func (c *crashClient) setup(policy string) {
	cl, adm := c.kafka()
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, c.topic); err != nil {
		c.t.Fatal(err)
	}
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: c.topic, Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			c.t.Fatal(err)
		}
	}
	c.must("PUT", "/v1/groups/"+c.group+"/poison/"+c.topic, map[string]any{"policy": policy, "max_attempts": 1}, nil)
}

type crashConsume struct {
	Records []struct {
		Offset int64 `json:"offset"`
	} `json:"records"`
	Generation int32 `json:"generation"`
	Paused     []struct {
		Offset int64 `json:"offset"`
	} `json:"paused"`
}

// consume consumes until stop says so, and returns the offsets handed
// out and the last answer.
func (c *crashClient) consume(stop func(got []int64, last crashConsume) bool) ([]int64, crashConsume) {
	c.t.Helper()
	var got []int64
	var last crashConsume
	testutil.Eventually(c.t, 30*time.Second, func() error {
		var a crashConsume
		st, err := c.call("GET", "/v1/topics/"+c.topic+"/consume?group="+c.group+"&ack_mode=records&auto_offset_reset=earliest&timeout_ms=300", nil, &a)
		if err != nil || st != 200 {
			return fmt.Errorf("consume: %d %v", st, err)
		}
		for _, r := range a.Records {
			got = append(got, r.Offset)
		}
		last, c.gen = a, a.Generation
		if !stop(got, a) {
			return fmt.Errorf("handed out %v, paused %v", got, a.Paused)
		}
		return nil
	})
	return got, last
}

func (c *crashClient) ack(offsets ...int64) {
	c.t.Helper()
	c.must("POST", "/v1/topics/"+c.topic+"/ack", map[string]any{"group": c.group, "generation": c.gen, "offsets": map[string][]int64{"0": offsets}}, nil)
}

func (c *crashClient) nack(offset int64) (map[string]any, error) {
	var out map[string]any
	st, err := c.call("POST", "/v1/topics/"+c.topic+"/nack", map[string]any{"group": c.group, "generation": c.gen, "partition": 0, "offset": offset, "reason": "poison"}, &out)
	if err == nil && st != 200 {
		c.t.Fatalf("nack: %d %v", st, out)
	}
	return out, err
}

// crashed waits for the node to have killed itself at the failpoint,
// and restarts it.
func (c *crashClient) crashed(marker string) {
	c.t.Helper()
	testutil.Eventually(c.t, 20*time.Second, func() error {
		if c.n.Running() {
			return fmt.Errorf("the node still runs")
		}
		return nil
	})
	if _, err := os.Stat(marker); err != nil {
		c.t.Fatalf("the node stopped, but not at the failpoint (no marker): %v\n%s", err, c.n.LogTail(20))
	}
	c.n.Restart()
}

// run drives the client through the poison record, through the crash.
func (c *crashClient) run(failpoint, marker string) {
	got, _ := c.consume(func(got []int64, _ crashConsume) bool { return len(got) >= 3 })
	if !slices.Equal(got[:3], []int64{0, 1, 2}) {
		c.t.Fatalf("first delivery %v", got)
	}
	c.ack(0, 2)
	switch failpoint {
	case "poison.dead-letter-written", "poison.dead-letter-committed", "poison.pause-written":
		if _, err := c.nack(1); err == nil {
			c.t.Fatalf("the nack was answered: the failpoint %s did not fire", failpoint)
		}
		c.crashed(marker)
	case "poison.resume-dead-letter-written", "poison.skip-committed":
		if out, err := c.nack(1); err != nil || out["action"] != "paused" {
			c.t.Fatalf("nack: %v %v", out, err)
		}
	}
	switch failpoint {
	case "poison.dead-letter-written":
		// The copy is written, the commit is not: 1 comes again, and is
		// copied again.
		again, _ := c.consume(func(got []int64, _ crashConsume) bool { return slices.Contains(got, 1) })
		if again[0] != 1 {
			c.t.Fatalf("after the crash: %v, want 1 first", again)
		}
		if out, err := c.nack(1); err != nil || out["action"] != "dead_lettered" {
			c.t.Fatalf("nack after the crash: %v %v", out, err)
		}
		c.ackAllFrom(again, 1)
	case "poison.dead-letter-committed":
		// Nothing to redo: the next consume starts past the record.
		again, _ := c.consume(func(got []int64, _ crashConsume) bool { return true })
		if slices.Contains(again, 1) {
			c.t.Fatalf("after a crash past the commit, 1 came again: %v", again)
		}
		c.ackAllFrom(again, -1)
	case "poison.pause-written":
		// The pause holds on the restarted node.
		_, last := c.consume(func(_ []int64, a crashConsume) bool { return len(a.Paused) == 1 })
		if last.Paused[0].Offset != 1 {
			c.t.Fatalf("paused %v, want at 1", last.Paused)
		}
		c.resumeSkip(true)
		c.finish()
	case "poison.resume-dead-letter-written":
		// The group has no member when it resumes: the skip commits
		// itself, or crashes between the copy and the commit.
		c.must("DELETE", "/v1/topics/"+c.topic+"/consume?group="+c.group, nil, nil)
		if _, err := c.call("POST", "/v1/groups/"+c.group+"/resume", map[string]any{"topic": c.topic, "partition": 0, "skip": true}, nil); err == nil {
			c.t.Fatal("the resume was answered: the failpoint did not fire")
		}
		c.crashed(marker)
		c.resumeSkip(false)
		c.finish()
	case "poison.skip-committed":
		// The owner carries out the skip at its next consume, and dies
		// between its commit and removing the pause.
		c.resumeSkip(true)
		if _, err := c.call("GET", "/v1/topics/"+c.topic+"/consume?group="+c.group+"&ack_mode=records&timeout_ms=300", nil, nil); err == nil {
			c.t.Fatal("the consume was answered: the failpoint did not fire")
		}
		c.crashed(marker)
		c.finish()
	}
}

// finish consumes past the skipped record: 2 comes (again: the pause
// dropped what followed the poison record, acknowledged or not) and is
// acknowledged, and no pause is left.
func (c *crashClient) finish() {
	c.t.Helper()
	got, _ := c.consume(func(got []int64, a crashConsume) bool { return len(a.Paused) == 0 && slices.Contains(got, 2) })
	if slices.Contains(got, 1) {
		c.t.Fatalf("the skipped record came again: %v", got)
	}
	c.ack(2)
}

// resumeSkip resumes the pause with a skip; owned says a member of the
// group is running (the skip is then left to it).
func (c *crashClient) resumeSkip(owned bool) {
	c.t.Helper()
	var out map[string]any
	c.must("POST", "/v1/groups/"+c.group+"/resume", map[string]any{"topic": c.topic, "partition": 0, "skip": true}, &out)
	if out["committed"] != !owned {
		c.t.Fatalf("resume: %v, want committed %v", out, !owned)
	}
}

// ackAllFrom acknowledges the offsets handed out, but skip.
func (c *crashClient) ackAllFrom(got []int64, skip int64) {
	var offs []int64
	for _, o := range got {
		if o != skip {
			offs = append(offs, o)
		}
	}
	if len(offs) > 0 {
		c.ack(offs...)
	}
}

// check: the commit is past every record, and the poison record is in
// the dead-letter topic, at most maxCopies times, with its origin.
func (c *crashClient) check(maxCopies int) {
	c.t.Helper()
	_, adm := c.kafka()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	testutil.Eventually(c.t, 20*time.Second, func() error {
		offsets, err := adm.FetchOffsets(ctx, c.group)
		if err != nil {
			return err
		}
		if o, ok := offsets.Lookup(c.topic, 0); !ok || o.At != 3 {
			return fmt.Errorf("committed %+v, want 3 (past every record)", o)
		}
		return nil
	})
	ends, err := adm.ListEndOffsets(ctx, poison.DefaultDLQTopic(c.topic))
	if err != nil {
		c.t.Fatal(err)
	}
	var copies int64
	ends.Each(func(o kadm.ListedOffset) { copies += o.Offset })
	if copies < 1 || copies > int64(maxCopies) {
		c.t.Fatalf("%d dead-letter copies of the poison record, want 1 to %d", copies, maxCopies)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.n.Brokers()), kgo.ConsumeTopics(poison.DefaultDLQTopic(c.topic)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	for read := int64(0); read < copies; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			c.t.Fatal(err)
		}
		for _, r := range fs.Records() {
			read++
			if o, ok := poison.OriginOf(r); !ok || o.Topic != c.topic || o.Offset != 1 || string(r.Value) != "v1" {
				c.t.Fatalf("dead letter %+v %q, want src/0/1 v1", o, r.Value)
			}
		}
	}
}
