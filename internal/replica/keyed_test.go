package replica

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
)

// keyedBatch is a client batch of n records keyed "k<i>".
func keyedBatch(t testing.TB, n int) []byte {
	t.Helper()
	b := record.NewBuilder(record.DefaultBatchOptions())
	for i := range n {
		b.Add(fmt.Appendf(nil, "k%d", i), []byte("v"), nil, 0)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Options.KeyedAppend hears of a partition's first keyed append as its
// leader, once per partition: not of null-key appends, not again for
// later keyed ones.
func TestKeyedAppendHook(t *testing.T) {
	e := newEnv(t, "")
	var mu sync.Mutex
	var calls []string
	// Set before the first image: nothing reads it until a produce.
	e.m.opts.KeyedAppend = func(topic string, id metadata.UUID) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, fmt.Sprintf("%s/%x", topic, id[:3]))
	}
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
	e.put(newTopic("t", 1, 2, nil), newTopic("nulls", 2, 1, nil))

	e.append("nulls", 0, batch(t, "a", 3, 0), AcksLeader)
	e.append("t", 0, batch(t, "a", 3, 0), AcksAll)
	if got := seen(); len(got) != 0 {
		t.Fatalf("null-key appends told the hook: %v", got)
	}
	e.append("t", 0, keyedBatch(t, 2), AcksLeader)
	e.append("t", 0, keyedBatch(t, 1), AcksAll)
	e.append("t", 0, keyedBatch(t, 1), AcksNone)
	want := []string{"t/01f10d"}
	if got := seen(); !slices.Equal(got, want) {
		t.Fatalf("after three keyed appends to t-0: %v, want %v", got, want)
	}
	e.append("t", 1, keyedBatch(t, 1), AcksLeader)
	want = append(want, "t/01f10d")
	if got := seen(); !slices.Equal(got, want) {
		t.Fatalf("after a keyed append to t-1: %v, want %v", got, want)
	}
	// A partition this node no longer leads is refused before anything
	// is written, so there is nothing to tell.
	e.put(withPartition(e.topics["nulls"], 0, func(p *metadata.Partition) {
		p.Replicas, p.ISR, p.Leader, p.LeaderEpoch = []int32{testNode, 7}, []int32{testNode, 7}, 7, 1
	}))
	if _, err := e.m.StartAppend("nulls", 0, keyedBatch(t, 1), AcksLeader); err == nil {
		t.Fatal("a follower took a produce")
	}
	if got := seen(); !slices.Equal(got, want) {
		t.Fatalf("after a refused produce: %v, want %v", got, want)
	}
}

// Without a hook, keyed appends are written as ever.
func TestKeyedAppendNoHook(t *testing.T) {
	e := newEnv(t, "")
	e.put(newTopic("t", 1, 1, nil))
	if res := e.append("t", 0, keyedBatch(t, 2), AcksAll); res.BaseOffset != 0 {
		t.Fatalf("append: %+v", res)
	}
}
