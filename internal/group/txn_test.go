package group

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/clock"
)

// txnReq is producer pid's TxnOffsetCommit with no membership (v0-2).
func txnReq(group string, pid int64, epoch int16, offsets ...OffsetCommit) TxnCommitRequest {
	return TxnCommitRequest{Group: group, ProducerID: pid, ProducerEpoch: epoch, Generation: -1, Offsets: offsets}
}

// txnCommit runs req and fails the test unless every partition is
// accepted.
func (h *harness) txnCommit(req TxnCommitRequest) {
	h.t.Helper()
	err, errs := h.c.CommitTxnOffsets(h.ctx, req)
	if err != nil {
		h.t.Fatalf("txn commit: %v", err)
	}
	for i, e := range errs {
		if e != nil {
			h.t.Fatalf("txn commit, partition %d: %v", i, e)
		}
	}
}

// simpleCommit is a simple consumer's OffsetCommit, which must succeed.
func (h *harness) simpleCommit(group string, offsets ...OffsetCommit) {
	h.t.Helper()
	err, errs := h.c.CommitOffsets(h.ctx, CommitRequest{Group: group, Generation: -1, Offsets: offsets})
	if err != nil || errs[0] != nil {
		h.t.Fatalf("commit: %v %v", err, errs)
	}
}

// endTxn writes pid's marker to group's partition and reports it, as the
// WriteTxnMarkers handler does.
func (h *harness) endTxn(group string, pid int64, epoch int16, commit bool) {
	p := PartitionFor(group, testPartitions)
	h.log.marker(p, pid, epoch, commit)
	h.c.CompleteTxn(p, pid, commit)
}

// fetchOne is FetchOffsets of one partition.
func (h *harness) fetchOne(group string, part TopicPartition, requireStable bool) CommittedOffset {
	h.t.Helper()
	got, err := h.c.FetchOffsets(group, []TopicPartition{part}, requireStable)
	if err != nil {
		h.t.Fatal(err)
	}
	return got[0]
}

// wantStable checks a requireStable fetch of part: unstable, or the
// committed offset want.
func (h *harness) wantStable(group string, part TopicPartition, unstable bool, want int64) {
	h.t.Helper()
	got := h.fetchOne(group, part, true)
	switch {
	case unstable && (got.Err != ErrUnstableOffsetCommit || got.Offset != -1 || got.LeaderEpoch != -1):
		h.t.Fatalf("stable fetch of %v: %+v, want -1 with UNSTABLE_OFFSET_COMMIT", part, got)
	case !unstable && (got.Err != nil || got.Offset != want):
		h.t.Fatalf("stable fetch of %v: offset %d err %v, want %d and no error", part, got.Offset, got.Err, want)
	}
}

// pendingOf is the group's pending offsets: producer -> partition ->
// offset (nil: no group).
func (h *harness) pendingOf(id string) map[int64]map[TopicPartition]int64 {
	h.t.Helper()
	var out map[int64]map[TopicPartition]int64
	h.peek(id, func(g *group) {
		if g == nil {
			return
		}
		out = make(map[int64]map[TopicPartition]int64)
		for pid, pending := range g.mu.txnOffsets {
			out[pid] = make(map[TopicPartition]int64)
			for tp, o := range pending {
				out[pid][tp] = o.offset
			}
		}
	})
	return out
}

// unloadedCoordinator is a second coordinator over h's log with nothing
// loaded.
func (h *harness) unloadedCoordinator() *harness {
	h2 := &harness{t: h.t, clock: clock.NewFake(h.clock.Now()), log: h.log, cfg: h.cfg, ctx: h.ctx}
	h2.cfg.Clock = h2.clock
	h2.c = New(h2.cfg, h.log)
	h.t.Cleanup(h2.c.Close)
	return h2
}

// Reference: KIP-98. Offsets committed in a transaction are written at
// once, as transactional records of the producer, but are not committed
// until the commit marker: before it, fetches answer the previous
// offset; after it, the transaction's.
func TestTxnOffsetsVisibleOnlyAfterCommitMarker(t *testing.T) {
	h := newHarness(t)
	h.simpleCommit("g", oc("t", 0, 1))
	h.txnCommit(txnReq("g", 7, 3, oc("t", 0, 5), oc("t", 1, 6)))

	if got := h.committed("g", tp("t", 0)); got != 1 {
		t.Fatalf("t-0 answers %d before the marker, want the committed 1", got)
	}
	if got := h.committed("g", tp("t", 1)); got != -1 {
		t.Fatalf("t-1 answers %d before the marker, want none", got)
	}
	if all, _ := h.c.FetchOffsets("g", nil, false); len(all) != 1 || all[0].Offset != 1 {
		t.Fatalf("all offsets before the marker: %+v, want only the committed t-0", all)
	}
	var txnRecords int
	for _, r := range h.log.records(PartitionFor("g", testPartitions)) {
		if r.Transactional {
			txnRecords++
			if r.ProducerID != 7 {
				t.Fatalf("transactional record of producer %d, want 7", r.ProducerID)
			}
		}
	}
	if txnRecords != 2 {
		t.Fatalf("%d transactional records written, want 2", txnRecords)
	}

	h.endTxn("g", 7, 3, true)
	if h.committed("g", tp("t", 0)) != 5 || h.committed("g", tp("t", 1)) != 6 {
		t.Fatal("the commit marker did not make the transaction's offsets visible")
	}
	h.wantStable("g", tp("t", 0), false, 5)
	if p := h.pendingOf("g"); len(p) != 0 {
		t.Fatalf("still pending after the marker: %v", p)
	}
	if h2 := h.reload(); h2.committed("g", tp("t", 0)) != 5 || h2.committed("g", tp("t", 1)) != 6 {
		t.Fatal("a reload answers differently")
	}
}

// An abort marker drops the transaction's offsets: the committed ones
// stay, and a simple consumer's group that held nothing else is gone.
func TestTxnAbortDropsPendingOffsets(t *testing.T) {
	h := newHarness(t)
	h.simpleCommit("g", oc("t", 0, 1))
	h.txnCommit(txnReq("g", 7, 0, oc("t", 0, 5)))
	h.txnCommit(txnReq("only-txn", 7, 0, oc("t", 0, 9)))
	h.wantState("only-txn", "Empty") // known by its pending offsets alone

	h.endTxn("g", 7, 0, false)
	h.endTxn("only-txn", 7, 0, false)
	h.wantStable("g", tp("t", 0), false, 1)
	if p := h.pendingOf("g"); len(p) != 0 {
		t.Fatalf("still pending after the abort: %v", p)
	}
	h.wantState("only-txn", "Dead")
	h2 := h.reload()
	h2.wantStable("g", tp("t", 0), false, 1)
	h2.wantState("only-txn", "Dead")
}

// Reference: KIP-447, GroupMetadataManager.getOffsets. requireStable
// answers UNSTABLE_OFFSET_COMMIT for exactly the partitions with a
// transactional commit pending (or being written), whichever producer's;
// the others answer their committed offset.
func TestRequireStableOnlyForPendingPartitions(t *testing.T) {
	h := newHarness(t)
	h.simpleCommit("g", oc("t", 0, 1), oc("t", 1, 2), oc("t", 2, 3))
	h.txnCommit(txnReq("g", 7, 0, oc("t", 0, 5)))
	h.txnCommit(txnReq("g", 8, 0, oc("t", 3, 6)))

	h.wantStable("g", tp("t", 0), true, 0)
	h.wantStable("g", tp("t", 1), false, 2)
	h.wantStable("g", tp("t", 3), true, 0)
	h.wantStable("g", tp("u", 0), false, -1)
	// Without requireStable, the committed offsets as before.
	if got := h.fetchOne("g", tp("t", 0), false); got.Err != nil || got.Offset != 1 {
		t.Fatalf("plain fetch of t-0: %+v", got)
	}
	// All partitions: those with a committed offset, t-0 unstable.
	all, err := h.c.FetchOffsets("g", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"t-0:-1:UNSTABLE_OFFSET_COMMIT", "t-1:2:<nil>", "t-2:3:<nil>"}
	if len(all) != len(want) {
		t.Fatalf("all offsets: %+v", all)
	}
	for i, o := range all {
		got := fmt.Sprintf("%s-%d:%d:%v", o.Topic, o.Partition, o.Offset, o.Err)
		if o.Err != nil {
			got = fmt.Sprintf("%s-%d:%d:%s", o.Topic, o.Partition, o.Offset, o.Err.(*kerr.Error).Message)
		}
		if got != want[i] {
			t.Fatalf("all offsets[%d] = %s, want %s", i, got, want[i])
		}
	}

	// A transactional commit being written is already unstable.
	release := h.log.hold()
	defer release()
	c := start(t, func() error {
		_, errs := h.c.CommitTxnOffsets(h.ctx, txnReq("g", 9, 0, oc("t", 1, 7)))
		return errs[0]
	})
	h.eventually(func() error {
		if h.log.waitingAppends() != 1 {
			return errors.New("txn commit not at the log yet")
		}
		return nil
	})
	h.wantStable("g", tp("t", 1), true, 0)
	release()
	wantErr(t, "txn commit", c.result(), nil)
	h.wantStable("g", tp("t", 1), true, 0)
	h.endTxn("g", 9, 0, false)
	h.wantStable("g", tp("t", 1), false, 2)
}

// Reference: GroupMetadata.completePendingTxnOffsetCommit and
// OffsetMetadataManager.replayEndTransactionMarker. When a transaction
// commits, its offset replaces the committed one only if its record is
// later in the log; memory and a reload of the log agree, and a reloaded
// group orders new appends after everything it replayed.
func TestTxnCommitKeepsWhicheverIsLaterInLog(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(h *harness)
		want  int64
	}{
		{"txn commit, plain commit, marker", func(h *harness) {
			h.txnCommit(txnReq("g", 7, 0, oc("t", 0, 10)))
			h.simpleCommit("g", oc("t", 0, 20))
		}, 20},
		{"plain commit, txn commit, marker", func(h *harness) {
			h.simpleCommit("g", oc("t", 0, 20))
			h.txnCommit(txnReq("g", 7, 0, oc("t", 0, 10)))
		}, 10},
		{"txn commit, plain commit, txn commit again, marker", func(h *harness) {
			h.txnCommit(txnReq("g", 7, 0, oc("t", 0, 10)))
			h.simpleCommit("g", oc("t", 0, 20))
			h.txnCommit(txnReq("g", 7, 0, oc("t", 0, 30)))
		}, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.simpleCommit("g", oc("t", 0, 1))
			tc.write(h)
			h.endTxn("g", 7, 0, true)
			if got := h.committed("g", tp("t", 0)); got != tc.want {
				t.Fatalf("in memory: %d, want %d", got, tc.want)
			}
			h2 := h.reload()
			if got := h2.committed("g", tp("t", 0)); got != tc.want {
				t.Fatalf("after reload: %d, want %d", got, tc.want)
			}
			// The reloaded group's own appends are later than anything
			// it replayed: a transaction committed now wins.
			h2.txnCommit(txnReq("g", 8, 0, oc("t", 0, 40)))
			h2.endTxn("g", 8, 0, true)
			if got := h2.committed("g", tp("t", 0)); got != 40 {
				t.Fatalf("a transaction committed after the reload: %d, want 40", got)
			}
			// And a plain commit after a txn commit still wins.
			h2.txnCommit(txnReq("g", 8, 0, oc("t", 0, 50)))
			h2.simpleCommit("g", oc("t", 0, 60))
			h2.endTxn("g", 8, 0, true)
			if got := h2.committed("g", tp("t", 0)); got != 60 {
				t.Fatalf("plain commit after the reloaded group's txn commit: %d, want 60", got)
			}
			if got := h2.reload().committed("g", tp("t", 0)); got != 60 {
				t.Fatalf("second reload: %d, want 60", got)
			}
		})
	}
}

// Offsets still pending at the end of the log load as pending (a group
// known only by them exists, Empty), and the marker that comes later
// through CompleteTxn completes them.
func TestReplayLeavesOpenTransactionsPending(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			h := newHarness(t)
			h.simpleCommit("g", oc("t", 0, 1))
			h.txnCommit(txnReq("g", 7, 0, oc("t", 0, 5)))
			h.txnCommit(txnReq("new", 7, 0, oc("t", 0, 9)))

			h2 := h.reload()
			h2.wantState("new", "Empty")
			h2.wantStable("g", tp("t", 0), true, 0)
			h2.wantStable("new", tp("t", 0), true, 0)
			if got := h2.committed("g", tp("t", 0)); got != 1 {
				t.Fatalf("g's t-0 answers %d while pending, want 1", got)
			}
			// Retention does not drop the group known only by pending
			// offsets.
			h2.clock.Advance(2 * h2.cfg.OffsetsRetention)
			h2.wantState("new", "Empty")

			// The transaction's marker on each partition it touched.
			h2.endTxn("g", 7, 0, commit)
			if PartitionFor("new", testPartitions) != PartitionFor("g", testPartitions) {
				h2.endTxn("new", 7, 0, commit)
			}
			wantG, wantNew := int64(1), int64(-1)
			if commit {
				wantG, wantNew = 5, 9
			}
			h2.wantStable("g", tp("t", 0), false, wantG)
			h2.wantStable("new", tp("t", 0), false, wantNew)
			if !commit {
				h2.wantState("new", "Dead")
			}
			h3 := h2.reload()
			h3.wantStable("g", tp("t", 0), false, wantG)
			h3.wantStable("new", tp("t", 0), false, wantNew)
		})
	}
}

// Reference: Kafka's GroupMetadataManager.loadGroupsAndOffsets and
// OffsetMetadataManager.replay. Replay rules, driven record by record: a
// tombstone in a producer's transactional batch drops that producer's
// pending offset only; a plain tombstone drops the committed offset and
// every producer's pending one; a marker ends only its producer's.
func TestReplayTransactionalRecords(t *testing.T) {
	var recs []Record
	add := func(r Record) {
		r.Offset = int64(len(recs))
		recs = append(recs, r)
	}
	plain := func(part int32, off int64) {
		add(offsetCommitRecord("g", oc("t", part, off), t0, time.Time{}))
	}
	txn := func(pid int64, part int32, off int64) {
		r := offsetCommitRecord("g", oc("t", part, off), t0, time.Time{})
		r.Transactional, r.ProducerID = true, pid
		add(r)
	}
	txnTombstone := func(pid int64, part int32) {
		r := offsetTombstone("g", tp("t", part))
		r.Transactional, r.ProducerID = true, pid
		add(r)
	}
	marker := func(pid int64, commit bool) { add(Record{Control: true, ProducerID: pid, Commit: commit}) }

	plain(0, 1)
	txn(1, 0, 10) // producer 1: t-0, t-1, t-2
	txn(1, 1, 11)
	txn(1, 2, 12)
	txn(2, 1, 21)                         // producer 2: t-1, t-3
	txn(2, 3, 23)                         //
	txnTombstone(1, 2)                    // drops producer 1's t-2
	add(offsetTombstone("g", tp("t", 1))) // drops t-1 of both producers
	txn(3, 4, 34)                         // producer 3: t-4, aborted
	marker(3, false)                      //
	marker(1, true)                       // t-0 = 10 (later than the plain 1); t-1, t-2 gone
	txn(2, 0, 20)                         // producer 2's t-0, still open at the end

	c := New(Config{OffsetsPartitions: 1, Clock: clock.NewFake(t0)}, newMemLog())
	defer c.Close()
	err := c.Load(0, func(fn func(Record) error) error {
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.FetchOffsets("g", []TopicPartition{tp("t", 0), tp("t", 1), tp("t", 2), tp("t", 3), tp("t", 4)}, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		off      int64
		unstable bool
	}{{-1, true}, {-1, false}, {-1, false}, {-1, true}, {-1, false}} {
		if got[i].Offset != want.off || (got[i].Err == ErrUnstableOffsetCommit) != want.unstable {
			t.Fatalf("stable fetch of t-%d: %+v, want offset %d unstable %v", i, got[i], want.off, want.unstable)
		}
	}
	if got := fetchCommitted(t, c, "g", tp("t", 0)); got != 10 {
		t.Fatalf("t-0 committed %d, want producer 1's 10", got)
	}
	// Producer 2 commits: t-3 = 23 and t-0 = 20 (later than 10).
	c.CompleteTxn(0, 2, true)
	for part, want := range map[int32]int64{0: 20, 1: -1, 2: -1, 3: 23, 4: -1} {
		if got := fetchCommitted(t, c, "g", tp("t", part)); got != want {
			t.Fatalf("after producer 2's commit, t-%d = %d, want %d", part, got, want)
		}
	}
}

// partitionMate is a group id other than id on id's partition.
func partitionMate(id string) string {
	for i := 0; ; i++ {
		if other := fmt.Sprintf("mate-%d", i); PartitionFor(other, testPartitions) == PartitionFor(id, testPartitions) {
			return other
		}
	}
}

func fetchCommitted(t *testing.T, c *Coordinator, group string, part TopicPartition) int64 {
	t.Helper()
	got, err := c.FetchOffsets(group, []TopicPartition{part}, false)
	if err != nil {
		t.Fatal(err)
	}
	return got[0].Offset
}

// A marker reported while the partition is loading is not lost: it is
// applied after the replay, whether or not the replay read it too, before
// any request sees the groups.
func TestCompleteTxnWhileLoading(t *testing.T) {
	for _, tc := range []struct {
		name           string
		markerInReplay bool
		commit         bool
		wantG          int64
		wantNewState   string // the mate's
	}{
		{"commit marker past the replay's end", false, true, 5, "Empty"},
		{"commit marker the replay read too", true, true, 5, "Empty"},
		{"abort marker past the replay's end", false, false, 1, "Dead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// "g" and its mate share a partition: one marker ends the
			// producer's offsets in both. The mate is known only by
			// them.
			h := newHarness(t)
			mate := partitionMate("g")
			p := PartitionFor("g", testPartitions)
			h.simpleCommit("g", oc("t", 0, 1))
			h.txnCommit(txnReq("g", 7, 0, oc("t", 0, 5)))
			h.txnCommit(txnReq(mate, 7, 0, oc("t", 0, 9)))

			h2 := h.unloadedCoordinator()
			before := h.log.reader(p)
			proceed := make(chan struct{})
			loaded := start(t, func() error {
				return h2.c.Load(p, func(fn func(Record) error) error {
					<-proceed
					if tc.markerInReplay {
						return h.log.reader(p)(fn)
					}
					return before(fn)
				})
			})
			h2.eventually(func() error {
				if err := h2.c.status("g"); err != ErrCoordinatorLoadInProgress {
					return fmt.Errorf("status %v, want loading", err)
				}
				return nil
			})
			h.log.marker(p, 7, 0, tc.commit)
			h2.c.CompleteTxn(p, 7, tc.commit)
			close(proceed)
			if err := loaded.result(); err != nil {
				t.Fatal(err)
			}
			h2.wantStable("g", tp("t", 0), false, tc.wantG)
			h2.wantState(mate, tc.wantNewState)
			if p := h2.pendingOf("g"); len(p) != 0 {
				t.Fatalf("still pending: %v", p)
			}
		})
	}
}

// A marker that lands while its producer's commit to the group has been
// written but not yet answered applies to that commit as soon as it is:
// the batch is before the marker in the log, and replay agrees.
func TestMarkerWhileTxnCommitIsAnswered(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			h := newHarness(t)
			h.simpleCommit("g", oc("t", 0, 1))
			release := h.log.holdAnswers()
			defer release()
			c := start(t, func() error {
				_, errs := h.c.CommitTxnOffsets(h.ctx, txnReq("g", 7, 0, oc("t", 0, 5)))
				return errs[0]
			})
			h.eventually(func() error {
				if h.log.landedAppends() != 1 {
					return errors.New("txn commit not landed yet")
				}
				return nil
			})
			h.endTxn("g", 7, 1, commit) // the coordinator ends it: epoch bumped
			release()
			wantErr(t, "txn commit", c.result(), nil)
			want := int64(1)
			if commit {
				want = 5
			}
			h.wantStable("g", tp("t", 0), false, want)
			h.reload().wantStable("g", tp("t", 0), false, want)
		})
	}
}

// Reference: KIP-447 and Kafka's validateOffsetCommit (isTransactional).
// Membership is checked as for OffsetCommit when the request carries it,
// not at all when it does not; awaiting assignments does not refuse a
// transactional commit.
func TestTxnCommitChecks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(h *harness, ms []joined) []joined
		req    func(ms []joined) TxnCommitRequest
		want   error
	}{
		{"member of the current generation", nil, func(ms []joined) TxnCommitRequest {
			return memberTxnReq(ms[1])
		}, nil},
		{"stale generation", nil, func(ms []joined) TxnCommitRequest {
			r := memberTxnReq(ms[1])
			r.Generation--
			return r
		}, ErrIllegalGeneration},
		{"unknown member", nil, func(ms []joined) TxnCommitRequest {
			r := memberTxnReq(ms[1])
			r.MemberID = "stranger"
			return r
		}, ErrUnknownMemberID},
		{"fenced static instance", nil, func(ms []joined) TxnCommitRequest {
			r := memberTxnReq(ms[0])
			r.MemberID = "i1-old-incarnation"
			return r
		}, ErrFencedInstanceID},
		{"unknown static instance", nil, func(ms []joined) TxnCommitRequest {
			r := memberTxnReq(ms[0])
			r.InstanceID = ptr("nobody")
			return r
		}, ErrUnknownMemberID},
		{"member id with generation -1", nil, func(ms []joined) TxnCommitRequest {
			r := memberTxnReq(ms[1])
			r.Generation = -1
			return r
		}, ErrIllegalGeneration},
		{"no membership while the group has members (v0-2)", nil, func(ms []joined) TxnCommitRequest {
			return txnReq("g", 7, 0, oc("t", 0, 7))
		}, nil},
		{"awaiting sync", func(h *harness, ms []joined) []joined {
			return h.rebalance(ms)
		}, func(ms []joined) TxnCommitRequest { return memberTxnReq(ms[1]) }, nil},
		{"member of a group this coordinator does not know", nil, func(ms []joined) TxnCommitRequest {
			r := memberTxnReq(ms[1])
			r.Group = "other"
			return r
		}, ErrUnknownMemberID},
		{"empty group id", nil, func(ms []joined) TxnCommitRequest {
			return txnReq("", 7, 0, oc("t", 0, 7))
		}, ErrInvalidGroupID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ms := h.formGroup(staticReq("g", "i1"), memberReq("g", "b"))
			if tc.before != nil {
				ms = tc.before(h, ms)
			}
			req := tc.req(ms)
			err, partErrs := h.c.CommitTxnOffsets(h.ctx, req)
			wantErr(t, "txn commit", err, tc.want)
			if tc.want != nil {
				if partErrs != nil {
					t.Fatalf("partition errors %v beside a group error", partErrs)
				}
				if p := h.pendingOf("g"); len(p) != 0 {
					t.Fatalf("a refused commit left pending offsets %v", p)
				}
				if req.Group == "other" {
					h.wantState("other", "Dead") // created for the check, dropped again
				}
				return
			}
			if p := h.pendingOf(req.Group); p[7][tp("t", 0)] != 7 {
				t.Fatalf("pending %v, want producer 7's t-0 = 7", p)
			}
		})
	}
}

// memberTxnReq is m's TxnOffsetCommit v3+ of t-0 = 7 as producer 7.
func memberTxnReq(m joined) TxnCommitRequest {
	return TxnCommitRequest{Group: m.req.Group, ProducerID: 7, MemberID: m.MemberID, InstanceID: m.req.InstanceID,
		Generation: m.Generation, Offsets: []OffsetCommit{oc("t", 0, 7)}}
}

// Kafka's doTxnCommitOffsets does not restart the member's session,
// unlike an OffsetCommit's.
func TestTxnCommitDoesNotRestartSession(t *testing.T) {
	for _, txn := range []bool{true, false} {
		t.Run(fmt.Sprintf("txn=%v", txn), func(t *testing.T) {
			h := newHarness(t)
			m := h.formGroup(memberReq("g", "a"))[0] // 10s session
			h.clock.Advance(6 * time.Second)
			if txn {
				h.txnCommit(memberTxnReq(m))
			} else {
				err, errs := h.c.CommitOffsets(h.ctx, m.commitReq(oc("t", 0, 7)))
				if err != nil || errs[0] != nil {
					t.Fatal(err, errs)
				}
			}
			h.clock.Advance(5 * time.Second)
			members := h.memberIDs("g")
			if txn && len(members) != 0 {
				t.Fatalf("members %v: the txn commit kept the session alive", members)
			}
			if !txn && len(members) != 1 {
				t.Fatalf("members %v: the plain commit did not restart the session", members)
			}
		})
	}
}

// The log's epoch check reaches the producer unchanged (it must learn it
// is fenced), and a refused write leaves nothing pending.
func TestTxnCommitLogErrors(t *testing.T) {
	h := newHarness(t)
	h.simpleCommit("g", oc("t", 1, 1))
	h.txnCommit(txnReq("g", 7, 0, oc("t", 0, 5)))
	h.endTxn("g", 7, 1, false) // the coordinator aborts it and bumps the epoch

	for _, tc := range []struct {
		name string
		fail error // set on the log; nil: the epoch check refuses
		want error
	}{
		{"stale epoch", nil, kerr.InvalidProducerEpoch},
		{"producer fenced", kerr.ProducerFenced, kerr.ProducerFenced},
		{"not enough replicas", kerr.NotEnoughReplicas, ErrCoordinatorNotAvailable},
	} {
		h.log.setFail(tc.fail)
		err, errs := h.c.CommitTxnOffsets(h.ctx, txnReq("g", 7, 0, oc("t", 0, 6), oc("t", 1, 6)))
		h.log.setFail(nil)
		if err != nil || len(errs) != 2 || errs[0] != tc.want || errs[1] != tc.want {
			t.Fatalf("%s: %v %v, want %v for each partition", tc.name, err, errs, tc.want)
		}
		if p := h.pendingOf("g"); len(p) != 0 {
			t.Fatalf("%s: pending %v after a failed write", tc.name, p)
		}
		h.wantStable("g", tp("t", 0), false, -1)
		h.wantStable("g", tp("t", 1), false, 1)
	}
	// The producer's new epoch is accepted.
	h.txnCommit(txnReq("g", 7, 1, oc("t", 0, 6)))
	h.wantStable("g", tp("t", 0), true, 0)
}

// Pending offsets do not expire and keep their group, and a committed
// offset of a partition with a pending one waits for the transaction.
func TestPendingOffsetsOutliveRetention(t *testing.T) {
	h := newHarness(t)
	h.simpleCommit("s", oc("t", 0, 1))
	h.txnCommit(txnReq("s", 7, 0, oc("t", 0, 5)))
	h.txnCommit(txnReq("only-pending", 8, 0, oc("t", 0, 9)))
	h.clock.Advance(2 * h.cfg.OffsetsRetention)
	h.wantState("only-pending", "Empty")
	if got := h.committed("s", tp("t", 0)); got != 1 {
		t.Fatalf("s's t-0 = %d: expired under a pending transaction", got)
	}
	if p := h.pendingOf("only-pending"); p[8][tp("t", 0)] != 9 {
		t.Fatalf("pending %v", p)
	}

	h.endTxn("s", 7, 0, false)
	h.endTxn("only-pending", 8, 0, true)
	if got := h.committed("only-pending", tp("t", 0)); got != 9 {
		t.Fatalf("only-pending's t-0 = %d, want the committed 9", got)
	}
	// Once the transactions end, retention applies as usual, counting
	// from the commit (a transactional one's: its TxnOffsetCommit, as
	// Kafka's commit timestamp), and both groups go.
	h.clock.Advance(h.cfg.RetentionCheckInterval)
	if got := h.committed("s", tp("t", 0)); got != -1 {
		t.Fatalf("s's t-0 = %d after the abort, want expired", got)
	}
	h.wantState("s", "Dead")
	h.wantState("only-pending", "Dead")
}

// Two producers pending on one group's different partitions are completed
// each by its own marker.
func TestTwoProducersPendingOnOneGroup(t *testing.T) {
	h := newHarness(t)
	h.txnCommit(txnReq("g", 1, 0, oc("t", 0, 10)))
	h.txnCommit(txnReq("g", 2, 0, oc("t", 1, 20)))

	h.endTxn("g", 1, 0, true)
	h.wantStable("g", tp("t", 0), false, 10)
	h.wantStable("g", tp("t", 1), true, 0)
	if p := h.pendingOf("g"); len(p) != 1 || p[2][tp("t", 1)] != 20 {
		t.Fatalf("pending after producer 1's marker: %v", p)
	}
	h2 := h.reload()
	h2.wantStable("g", tp("t", 0), false, 10)
	h2.wantStable("g", tp("t", 1), true, 0)

	h.endTxn("g", 2, 0, false)
	h.wantStable("g", tp("t", 1), false, -1)
	h2.c.CompleteTxn(PartitionFor("g", testPartitions), 2, false)
	h2.wantStable("g", tp("t", 1), false, -1)
	h2.wantStable("g", tp("t", 0), false, 10)
}

// Reference: OffsetMetadataManager.deleteAllOffsets. DeleteGroups of an
// Empty group with pending offsets deletes it, tombstoning the pending
// partitions too, so the transaction's commit brings nothing back, in
// memory or after a reload.
func TestDeleteGroupWithPendingOffsets(t *testing.T) {
	h := newHarness(t)
	h.simpleCommit("s", oc("t", 0, 1))
	h.txnCommit(txnReq("s", 7, 0, oc("t", 0, 5), oc("t", 1, 6)))
	wantErr(t, "delete", h.c.DeleteGroups(h.ctx, []string{"s"})[0], nil)
	var tombstoned []TopicPartition
	for _, d := range h.groupRecords("s") {
		if d.tombstone {
			tombstoned = append(tombstoned, d.tp)
		}
	}
	if len(tombstoned) != 2 || tombstoned[0] != tp("t", 0) || tombstoned[1] != tp("t", 1) {
		t.Fatalf("tombstones %v, want t-0 and t-1", tombstoned)
	}
	h.endTxn("s", 7, 0, true)
	h.wantState("s", "Dead")
	h.wantStable("s", tp("t", 1), false, -1)
	h2 := h.reload()
	h2.wantState("s", "Dead")
	h2.wantStable("s", tp("t", 0), false, -1)
}

// Reference: OffsetMetadataManager.deleteOffsets. OffsetDelete of a
// partition with only a pending offset tombstones it: the pending offset
// is gone, and the transaction's commit does not bring it back.
func TestDeleteOffsetsWithPendingOffsets(t *testing.T) {
	h := newHarness(t)
	h.simpleCommit("s", oc("t", 1, 1))
	h.txnCommit(txnReq("s", 7, 0, oc("t", 0, 5), oc("t", 1, 6)))
	err, errs := h.c.DeleteOffsets(h.ctx, "s", []TopicPartition{tp("t", 0)})
	if err != nil || errs[0] != nil {
		t.Fatalf("delete: %v %v", err, errs)
	}
	h.wantStable("s", tp("t", 0), false, -1)
	h.wantStable("s", tp("t", 1), true, 0)
	h.endTxn("s", 7, 0, true)
	for _, hh := range []*harness{h, h.reload()} {
		hh.wantStable("s", tp("t", 0), false, -1)
		hh.wantStable("s", tp("t", 1), false, 6)
	}
	// Deleting the last offsets, committed or pending, removes the group.
	h.txnCommit(txnReq("s", 7, 0, oc("t", 2, 8)))
	err, errs = h.c.DeleteOffsets(h.ctx, "s", []TopicPartition{tp("t", 1), tp("t", 2)})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("delete: %v %v", err, errs)
	}
	h.wantState("s", "Dead")
	h.endTxn("s", 7, 0, true)
	h.wantState("s", "Dead")
	h.reload().wantState("s", "Dead")
}

// A group known only by pending offsets holds something: a failed
// request, or another producer's abort, does not drop it as unused.
func TestPendingOnlyGroupIsKept(t *testing.T) {
	h := newHarness(t)
	h.txnCommit(txnReq("s", 1, 0, oc("t", 0, 5)))
	h.log.setFail(kerr.NotEnoughReplicas)
	if err, errs := h.c.CommitOffsets(h.ctx, CommitRequest{Group: "s", Generation: -1, Offsets: []OffsetCommit{oc("t", 1, 1)}}); err != nil || errs[0] != ErrCoordinatorNotAvailable {
		t.Fatalf("failed plain commit: %v %v", err, errs)
	}
	if err, errs := h.c.CommitTxnOffsets(h.ctx, txnReq("s", 2, 0, oc("t", 1, 1))); err != nil || errs[0] != ErrCoordinatorNotAvailable {
		t.Fatalf("failed txn commit: %v %v", err, errs)
	}
	h.log.setFail(nil)
	h.endTxn("s", 2, 0, false)
	if got := h.list(nil); len(got) != 1 || got[0].Group != "s" || got[0].State != "Empty" {
		t.Fatalf("groups %+v, want s, Empty", got)
	}
	if p := h.pendingOf("s"); len(p) != 1 || p[1][tp("t", 0)] != 5 {
		t.Fatalf("pending %v, want producer 1's t-0 = 5", p)
	}
}
