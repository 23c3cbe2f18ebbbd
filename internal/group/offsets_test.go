package group

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func tp(topic string, p int32) TopicPartition { return TopicPartition{topic, p} }

func oc(topic string, p int32, off int64) OffsetCommit {
	return OffsetCommit{TopicPartition: tp(topic, p), Offset: off, LeaderEpoch: -1}
}

// committed returns the group's committed offset of one partition (-1:
// none).
func (h *harness) committed(group string, part TopicPartition) int64 {
	h.t.Helper()
	got, err := h.c.FetchOffsets(group, []TopicPartition{part}, false)
	if err != nil {
		h.t.Fatal(err)
	}
	return got[0].Offset
}

// Reference: Kafka's validateOffsetCommit and doCommitOffsets.
func TestCommitChecks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(h *harness, ms []joined) []joined
		req    func(ms []joined) CommitRequest
		want   error
	}{
		{"member of the current generation", nil, func(ms []joined) CommitRequest {
			return ms[1].commitReq(oc("t", 0, 7))
		}, nil},
		{"older generation", nil, func(ms []joined) CommitRequest {
			r := ms[1].commitReq(oc("t", 0, 7))
			r.Generation = 1
			return r
		}, ErrIllegalGeneration},
		{"unknown member", nil, func(ms []joined) CommitRequest {
			r := ms[1].commitReq(oc("t", 0, 7))
			r.MemberID = "stranger"
			return r
		}, ErrUnknownMemberID},
		{"member with generation -1", nil, func(ms []joined) CommitRequest {
			r := ms[1].commitReq(oc("t", 0, 7))
			r.Generation = -1
			return r
		}, ErrIllegalGeneration},
		{"simple commit while the group has members", nil, func(ms []joined) CommitRequest {
			return CommitRequest{Group: "g", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, 7)}}
		}, ErrUnknownMemberID},
		{"simple commit to an empty group", func(h *harness, ms []joined) []joined {
			h.leaveAll(ms)
			return ms
		}, func(ms []joined) CommitRequest {
			return CommitRequest{Group: "g", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, 7)}}
		}, nil},
		{"member's commit to an empty group", func(h *harness, ms []joined) []joined {
			h.leaveAll(ms)
			return ms
		}, func(ms []joined) CommitRequest { return ms[1].commitReq(oc("t", 0, 7)) }, ErrUnknownMemberID},
		{"awaiting sync", func(h *harness, ms []joined) []joined {
			return h.rebalance(ms)
		}, func(ms []joined) CommitRequest { return ms[1].commitReq(oc("t", 0, 7)) }, ErrRebalanceInProgress},
		{"preparing rebalance, generation that is ending", func(h *harness, ms []joined) []joined {
			h.startJoin(memberReq("g", "late"))
			h.waitAwaitingJoin("g", 1)
			return ms
		}, func(ms []joined) CommitRequest { return ms[1].commitReq(oc("t", 0, 7)) }, nil},
		{"generation for an unknown group", nil, func(ms []joined) CommitRequest {
			return CommitRequest{Group: "other", MemberID: "m", Generation: 3, Offsets: []OffsetCommit{oc("t", 0, 7)}}
		}, ErrIllegalGeneration},
		{"partition not loaded", func(h *harness, ms []joined) []joined {
			h.c.Unload(PartitionFor("g", testPartitions))
			return ms
		}, func(ms []joined) CommitRequest { return ms[1].commitReq(oc("t", 0, 7)) }, ErrNotCoordinator},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ms := h.formGroup(memberReq("g", "a"), memberReq("g", "b"))
			if tc.before != nil {
				ms = tc.before(h, ms)
			}
			appends := h.log.appendCount()
			req := tc.req(ms)
			err, partErrs := h.c.CommitOffsets(h.ctx, req)
			wantErr(t, "commit", err, tc.want)
			if tc.want != nil {
				if partErrs != nil {
					t.Fatalf("partition errors %v with a group error", partErrs)
				}
				if h.log.appendCount() != appends {
					t.Fatal("a refused commit was written")
				}
				if tc.want != ErrNotCoordinator {
					if got := h.committed(req.Group, tp("t", 0)); got != -1 {
						t.Fatalf("a refused commit stored offset %d", got)
					}
				}
				return
			}
			if len(partErrs) != 1 || partErrs[0] != nil {
				t.Fatalf("partition errors %v", partErrs)
			}
			if got := h.committed(req.Group, tp("t", 0)); got != 7 {
				t.Fatalf("committed %d, want 7", got)
			}
		})
	}
}

// A simple consumer (no group membership) commits to a group the
// coordinator does not know yet, creating it; it is Empty, with no
// protocol type, and lists.
func TestSimpleConsumerCommit(t *testing.T) {
	h := newHarness(t)
	err, partErrs := h.c.CommitOffsets(h.ctx, CommitRequest{Group: "simple", Generation: -1,
		Offsets: []OffsetCommit{oc("t", 0, 5), oc("t", 1, 9)}})
	if err != nil || partErrs[0] != nil || partErrs[1] != nil {
		t.Fatalf("commit: %v %v", err, partErrs)
	}
	if got := h.list(nil); len(got) != 1 || got[0] != (GroupListing{Group: "simple", State: "Empty"}) {
		t.Fatalf("groups %+v", got)
	}
	// The empty group id is accepted for commits, as Kafka does.
	if err, _ := h.c.CommitOffsets(h.ctx, CommitRequest{Group: "", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, 1)}}); err != nil {
		t.Fatal(err)
	}
	if got := h.committed("", tp("t", 0)); got != 1 {
		t.Fatalf("\"\" group committed %d", got)
	}
}

// Metadata over MaxMetadataBytes fails that partition alone, which is not
// stored; the record of a stored one carries offset, epoch, metadata and
// the commit time.
func TestCommitMetadataTooLarge(t *testing.T) {
	h := newHarness(t)
	m := h.formGroup(memberReq("g", "a"))[0]
	h.clock.Advance(time.Second)
	ok, tooLarge := strings.Repeat("x", 64), strings.Repeat("x", 65)
	err, partErrs := h.c.CommitOffsets(h.ctx, m.commitReq(
		OffsetCommit{TopicPartition: tp("t", 0), Offset: 10, LeaderEpoch: 4, Metadata: &ok},
		OffsetCommit{TopicPartition: tp("t", 1), Offset: 11, LeaderEpoch: -1, Metadata: &tooLarge},
		OffsetCommit{TopicPartition: tp("u", 0), Offset: 12, LeaderEpoch: -1},
	))
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "t-0", partErrs[0], nil)
	wantErr(t, "t-1", partErrs[1], ErrOffsetMetadataTooLarge)
	wantErr(t, "u-0", partErrs[2], nil)
	got, _ := h.c.FetchOffsets("g", nil, false)
	if len(got) != 2 || got[0].TopicPartition != tp("t", 0) || got[1].TopicPartition != tp("u", 0) {
		t.Fatalf("committed %+v", got)
	}
	if got[0].Offset != 10 || got[0].LeaderEpoch != 4 || *got[0].Metadata != ok || got[1].Offset != 12 || *got[1].Metadata != "" || got[1].LeaderEpoch != -1 {
		t.Fatalf("committed %+v %+v", got[0], got[1])
	}
	var offsets []decoded
	for _, d := range h.groupRecords("g") {
		if d.kind == "offset" {
			offsets = append(offsets, d)
		}
	}
	if len(offsets) != 2 {
		t.Fatalf("%d offset records, want 2", len(offsets))
	}
	v := offsets[0].offset
	if v.Version != 3 || v.Offset != 10 || v.LeaderEpoch != 4 || v.Metadata != ok || v.CommitTimestamp != t0.Add(time.Second).UnixMilli() {
		t.Fatalf("offset record %+v", v)
	}

	// All too large: nothing is written at all.
	appends := h.log.appendCount()
	_, partErrs = h.c.CommitOffsets(h.ctx, m.commitReq(OffsetCommit{TopicPartition: tp("t", 1), Offset: 1, Metadata: &tooLarge}))
	wantErr(t, "only partition", partErrs[0], ErrOffsetMetadataTooLarge)
	if h.log.appendCount() != appends {
		t.Fatal("a commit of only oversized metadata was written")
	}
}

func TestFetchOffsets(t *testing.T) {
	h := newHarness(t)
	h.c.CommitOffsets(h.ctx, CommitRequest{Group: "g", Generation: -1, Offsets: []OffsetCommit{oc("u", 0, 3), oc("t", 1, 2), oc("t", 0, 1)}})
	all, err := h.c.FetchOffsets("g", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range all {
		got = append(got, fmt.Sprintf("%s-%d:%d", o.Topic, o.Partition, o.Offset))
	}
	if strings.Join(got, " ") != "t-0:1 t-1:2 u-0:3" {
		t.Fatalf("all offsets: %v", got)
	}
	some, _ := h.c.FetchOffsets("g", []TopicPartition{tp("t", 1), tp("v", 0)}, false)
	if some[0].Offset != 2 || some[1].Offset != -1 || some[1].LeaderEpoch != -1 || some[1].Metadata == nil || *some[1].Metadata != "" {
		t.Fatalf("some offsets: %+v", some)
	}
	unknown, err := h.c.FetchOffsets("nobody", []TopicPartition{tp("t", 0)}, false)
	if err != nil || len(unknown) != 1 || unknown[0].Offset != -1 {
		t.Fatalf("unknown group: %+v %v", unknown, err)
	}
	if none, err := h.c.FetchOffsets("nobody", nil, false); err != nil || len(none) != 0 {
		t.Fatalf("unknown group, all: %+v %v", none, err)
	}
}

// Reference: Kafka's GroupMetadataManager.storeOffsets error mapping. A
// failed write leaves the committed offsets (and the group list) as they
// were.
func TestCommitWriteFailureChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		appendErr error
		want      error
	}{
		{kerr.NotLeaderForPartition, ErrNotCoordinator},
		{kerr.KafkaStorageError, ErrNotCoordinator},
		{kerr.UnknownTopicOrPartition, ErrCoordinatorNotAvailable},
		{kerr.NotEnoughReplicas, ErrCoordinatorNotAvailable},
		{kerr.NotEnoughReplicasAfterAppend, ErrCoordinatorNotAvailable},
		{kerr.RequestTimedOut, ErrRequestTimedOut},
		{kerr.MessageTooLarge, ErrInvalidCommitOffsetSize},
		{kerr.RecordListTooLarge, ErrInvalidCommitOffsetSize},
		{errors.New("disk on fire"), ErrCoordinatorNotAvailable},
	} {
		t.Run(tc.appendErr.Error(), func(t *testing.T) {
			h := newHarness(t)
			m := h.formGroup(memberReq("g", "a"))[0]
			if err, _ := h.c.CommitOffsets(h.ctx, m.commitReq(oc("t", 0, 5))); err != nil {
				t.Fatal(err)
			}
			h.log.setFail(tc.appendErr)
			err, partErrs := h.c.CommitOffsets(h.ctx, m.commitReq(oc("t", 0, 6), oc("t", 1, 6)))
			if err != nil {
				t.Fatal(err)
			}
			wantErr(t, "t-0", partErrs[0], tc.want)
			wantErr(t, "t-1", partErrs[1], tc.want)
			if got := h.committed("g", tp("t", 0)); got != 5 {
				t.Fatalf("t-0 committed %d after a failed commit, want 5", got)
			}
			if got := h.committed("g", tp("t", 1)); got != -1 {
				t.Fatalf("t-1 committed %d after a failed commit, want none", got)
			}
			// A simple commit that would have created a group leaves none.
			_, partErrs = h.c.CommitOffsets(h.ctx, CommitRequest{Group: "fresh", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, 1)}})
			wantErr(t, "fresh group", partErrs[0], tc.want)
			if groups := h.list(nil); len(groups) != 1 {
				t.Fatalf("groups after failed commits: %+v", groups)
			}
		})
	}
}

// A commit whose context ends while it waits for its turn behind another
// write answers at once and changes nothing.
func TestCommitContextEndsWhileWaiting(t *testing.T) {
	h := newHarness(t)
	release := h.log.hold()
	defer release()
	first := start(t, func() error {
		err, _ := h.c.CommitOffsets(h.ctx, CommitRequest{Group: "g", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, 1)}})
		return err
	})
	h.eventually(func() error {
		if h.log.waitingAppends() != 1 {
			return errors.New("first commit not appending yet")
		}
		return nil
	})
	ctx, cancel := contextWithCancel()
	second := start(t, func() error {
		err, _ := h.c.CommitOffsets(ctx, CommitRequest{Group: "g", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, 2)}})
		return err
	})
	second.parked()
	cancel()
	if err := second.result(); err == nil {
		t.Fatal("commit with an ended context succeeded")
	}
	release()
	if err := first.result(); err != nil {
		t.Fatal(err)
	}
	if got := h.committed("g", tp("t", 0)); got != 1 {
		t.Fatalf("committed %d, want 1", got)
	}
}

// Reference: KIP-211. An Empty group's offsets expire OffsetsRetention
// after it became Empty, whenever they were committed; with no offsets
// left it is removed, its metadata tombstoned.
func TestEmptyGroupExpiry(t *testing.T) {
	h := newHarness(t)
	req := memberReq("g", "a")
	req.SessionTimeout = 10 * time.Minute
	m := h.formGroup(req)[0]
	h.c.CommitOffsets(h.ctx, m.commitReq(oc("t", 0, 5), oc("t", 1, 6)))
	// The member stays for 30 hours: a group with members keeps its
	// offsets however old they are.
	for range 30 * 12 {
		h.clock.Advance(5 * time.Minute)
		if err := m.heartbeat(h); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.committed("g", tp("t", 0)); got != 5 {
		t.Fatalf("a Stable group's offset expired: %d", got)
	}
	h.c.LeaveGroup(h.ctx, "g", []LeaveMember{{MemberID: m.MemberID}})
	h.wantState("g", "Empty")
	h.clock.Advance(24*time.Hour - 10*time.Minute)
	if got := h.committed("g", tp("t", 0)); got != 5 {
		t.Fatalf("expired %v after the group became empty, before the retention", 24*time.Hour-10*time.Minute)
	}
	h.wantState("g", "Empty")
	h.clock.Advance(10 * time.Minute) // the first check at or after 24h
	if got := h.committed("g", tp("t", 0)); got != -1 {
		t.Fatalf("offset %d survived retention", got)
	}
	if groups := h.list(nil); len(groups) != 0 {
		t.Fatalf("expired group still listed: %+v", groups)
	}
	recs := h.groupRecords("g")
	tail := recs[len(recs)-3:]
	if !tail[0].tombstone || tail[0].kind != "offset" || !tail[1].tombstone || tail[1].kind != "offset" ||
		!tail[2].tombstone || tail[2].kind != "group" {
		t.Fatalf("last records %+v", tail)
	}
}

// A group that never had members (simple consumers) expires each offset
// OffsetsRetention after its own commit, and is removed with the last.
func TestSimpleConsumerOffsetExpiry(t *testing.T) {
	h := newHarness(t)
	commit := func(o OffsetCommit) {
		if err, errs := h.c.CommitOffsets(h.ctx, CommitRequest{Group: "s", Generation: -1, Offsets: []OffsetCommit{o}}); err != nil || errs[0] != nil {
			t.Fatalf("commit: %v %v", err, errs)
		}
	}
	commit(oc("t", 0, 1))
	h.clock.Advance(12 * time.Hour)
	commit(oc("t", 1, 1))
	h.clock.Advance(12 * time.Hour) // t-0's retention has passed, t-1's has not
	if h.committed("s", tp("t", 0)) != -1 || h.committed("s", tp("t", 1)) != 1 {
		t.Fatal("wrong offsets expired at 24h")
	}
	h.wantState("s", "Empty")
	h.clock.Advance(12 * time.Hour)
	h.wantState("s", "Dead") // gone
	for _, d := range h.groupRecords("s") {
		if d.kind == "group" {
			t.Fatal("a group that never had metadata got a metadata tombstone")
		}
	}
}

// A Stable consumer group's offsets of topics no member subscribes to
// expire after their commit; subscribed topics' offsets do not.
func TestStableGroupUnsubscribedOffsetExpiry(t *testing.T) {
	h := newHarness(t)
	req := memberReq("g", "a", "t")
	req.SessionTimeout = 10 * time.Minute
	m := h.formGroup(req)[0]
	h.c.CommitOffsets(h.ctx, m.commitReq(oc("t", 0, 1), oc("old", 0, 1)))
	for i := 0; i < 24*60/5; i++ {
		h.clock.Advance(5 * time.Minute)
		if err := m.heartbeat(h); err != nil {
			t.Fatal(err)
		}
	}
	if h.committed("g", tp("t", 0)) != 1 || h.committed("g", tp("old", 0)) != -1 {
		t.Fatal("want t's offset kept and old's expired")
	}
	h.wantState("g", "Stable")
}

// A failed tombstone write removes nothing; the next check succeeds.
func TestExpiryWriteFailureRetries(t *testing.T) {
	h := newHarness(t)
	h.c.CommitOffsets(h.ctx, CommitRequest{Group: "s", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, 1)}})
	h.log.setFail(kerr.NotEnoughReplicas)
	h.clock.Advance(24 * time.Hour)
	if h.committed("s", tp("t", 0)) != 1 {
		t.Fatal("an offset was removed although its tombstone was not written")
	}
	h.log.setFail(nil)
	h.clock.Advance(10 * time.Minute)
	if h.committed("s", tp("t", 0)) != -1 {
		t.Fatal("the retry did not expire the offset")
	}
}

// A client that goes away while its commit is being written does not
// cancel the write: the record lands, and memory learns of it, so what
// OffsetFetch answers matches what a reload of the log would.
func TestCommitOutlivesItsRequest(t *testing.T) {
	h := newHarness(t)
	release := h.log.hold()
	ctx, cancel := context.WithCancel(h.ctx)
	done := start(t, func() error {
		err, partErrs := h.c.CommitOffsets(ctx, CommitRequest{Group: "g", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, 42)}})
		if err == nil {
			err = partErrs[0]
		}
		return err
	})
	h.eventually(func() error {
		if h.log.waitingAppends() != 1 {
			return errors.New("the commit's append is not waiting yet")
		}
		return nil
	})
	cancel() // the connection closes
	release()
	if err := done.result(); err != nil {
		t.Fatalf("commit answered %v once its write landed", err)
	}
	if got := h.committed("g", tp("t", 0)); got != 42 {
		t.Fatalf("committed offset %d, want 42: the write landed but memory did not learn of it", got)
	}
	if got := h.reload().committed("g", tp("t", 0)); got != 42 {
		t.Fatalf("reloaded offset %d, want 42", got)
	}
}

// CommittedOffsets hands out every group's committed offsets, a copy per
// group, and stops when asked to.
func TestCommittedOffsets(t *testing.T) {
	h := newHarness(t)
	h.c.CommitOffsets(h.ctx, CommitRequest{Group: "g", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, 5), oc("t", 1, 7)}})
	h.c.CommitOffsets(h.ctx, CommitRequest{Group: "h", Generation: -1, Offsets: []OffsetCommit{oc("u", 0, 3)}})
	h.c.CommitOffsets(h.ctx, CommitRequest{Group: "h", Generation: -1, Offsets: []OffsetCommit{oc("u", 0, 4)}})
	got := map[string]map[TopicPartition]int64{}
	h.c.CommittedOffsets(func(group string, offsets map[TopicPartition]int64) bool {
		got[group] = offsets
		offsets[tp("x", 9)] = 1 // the caller's copy: the group must not see it
		return true
	})
	want := map[string]map[TopicPartition]int64{
		"g": {tp("t", 0): 5, tp("t", 1): 7, tp("x", 9): 1},
		"h": {tp("u", 0): 4, tp("x", 9): 1},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("committed offsets %v, want %v", got, want)
	}
	if all, _ := h.c.FetchOffsets("g", nil, true); len(all) != 2 {
		t.Fatalf("the visitor's change reached the group: %+v", all)
	}
	visits := 0
	h.c.CommittedOffsets(func(string, map[TopicPartition]int64) bool { visits++; return false })
	if visits != 1 {
		t.Fatalf("%d visits after the first said stop", visits)
	}
}

// Kafka's older per-commit expiry: OffsetCommit v2-v4's retention time
// expires those offsets that long after the commit, also across a
// reload (written as value v1), and v1's commit timestamp is what
// retention counts from.
func TestCommitRetentionAndTimestamp(t *testing.T) {
	h := newHarness(t) // OffsetsRetention: 24h
	commit := func(req CommitRequest) {
		t.Helper()
		if err, errs := h.c.CommitOffsets(h.ctx, req); err != nil || errs[0] != nil {
			t.Fatalf("commit: %v %v", err, errs)
		}
	}
	commit(CommitRequest{Group: "s", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, 1)}, Retention: 10 * time.Minute})
	early := oc("t", 1, 2)
	early.CommitTime = t0.Add(-23 * time.Hour) // a v1 client's own clock
	commit(CommitRequest{Group: "s", Generation: -1, Offsets: []OffsetCommit{early}})
	commit(CommitRequest{Group: "s", Generation: -1, Offsets: []OffsetCommit{oc("t", 2, 3)}})

	var v1, v3 int
	for _, d := range h.groupRecords("s") {
		switch {
		case d.offset == nil:
		case d.tp == tp("t", 0):
			v1++
			if d.offset.Version != 1 || d.offset.ExpireTimestamp != t0.Add(10*time.Minute).UnixMilli() || d.offset.CommitTimestamp != t0.UnixMilli() {
				t.Fatalf("retained commit stored as %+v", d.offset)
			}
		case d.tp == tp("t", 1):
			v3++
			if d.offset.Version != 3 || d.offset.CommitTimestamp != early.CommitTime.UnixMilli() {
				t.Fatalf("timestamped commit stored as %+v", d.offset)
			}
		}
	}
	if v1 != 1 || v3 != 1 {
		t.Fatalf("%d v1 and %d v3 records for the two commits", v1, v3)
	}

	h = h.reload()
	h.clock.Advance(10 * time.Minute)
	if h.committed("s", tp("t", 0)) != -1 || h.committed("s", tp("t", 1)) != 2 || h.committed("s", tp("t", 2)) != 3 {
		t.Fatal("at 10 minutes only the offset retained 10 minutes should be gone")
	}
	h.clock.Advance(time.Hour - 10*time.Minute)
	if h.committed("s", tp("t", 1)) != -1 || h.committed("s", tp("t", 2)) != 3 {
		t.Fatal("at an hour the offset committed 23 hours earlier should be gone, and only it")
	}
}
