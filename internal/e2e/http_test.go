package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// httpDo sends a JSON request to the node's HTTP API and decodes the
// answer into out.
func httpDo(t *testing.T, addr, method, path, body string, out any) (int, error) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 40 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: answer %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, nil
}

type httpProduced struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Error     string `json:"error"`
	Message   string `json:"message"`
}

// What the HTTP API acknowledged survives SIGKILL, as the Kafka
// protocol's acks=all does: idempotent produces retried after the crash
// answer where the records went and append nothing, every acknowledged
// record is there once, and a group's HTTP consumer resumes after its
// last acknowledged commit.
func TestHTTPAcknowledgedSurvivesSIGKILL(t *testing.T) {
	n := startNode(t)
	addr := n.HTTPAddr()
	var created map[string]any
	if st, err := httpDo(t, addr, "POST", "/v1/topics", `{"name": "pay", "partitions": 3}`, &created); err != nil || st != 201 {
		t.Fatalf("create: %d %v %v", st, err, created)
	}

	records := scale(200, 2000)
	produce := func(i int) (httpProduced, int, error) {
		var res httpProduced
		body := fmt.Sprintf(`{"value": %q, "idempotency_key": "payment-%d"}`, base64.StdEncoding.EncodeToString([]byte(fmt.Sprint("payment ", i))), i)
		st, err := httpDo(t, addr, "POST", "/v1/topics/pay/produce", body, &res)
		return res, st, err
	}
	first := make([]httpProduced, records)
	for i := range records {
		res, st, err := produce(i)
		if err != nil || st != 200 {
			t.Fatalf("produce %d: %d %v %+v", i, st, err, res)
		}
		first[i] = res
	}

	// A group's HTTP consumer reads some and commits where it got to.
	var consumed struct {
		Records []struct {
			Partition int32 `json:"partition"`
			Offset    int64 `json:"offset"`
		} `json:"records"`
		NextOffsets map[string]int64 `json:"next_offsets"`
	}
	eventually(t, 30*time.Second, func() error {
		st, err := httpDo(t, addr, "GET", "/v1/topics/pay/consume?group=ledger&auto_offset_reset=earliest&timeout_ms=1000&max_bytes=200", "", &consumed)
		if err != nil || st != 200 || len(consumed.Records) == 0 {
			return fmt.Errorf("consume: %d %v, %d records", st, err, len(consumed.Records))
		}
		return nil
	})
	commitBody, _ := json.Marshal(map[string]any{"group": "ledger", "offsets": consumed.NextOffsets})
	if st, err := httpDo(t, addr, "POST", "/v1/topics/pay/commit", string(commitBody), nil); err != nil || st != 200 {
		t.Fatalf("commit: %d %v", st, err)
	}

	n.Kill()
	n.Restart()

	// Every retry answers the first answer, once the idempotency index
	// has loaded again (until then: 503, try again).
	for i := range records {
		var res httpProduced
		eventually(t, 30*time.Second, func() error {
			var st int
			var err error
			res, st, err = produce(i)
			if err != nil || st != 200 {
				return fmt.Errorf("retry %d after the crash: %d %v %+v", i, st, err, res)
			}
			return nil
		})
		if res.Partition != first[i].Partition || res.Offset != first[i].Offset {
			t.Fatalf("retry %d after the crash: partition %d offset %d, first answered %d/%d", i, res.Partition, res.Offset, first[i].Partition, first[i].Offset)
		}
	}

	// Every acknowledged record is there, once.
	ctx := testContext(t, time.Minute)
	got := readAll(ctx, t, n, "pay")
	seen := map[string]int{}
	total := 0
	for _, recs := range got {
		for _, r := range recs {
			seen[string(r.Value)]++
			total++
		}
	}
	if total != records {
		t.Fatalf("%d records in the topic after the crash and %d retries, want %d", total, records, records)
	}
	for i := range records {
		if v := fmt.Sprint("payment ", i); seen[v] != 1 {
			t.Fatalf("%q is there %d times", v, seen[v])
		}
	}

	// The group's commit is there. (A new HTTP consumer would resume
	// from it, as TestHTTPFlowAcrossRestart in httpapi shows, but only
	// once the killed node's member has timed out of the group, Kafka's
	// 45 s session.)
	adm := newAdmin(t, n)
	eventually(t, 30*time.Second, func() error {
		offsets, err := adm.FetchOffsets(ctx, "ledger")
		if err == nil {
			err = offsets.Error()
		}
		if err != nil {
			return err // COORDINATOR_LOAD_IN_PROGRESS while it loads
		}
		for p, next := range consumed.NextOffsets {
			var part int32
			fmt.Sscan(p, &part)
			if o, ok := offsets.Lookup("pay", part); !ok || o.At != next {
				return fmt.Errorf("partition %d: committed %+v (found %v), the acknowledged commit was %d", part, o, ok, next)
			}
		}
		return nil
	})
}
