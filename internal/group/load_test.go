package group

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/clock"
)

// reload starts a second coordinator on h's log (its own fake clock, at
// h's time) and loads every partition into it.
func (h *harness) reload(mutate ...func(*Config)) *harness {
	h.t.Helper()
	h2 := &harness{t: h.t, clock: clock.NewFake(h.clock.Now()), log: h.log, cfg: h.cfg}
	h2.cfg.Clock = h2.clock
	for _, f := range mutate {
		f(&h2.cfg)
	}
	h2.ctx = h.ctx
	h2.c = New(h2.cfg, h.log)
	h.t.Cleanup(h2.c.Close)
	for p := range int32(testPartitions) {
		if err := h2.c.Load(p, h.log.reader(p)); err != nil {
			h.t.Fatal(err)
		}
	}
	return h2
}

// snapshot is everything a client can see of a group, and the offsets'
// commit times.
type snapshot struct {
	desc    GroupDescription
	offsets []CommittedOffset
	times   map[TopicPartition]int64 // commit times, in ms
}

func (h *harness) snapshot(id string) snapshot {
	h.t.Helper()
	d, err := h.c.DescribeGroup(id)
	if err != nil {
		h.t.Fatal(err)
	}
	o, err := h.c.FetchOffsets(id, nil, false)
	if err != nil {
		h.t.Fatal(err)
	}
	s := snapshot{desc: d, offsets: o, times: map[TopicPartition]int64{}}
	h.peek(id, func(g *group) {
		if g != nil {
			for tp, o := range g.mu.offsets {
				s.times[tp] = o.commitTime.UnixMilli()
			}
		}
	})
	return s
}

// Loading a partition rebuilds exactly what was written through it: each
// group's state, generation, members, assignments and offsets.
func TestLoadRebuildsWhatWasWritten(t *testing.T) {
	h := newHarness(t)
	stable := h.formGroup(memberReq("stable", "a"), staticReq("stable", "s"), memberReq("stable", "b", "t", "u"))
	meta := "checkpoint"
	h.c.CommitOffsets(h.ctx, stable[0].commitReq(oc("t", 0, 10), OffsetCommit{TopicPartition: tp("t", 1), Offset: 11, LeaderEpoch: 3, Metadata: &meta}))
	h.clock.Advance(time.Second)
	h.c.CommitOffsets(h.ctx, stable[1].commitReq(oc("t", 0, 12))) // overwrites t-0

	empty := h.formGroup(memberReq("empty", "x"))[0]
	h.c.CommitOffsets(h.ctx, empty.commitReq(oc("t", 0, 1)))
	h.c.LeaveGroup(h.ctx, "empty", []LeaveMember{{MemberID: empty.MemberID}})
	h.eventually(func() error { // the Empty record is written in the background
		recs := h.groupRecords("empty")
		if last := recs[len(recs)-1]; last.metadata == nil || len(last.metadata.Members) != 0 {
			return errors.New("empty group not written yet")
		}
		return nil
	})

	h.c.CommitOffsets(h.ctx, CommitRequest{Group: "simple", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, 5), oc("t", 1, 6)}})
	h.c.DeleteOffsets(h.ctx, "simple", []TopicPartition{tp("t", 1)})

	h.c.CommitOffsets(h.ctx, CommitRequest{Group: "deleted", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, 5)}})
	h.c.DeleteGroups(h.ctx, []string{"deleted"})

	h2 := h.reload()
	if a, b := h.list(nil), h2.list(nil); !reflect.DeepEqual(a, b) || len(a) != 3 {
		t.Fatalf("groups before %+v, after %+v", a, b)
	}
	for _, id := range []string{"stable", "empty", "simple", "deleted"} {
		if a, b := h.snapshot(id), h2.snapshot(id); !reflect.DeepEqual(a, b) {
			t.Fatalf("group %s before load:\n%+v\nafter:\n%+v", id, a, b)
		}
	}
	h2.peek("stable", func(g *group) {
		if g.mu.generation != 2 || g.mu.leader != stable[0].MemberID || g.mu.static["s"] != stable[1].MemberID {
			t.Fatalf("stable group generation %d leader %s static %v", g.mu.generation, g.mu.leader, g.mu.static)
		}
	})

	// The loaded members carry on: heartbeats and syncs of their
	// generation work, commits too, with no rebalance.
	for _, m := range stable {
		wantErr(t, "heartbeat after load", m.heartbeat(h2), nil)
	}
	if res := h2.sync(stable[2].syncReq(nil)); res.Err != nil || string(res.Assignment) != string(assignmentFor(stable[2].MemberID)) {
		t.Fatalf("sync after load: %+v", res)
	}
	if err, _ := h2.c.CommitOffsets(h2.ctx, stable[2].commitReq(oc("u", 0, 1))); err != nil {
		t.Fatal(err)
	}
	// A static member restarting after the failover takes its place too.
	if res := h2.join(staticReq("stable", "s")); res.Err != nil || res.Generation != 2 {
		t.Fatalf("static restart after load: %+v", res)
	}
	h2.wantState("stable", "Stable")
	// Sessions run on the new coordinator: members that stay away are
	// removed, one that heartbeats stays.
	h2.clock.Advance(5 * time.Second)
	wantErr(t, "a's heartbeat", stable[0].heartbeat(h2), nil)
	h2.clock.Advance(5 * time.Second)
	h2.wantState("stable", "PreparingRebalance")
	if ids := h2.memberIDs("stable"); len(ids) != 1 || ids[0] != stable[0].MemberID {
		t.Fatalf("members after the others' sessions ended: %v", ids)
	}
}

// Reference: every __consumer_offsets schema version Kafka has written
// (OffsetCommitValue v0-v4, GroupMetadataValue v0-v4, both key versions of
// offsets) loads; the last record per key wins and tombstones delete;
// records of other group types are skipped.
func TestLoadAcceptsEveryRecordVersion(t *testing.T) {
	log := newMemLog()
	put := func(group string, key, value []byte) {
		p := PartitionFor(group, testPartitions)
		log.mu.parts[p] = append(log.mu.parts[p], Record{Key: key, Value: value})
	}
	commitMs := t0.Add(-time.Hour).UnixMilli()
	offsetRecord := func(keyVersion, valueVersion int16, group string, part int32, off int64, epoch int32) {
		k := kmsg.NewOffsetCommitKey()
		k.Version, k.Group, k.Topic, k.Partition = keyVersion, group, "t", part
		v := kmsg.NewOffsetCommitValue()
		v.Version, v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = valueVersion, off, epoch, "meta", commitMs
		v.ExpireTimestamp = t0.Add(time.Hour).UnixMilli()
		put(group, k.AppendTo(nil), v.AppendTo(nil))
	}
	for version := int16(0); version <= 4; version++ {
		offsetRecord(min(version, 1), version, "offsets", int32(version), int64(100+version), 7)
	}
	offsetRecord(1, 3, "offsets", 9, 1, -1)
	offsetRecord(1, 3, "offsets", 9, 2, -1) // the later record wins
	offsetRecord(1, 3, "offsets", 8, 1, -1)
	k := kmsg.NewOffsetCommitKey()
	k.Version, k.Group, k.Topic, k.Partition = 1, "offsets", "t", 8
	put("offsets", k.AppendTo(nil), nil) // tombstone

	for version := int16(0); version <= 4; version++ {
		id := "meta-v" + string(rune('0'+version))
		gk := kmsg.NewGroupMetadataKey()
		gk.Version, gk.Group = 2, id
		v := kmsg.NewGroupMetadataValue()
		v.Version, v.ProtocolType, v.Generation = version, "consumer", 5
		v.Protocol, v.Leader = ptr("range"), ptr("m1")
		v.CurrentStateTimestamp = t0.UnixMilli()
		mv := kmsg.NewGroupMetadataValueMember()
		mv.MemberID, mv.ClientID, mv.ClientHost = "m1", "c", "h"
		mv.InstanceID = ptr("i1")
		mv.SessionTimeoutMillis, mv.RebalanceTimeoutMillis = 10000, 20000
		mv.Subscription, mv.Assignment = consumerMeta("t"), []byte("A")
		v.Members = []kmsg.GroupMetadataValueMember{mv}
		put(id, gk.AppendTo(nil), v.AppendTo(nil))
	}
	// A group deleted after its metadata was written.
	gk := kmsg.NewGroupMetadataKey()
	gk.Version, gk.Group = 2, "deleted"
	dv := kmsg.NewGroupMetadataValue()
	dv.Version, dv.ProtocolType, dv.Generation = 3, "consumer", 1
	put("deleted", gk.AppendTo(nil), dv.AppendTo(nil))
	put("deleted", gk.AppendTo(nil), nil)
	// A KIP-848 record (key version 3+): not ours, skipped.
	put("offsets", []byte{0, 3, 0, 1, 'x'}, []byte{0, 0, 1, 2, 3})

	h := &harness{t: t, clock: clock.NewFake(t0), log: log}
	h.cfg = Config{OffsetsPartitions: testPartitions, Clock: h.clock, MinSessionTimeout: time.Second}
	h.c = New(h.cfg, log)
	t.Cleanup(h.c.Close)
	for p := range int32(testPartitions) {
		if err := h.c.Load(p, log.reader(p)); err != nil {
			t.Fatal(err)
		}
	}

	got, _ := h.c.FetchOffsets("offsets", nil, false)
	want := map[int32][2]int64{0: {100, -1}, 1: {101, -1}, 2: {102, -1}, 3: {103, 7}, 4: {104, 7}, 9: {2, -1}}
	if len(got) != len(want) {
		t.Fatalf("offsets %+v", got)
	}
	for _, o := range got {
		w, ok := want[o.Partition]
		if !ok || o.Offset != w[0] || int64(o.LeaderEpoch) != w[1] || *o.Metadata != "meta" {
			t.Fatalf("partition %d: %+v, want offset %d epoch %d", o.Partition, o, w[0], w[1])
		}
	}
	h.peek("offsets", func(g *group) {
		for tp, o := range g.mu.offsets {
			if o.commitTime.UnixMilli() != commitMs {
				t.Fatalf("%v commit time %v", tp, o.commitTime)
			}
			// Only v1 values carried a per-offset expiry.
			if (tp.Partition == 1) != !o.expireTime.IsZero() {
				t.Fatalf("%v expire time %v", tp, o.expireTime)
			}
		}
	})

	for version := 0; version <= 4; version++ {
		id := "meta-v" + string(rune('0'+version))
		d, err := h.c.DescribeGroup(id)
		if err != nil || d.State != "Stable" || d.Protocol != "range" || len(d.Members) != 1 {
			t.Fatalf("%s: %+v %v", id, d, err)
		}
		m := d.Members[0]
		if m.MemberID != "m1" || string(m.Assignment) != "A" || (version >= 3) != (m.InstanceID != nil) {
			t.Fatalf("%s member %+v", id, m)
		}
		h.peek(id, func(g *group) {
			mm := g.mu.members["m1"]
			wantRebalance := 20 * time.Second
			if version == 0 {
				wantRebalance = 10 * time.Second // v0 predates the rebalance timeout
			}
			if g.mu.generation != 5 || mm.rebalanceTimeout != wantRebalance || mm.sessionTimeout != 10*time.Second {
				t.Fatalf("%s generation %d timeouts %v/%v", id, g.mu.generation, mm.sessionTimeout, mm.rebalanceTimeout)
			}
			if wantTS := version >= 2; wantTS != !g.mu.stateTimestamp.IsZero() {
				t.Fatalf("%s state timestamp %v", id, g.mu.stateTimestamp)
			}
		})
	}
	if d, _ := h.c.DescribeGroup("deleted"); d.State != "Dead" {
		t.Fatalf("tombstoned group loaded: %+v", d)
	}
}

func TestLoadMalformedRecordFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  Record
	}{
		{"short key", Record{Key: []byte{0}}},
		{"truncated offset key", Record{Key: []byte{0, 1, 0, 5, 'g'}, Value: []byte{0, 3}}},
		{"truncated offset value", Record{Key: offsetKey("g", tp("t", 0)), Value: []byte{0, 3, 0, 0}}},
		{"truncated group value", Record{Key: groupKey("g"), Value: []byte{0, 3, 0, 8, 'c'}}},
		{"members without protocol", func() Record {
			v := kmsg.NewGroupMetadataValue()
			v.Version, v.ProtocolType = 3, "consumer"
			v.Members = []kmsg.GroupMetadataValueMember{kmsg.NewGroupMetadataValueMember()}
			return Record{Key: groupKey("g"), Value: v.AppendTo(nil)}
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{OffsetsPartitions: testPartitions, Clock: clock.NewFake(t0)}, newMemLog())
			defer c.Close()
			p := PartitionFor("g", testPartitions)
			err := c.Load(p, func(fn func(Record) error) error { return fn(tc.rec) })
			if !errors.Is(err, ErrMalformedRecord) {
				t.Fatalf("Load: %v, want ErrMalformedRecord", err)
			}
			_, err = c.FetchOffsets("g", nil, false)
			wantErr(t, "fetch after a failed load", err, ErrNotCoordinator)
		})
	}
}

// While a partition loads, its groups answer COORDINATOR_LOAD_IN_PROGRESS
// (SyncGroup REBALANCE_IN_PROGRESS, Heartbeat nil, as Kafka); once loaded,
// they are served.
func TestLoadInProgress(t *testing.T) {
	h := newHarness(t)
	m := h.formGroup(memberReq("g", "a"))[0]
	h.c.CommitOffsets(h.ctx, m.commitReq(oc("t", 0, 1)))
	h2 := &harness{t: t, clock: clock.NewFake(t0), log: h.log, cfg: h.cfg, ctx: h.ctx}
	h2.cfg.Clock = h2.clock
	h2.c = New(h2.cfg, h.log)
	t.Cleanup(h2.c.Close)

	p := PartitionFor("g", testPartitions)
	proceed := make(chan struct{})
	loaded := start(t, func() error {
		return h2.c.Load(p, func(fn func(Record) error) error {
			<-proceed
			return h.log.reader(p)(fn)
		})
	})
	h2.eventually(func() error {
		if err := h2.c.status("g"); err != ErrCoordinatorLoadInProgress {
			return errors.New("not loading yet")
		}
		return nil
	})
	wantErr(t, "join", h2.join(m.rejoinReq()).Err, ErrCoordinatorLoadInProgress)
	err, _ := h2.c.CommitOffsets(h2.ctx, m.commitReq(oc("t", 0, 2)))
	wantErr(t, "commit", err, ErrCoordinatorLoadInProgress)
	_, err = h2.c.FetchOffsets("g", nil, false)
	wantErr(t, "fetch", err, ErrCoordinatorLoadInProgress)
	wantErr(t, "sync", h2.sync(m.syncReq(nil)).Err, ErrRebalanceInProgress)
	wantErr(t, "heartbeat", m.heartbeat(h2), nil)
	if groups, err := h2.c.ListGroups(nil); len(groups) != 0 || err != ErrCoordinatorLoadInProgress {
		t.Fatalf("ListGroups while loading: %+v, %v; want none, COORDINATOR_LOAD_IN_PROGRESS", groups, err)
	}
	close(proceed)
	if err := loaded.result(); err != nil {
		t.Fatal(err)
	}
	if h2.committed("g", tp("t", 0)) != 1 {
		t.Fatal("offset not loaded")
	}
	wantErr(t, "heartbeat after load", m.heartbeat(h2), nil)
}

func TestUnloadDuringLoadSupersedesIt(t *testing.T) {
	c := New(Config{OffsetsPartitions: testPartitions, Clock: clock.NewFake(t0)}, newMemLog())
	defer c.Close()
	proceed := make(chan struct{})
	loaded := start(t, func() error {
		return c.Load(0, func(fn func(Record) error) error {
			<-proceed
			return fn(offsetCommitRecord("g", oc("t", 0, 1), t0, time.Time{}))
		})
	})
	testEventually(t, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.mu.partitions[0] == nil {
			return errors.New("not loading yet")
		}
		return nil
	})
	c.Unload(0)
	close(proceed)
	if err := loaded.result(); !errors.Is(err, ErrLoadSuperseded) {
		t.Fatalf("Load: %v, want ErrLoadSuperseded", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.partitions[0] != nil {
		t.Fatal("a superseded load installed its partition")
	}
}

// Unload answers parked requests NOT_COORDINATOR; loading again brings the
// group back as last written.
func TestUnloadAnswersParkedRequests(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(memberReq("g", "a"), memberReq("g", "b"))
	join := h.startJoin(memberReq("g", "c"))
	h.waitAwaitingJoin("g", 1)
	p := PartitionFor("g", testPartitions)
	h.c.Unload(p)
	wantErr(t, "parked join", join.result().Err, ErrNotCoordinator)
	wantErr(t, "heartbeat", ms[0].heartbeat(h), ErrNotCoordinator)

	if err := h.c.Load(p, h.log.reader(p)); err != nil {
		t.Fatal(err)
	}
	h.wantState("g", "Stable")
	ms = h.rebalance(ms)
	sync := h.startSync(ms[1].syncReq(nil))
	h.waitAwaitingSync("g", ms[1].MemberID)
	// Loading a loaded partition again replaces its groups from the log.
	if err := h.c.Load(p, h.log.reader(p)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "parked sync", sync.result().Err, ErrNotCoordinator)
	h.wantState("g", "Stable") // generation 3 never completed: back to 2
	wantErr(t, "generation 3 heartbeat", ms[0].heartbeat(h), ErrIllegalGeneration)
}

func TestCloseAnswersParkedRequests(t *testing.T) {
	h := newHarness(t)
	ms := h.rebalance(h.formGroup(memberReq("g", "a"), memberReq("g", "b")))
	sync := h.startSync(ms[1].syncReq(nil))
	h.waitAwaitingSync("g", ms[1].MemberID)
	join := h.startJoin(memberReq("other", "x", "t"))
	h.formGroup(memberReq("third", "y"))
	third := h.startJoin(memberReq("third", "z"))
	h.waitAwaitingJoin("third", 1)
	h.c.Close()
	wantErr(t, "parked sync", sync.result().Err, ErrCoordinatorNotAvailable)
	wantErr(t, "parked join", third.result().Err, ErrCoordinatorNotAvailable)
	if res := join.result(); res.Err != nil && res.Err != ErrCoordinatorNotAvailable {
		t.Fatalf("join racing Close: %v", res.Err)
	}
	wantErr(t, "heartbeat after close", ms[0].heartbeat(h), ErrCoordinatorNotAvailable)
	if err := h.c.Load(0, h.log.reader(0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Load after Close: %v", err)
	}
}

// A loaded group larger than group.max.size now allows rebalances, so the
// extra members are turned away as they rejoin.
func TestLoadOverCapacityRebalances(t *testing.T) {
	h := newHarness(t)
	ms := h.formGroup(memberReq("g", "a"), memberReq("g", "b"), memberReq("g", "c"))
	h2 := h.reload(func(c *Config) { c.MaxGroupSize = 2 })
	h2.wantState("g", "PreparingRebalance")
	// Reference: KIP-389. The first two to rejoin are accepted; the last
	// is turned away and removed, which completes the rebalance.
	a := h2.startJoin(ms[0].rejoinReq())
	h2.waitAwaitingJoin("g", 1)
	b := h2.startJoin(ms[1].rejoinReq())
	h2.waitAwaitingJoin("g", 2)
	res := h2.join(ms[2].rejoinReq())
	wantErr(t, "third rejoin", res.Err, ErrGroupMaxSizeReached)
	ra, rb := a.result(), b.result()
	if ra.Err != nil || rb.Err != nil || len(ra.Members) != 2 || ra.Generation != 3 {
		t.Fatalf("rejoins: %+v / %+v", ra, rb)
	}
}

// FuzzLoad: replaying arbitrary records.
// Invariants: Load never panics; it fails only with ErrMalformedRecord
// (for records of versions it reads); when it succeeds every loaded group
// can be described and fetched.
func FuzzLoad(f *testing.F) {
	v := kmsg.NewGroupMetadataValue()
	v.Version, v.ProtocolType, v.Protocol, v.Leader = 3, "consumer", ptr("range"), ptr("m")
	mv := kmsg.NewGroupMetadataValueMember()
	mv.MemberID, mv.Subscription = "m", consumerMeta("t")
	v.Members = []kmsg.GroupMetadataValueMember{mv}
	good := v.AppendTo(nil)
	off := offsetCommitRecord("g", oc("t", 0, 1), t0, time.Time{})
	f.Add([]byte{}, []byte{})
	f.Add(off.Key, off.Value)
	f.Add(off.Key, []byte{})
	f.Add(groupKey("g"), good)
	f.Add(groupKey("g"), append(good, 0xff, 0xff))
	f.Add(groupKey("g"), good[:len(good)/2])
	f.Add([]byte{0, 9, 1}, []byte{1})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		c := New(Config{OffsetsPartitions: 1, Clock: clock.NewFake(t0)}, newMemLog())
		defer c.Close()
		err := c.Load(0, func(fn func(Record) error) error {
			if err := fn(Record{Key: key, Value: value}); err != nil {
				return err
			}
			return fn(Record{Key: key, Value: value}) // twice: the same key again
		})
		if err != nil {
			if !errors.Is(err, ErrMalformedRecord) {
				t.Fatalf("Load failed with %v", err)
			}
			return
		}
		listed, err := c.ListGroups(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range listed {
			if _, err := c.DescribeGroup(l.Group); err != nil {
				t.Fatal(err)
			}
			if _, err := c.FetchOffsets(l.Group, nil, false); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Reloading a partition this node still leads (a new leader epoch) waits
// for the writes under way on its groups before it replays the log, so a
// commit that lands meanwhile is in the reloaded group, not only in the
// log.
func TestReloadWaitsForWritesInFlight(t *testing.T) {
	h := newHarness(t)
	commit := func(off int64) (error, []error) {
		return h.c.CommitOffsets(h.ctx, CommitRequest{Group: "g", Generation: -1, Offsets: []OffsetCommit{oc("t", 0, off)}})
	}
	if err, errs := commit(1); err != nil || errs[0] != nil {
		t.Fatalf("commit: %v %v", err, errs)
	}
	release := h.log.hold()
	defer release()
	inFlight := start(t, func() error {
		err, errs := commit(2)
		if err == nil {
			err = errs[0]
		}
		return err
	})
	h.eventually(func() error {
		if n := h.log.waitingAppends(); n != 1 {
			return fmt.Errorf("%d appends held", n)
		}
		return nil
	})

	p := PartitionFor("g", testPartitions)
	replaying := make(chan struct{})
	loaded := start(t, func() error {
		return h.c.Load(p, func(fn func(Record) error) error {
			close(replaying)
			return h.log.reader(p)(fn) // the log as it is when the replay begins
		})
	})
	h.eventually(func() error {
		if _, err := h.c.FetchOffsets("g", nil, true); err != ErrCoordinatorLoadInProgress {
			return fmt.Errorf("FetchOffsets during the reload: %v", err)
		}
		return nil
	})
	// This wait can fail only if the replay starts while the write is
	// held, which is the bug; it cannot fail a correct coordinator.
	select {
	case <-replaying:
		t.Fatal("the replay began while a commit's write was still in flight")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := loaded.result(); err != nil {
		t.Fatal(err)
	}
	// The commit's own answer: it landed, but its group was dropped
	// while it was in flight.
	if err := inFlight.result(); err != nil && err != ErrNotCoordinator {
		t.Fatalf("the in-flight commit answered %v", err)
	}
	if got := h.committed("g", tp("t", 0)); got != 2 {
		t.Fatalf("after the reload the group has offset %d; the log's last commit is 2", got)
	}
}
