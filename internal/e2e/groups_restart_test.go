package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/testcluster"
)

// TestGroupCommitsSurviveKill is issue 5's fourth acceptance test: offsets
// committed for two groups, one by kadm (simple commits, no membership,
// several rounds over different partitions, some moving backwards) and
// one by a live franz-go member, then the node is SIGKILLed right after
// the last commit is acknowledged and restarted on the same data. The
// node must rebuild the groups from __consumer_offsets: OffsetFetch
// answers exactly the last acknowledged commit of each partition (offset,
// leader epoch, metadata; nothing for partitions never committed), and a
// new member of each group starts each partition exactly there (the
// members reset to the earliest offset, so a lost commit would show as a
// start at 0).
func TestGroupCommitsSurviveKill(t *testing.T) {
	t.Parallel()
	n := startGroupNode(t)
	ctx := testContext(t, 2*time.Minute)
	const topic, partitions, perPartition = "restart", 4, 200
	adm := newAdmin(t, n)
	createTopic(ctx, t, adm, topic, partitions)
	producer := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	var recs []*kgo.Record
	for p := range int32(partitions) {
		for i := range perPartition {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-%03d", p, i)})
		}
	}
	produceRecordsSync(ctx, t, producer, recs...)

	expected := make(map[string]map[int32]committedOffset)
	for cycle := range scale(1, 3) {
		adminGroup, memberGroup := fmt.Sprintf("restart-admin-%d", cycle), fmt.Sprintf("restart-member-%d", cycle)

		// kadm: rounds of commits, the first to every partition, later
		// ones to some; the last value per partition is what must
		// survive.
		wantAdmin := make(map[int32]committedOffset)
		for round := range 5 {
			os := make(kadm.Offsets)
			for p := range int32(partitions) {
				if round > 0 && (int(p)+round)%3 == 0 {
					continue
				}
				c := committedOffset{
					// Moves forwards and backwards across rounds;
					// always below the end, so a member resumes by
					// reading a record.
					offset:   int64((round*67 + int(p)*41 + cycle*13) % perPartition),
					epoch:    int32(round%2) - 1, // -1 (none) and 0 (the partition's epoch)
					metadata: fmt.Sprintf("cycle %d round %d", cycle, round),
				}
				os.Add(kadm.Offset{Topic: topic, Partition: p, At: c.offset, LeaderEpoch: c.epoch, Metadata: c.metadata})
				wantAdmin[p] = c
			}
			resps, err := adm.CommitOffsets(ctx, adminGroup, os)
			if err == nil {
				err = resps.Error()
			}
			if err != nil {
				t.Fatalf("kadm commit round %d: %v", round, err)
			}
		}

		// A member commits where it wants to resume, through its group
		// membership (generation and member id checked by the node).
		wantMember, closeMember := memberCommit(ctx, t, n, adm, topic, memberGroup, partitions, cycle)

		// One more admin commit, and the kill right after its answer:
		// nothing acknowledged may be lost.
		last := committedOffset{offset: int64(perPartition - 1 - cycle), epoch: 0, metadata: fmt.Sprintf("cycle %d last", cycle)}
		os := make(kadm.Offsets)
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: last.offset, LeaderEpoch: last.epoch, Metadata: last.metadata})
		resps, err := adm.CommitOffsets(ctx, adminGroup, os)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			t.Fatalf("kadm last commit: %v", err)
		}
		wantAdmin[0] = last
		n.Kill()
		n.Restart()
		// A client from before the kill holds connections to the dead
		// process, and franz-go does not retry a FindCoordinator that
		// reads EOF on one: the checks use a client of the new process.
		adm = newAdmin(t, n)

		// Every group so far, from earlier cycles too: their commits
		// must survive every kill, replayed over and over.
		expected[adminGroup], expected[memberGroup] = wantAdmin, wantMember
		for group, want := range expected {
			// The node may still be loading __consumer_offsets; a fetch
			// that errs is asked again, an answer is final.
			var got map[history.TopicPartition]kadm.OffsetResponse
			eventually(t, 30*time.Second, func() error {
				var err error
				got, err = committedOffsets(ctx, adm, group)
				return err
			})
			for p := range int32(partitions) {
				o, ok := got[history.TopicPartition{Topic: topic, Partition: p}]
				w, committed := want[p]
				switch {
				case !committed && ok:
					t.Errorf("cycle %d group %s partition %d: nothing was committed, OffsetFetch answers %s", cycle, group, p, describeCommit(o, ok))
				case committed && (!ok || o.Err != nil || o.At != w.offset || o.LeaderEpoch != w.epoch || o.Metadata != w.metadata):
					t.Errorf("cycle %d group %s partition %d: OffsetFetch after SIGKILL and restart answers %s; the last acknowledged commit was offset %d (leader epoch %d, metadata %q)",
						cycle, group, p, describeCommit(o, ok), w.offset, w.epoch, w.metadata)
				}
			}
			for tp, o := range got {
				if tp.Topic != topic || tp.Partition < 0 || tp.Partition >= partitions {
					t.Errorf("cycle %d group %s: OffsetFetch answers %s for %s, which nothing committed", cycle, group, describeCommit(o, true), tp)
				}
			}
		}
		// The member from before the kill leaves (committing nothing),
		// so that a new one gets every partition.
		closeMember()
		resumeAt(ctx, t, n, topic, adminGroup, partitions, wantAdmin)
		resumeAt(ctx, t, n, topic, memberGroup, partitions, wantMember)
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("cycle %d: after SIGKILL and restart, %s resumed at %v and %s at %v", cycle, adminGroup, wantAdmin, memberGroup, wantMember)
	}
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// committedOffset is one partition's commit.
type committedOffset struct {
	offset   int64
	epoch    int32
	metadata string
}

func (c committedOffset) String() string { return fmt.Sprintf("%d", c.offset) }

// memberCommit has a franz-go member of group consume a few records of
// every partition and commit, per partition, the offset after the last
// record it consumed (with that record's leader epoch, as a consumer
// does). It returns what it committed once the node acknowledged it, and
// the member's Close. The member stays in the group: it is still there
// when the node is killed. It never commits again (no autocommit, and
// the default revoke does not commit without it).
func memberCommit(ctx context.Context, t *testing.T, n *testcluster.Node, adm *kadm.Client, topic, group string, partitions int32, cycle int) (map[int32]committedOffset, func()) {
	t.Helper()
	var mu sync.Mutex
	var assigned bool
	cl := newClient(t, n,
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			mu.Lock()
			assigned = true
			mu.Unlock()
		}),
	)
	// Per partition, a few records more each cycle.
	target := int64(10 + 20*cycle)
	last := make(map[int32]*kgo.Record)
	done := func() bool {
		for p := range partitions {
			if r := last[p]; r == nil || r.Offset+1 < target {
				return false
			}
		}
		return true
	}
	for !done() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("member of %s: consumed %d partitions before the deadline", group, len(last))
		}
		if err := fetches.Err(); err != nil {
			t.Fatalf("member of %s: %v", group, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset < target {
				last[r.Partition] = r
			}
		})
	}
	mu.Lock()
	if !assigned {
		t.Fatalf("member of %s consumed without an assignment callback", group)
	}
	mu.Unlock()
	offsets := make(map[int32]kgo.EpochOffset)
	for p, r := range last {
		offsets[p] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
	}
	// What must survive is what the request carried (franz-go fills in
	// the metadata string).
	want := make(map[int32]committedOffset)
	var commitErr error
	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: offsets},
		func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				commitErr = err
				return
			}
			for _, rt := range req.Topics {
				for _, rp := range rt.Partitions {
					want[rp.Partition] = committedOffset{offset: rp.Offset, epoch: rp.LeaderEpoch, metadata: derefString(rp.Metadata)}
				}
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil && commitErr == nil {
						commitErr = fmt.Errorf("%s-%d: %w", rt.Topic, rp.Partition, err)
					}
				}
			}
		})
	if commitErr != nil {
		t.Fatalf("member commit to %s: %v", group, commitErr)
	}
	for p, eo := range offsets {
		if want[p].offset != eo.Offset || want[p].epoch != eo.Epoch {
			t.Fatalf("member commit to %s: partition %d: sent %+v, asked for %+v", group, p, want[p], eo)
		}
	}
	// It was a member's commit, not a simple one: the group has the
	// member.
	if d := describeGroup(ctx, t, adm, group); d.State != "Stable" || len(d.Members) != 1 {
		t.Fatalf("group %s while its member commits: %s with %d members, want Stable with 1", group, d.State, len(d.Members))
	}
	return want, cl.Close
}

// resumeAt checks that a new member of group starts each committed
// partition at its committed offset, and any other partition at the
// start.
func resumeAt(ctx context.Context, t *testing.T, n *testcluster.Node, topic, group string, partitions int32, committed map[int32]committedOffset) {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(n.Brokers()),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// A member left over from before the kill, if the node still
		// counts it, is waited for by the rebalance until it rejoins
		// or its session ends.
		kgo.SessionTimeout(6*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	first := make(map[int32]int64)
	for len(first) < int(partitions) {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("new member of %s: first records of %d partitions before the deadline: %v", group, len(first), first)
		}
		if err := fetches.Err(); err != nil {
			t.Fatalf("new member of %s: %v", group, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
		})
	}
	for p := range partitions {
		want := committed[p].offset // 0 when nothing was committed
		if first[p] != want {
			t.Errorf("group %s partition %d: a new member started at offset %d, the committed offset is %d", group, p, first[p], want)
		}
	}
}
