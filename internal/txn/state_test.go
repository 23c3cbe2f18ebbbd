package txn

import (
	"fmt"
	"slices"
	"testing"
)

var allStates = []State{
	StateEmpty, StateOngoing, StatePrepareCommit, StatePrepareAbort,
	StateCompleteCommit, StateCompleteAbort, StateDead, StatePrepareEpochFence,
}

// Reference: Kafka's TransactionState.VALID_PREVIOUS_STATES (C§1.3),
// every pair of states.
func TestLegalTransitions(t *testing.T) {
	legal := map[[2]State]bool{}
	for _, pair := range [][2]State{
		{StateEmpty, StateEmpty}, {StateCompleteCommit, StateEmpty}, {StateCompleteAbort, StateEmpty},
		{StateEmpty, StateOngoing}, {StateOngoing, StateOngoing}, {StateCompleteCommit, StateOngoing}, {StateCompleteAbort, StateOngoing},
		{StateOngoing, StatePrepareCommit},
		{StateOngoing, StatePrepareAbort}, {StatePrepareEpochFence, StatePrepareAbort},
		{StateEmpty, StatePrepareAbort}, {StateCompleteCommit, StatePrepareAbort}, {StateCompleteAbort, StatePrepareAbort},
		{StatePrepareCommit, StateCompleteCommit},
		{StatePrepareAbort, StateCompleteAbort},
		{StateEmpty, StateDead}, {StateCompleteCommit, StateDead}, {StateCompleteAbort, StateDead},
		{StateOngoing, StatePrepareEpochFence},
	} {
		legal[pair] = true
	}
	for _, from := range allStates {
		for _, to := range allStates {
			if got, want := canTransition(from, to), legal[[2]State{from, to}]; got != want {
				t.Errorf("canTransition(%v, %v) = %v, want %v", from, to, got, want)
			}
		}
	}
}

func TestStateNames(t *testing.T) {
	want := []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}
	for i, s := range allStates {
		if s.String() != want[i] || int(s) != i {
			t.Errorf("state %d: %q, want %q", int(s), s, want[i])
		}
		if got, ok := ParseState(want[i]); !ok || got != s {
			t.Errorf("ParseState(%q) = %v, %v", want[i], got, ok)
		}
	}
	for _, name := range []string{"", "ongoing", "Ongoing ", "Unknown"} {
		if s, ok := ParseState(name); ok {
			t.Errorf("ParseState(%q) = %v: Kafka matches exact names only", name, s)
		}
	}
}

// ongoing is a transaction of producer 10 at epoch 3, started at 1000.
func ongoing() transit {
	t := newTransit(10, 60_000, 0)
	t.prevProducerID = 10
	t.producerEpoch, t.state = 3, StateOngoing
	t.partitions = []TopicPartition{tp("a", 0), tp("b", 1)}
	t.startMs = 1000
	return t
}

// Reference: C§1.5, prepareIncrementProducerEpoch.
func TestIncrementEpoch(t *testing.T) {
	base := ongoing()
	base.state, base.partitions, base.startMs = StateCompleteCommit, nil, 1000
	base.lastProducerEpoch = 2
	for _, tc := range []struct {
		name                string
		expected            int16
		wantEpoch, wantLast int16
		wantErr             error
	}{
		{"no expectation: a new session", -1, 4, -1, nil},
		{"KIP-360: the current epoch", 3, 4, 3, nil},
		{"KIP-360: a retry with the last epoch", 2, 3, 2, nil},
		{"a zombie's epoch", 1, 0, 0, ErrProducerFenced},
		{"a future epoch", 9, 0, 0, ErrProducerFenced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := base.incrementEpoch(5000, tc.expected, 32767, 2000)
			wantErr(t, "incrementEpoch", err, tc.wantErr)
			if err != nil {
				return
			}
			if n.producerEpoch != tc.wantEpoch || n.lastProducerEpoch != tc.wantLast {
				t.Fatalf("epoch %d last %d, want %d last %d", n.producerEpoch, n.lastProducerEpoch, tc.wantEpoch, tc.wantLast)
			}
			if n.state != StateEmpty || n.timeoutMs != 5000 || n.startMs != -1 || n.partitions != nil || n.lastUpdateMs != 2000 || n.producerID != 10 {
				t.Fatalf("transit %+v", n)
			}
			checkTransition("id", base, n)
		})
	}

	fresh := newTransit(77, 1000, 0)
	n, err := fresh.incrementEpoch(1000, 5, 32767, 1)
	if err != nil || n.producerEpoch != 0 || n.lastProducerEpoch != -1 {
		t.Fatalf("new id with an expectation: %+v, %v; want epoch 0", n, err)
	}
}

func TestRotateProducerID(t *testing.T) {
	cur := ongoing()
	cur.state, cur.partitions, cur.startMs, cur.producerEpoch = StateCompleteAbort, nil, 5, 32766
	n := cur.rotateProducerID(11, 100, true, 9)
	if n.producerID != 11 || n.prevProducerID != 10 || n.producerEpoch != 0 || n.lastProducerEpoch != 32766 || n.state != StateEmpty {
		t.Fatalf("rotation: %+v", n)
	}
	checkTransition("id", cur, n)
	if n := cur.rotateProducerID(11, 100, false, 9); n.lastProducerEpoch != -1 {
		t.Fatalf("rotation with no expectation keeps last epoch %d", n.lastProducerEpoch)
	}
}

// Reference: C§1.5 and C§7.2/7.3: what each end sets, V1 and V2, from a
// client and after a fence (KAFKA-19367: a V2 fence bumps once).
func TestPrepareAbortOrCommit(t *testing.T) {
	cur := ongoing()
	fenced, err := cur.fenceEpoch(32767, 50)
	if err != nil || fenced.producerEpoch != 4 || fenced.state != StatePrepareEpochFence {
		t.Fatalf("fence: %+v, %v", fenced, err)
	}
	checkTransition("id", cur, fenced)
	for _, tc := range []struct {
		name                string
		from                transit
		to                  State
		tv                  int16
		kind                endKind
		wantEpoch, wantLast int16
	}{
		{"V1 commit keeps the epoch", cur, StatePrepareCommit, 0, endClient, 3, -1},
		{"V2 commit bumps", cur, StatePrepareCommit, 2, endClient, 4, 3},
		{"V2 abort bumps", cur, StatePrepareAbort, 2, endClient, 4, 3},
		{"V1 abort after a fence: the fenced epoch", fenced, StatePrepareAbort, 0, endFence, 4, -1},
		{"V2 abort after a fence: one bump only", fenced, StatePrepareAbort, 2, endFence, 4, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.from.prepareAbortOrCommit(tc.to, tc.tv, tc.kind, -1, 32767, 100)
			if n.producerEpoch != tc.wantEpoch || n.lastProducerEpoch != tc.wantLast || n.state != tc.to {
				t.Fatalf("%v epoch %d last %d, want epoch %d last %d", n.state, n.producerEpoch, n.lastProducerEpoch, tc.wantEpoch, tc.wantLast)
			}
			if n.clientTransactionVersion != tc.tv || n.startMs != 1000 || !slices.Equal(n.partitions, cur.partitions) {
				t.Fatalf("transit %+v", n)
			}
			checkTransition("id", tc.from, n)
		})
	}

	empty := cur
	empty.state, empty.partitions, empty.startMs = StateEmpty, nil, -1
	n := empty.prepareAbortOrCommit(StatePrepareAbort, 2, endEmptyAbort, -1, 32767, 700)
	if n.startMs != 700 || n.producerEpoch != 4 {
		t.Fatalf("V2 empty abort: %+v", n)
	}
	checkTransition("id", empty, n)
	v1 := empty.prepareAbortOrCommit(StatePrepareAbort, 0, endEmptyAbort, -1, 32767, 700)
	mustPanic(t, "a V1 abort of Empty", func() { checkTransition("id", empty, v1) })
}

func TestPrepareCompleteAdoptsNextProducerID(t *testing.T) {
	cur := ongoing()
	cur.producerEpoch = 32766
	prep := cur.prepareAbortOrCommit(StatePrepareCommit, 2, endClient, 555, 32767, 10)
	if prep.producerEpoch != 32767 || prep.nextProducerID != 555 {
		t.Fatalf("prepare at the exhausted epoch: %+v", prep)
	}
	done := prep.prepareComplete(20)
	if done.producerID != 555 || done.producerEpoch != 0 || done.prevProducerID != 10 || done.nextProducerID != -1 ||
		done.lastProducerEpoch != 32766 || done.partitions != nil || done.state != StateCompleteCommit {
		t.Fatalf("complete: %+v", done)
	}
	checkTransition("id", prep, done)

	plain := cur.prepareAbortOrCommit(StatePrepareAbort, 0, endClient, -1, 32767, 10).prepareComplete(20)
	if plain.producerID != 10 || plain.producerEpoch != 32766 || plain.state != StateCompleteAbort {
		t.Fatalf("complete without a next producer id: %+v", plain)
	}
}

func TestAddPartitionsStartsTheTransaction(t *testing.T) {
	empty := newTransit(10, 1000, 0)
	empty.producerEpoch = 0
	n := empty.addPartitions([]TopicPartition{tp("b", 0), tp("a", 2)}, 2, 500)
	if n.startMs != 500 || n.state != StateOngoing || n.clientTransactionVersion != 2 ||
		!slices.Equal(n.partitions, []TopicPartition{tp("a", 2), tp("b", 0)}) {
		t.Fatalf("first add: %+v", n)
	}
	checkTransition("id", empty, n)
	m := n.addPartitions([]TopicPartition{tp("a", 1), tp("a", 2)}, 0, 900)
	if m.startMs != 500 || len(m.partitions) != 3 {
		t.Fatalf("second add: %+v", m)
	}
	checkTransition("id", n, m)
}

// checkTransition refuses what Kafka's completeTransitionTo refuses.
func TestCheckTransitionRefuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to func() transit
	}{
		{"Ongoing to Empty", ongoing, func() transit { n := ongoing(); n.state = StateEmpty; return n }},
		{"PrepareCommit from Empty", func() transit { n := ongoing(); n.state, n.partitions = StateEmpty, nil; return n },
			func() transit { n := ongoing(); n.state, n.partitions = StatePrepareCommit, nil; return n }},
		{"Ongoing losing partitions", ongoing, func() transit { n := ongoing(); n.partitions = n.partitions[:1]; return n }},
		{"Ongoing with another epoch", ongoing, func() transit { n := ongoing(); n.producerEpoch++; return n }},
		{"Prepare with a bump of two", ongoing, func() transit { n := ongoing(); n.state, n.producerEpoch = StatePrepareCommit, 5; return n }},
		{"Complete with partitions", func() transit { n := ongoing(); n.state = StatePrepareCommit; return n },
			func() transit { n := ongoing(); n.state = StateCompleteCommit; return n }},
		{"fence without a bump", ongoing, func() transit { n := ongoing(); n.state = StatePrepareEpochFence; return n }},
		{"Empty with a jump of epochs", func() transit { n := ongoing(); n.state, n.partitions = StateCompleteAbort, nil; return n },
			func() transit {
				n := ongoing()
				n.state, n.partitions, n.startMs, n.producerEpoch = StateEmpty, nil, -1, 9
				return n
			}},
	} {
		mustPanic(t, tc.name, func() { checkTransition("id", tc.from(), tc.to()) })
	}
}

func TestEpochExhausted(t *testing.T) {
	for _, tc := range []struct {
		epoch, max int16
		want       bool
	}{{32765, 32767, false}, {32766, 32767, true}, {32767, 32767, true}, {3, 5, false}, {4, 5, true}, {-1, 5, false}} {
		if got := epochExhausted(tc.epoch, tc.max); got != tc.want {
			t.Errorf("epochExhausted(%d, %d) = %v", tc.epoch, tc.max, got)
		}
	}
}

func TestPartitionSet(t *testing.T) {
	got := partitionSet([]TopicPartition{tp("b", 1), tp("a", 3), tp("b", 1), tp("a", 0)})
	want := []TopicPartition{tp("a", 0), tp("a", 3), tp("b", 1)}
	if !slices.Equal(got, want) {
		t.Fatalf("partitionSet = %v", got)
	}
	if partitionSet(nil) != nil || !containsAll(want, []TopicPartition{tp("b", 1), tp("a", 0)}) || containsAll(want, []TopicPartition{tp("c", 0)}) {
		t.Fatal("set operations")
	}
	if u := unionPartitions(want, []TopicPartition{tp("c", 0), tp("a", 0)}); len(u) != 4 || fmt.Sprint(u[3]) != "{c 0}" {
		t.Fatalf("union = %v", u)
	}
}
