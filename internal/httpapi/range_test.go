package httpapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fjordmq/fjord/internal/testutil"
)

// produceN produces n records to partition p of topic.
func (e *env) produceN(topic string, p, n int) {
	e.t.Helper()
	for i := range n {
		var res result
		if st := e.do("POST", "/v1/topics/"+topic+"/produce", fmt.Sprintf(`{"value": %q, "partition": %d}`, b64(fmt.Sprint(i)), p), &res); st != 200 {
			e.t.Fatalf("produce: %d %+v", st, res)
		}
	}
}

// deleteRecordsBefore moves partition p's log start to offset.
func (e *env) deleteRecordsBefore(topic string, p int32, offset int64) {
	e.t.Helper()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: p, At: offset})
	resp, err := e.adm.DeleteRecords(context.Background(), os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// consumeOffsets consumes at path until at least n records came, and
// returns their offsets in order.
func (e *env) consumeOffsets(path string, n int) []int64 {
	e.t.Helper()
	var read []int64
	testutil.Eventually(e.t, 30*time.Second, func() error {
		var c consumed
		if st := e.do("GET", path, "", &c); st != 200 {
			return fmt.Errorf("consume: %d %+v", st, c)
		}
		for _, r := range c.Records {
			read = append(read, r.Offset)
		}
		if len(read) < n {
			return fmt.Errorf("read %v, want %d records", read, n)
		}
		return nil
	})
	return read
}

// Regression: a seek past the log end was accepted, and the instance's
// next fetch, out of range, silently replayed the partition from 0; a
// commit below the log start was accepted too. Both are refused, with
// the partition's valid range, and nothing moves.
func TestSeekAndCommitOutsideTheLog(t *testing.T) {
	e := newEnv(t)
	e.createTopic("t", 1)
	e.produceN("t", 0, 5)
	e.deleteRecordsBefore("t", 0, 2) // the log is now [2, 5]

	committed := func(group string) int64 {
		t.Helper()
		os, err := e.adm.FetchOffsets(context.Background(), group)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := os.Lookup("t", 0)
		if !ok {
			return -1
		}
		return o.At
	}
	refused := func(what, path, body string) {
		t.Helper()
		var res result
		if st := e.do("POST", path, body, &res); st != 416 || res.Error != "offset_out_of_range" || !strings.Contains(res.Message, "2 to 5") {
			t.Errorf("%s: %d %+v, want 416 offset_out_of_range naming the log, 2 to 5", what, st, res)
		}
	}

	// A group with no members: the simple-commit path.
	refused("seek past the end", "/v1/topics/t/seek", `{"group": "idle", "partition": 0, "offset": 6}`)
	refused("seek below the start", "/v1/topics/t/seek", `{"group": "idle", "partition": 0, "offset": 1}`)
	refused("commit past the end", "/v1/topics/t/commit", `{"group": "idle", "offsets": {"0": 6}}`)
	refused("commit below the start", "/v1/topics/t/commit", `{"group": "idle", "offsets": {"0": 0}}`)
	if c := committed("idle"); c != -1 {
		t.Fatalf("group idle committed at %d after refused requests, want nothing", c)
	}
	for _, body := range []string{`{"group": "idle", "partition": 0, "offset": 2}`, `{"group": "idle", "partition": 0, "offset": 5}`} {
		var res result
		if st := e.do("POST", "/v1/topics/t/seek", body, &res); st != 200 {
			t.Fatalf("seek to the log's bounds %s: %d %+v", body, st, res)
		}
	}

	// A member on this node owning the partition: the instance's path.
	const live = "/v1/topics/t/consume?group=live&auto_offset_reset=earliest&timeout_ms=200"
	e.consumeOffsets(live, 3)
	refused("seek past the end, owned here", "/v1/topics/t/seek", `{"group": "live", "partition": 0, "offset": 6}`)
	refused("commit past the end, owned here", "/v1/topics/t/commit", `{"group": "live", "offsets": {"0": 6}}`)
	// The instance did not move: it reads nothing old again.
	e.produceN("t", 0, 1)
	after := e.consumeOffsets(live, 1)
	if after[0] != 5 {
		t.Fatalf("after a refused seek the instance read %v, want 5 (the new record) first", after)
	}
}

// A committed position that the log start has since passed is neither
// skipped nor replayed by the gateway on its own: the consume names the
// gap, with the log's range, until a seek moves it; then it reads from
// there (consume_gap_test.go has the rest of the contract).
func TestConsumeAfterTheLogStartPassedTheCommit(t *testing.T) {
	e := newEnv(t)
	e.createTopic("t", 1)
	e.produceN("t", 0, 4)
	var res result
	if st := e.do("POST", "/v1/topics/t/commit", `{"group": "g", "offsets": {"0": 1}}`, &res); st != 200 {
		t.Fatalf("commit: %d %+v", st, res)
	}
	e.deleteRecordsBefore("t", 0, 3) // the log is now [3, 4]; the group is at 1

	gap, _ := e.consumeGap("/v1/topics/t/consume?group=g&timeout_ms=200", nil)
	if want := "partition 0 behind_log_start position=null committed=1 log=3..4 lost=2"; gap.String() != want {
		t.Fatalf("gap %v, want %s", gap, want)
	}
	if st := e.do("POST", "/v1/topics/t/seek", `{"group": "g", "partition": 0, "offset": 3}`, &res); st != 200 {
		t.Fatalf("seek: %d %+v", st, res)
	}
	read := e.consumeOffsets("/v1/topics/t/consume?group=g&timeout_ms=200", 1)
	if read[0] != 3 {
		t.Fatalf("after seeking to the log start the group read %v, want 3 first", read)
	}
}
