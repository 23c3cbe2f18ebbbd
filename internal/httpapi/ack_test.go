package httpapi_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/testutil"
)

// ackAnswer is a consume's answer in ack_mode=records.
type ackAnswer struct {
	consumed
	Generation   int32 `json:"generation"`
	Unacked      *int  `json:"unacked"`
	UnackedLimit bool  `json:"unacked_limit"`
	Joining      bool  `json:"joining"`
}

type ackResult struct {
	Committed map[string]int64 `json:"committed"`
	Unacked   int              `json:"unacked"`
	Error     string           `json:"error"`
	Message   string           `json:"message"`
}

// consumeAcked consumes at path until n records came and returns them
// with the last answer's generation.
func (e *env) consumeAcked(path string, n int) (offsets []int64, gen int32) {
	e.t.Helper()
	testutil.Eventually(e.t, 30*time.Second, func() error {
		var c ackAnswer
		if st := e.do("GET", path, "", &c); st != 200 {
			return fmt.Errorf("consume: %d %s", st, c.Error)
		}
		if c.Unacked == nil {
			e.t.Fatalf("a consume in ack_mode=records without unacked")
		}
		for _, r := range c.Records {
			offsets = append(offsets, r.Offset)
		}
		gen = c.Generation
		if len(offsets) < n {
			return fmt.Errorf("%d of %d records", len(offsets), n)
		}
		return nil
	})
	return offsets, gen
}

func (e *env) ack(topic, body string) (int, ackResult) {
	e.t.Helper()
	var res ackResult
	st := e.do("POST", "/v1/topics/"+topic+"/ack", body, &res)
	return st, res
}

// Issue 18, point 2: out-of-order acknowledgements commit only the
// contiguous acknowledged prefix; an older generation's ack is refused,
// and so is an offset not handed out, changing nothing.
func TestAckCommitsTheContiguousPrefix(t *testing.T) {
	e := newEnv(t)
	e.createTopic("acks", 1)
	e.produceN("acks", 0, 5)
	path := "/v1/topics/acks/consume?group=ag&ack_mode=records&auto_offset_reset=earliest&timeout_ms=500"
	got, gen := e.consumeAcked(path, 5)
	if !slices.Equal(got, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("delivered %v", got)
	}
	ack := func(offsets string, wantStatus int, wantCommitted int64) ackResult {
		t.Helper()
		st, res := e.ack("acks", fmt.Sprintf(`{"group": "ag", "generation": %d, "offsets": {"0": %s}}`, gen, offsets))
		if st != wantStatus {
			t.Fatalf("ack %s: %d %+v, want %d", offsets, st, res, wantStatus)
		}
		if c := e.committedAt("ag", "acks", 0); c != wantCommitted {
			t.Fatalf("after ack %s: committed %d, want %d", offsets, c, wantCommitted)
		}
		return res
	}
	// 0 and 2 done: the commit moves to 1 (2 waits for 1).
	if res := ack("[0, 2]", 200, 1); res.Committed["0"] != 1 || res.Unacked != 3 {
		t.Errorf("ack [0, 2]: %+v", res)
	}
	ack("[1]", 200, 3)
	// 4 done, 3 not: nothing moves.
	if res := ack("[4]", 200, 3); len(res.Committed) != 0 || res.Unacked != 1 {
		t.Errorf("ack [4]: %+v, want no commit and 1 unacked (3)", res)
	}
	// Refused, nothing changed: an offset never handed out, one already
	// committed past, a batch with one bad offset among good ones.
	for _, offs := range []string{"[7]", "[1]", "[3, 9]"} {
		if res := ack(offs, 409, 3); res.Error != "not_delivered" {
			t.Errorf("ack %s: %+v, want not_delivered", offs, res)
		}
	}
	// An older generation's ack.
	st, res := e.ack("acks", fmt.Sprintf(`{"group": "ag", "generation": %d, "offsets": {"0": [3]}}`, gen-1))
	if st != 409 || res.Error != "stale_generation" || e.committedAt("ag", "acks", 0) != 3 {
		t.Fatalf("stale generation: %d %+v", st, res)
	}
	ack("[3]", 200, 5)
}

// A rebalance gives the member a new generation: the records it handed
// out and nobody acknowledged come again in it, and acks naming the old
// one are refused.
func TestAckAcrossARebalance(t *testing.T) {
	e := newEnv(t)
	e.createTopic("reb", 1)
	e.produceN("reb", 0, 3)
	path := "/v1/topics/reb/consume?group=rg&ack_mode=records&auto_offset_reset=earliest&timeout_ms=200"
	got, gen := e.consumeAcked(path, 3)
	if !slices.Equal(got, []int64{0, 1, 2}) {
		t.Fatalf("delivered %v", got)
	}
	if st, res := e.ack("reb", fmt.Sprintf(`{"group": "rg", "generation": %d, "offsets": {"0": [0]}}`, gen)); st != 200 || res.Committed["0"] != 1 {
		t.Fatalf("ack: %d %+v", st, res)
	}
	// A second member joins (and gets nothing: one partition, sticky).
	other := "/v1/topics/reb/consume?group=rg&consumer=other&ack_mode=records&timeout_ms=200"
	e.waitStable("rg", 2, func() {
		var c ackAnswer
		e.do("GET", other, "", &c)
		e.do("GET", path, "", &c)
	})
	if st, res := e.ack("reb", fmt.Sprintf(`{"group": "rg", "generation": %d, "offsets": {"0": [1]}}`, gen)); st != 409 || res.Error != "stale_generation" {
		t.Fatalf("an old generation's ack: %d %+v", st, res)
	}
	again, newGen := e.consumeAcked(path, 2)
	if newGen <= gen || !slices.Equal(again[:2], []int64{1, 2}) {
		t.Fatalf("after the rebalance: %v at generation %d (was %d), want 1 and 2 again in a newer one", again, newGen, gen)
	}
	if st, res := e.ack("reb", fmt.Sprintf(`{"group": "rg", "generation": %d, "offsets": {"0": [1, 2]}}`, newGen)); st != 200 || res.Committed["0"] != 3 {
		t.Fatalf("ack in the new generation: %d %+v", st, res)
	}
}

// Bad acks: clear errors, nothing acknowledged.
func TestAckBadInput(t *testing.T) {
	e := newEnv(t)
	e.createTopic("bad", 1)
	e.produceN("bad", 0, 2)
	_, gen := e.consumeAcked("/v1/topics/bad/consume?group=bg&ack_mode=records&auto_offset_reset=earliest&timeout_ms=200", 2)
	var plain ackAnswer
	if st := e.do("GET", "/v1/topics/bad/consume?group=og&auto_offset_reset=earliest&timeout_ms=200", "", &plain); st != 200 {
		t.Fatalf("offsets-mode consume: %d", st)
	}
	if plain.Unacked != nil {
		t.Errorf("an offsets-mode consume says unacked %d", *plain.Unacked)
	}
	g := fmt.Sprint(gen)
	e.expectErrors([]hostileCase{
		{"POST", "/v1/topics/bad/ack", `{"generation": ` + g + `, "offsets": {"0": [0]}}`, 400, "bad_group"},
		{"POST", "/v1/topics/bad/ack", `{"group": "bg", "offsets": {"0": [0]}}`, 400, "bad_generation"},
		{"POST", "/v1/topics/bad/ack", `{"group": "bg", "generation": ` + g + `, "offsets": {}}`, 400, "bad_offsets"},
		{"POST", "/v1/topics/bad/ack", `{"group": "bg", "generation": ` + g + `, "offsets": {"x": [0]}}`, 400, "bad_partition"},
		{"POST", "/v1/topics/bad/ack", `{"group": "bg", "generation": ` + g + `, "offsets": {"-1": [0]}}`, 400, "bad_partition"},
		{"POST", "/v1/topics/bad/ack", `{"group": "bg", "generation": ` + g + `, "offsets": {"0": [-1]}}`, 409, "not_delivered"},
		{"POST", "/v1/topics/bad/ack", `{"group": "bg", "generation": ` + g + `, "offsets": {"0": "x"}}`, 400, "malformed_json"},
		{"POST", "/v1/topics/bad/ack", `{"group": "nobody", "generation": 1, "offsets": {"0": [0]}}`, 404, "unknown_consumer"},
		{"POST", "/v1/topics/bad/ack", `{"group": "og", "generation": 1, "offsets": {"0": [0]}}`, 409, "ack_mode"},
		{"GET", "/v1/topics/bad/consume?group=bg&ack_mode=offsets", "", 409, "ack_mode_mismatch"},
		{"GET", "/v1/topics/bad/consume?group=bg&ack_mode=maybe", "", 400, "bad_ack_mode"},
	})
	if c := e.committedAt("bg", "bad", 0); c != -1 {
		t.Errorf("committed %d after only bad acks, want none", c)
	}
}
