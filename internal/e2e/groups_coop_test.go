package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/testcluster"
)

// TestGroupCooperativeSticky is issue 5's first acceptance test: three
// franz-go members with the cooperative-sticky balancer share a
// 12-partition topic while a producer writes keyed records (60,000; 200,000
// under FJORD_E2E_LONG=1). Member A and member K (a child process) start
// the group, C joins late, A leaves (Close: revoke, commit, LeaveGroup),
// and K is SIGKILLed, so the node must notice it by its 6 s session
// timeout. Every member commits what it processed every few hundred
// milliseconds and in every revoke.
//
// After each rebalance, DescribeGroups must show a Stable
// cooperative-sticky group of the live members, each assigned what its
// callbacks say; no commit may be refused; at the end the group's offsets
// are the log ends and the group is Empty. checkCoop then holds the
// members' logs to the rules (groups_coopcheck_test.go): every record
// consumed at least once; a record consumed twice only after its
// partition left a member that had not committed it; each stretch of a
// partition starting at the committed offset, with offsets and per-key
// order intact; no partition revoked from a member that keeps it. The
// longest pause in consuming a partition that a rebalance did not move is
// measured and logged for each rebalance, not asserted: it is wall-clock
// luck.
func TestGroupCooperativeSticky(t *testing.T) {
	t.Parallel()
	n := startGroupNode(t)
	ctx := testContext(t, 3*time.Minute)
	const (
		topic      = "coop"
		group      = "coop-group"
		partitions = 12
		keys       = 600
	)
	total := scale(60_000, 200_000)
	// The producer is paced so that it is still writing during the last
	// rebalance, which the kill delays by the session timeout: a
	// partition that is not being written to cannot show whether its
	// consumption paused.
	span := time.Duration(scale(15, 30)) * time.Second
	adm := newAdmin(t, n)
	createTopic(ctx, t, adm, topic, partitions)

	prod := startPacedProducer(ctx, t, n, topic, keys, total, span)

	base := coopMemberConfig{
		Brokers:        n.Brokers(),
		Group:          group,
		Topic:          topic,
		SessionTimeout: 45 * time.Second, // Kafka's default: A and C never time out
		CommitInterval: 300 * time.Millisecond,
	}
	logA, logK, logC := newCoopLog("A"), newCoopLog("K"), newCoopLog("C")
	all := []*coopLog{logA, logK, logC}
	cfgA := base
	cfgA.Name = "A"
	a := startCoopInProcess(t, cfgA, logA)
	cfgK := base
	cfgK.Name = "K"
	// The node's minimum: the kill is noticed as soon as a node allows.
	cfgK.SessionTimeout = 6 * time.Second
	// A longer interval leaves K with processed records it has not
	// committed when it is killed, so the duplicates rule is exercised.
	cfgK.CommitInterval = time.Second
	k := startCoopProcess(t, cfgK, logK)

	// healthy fails the test at once if a member reported a failure or
	// the child exited by itself: waiting for the deadline would hide
	// why.
	healthy := func() {
		t.Helper()
		for _, l := range all {
			if f := l.failures(); len(f) > 0 {
				t.Fatalf("member %s failed: %s", l.name, strings.Join(f, "; "))
			}
			// franz-go commits only in a settled session, with its
			// generation: the node has no reason to refuse one.
			if f := l.commitFailures(); len(f) > 0 {
				t.Fatalf("member %s: commits failed: %s", l.name, strings.Join(f, "; "))
			}
		}
		if k.exited() && !logK.gone() {
			t.Fatalf("member K's process exited by itself: %v", k.err)
		}
		if err := prod.failures.err(); err != nil {
			t.Fatalf("producer: %v", err)
		}
	}
	// converge waits until the live members own every partition between
	// them, disjointly and evenly, and returns when the last of them got
	// its assignment.
	converge := func(what string, live ...*coopLog) time.Time {
		t.Helper()
		var settled time.Time
		eventually(t, time.Minute, func() error {
			healthy()
			owner := make(map[int32]string)
			var sizes []int
			settled = time.Time{}
			for _, l := range live {
				l.mu.Lock()
				owned, changed := l.mu.owned, l.mu.lastChange
				for p := range owned {
					if o, ok := owner[p]; ok {
						l.mu.Unlock()
						return fmt.Errorf("%s: partition %d owned by %s and %s", what, p, o, l.name)
					}
					owner[p] = l.name
				}
				sizes = append(sizes, len(owned))
				if changed.After(settled) {
					settled = changed
				}
				l.mu.Unlock()
			}
			if len(owner) != partitions || slices.Max(sizes)-slices.Min(sizes) > 1 {
				return fmt.Errorf("%s: assignment %s", what, describeOwners(live))
			}
			return nil
		})
		t.Logf("%s: %s", what, describeOwners(live))
		checkDescribedAssignment(ctx, t, adm, group, topic, live)
		return settled
	}
	waitAcked := func(fraction float64, extra func() error) {
		t.Helper()
		want := int(fraction * float64(total))
		eventually(t, time.Minute, func() error {
			healthy()
			if got := prod.acked.Load(); got < int64(want) {
				return fmt.Errorf("%d of %d records acknowledged", got, want)
			}
			if extra != nil {
				return extra()
			}
			return nil
		})
	}

	// The group usually forms with a rebalance too: the first member to
	// join gets every partition, and the second takes half. (When both
	// join before the first generation completes, there is none.)
	formed := converge("A and K form the group", logA, logK)
	var windows []coopWindow
	for _, l := range []*coopLog{logA, logK} {
		for _, ev := range l.events() {
			if ev.Kind == evAssigned && len(ev.Partitions) == partitions {
				windows = append(windows, coopWindow{"the second member joins", ev.At, formed})
				break
			}
		}
	}

	waitAcked(0.10, nil)
	start := now()
	cfgC := base
	cfgC.Name = "C"
	c := startCoopInProcess(t, cfgC, logC)
	windows = append(windows, coopWindow{"C joins", start, converge("C joined", logA, logK, logC)})

	waitAcked(0.25, nil)
	start = now()
	a.stop()
	logA.markGone()
	windows = append(windows, coopWindow{"A leaves", start, converge("A left", logK, logC)})

	// K must have committed in its new assignment before it dies, so the
	// next owner's starting offsets are K's commits, not A's; and it
	// should die with records consumed but not committed, so that the
	// rule for records consumed twice has cases to judge (likely, not
	// certain: K may commit between this check and the kill).
	afterLeave := windows[len(windows)-1].end
	waitAcked(0.40, func() error {
		if at := logK.lastAcked(); !at.After(afterLeave) {
			return fmt.Errorf("K has not had a commit acknowledged since A left")
		}
		if n := logK.uncommitted(); n < 100 {
			return fmt.Errorf("K has consumed %d records beyond its commits", n)
		}
		return nil
	})
	start = now()
	k.kill()
	killedAt := now()
	logK.markGone()
	windows = append(windows, coopWindow{"K killed", start, converge("K's session expired", logC)})

	prod.wait(t)
	healthy()
	producedUntil := prod.lastAck()
	ends := prod.counts()
	eventually(t, time.Minute, func() error {
		healthy()
		got := logC.consumedTo()
		for p := range int32(partitions) {
			if got[p] != ends[p] {
				return fmt.Errorf("C has consumed partition %d to offset %d of %d (all: %v of %v)", p, got[p], ends[p], got, ends)
			}
		}
		return nil
	})
	c.stop()
	logC.markGone()
	healthy()

	// Everything consumed was committed: the group's offsets are the log
	// ends, and the group is empty.
	committed, err := committedOffsets(ctx, adm, group)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(partitions) {
		if o, ok := committed[history.TopicPartition{Topic: topic, Partition: p}]; !ok || o.At != ends[p] {
			t.Errorf("partition %d: committed %s, want offset %d (the log end)", p, describeCommit(o, ok), ends[p])
		}
	}
	if d := describeGroup(ctx, t, adm, group); d.State != "Empty" || len(d.Members) != 0 {
		t.Errorf("after every member left or died: group state %q with %d members, want Empty with none", d.State, len(d.Members))
	}

	members := []coopMemberLog{
		{name: "A", events: logA.events()},
		{name: "K", events: logK.events(), killedAt: killedAt},
		{name: "C", events: logC.events()},
	}
	sum, err := checkCoop(members, prod.values(), windows, producedUntil)
	t.Logf("%d records produced; %d consumptions of %d distinct records in %d stretches, %d consumed again",
		prod.acked.Load(), sum.consumed, sum.distinct, sum.stretches, sum.duplicates)
	for _, g := range sum.gaps {
		t.Logf("rebalance %v", g)
	}
	t.Logf("longest gap outside rebalances while producing: %v", sum.steadyMaxGap.Round(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
}

// describeOwners shows the members' assignments, for messages.
func describeOwners(logs []*coopLog) string {
	var b strings.Builder
	for i, l := range logs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %v", l.name, sortedKeys(l.owned()))
	}
	return b.String()
}

// checkDescribedAssignment checks that DescribeGroups agrees with the
// members: the group is Stable with the live members, under the
// cooperative-sticky protocol, each assigned what its callbacks say.
func checkDescribedAssignment(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string, live []*coopLog) {
	t.Helper()
	d := describeGroup(ctx, t, adm, group)
	if d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != "cooperative-sticky" {
		t.Errorf("group %s: state %q, protocol type %q, protocol %q; want Stable, consumer, cooperative-sticky", group, d.State, d.ProtocolType, d.Protocol)
	}
	byID := make(map[string]kadm.DescribedGroupMember)
	for _, m := range d.Members {
		byID[m.MemberID] = m
	}
	if len(d.Members) != len(live) {
		t.Errorf("group %s: DescribeGroups lists %d members, want %d (%s)", group, len(d.Members), len(live), describeOwners(live))
	}
	for _, l := range live {
		id := l.latestMemberID()
		m, ok := byID[id]
		if !ok {
			t.Errorf("group %s: member %s (id %q) is not among the described members", group, l.name, id)
			continue
		}
		if got, want := memberAssignment(m, topic), sortedKeys(l.owned()); !slices.Equal(got, want) {
			t.Errorf("group %s: DescribeGroups says member %s is assigned %v; its callbacks say %v", group, l.name, got, want)
		}
	}
}

// pacedProducer writes total keyed records at an even rate over span.
type pacedProducer struct {
	acked    atomic.Int64
	failures errorList
	done     chan struct{}

	mu struct {
		sync.Mutex
		// written is, per partition, the value at each offset.
		written map[int32]map[int64]string
		lastAck time.Time
	}
}

// startPacedProducer starts writing keyed records "key-NNN/seq" with an
// idempotent acks=all franz-go producer.
func startPacedProducer(ctx context.Context, t *testing.T, n *testcluster.Node, topic string, keys, total int, span time.Duration) *pacedProducer {
	t.Helper()
	cl := newClient(t, n, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	p := &pacedProducer{done: make(chan struct{})}
	p.mu.written = make(map[int32]map[int64]string)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() {
		cancel()
		<-p.done
	})
	go func() {
		defer close(p.done)
		begin := time.Now()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < total; {
			// Catch up to where the rate says we should be, so slow
			// ticks do not slow the rate.
			due := min(total, int(float64(total)*time.Since(begin).Seconds()/span.Seconds())+1)
			for ; i < due; i++ {
				key := fmt.Sprintf("key-%03d", i%keys)
				value := fmt.Sprintf("%s/%d", key, i/keys)
				cl.Produce(ctx, &kgo.Record{Key: []byte(key), Value: []byte(value)}, p.onAck)
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
		if err := cl.Flush(ctx); err != nil {
			p.failures.add(fmt.Errorf("flush: %w", err))
		}
	}()
	return p
}

func (p *pacedProducer) onAck(r *kgo.Record, err error) {
	if err != nil {
		p.failures.add(fmt.Errorf("%s: %w", r.Value, err))
		return
	}
	p.mu.Lock()
	m := p.mu.written[r.Partition]
	if m == nil {
		m = make(map[int64]string)
		p.mu.written[r.Partition] = m
	}
	m[r.Offset] = string(r.Value)
	p.mu.lastAck = now()
	p.mu.Unlock()
	p.acked.Add(1)
}

// wait waits until every record is acknowledged, failing the test on a
// producer error.
func (p *pacedProducer) wait(t *testing.T) {
	t.Helper()
	<-p.done
	if err := p.failures.err(); err != nil {
		t.Fatalf("producer: %v", err)
	}
}

func (p *pacedProducer) lastAck() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.lastAck
}

// counts is the number of records acknowledged per partition.
func (p *pacedProducer) counts() map[int32]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := make(map[int32]int64)
	for part, m := range p.mu.written {
		c[part] = int64(len(m))
	}
	return c
}

// values is what was acknowledged, per partition by offset; a hole (an
// offset never acknowledged) is an empty string, which no consumed value
// equals.
func (p *pacedProducer) values() map[int32][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := make(map[int32][]string)
	for part, m := range p.mu.written {
		var end int64
		for o := range m {
			end = max(end, o+1)
		}
		vals := make([]string, end)
		for o, val := range m {
			vals[o] = val
		}
		v[part] = vals
	}
	return v
}
