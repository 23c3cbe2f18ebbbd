package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 18: retention overtaking a consumer is a gap, never a silent
// reset. A group whose committed offset fell below the log start stops
// with the gap named, unless --on-gap says where to go on. Before this,
// the member's client reset such a partition to the log end without a
// word, skipping the lost records and the retained ones.

// gapGroup makes group g on topic "gap" with a gap in partition 0: g read
// a (committed 1) and nothing of partition 1 (committed 0, its start when
// g joined); then b and c were deleted unread (log start 3, d and e
// retained) and x and y written to partition 1.
func gapGroup(t *testing.T) *groupTestNode {
	t.Helper()
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "gap", "--partitions", "2")
	n.ok(t, "a\nb\nc\nd\ne\n", "produce", "gap", "--partition", "0")
	n.ok(t, "", "consume", "gap", "--group", "g", "--from-beginning", "--max-messages", "1")
	n.wantCommitted(t, "g", map[topicPartition]int64{tp("gap", 0): 1, tp("gap", 1): 0})
	n.ok(t, "x\ny\n", "produce", "gap", "--partition", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var before kadm.Offsets
	before.Add(kadm.Offset{Topic: "gap", Partition: 0, At: 3})
	deleted, err := n.adm.DeleteRecords(ctx, before)
	if err == nil {
		err = deleted.Error()
	}
	if err != nil {
		t.Fatalf("deleting the records of gap-0 before offset 3: %v", err)
	}
	return n
}

// The gap as consume names it: topic, partition, committed offset, log
// start and the records lost.
const gapIn0 = "gap-0: committed offset 1 is below the log start 3: 2 records lost, deleted (by retention or DeleteRecords) before the group read them"

func TestConsumeGroupStopsAtGap(t *testing.T) {
	n := gapGroup(t)
	committed := map[topicPartition]int64{tp("gap", 0): 1, tp("gap", 1): 0}
	for run := range 2 {
		// Without --max-messages: only the gap can end the run.
		r := fjord(t, "", "consume", "gap", "--group", "g", "--format", `%p %o %v\n`, "--brokers", n.brokers)
		want := "fjord: gap in the log for group g: " + gapIn0 + "; nothing more is printed from gap-0: " +
			"go on with --on-gap earliest (from the log start) or --on-gap latest (from the log end), " +
			`or move the group with "fjord group reset-offsets g --topic gap:0 --to-earliest --execute" (or --to-latest)` + "\n"
		if r.code == 0 || r.stderr != want {
			t.Fatalf("run %d: exit %d, stderr:\n%s\nwant a non-zero exit and:\n%s", run, r.code, r.stderr, want)
		}
		// Nothing of partition 0; what was printed of partition 1
		// (the poll that met the gap may have brought x and y) is
		// committed, as on any exit.
		for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
			switch {
			case l == "":
			case strings.HasPrefix(l, "1 "):
				committed[tp("gap", 1)]++
			default:
				t.Errorf("run %d printed %q: nothing of partition 0 belongs before the gap is decided", run, l)
			}
		}
		// The second run meets the same gap: nothing moved it.
		n.wantCommitted(t, "g", committed)
	}
}

func TestConsumeGroupOnGapEarliest(t *testing.T) {
	n := gapGroup(t)
	r := n.ok(t, "", "consume", "gap", "--group", "g", "--on-gap", "earliest", "--max-messages", "4", "--format", `%p %o %v\n`)
	if got, want := sortedLines(r.stdout), []string{"0 3 d", "0 4 e", "1 0 x", "1 1 y"}; !slices.Equal(got, want) {
		t.Fatalf("printed %q, want %q: partition 0 from its log start", got, want)
	}
	if want := "fjord: warning: gap in the log for group g: " + gapIn0 + "; --on-gap earliest: going on from offset 3, the log start\n"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr does not warn:\n%s\nwant:\n%s", r.stderr, want)
	}
	n.wantCommitted(t, "g", map[topicPartition]int64{tp("gap", 0): 5, tp("gap", 1): 2})
}

// --on-gap latest skips the records still in the log too, says so, and
// commits the log end though it prints nothing from there.
func TestConsumeGroupOnGapLatest(t *testing.T) {
	n := gapGroup(t)
	c := n.startConsumer(t, "gap", "--group", "g", "--on-gap", "latest", "--format", `%p %o %v\n`)
	want := "fjord: warning: gap in the log for group g: " + gapIn0 +
		"; --on-gap latest: going on from offset 5, the log end, skipping also the 2 records still in the log (offsets 3 to 4)\n"
	testutil.Eventually(t, 20*time.Second, func() error {
		if !strings.Contains(c.stderr.String(), want) {
			return fmt.Errorf("stderr does not warn:\n%s\nwant:\n%s", c.stderr.String(), want)
		}
		return nil
	})
	testutil.Eventually(t, 4*groupCommitInterval, func() error {
		if got := n.committed(t, "g")[tp("gap", 0)]; got != 5 {
			return fmt.Errorf("group g has committed %d in gap-0, want 5, the log end", got)
		}
		return nil
	})
	n.ok(t, "f\n", "produce", "gap", "--partition", "0")
	var printed []string
	for !slices.Contains(printed, "0 5 f") {
		l, ok := c.next(20 * time.Second)
		if !ok {
			t.Fatalf("consumer printed %q and not f; stderr:\n%s", printed, c.stderr.String())
		}
		printed = append(printed, l)
	}
	printed = append(printed, c.interrupt(t)...)
	for _, l := range printed {
		if strings.HasPrefix(l, "0 ") && l != "0 5 f" {
			t.Errorf("consumer printed %q: --on-gap latest skips what partition 0 held", l)
		}
	}
}

// The gap made by retention.ms itself, not by DeleteRecords.
func TestConsumeGroupStopsAtRetentionGap(t *testing.T) {
	n := startGroupNode(t, func(c *node.Config) { c.LogRetentionCheckInterval = 100 * time.Millisecond })
	// segment.ms of a minute: the new records, an hour younger than
	// the old, roll a segment of their own, so retention can delete the
	// old records without them.
	n.ok(t, "", "topic", "create", "aging", "--partitions", "1", "--config", "segment.ms=60000")
	n.produceAt(t, "aging", 0, time.Now().Add(-time.Hour), "a", "b", "c")
	n.produceAt(t, "aging", 0, time.Now(), "d", "e")
	n.ok(t, "", "consume", "aging", "--group", "g", "--from-beginning", "--max-messages", "1")
	n.wantCommitted(t, "g", map[topicPartition]int64{tp("aging", 0): 1})

	// A minute: a, b and c are an hour old, d and e outlive the test.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	minute := "60000"
	altered, err := n.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &minute}}, "aging")
	if err == nil {
		_, err = altered.On("aging", nil)
	}
	if err != nil {
		t.Fatalf("setting retention.ms of aging: %v", err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		starts, err := n.adm.ListStartOffsets(ctx, "aging")
		if err == nil {
			err = starts.Error()
		}
		if err != nil {
			return err
		}
		if s, _ := starts.Lookup("aging", 0); s.Offset != 3 {
			return fmt.Errorf("log start of aging-0 is %d, want 3 once retention deleted a, b and c", s.Offset)
		}
		return nil
	})

	r := fjord(t, "", "consume", "aging", "--group", "g", "--format", `%o %v\n`, "--brokers", n.brokers)
	want := "aging-0: committed offset 1 is below the log start 3: 2 records lost"
	if r.code == 0 || !strings.Contains(r.stderr, want) || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant a non-zero exit naming %q and nothing printed", r.code, r.stdout, r.stderr, want)
	}
	n.wantCommitted(t, "g", map[topicPartition]int64{tp("aging", 0): 1})

	r = n.ok(t, "", "consume", "aging", "--group", "g", "--on-gap", "earliest", "--max-messages", "2", "--format", `%o %v\n`)
	if r.stdout != "3 d\n4 e\n" || !strings.Contains(r.stderr, want) {
		t.Fatalf("--on-gap earliest printed %q, stderr:\n%s\nwant d and e, and a warning naming %q", r.stdout, r.stderr, want)
	}
	n.wantCommitted(t, "g", map[topicPartition]int64{tp("aging", 0): 5})
}

// Point 6 of issue 18: bad input is refused before anything is consumed.
func TestConsumeOnGapBadInput(t *testing.T) {
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "calm", "--partitions", "1")
	n.ok(t, "a\n", "produce", "calm")
	for _, c := range []struct {
		want string
		args []string
	}{
		{"--on-gap goes with --group: only a group member resumes from committed offsets that can fall out of the log",
			[]string{"consume", "calm", "--from-beginning", "--on-gap", "earliest"}},
		{`invalid argument "sideways" for "--on-gap" flag: allowed: earliest, latest`,
			[]string{"consume", "calm", "--group", "g", "--from-beginning", "--on-gap", "sideways"}},
		{`invalid argument "" for "--on-gap" flag: allowed: earliest, latest`,
			[]string{"consume", "calm", "--group", "g", "--from-beginning", "--on-gap", ""}},
	} {
		if r := n.fails(t, c.want, c.args...); r.stdout != "" {
			t.Errorf("fjord %s printed %q", strings.Join(c.args, " "), r.stdout)
		}
	}
	n.wantCommitted(t, "g", map[topicPartition]int64{})
}

// decideGaps, case by case: the words and numbers consume prints, and
// where each partition goes on from.
func TestDecideGaps(t *testing.T) {
	const advice = ": go on with --on-gap earliest (from the log start) or --on-gap latest (from the log end), or move the group with "
	below := logGap{partition: 0, committed: 1, start: 3, end: 5}
	for _, c := range []struct {
		name     string
		onGap    string
		gaps     []logGap
		err      string
		warnings []string
		moved    map[int32]kgo.EpochOffset
	}{
		{name: "stop", gaps: []logGap{below},
			err: "gap in the log for group g: " + gapIn0 + "; nothing more is printed from gap-0" + advice +
				`"fjord group reset-offsets g --topic gap:0 --to-earliest --execute" (or --to-latest)`},
		{name: "stop naming every partition", gaps: []logGap{below, {partition: 2, committed: 0, start: 1, end: 1}},
			err: "gap in the log for group g: " + gapIn0 + "; gap-2: committed offset 0 is below the log start 1: 1 record lost, " +
				"deleted (by retention or DeleteRecords) before the group read them; nothing more is printed from those partitions" + advice +
				`"fjord group reset-offsets g --topic gap:0,2 --to-earliest --execute" (or --to-latest)`},
		{name: "stop past the end", gaps: []logGap{{partition: 1, committed: 9, start: 0, end: 5}},
			err: "gap in the log for group g: gap-1: committed offset 9 is past the log end 5: the log no longer holds 4 records the group read; " +
				"nothing more is printed from gap-1" + advice + `"fjord group reset-offsets g --topic gap:1 --to-earliest --execute" (or --to-latest)`},
		{name: "earliest", onGap: onGapEarliest, gaps: []logGap{below},
			warnings: []string{"gap in the log for group g: " + gapIn0 + "; --on-gap earliest: going on from offset 3, the log start"},
			moved:    map[int32]kgo.EpochOffset{0: {Epoch: -1, Offset: 3}}},
		{name: "latest", onGap: onGapLatest, gaps: []logGap{below},
			warnings: []string{"gap in the log for group g: " + gapIn0 +
				"; --on-gap latest: going on from offset 5, the log end, skipping also the 2 records still in the log (offsets 3 to 4)"},
			moved: map[int32]kgo.EpochOffset{0: {Epoch: -1, Offset: 5}}},
		{name: "latest with nothing retained", onGap: onGapLatest, gaps: []logGap{{partition: 0, committed: 1, start: 3, end: 3}},
			warnings: []string{"gap in the log for group g: " + gapIn0 + "; --on-gap latest: going on from offset 3, the log end"},
			moved:    map[int32]kgo.EpochOffset{0: {Epoch: -1, Offset: 3}}},
		{name: "latest past the end", onGap: onGapLatest, gaps: []logGap{{partition: 1, committed: 9, start: 0, end: 5}},
			warnings: []string{"gap in the log for group g: gap-1: committed offset 9 is past the log end 5: the log no longer holds 4 records the group read; " +
				"--on-gap latest: going on from offset 5, the log end"},
			moved: map[int32]kgo.EpochOffset{1: {Epoch: -1, Offset: 5}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			moved, warnings, err := decideGaps("g", "gap", c.onGap, c.gaps)
			if got := fmt.Sprint(err); c.err != "" && got != c.err || c.err == "" && err != nil {
				t.Errorf("error:\n%v\nwant:\n%s", err, c.err)
			}
			if !slices.Equal(warnings, c.warnings) {
				t.Errorf("warnings:\n%q\nwant:\n%q", warnings, c.warnings)
			}
			if !maps.Equal(moved, c.moved) {
				t.Errorf("moved %v, want %v", moved, c.moved)
			}
		})
	}
}
