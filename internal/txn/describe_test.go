package txn

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Reference: C§10.1.
func TestDescribeTransactions(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("t")
	h.clock.Advance(time.Minute)
	h.add("t", pid, epoch, tp("b", 0), tp("a", 3))
	// An id on a partition neither "t" nor "unknown" is on, unloaded.
	elsewhere := "elsewhere"
	for i := 0; PartitionFor(elsewhere, testPartitions) == PartitionFor("t", testPartitions) ||
		PartitionFor(elsewhere, testPartitions) == PartitionFor("unknown", testPartitions); i++ {
		elsewhere = fmt.Sprintf("elsewhere-%d", i)
	}
	h.c.Unload(PartitionFor(elsewhere, testPartitions))

	got := h.c.DescribeTransactions([]string{"t", "", "unknown", elsewhere})
	want := []TransactionDescription{
		{TransactionalID: "t", State: StateOngoing, TimeoutMs: testTimeoutMs, StartTimeMs: t0.Add(time.Minute).UnixMilli(),
			ProducerID: pid, ProducerEpoch: epoch, Partitions: []TopicPartition{tp("a", 3), tp("b", 0)}},
		{TransactionalID: "", Err: ErrInvalidRequest},
		{TransactionalID: "unknown", Err: ErrTransactionalIDNotFound},
		{TransactionalID: elsewhere, Err: ErrNotCoordinator},
	}
	if len(got) != len(want) {
		t.Fatalf("%d answers", len(got))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.TransactionalID != w.TransactionalID || g.Err != w.Err || g.State != w.State || g.TimeoutMs != w.TimeoutMs ||
			g.StartTimeMs != w.StartTimeMs || g.ProducerID != w.ProducerID || g.ProducerEpoch != w.ProducerEpoch ||
			!slices.Equal(g.Partitions, w.Partitions) {
			t.Errorf("answer %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
	// The answer is a copy.
	got[0].Partitions[0] = tp("z", 9)
	if d := h.describe("t"); d.Partitions[0] != tp("a", 3) {
		t.Fatal("describe shares the transaction's partitions")
	}
}

// listFixture has, on the fake clock at t0+5m: "e" Empty (start -1),
// "o" Ongoing since t0+1m, "c" CompleteCommit and "x" CompleteAbort,
// both started at t0.
func listFixture(t *testing.T) (*harness, map[string]int64) {
	h := newHarness(t, func(cfg *Config) { cfg.AbortTimedOutTransactionCleanupInterval = time.Hour })
	pids := map[string]int64{}
	for _, id := range []string{"e", "o", "c", "x"} {
		pids[id], _ = h.init(id)
	}
	h.add("c", pids["c"], 0, tp("a", 0))
	h.endV1("c", pids["c"], 0, true)
	h.add("x", pids["x"], 0, tp("a", 0))
	h.endV1("x", pids["x"], 0, false)
	h.clock.Advance(time.Minute)
	h.add("o", pids["o"], 0, tp("a", 0))
	h.clock.Advance(4 * time.Minute)
	return h, pids
}

func ids(txns []TransactionListing) []string {
	var out []string
	for _, l := range txns {
		out = append(out, l.TransactionalID)
	}
	return out
}

// Reference: C§10.2, every filter.
func TestListTransactions(t *testing.T) {
	h, pids := listFixture(t)
	none := ListTransactionsFilter{DurationFilterMs: -1}
	for _, tc := range []struct {
		name        string
		filter      ListTransactionsFilter
		want        []string
		wantUnknown []string
	}{
		{"no filter", none, []string{"c", "e", "o", "x"}, nil},
		{"states", ListTransactionsFilter{States: []string{"Ongoing", "CompleteAbort", "Bogus"}, DurationFilterMs: -1},
			[]string{"o", "x"}, []string{"Bogus"}},
		{"only unknown states", ListTransactionsFilter{States: []string{"ongoing"}, DurationFilterMs: -1}, nil, []string{"ongoing"}},
		{"producer ids", ListTransactionsFilter{ProducerIDs: []int64{pids["c"], pids["e"], 999999}, DurationFilterMs: -1}, []string{"c", "e"}, nil},
		// o started 4 minutes ago; Empty's start is -1 and the completed
		// ones keep their old start, so they pass too (as in Kafka).
		{"duration 3m", ListTransactionsFilter{DurationFilterMs: (3 * time.Minute).Milliseconds()}, []string{"c", "e", "o", "x"}, nil},
		{"duration 4m", ListTransactionsFilter{DurationFilterMs: (4 * time.Minute).Milliseconds()}, []string{"c", "e", "x"}, nil},
		{"duration and Ongoing", ListTransactionsFilter{States: []string{"Ongoing"}, DurationFilterMs: (4 * time.Minute).Milliseconds()}, nil, nil},
		{"pattern, whole id", ListTransactionsFilter{TransactionalIDPattern: "[ox]", DurationFilterMs: -1}, []string{"o", "x"}, nil},
		{"pattern matching part of an id", ListTransactionsFilter{TransactionalIDPattern: "o.+", DurationFilterMs: -1}, nil, nil},
		{"pattern with an alternation", ListTransactionsFilter{TransactionalIDPattern: "c|e", DurationFilterMs: -1}, []string{"c", "e"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			txns, unknown, err := h.c.ListTransactions(tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(txns), tc.want) || !slices.Equal(unknown, tc.wantUnknown) {
				t.Fatalf("listed %v, unknown %v; want %v, %v", ids(txns), unknown, tc.want, tc.wantUnknown)
			}
		})
	}
	txns, _, _ := h.c.ListTransactions(ListTransactionsFilter{States: []string{"Ongoing"}, DurationFilterMs: -1})
	if len(txns) != 1 || txns[0] != (TransactionListing{TransactionalID: "o", ProducerID: pids["o"], State: StateOngoing}) {
		t.Fatalf("listing %+v", txns)
	}
	_, _, err := h.c.ListTransactions(ListTransactionsFilter{TransactionalIDPattern: "(", DurationFilterMs: -1})
	wantErr(t, "bad pattern", err, ErrInvalidRegularExpression)
}
