package replica

import (
	"context"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
)

// A consumer reading far behind the log end draws on the replay budget:
// it gets at most what the budget holds, then nothing until it refills;
// a consumer at the tail is never held; without a budget nothing is.
func TestReplayBudget(t *testing.T) {
	e := newEnv(t, "")
	now := time.Unix(1_700_000_000, 0)
	e.m.opts.Now = func() time.Time { return now }
	e.put(newTopic("events", 1, 1, nil))
	for i := range 40 {
		e.append("events", 0, bigBatch(t, 1, 1000, int64(i)), AcksAll) // ~1 KB each
	}
	end := e.log("events", 0).LogEndOffset()
	read := func(offset int64) int {
		res := e.m.Fetch(context.Background(), consumerFetch(0, 0), []FetchPartition{part("events", 0, offset)})
		defer res.Release()
		if err := res.Partitions[0].Err; err != nil {
			t.Fatal(err)
		}
		return res.Partitions[0].Size()
	}
	if n := read(0); n < 40_000 {
		t.Fatalf("without a budget: %d bytes from the start, want all ~40 KB", n)
	}
	setBudget := func(cfg map[string]string) {
		img := *e.img
		img.Offset++
		img.BrokerConfigs = map[int32]map[string]string{testNode: cfg}
		e.img = &img
		e.m.ApplyImage(&img)
	}
	// A budget of 5,000 bytes a second; the last 3,000 bytes are the tail.
	setBudget(map[string]string{metadata.ReplayRateConfig: "5000", metadata.ReplayTailConfig: "3000"})
	// A budget set starts empty (as the reassignment throttle does), so
	// setting it does not begin with a burst.
	if n := read(0); n != 0 {
		t.Fatalf("replay read as the budget was set: %d bytes, want none", n)
	}
	now = now.Add(time.Second)
	first := read(0)
	if first < 4000 || first > 6100 {
		t.Fatalf("first replay read: %d bytes, want about the budget's 5,000 (whole batches)", first)
	}
	// What is left of the budget (less than a batch) still lets one
	// batch through, as every fetch returns one; then the bucket is in
	// debt and nothing comes.
	if n := read(0); n > 1100 {
		t.Fatalf("second replay read: %d bytes, want at most one batch", n)
	}
	if n := read(0); n != 0 {
		t.Fatalf("replay read with the budget spent: %d bytes, want none", n)
	}
	if n := read(end - 2); n == 0 {
		t.Fatal("a read at the tail was held by the replay budget")
	}
	if s := e.m.ReplayStats(); s.Rate != 5000 || s.TailBytes != 3000 || s.Held < 1 || s.Bytes < int64(first) {
		t.Fatalf("stats %+v", s)
	}
	// A second later the bucket holds another second's worth.
	now = now.Add(time.Second)
	if n := read(0); n < 3000 || n > 6100 {
		t.Fatalf("after a second: %d bytes, want about a second of budget", n)
	}
	// Deleting the budget frees the replay at once.
	setBudget(nil)
	if n := read(0); n < 40_000 {
		t.Fatalf("after the budget was deleted: %d bytes", n)
	}
}

// A fetch held by the replay budget waits for the budget to refill, not
// its whole MaxWait, and does not answer at once either.
func TestReplayHeldFetchWaitsForBudget(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("events", 1, 1, nil))
	for i := range 20 {
		e.append("events", 0, bigBatch(t, 1, 1000, int64(i)), AcksAll)
	}
	img := *e.img
	img.Offset++
	img.BrokerConfigs = map[int32]map[string]string{testNode: {metadata.ReplayRateConfig: "2000", metadata.ReplayTailConfig: "0"}}
	e.img = &img
	e.m.ApplyImage(&img)
	fetch := func() int {
		res := e.m.Fetch(context.Background(), consumerFetch(30*time.Second, 1), []FetchPartition{part("events", 0, 0)})
		defer res.Release()
		return res.Partitions[0].Size()
	}
	fetch() // spends the budget (and more: the first batch always comes)
	start := time.Now()
	n := fetch()
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("a held fetch waited %v, its whole MaxWait, instead of the budget's refill", waited)
	}
	if n == 0 {
		t.Fatal("the held fetch answered with nothing after the budget refilled")
	}
}
