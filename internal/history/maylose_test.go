package history

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeClock hands out times one second apart from a fixed start, so a
// test knows when each event happened.
type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time {
	f.t = f.t.Add(time.Second)
	return f.t
}

var epoch = time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)

// A MayLose window excuses exactly the violations that losing a record
// acknowledged or read inside it explains, and nothing outside it.
func TestCheckerMayLose(t *testing.T) {
	clock := &fakeClock{t: epoch}
	c := NewChecker()
	c.SetClock(clock.now)
	p0 := TopicPartition{"t", 0}
	// Sent at 1..4 s, acknowledged at 5..8 s: v0 at 5 s, v1 6 s, v2 7 s,
	// v3 8 s; v2 read at 9 s.
	for i := range 4 {
		c.Sent("t", []byte("k"), fmt.Appendf(nil, "v%d", i))
	}
	for i := range 4 {
		c.Acked(rec(0, int64(i), "k", fmt.Sprintf("v%d", i)))
	}
	c.Read(rec(0, 2, "k", "v2"))
	// Every node died at 9.5 s; the window covers 6.5 s to 9.5 s.
	c.MayLose(epoch.Add(6500*time.Millisecond), epoch.Add(9500*time.Millisecond), "flush.policy=interval, every node killed at once")
	// v2 and v3 are gone; after the restart v4 went to offset 2 and was
	// acknowledged (at 11 s).
	c.Sent("t", []byte("k"), []byte("v4"))
	c.Acked(rec(0, 2, "k", "v4"))
	logs := map[TopicPartition][]Record{p0: {rec(0, 0, "k", "v0"), rec(0, 1, "k", "v1"), rec(0, 2, "k", "v4")}}
	res := c.VerifyAll(logs)
	if len(res.Violations) != 0 {
		t.Fatalf("violations %v, want every one allowed", res.Violations)
	}
	kinds := map[string]int{}
	for _, v := range res.Allowed {
		kinds[v.Kind]++
		if v.AllowedBy != "flush.policy=interval, every node killed at once" || v.TopicPartition != p0 || v.At.IsZero() {
			t.Errorf("allowed %+v: want it located, timed and giving the window's reason", v)
		}
	}
	// v2: lost, its offset acknowledged again (conflicting), and it was
	// read, then replaced (unstable read); v3: lost.
	if want := map[string]int{KindConflictingAck: 1, KindUnstableRead: 1, KindLost: 2}; fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("allowed kinds %v, want %v", kinds, want)
	}
	if res.Summary.Allowed != 4 {
		t.Fatalf("summary %+v, want 4 allowed", res.Summary)
	}

	// v1, acknowledged at 6 s, before the window: its loss is a
	// violation.
	logs[p0] = []Record{rec(0, 0, "k", "v0"), rec(0, 2, "k", "v4")}
	_, err := c.Verify(logs)
	var vs *Violations
	if !errors.As(err, &vs) || vs.Counts()[KindLost] != 1 || !strings.Contains(err.Error(), `acknowledged value "v1" missing`) {
		t.Fatalf("Verify: %v, want v1's loss a violation", err)
	}

	// A record of the window found elsewhere was moved, not lost: no
	// window excuses that.
	logs[p0] = []Record{rec(0, 0, "k", "v0"), rec(0, 1, "k", "v1"), rec(0, 2, "k", "v4"), rec(0, 3, "k", "v3")}
	c2 := NewChecker()
	c2.SetClock((&fakeClock{t: epoch}).now)
	for i := range 4 {
		c2.Sent("t", []byte("k"), fmt.Appendf(nil, "v%d", i))
	}
	c2.Sent("t", []byte("k"), []byte("v4"))
	for i := range 4 {
		c2.Acked(rec(0, int64(i), "k", fmt.Sprintf("v%d", i)))
	}
	c2.MayLose(epoch, epoch.Add(time.Hour), "everything")
	logs[p0] = []Record{rec(0, 0, "k", "v0"), rec(0, 1, "k", "v1"), rec(0, 2, "k", "v4"), rec(0, 4, "k", "v3")}
	_, err = c2.Verify(logs)
	if !errors.As(err, &vs) || vs.Counts()[KindMoved] != 1 {
		t.Fatalf("Verify: %v, want a moved record reported whatever the window", err)
	}
}

// A producer's records keep their order within a partition, across keys.
func TestCheckerProducerOrder(t *testing.T) {
	c := NewChecker()
	c.SentBy("p1", "t", []byte("a"), []byte("v0"))
	c.SentBy("p1", "t", []byte("b"), []byte("v1"))
	c.SentBy("p2", "t", []byte("c"), []byte("v2"))
	p0 := TopicPartition{"t", 0}
	good := map[TopicPartition][]Record{p0: {rec(0, 0, "c", "v2"), rec(0, 1, "a", "v0"), rec(0, 2, "b", "v1")}}
	if _, err := c.Verify(good); err != nil {
		t.Fatal(err)
	}
	bad := map[TopicPartition][]Record{p0: {rec(0, 0, "b", "v1"), rec(0, 1, "c", "v2"), rec(0, 2, "a", "v0")}}
	_, err := c.Verify(bad)
	var vs *Violations
	if !errors.As(err, &vs) || vs.Counts()[KindProducerOrder] != 1 || !strings.Contains(err.Error(), "producer p1's records out of order: its record #0 after its record #1") {
		t.Fatalf("Verify: %v, want producer p1's order broken", err)
	}
}

// Around lists the acknowledgements, reads and log records near an
// offset, in offset order; Latencies the send and acknowledgement times.
func TestCheckerAroundAndLatencies(t *testing.T) {
	clock := &fakeClock{t: epoch}
	c := NewChecker()
	c.SetClock(clock.now)
	for i := range 5 {
		c.Sent("t", []byte("k"), fmt.Appendf(nil, "v%d", i)) // 1..5 s
	}
	for i := range 5 {
		c.Acked(rec(0, int64(i), "k", fmt.Sprintf("v%d", i))) // 6..10 s
	}
	c.Read(rec(0, 2, "k", "v2")) // 11 s
	p0 := TopicPartition{"t", 0}
	logs := map[TopicPartition][]Record{p0: {rec(0, 0, "k", "v0"), rec(0, 1, "k", "v1"), rec(0, 3, "k", "v3"), rec(0, 4, "k", "v4")}}
	var got []string
	for _, op := range c.Around(logs, p0, 2, 1) {
		at := ""
		if !op.At.IsZero() {
			at = fmt.Sprintf("@%v", op.At.Sub(epoch))
		}
		got = append(got, fmt.Sprintf("%d %s %s%s", op.Offset, op.What, op.Value, at))
	}
	want := []string{"1 acknowledged v1@7s", "1 log v1", "2 acknowledged v2@8s", "2 read v2@11s", "3 acknowledged v3@9s", "3 log v3"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("Around:\n %s\nwant\n %s", strings.Join(got, "; "), strings.Join(want, "; "))
	}
	res := c.VerifyAll(logs)
	if len(res.Violations) != 2 || res.Violations[0].Kind != KindLost || res.Violations[0].Offset != 2 || res.Violations[0].At != epoch.Add(8*time.Second) ||
		res.Violations[1].Kind != KindUnstableRead || res.Violations[1].At != epoch.Add(11*time.Second) {
		t.Fatalf("violations %+v, want v2's loss at offset 2, acknowledged at 8 s, and its unstable read at 11 s", res.Violations)
	}
	lat := c.Latencies()
	if len(lat) != 5 || lat[0].Acked.Sub(lat[0].Sent) != 5*time.Second || !lat[4].Acked.Equal(epoch.Add(10*time.Second)) {
		t.Fatalf("Latencies %v", lat)
	}
}

// A consumer sent back by a log that lost what its commit covered
// commits lower: allowed when the commit it undid falls in a MayLose
// window, a violation otherwise; the lower commit is the group's
// committed offset from then on.
func TestCheckerMayLoseCommits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		from    time.Duration // the window, from epoch
		allowed bool
	}{
		{"the undone commit in the window", 2 * time.Second, true},
		{"the undone commit before it", 10 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, logs := goodHistory()
			c.SetClock((&fakeClock{t: epoch}).now)
			p0 := TopicPartition{"t", 0}
			for _, r := range logs[p0] {
				c.Processed("g", "m1", r)
			}
			c.Committed("g", "m1", p0, 3) // at 1 s, the clock's first tick
			c.Committed("g", "m1", p0, 1) // sent back, at 2 s
			c.Fetched("g", p0, 1)         // the coordinator agrees: no commit lost
			c.MayLose(epoch.Add(tc.from-time.Second), epoch.Add(20*time.Second), "test window")
			res := c.VerifyAll(logs)
			if tc.allowed != (len(res.Violations) == 0 && len(res.Allowed) == 1) {
				t.Fatalf("violations %v, allowed %v", res.Violations, res.Allowed)
			}
			all := append(res.Violations, res.Allowed...)
			if len(all) != 1 || all[0].Kind != KindCommitBackwards {
				t.Fatalf("found %v, want one commit-backwards", all)
			}
		})
	}
}
