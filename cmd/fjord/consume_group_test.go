package main

import (
	"bufio"
	"fmt"
	"maps"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/testutil"
)

// Runs of `fjord consume --group` against a node of the test's own (see
// group_test.go): in-process with --max-messages, as a child process when
// the test must interrupt it.

func TestConsumeGroupResumesFromCommits(t *testing.T) {
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "log", "--partitions", "1")
	n.ok(t, "a\nb\nc\n", "produce", "log")

	// --max-messages commits exactly what was printed, though the poll
	// fetched more.
	r := n.ok(t, "", "consume", "log", "--group", "g", "--from-beginning", "--max-messages", "2")
	if r.stdout != "a\nb\n" || !strings.Contains(r.stderr, "consumed 2 records") {
		t.Fatalf("first run printed %q, stderr %q", r.stdout, r.stderr)
	}
	n.wantCommitted(t, "g", map[topicPartition]int64{tp("log", 0): 2})

	// The committed offset beats --from-beginning, which only says where
	// a partition without one starts.
	r = n.ok(t, "", "consume", "log", "--group", "g", "--from-beginning", "--max-messages", "1")
	if r.stdout != "c\n" {
		t.Fatalf("second run printed %q, want c only", r.stdout)
	}
	n.wantCommitted(t, "g", map[topicPartition]int64{tp("log", 0): 3})

	// A later run prints only what was produced after the commits.
	n.ok(t, "d\ne\n", "produce", "log")
	r = n.ok(t, "", "consume", "log", "--group", "g", "--max-messages", "2", "--format", `%o %v\n`)
	if r.stdout != "3 d\n4 e\n" {
		t.Fatalf("third run printed %q, want d and e at offsets 3 and 4", r.stdout)
	}
	n.wantCommitted(t, "g", map[topicPartition]int64{tp("log", 0): 5})

	// Another group has its own offsets.
	r = n.ok(t, "", "consume", "log", "--group", "other", "--from-beginning", "--max-messages", "5")
	if r.stdout != "a\nb\nc\nd\ne\n" {
		t.Fatalf("a second group printed %q, want everything", r.stdout)
	}
}

// childConsumer is `fjord consume` running as a child process.
type childConsumer struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *syncBuffer
}

func (n *groupTestNode) startConsumer(t *testing.T, args ...string) *childConsumer {
	t.Helper()
	c := &childConsumer{
		cmd:    fjordCommand(t, append(append([]string{"consume"}, args...), "--brokers", n.brokers)...),
		lines:  make(chan string, 1024),
		stderr: &syncBuffer{},
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stderr = writerFunc(func(p []byte) (int, error) { c.stderr.WriteString(string(p)); return len(p), nil })
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c
}

// next returns the next line printed, or false after d.
func (c *childConsumer) next(d time.Duration) (string, bool) {
	select {
	case l, ok := <-c.lines: // a record printed, or the output closed
		return l, ok
	case <-time.After(d): // nothing printed in time
		return "", false
	}
}

// interrupt sends SIGINT, waits for a clean exit and returns the lines
// printed that were not read yet.
func (c *childConsumer) interrupt(t *testing.T) []string {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for l := range c.lines {
		rest = append(rest, l)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("consume exited with %v after SIGINT; stderr:\n%s", err, c.stderr.String())
	}
	return rest
}

// printNew produces "new-i" to partition 0 of topic until c prints
// something: the consumer starts at the log end once it has its
// partitions, and only then does a record produced show up. It returns
// the lines printed.
func (n *groupTestNode) printNew(t *testing.T, c *childConsumer, topic string) []string {
	t.Helper()
	for i := range 20 {
		n.ok(t, fmt.Sprintf("new-%d\n", i), "produce", topic, "--partition", "0")
		if l, ok := c.next(time.Second); ok {
			return []string{l}
		}
	}
	t.Fatalf("consumer printed nothing of 20 records produced; stderr:\n%s", c.stderr.String())
	return nil
}

func TestConsumeGroupRunsUntilInterrupted(t *testing.T) {
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "feed", "--partitions", "2")
	n.ok(t, "old-0\n", "produce", "feed", "--partition", "0")
	n.ok(t, "old-1\n", "produce", "feed", "--partition", "1")

	c := n.startConsumer(t, "feed", "--group", "live", "--format", `%p %v\n`)
	printed := n.printNew(t, c, "feed")

	// While it runs it commits what it printed, and where it started in
	// the partition it printed nothing from, every few seconds.
	testutil.Eventually(t, 4*groupCommitInterval, func() error {
		got := n.committed(t, "live")
		want := map[topicPartition]int64{tp("feed", 0): n.logEnd(t, "feed", 0), tp("feed", 1): 1}
		if !maps.Equal(got, want) {
			return fmt.Errorf("group live has committed %v, want %v", got, want)
		}
		return nil
	})

	printed = append(printed, c.interrupt(t)...)
	for _, l := range printed {
		if !strings.HasPrefix(l, "0 new-") {
			t.Errorf("consumer printed %q: only records produced after it started belong", l)
		}
	}
	if !strings.Contains(c.stderr.String(), fmt.Sprintf("consumed %s\n", plural(int64(len(printed)), "record"))) {
		t.Errorf("no summary after SIGINT:\n%s", c.stderr.String())
	}
	// It left the group on exit: no member waits out a session timeout.
	if d := n.describe(t, "live"); d.State != "Empty" || len(d.Members) != 0 {
		t.Errorf("after the consumer exited the group is %s with %d members, want Empty", d.State, len(d.Members))
	}

	// The next run starts where this one stopped, also in the partition
	// it printed nothing from.
	n.ok(t, "later\n", "produce", "feed", "--partition", "1")
	r := n.ok(t, "", "consume", "feed", "--group", "live", "--max-messages", "1", "--format", `%p %v\n`)
	if r.stdout != "1 later\n" {
		t.Fatalf("next run printed %q, want the record produced in between", r.stdout)
	}
}

// Members share the topic's partitions; when one leaves, another takes
// its partitions over from the offsets it committed: every record is
// printed once.
func TestConsumeGroupMembersShareAndHandOver(t *testing.T) {
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "work", "--partitions", "4")
	a := n.startConsumer(t, "work", "--group", "crew", "--from-beginning", "--format", `%p %v\n`)
	testutil.Eventually(t, 20*time.Second, func() error {
		if d := n.describe(t, "crew"); d.State != "Stable" || len(d.Members) != 1 {
			return fmt.Errorf("group is %s with %d members", d.State, len(d.Members))
		}
		return nil
	})
	b := n.startConsumer(t, "work", "--group", "crew", "--from-beginning", "--format", `%p %v\n`)
	var assigned map[string]string // partition -> member
	testutil.Eventually(t, 20*time.Second, func() error {
		d := n.describe(t, "crew")
		assigned = map[string]string{}
		for _, m := range d.Members {
			if c, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range c.Topics {
					for _, p := range t.Partitions {
						assigned[fmt.Sprint(p)] = m.MemberID
					}
				}
			}
		}
		if d.State != "Stable" || len(d.Members) != 2 || len(assigned) != 4 {
			return fmt.Errorf("group is %s with %d members and %d partitions assigned", d.State, len(d.Members), len(assigned))
		}
		return nil
	})

	var in strings.Builder
	for i := range 40 {
		fmt.Fprintf(&in, "k%d:%d\n", i, i)
	}
	n.ok(t, in.String(), "produce", "work", "--key-separator", ":")
	seen := map[string]string{} // value -> "a" or "b"
	partitionOf := map[string]string{}
	for len(seen) < 40 {
		select {
		case l := <-a.lines: // a printed a record
			notePrinted(t, seen, partitionOf, "a", l)
		case l := <-b.lines: // b printed a record
			notePrinted(t, seen, partitionOf, "b", l)
		case <-time.After(20 * time.Second): // records arrive in milliseconds
			t.Fatalf("%d of 40 records printed; stderr of a:\n%s\nstderr of b:\n%s", len(seen), a.stderr.String(), b.stderr.String())
		}
	}
	// Each partition's records went to one member only.
	byMember := map[string]map[string]bool{"a": {}, "b": {}}
	for v, who := range seen {
		byMember[who][partitionOf[v]] = true
	}
	if len(byMember["a"]) == 0 || len(byMember["b"]) == 0 {
		t.Errorf("one member printed everything: a had partitions %v, b %v", byMember["a"], byMember["b"])
	}
	for p := range byMember["a"] {
		if byMember["b"][p] {
			t.Errorf("partition %s printed by both members", p)
		}
	}

	// a leaves; b takes over a's partitions from a's commits.
	for _, l := range a.interrupt(t) {
		notePrinted(t, seen, partitionOf, "a", l)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if d := n.describe(t, "crew"); d.State != "Stable" || len(d.Members) != 1 || len(d.AssignedPartitions()["work"]) != 4 {
			return fmt.Errorf("group is %s with %d members after one left", d.State, len(d.Members))
		}
		return nil
	})
	in.Reset()
	for i := 40; i < 80; i++ {
		fmt.Fprintf(&in, "k%d:%d\n", i, i)
	}
	n.ok(t, in.String(), "produce", "work", "--key-separator", ":")
	for len(seen) < 80 {
		l, ok := b.next(20 * time.Second)
		if !ok {
			t.Fatalf("%d of 80 records printed; stderr of b:\n%s", len(seen), b.stderr.String())
		}
		notePrinted(t, seen, partitionOf, "b", l)
	}
	for _, l := range b.interrupt(t) {
		notePrinted(t, seen, partitionOf, "b", l)
	}
	var ends int64
	for p := range int32(4) {
		ends += n.logEnd(t, "work", p)
	}
	if ends != 80 || len(seen) != 80 {
		t.Fatalf("%d records in the log, %d printed", ends, len(seen))
	}
}

// notePrinted notes a line "partition value" printed by who, failing the
// test on a record printed twice.
func notePrinted(t *testing.T, seen, partitionOf map[string]string, who, line string) {
	t.Helper()
	p, v, ok := strings.Cut(line, " ")
	if !ok {
		t.Fatalf("%s printed %q", who, line)
	}
	if prev, dup := seen[v]; dup {
		t.Fatalf("record %s printed by %s and again by %s", v, prev, who)
	}
	seen[v], partitionOf[v] = who, p
}
