package history

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func rec(p int32, off int64, key, value string) Record {
	return Record{Topic: "t", Partition: p, Offset: off, Key: []byte(key), Value: []byte(value)}
}

// goodHistory is a producer's view of a run that went right: five records
// over two partitions, all acknowledged except v4 (in flight at a fault,
// written, answer lost), plus the log that matches it.
func goodHistory() (*Checker, map[TopicPartition][]Record) {
	c := NewChecker()
	for _, r := range []Record{rec(0, 0, "a", "v0"), rec(1, 0, "b", "v1"), rec(0, 1, "a", "v2"), rec(1, 1, "b", "v3"), rec(0, 2, "a", "v4")} {
		c.Sent(r.Topic, r.Key, r.Value)
	}
	for _, r := range []Record{rec(0, 0, "a", "v0"), rec(1, 0, "b", "v1"), rec(0, 1, "a", "v2"), rec(1, 1, "b", "v3")} {
		c.Acked(r)
	}
	logs := map[TopicPartition][]Record{
		{"t", 0}: {rec(0, 0, "a", "v0"), rec(0, 1, "a", "v2"), rec(0, 2, "a", "v4")},
		{"t", 1}: {rec(1, 0, "b", "v1"), rec(1, 1, "b", "v3")},
	}
	return c, logs
}

func TestCheckerAcceptsGoodHistory(t *testing.T) {
	c, logs := goodHistory()
	sum, err := c.Verify(logs)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Summary{Acked: 4, Read: 5, Unacked: 1}); sum != want {
		t.Fatalf("summary %+v, want %+v", sum, want)
	}
	if c.AckedCount() != 4 || len(c.Acks()) != 4 || c.Acks()[0].Value == nil {
		t.Fatalf("AckedCount %d, Acks %v", c.AckedCount(), c.Acks())
	}
	// A retry answered as a duplicate repeats the original ack: fine.
	c.Acked(rec(0, 1, "a", "v2"))
	if _, err := c.Verify(logs); err != nil {
		t.Fatalf("repeated identical ack: %v", err)
	}
	// Unacked records that never made it are fine too (at-least-once
	// only promises the acknowledged ones).
	logs[TopicPartition{"t", 0}] = logs[TopicPartition{"t", 0}][:2]
	if _, err := c.Verify(logs); err != nil {
		t.Fatalf("unacked record missing: %v", err)
	}
}

func TestCheckerFindsViolations(t *testing.T) {
	p0 := TopicPartition{"t", 0}
	p1 := TopicPartition{"t", 1}
	for _, tc := range []struct {
		name   string
		change func(c *Checker, logs map[TopicPartition][]Record)
		want   string
		kind   string
	}{
		{"acked record lost", func(c *Checker, logs map[TopicPartition][]Record) {
			logs[p1] = logs[p1][:1]
		}, `t-1 offset 1: acknowledged value "v3" missing`, KindLost},
		{"acked partition missing entirely", func(c *Checker, logs map[TopicPartition][]Record) {
			delete(logs, p1)
		}, `t-1 offset 0: acknowledged value "v1" missing`, KindLost},
		{"acked record at another offset", func(c *Checker, logs map[TopicPartition][]Record) {
			logs[p1] = []Record{rec(1, 0, "b", "v1"), rec(1, 2, "b", "v3")}
		}, `acknowledged value "v3" found at t-1 offset 2 instead`, KindMoved},
		{"acked offset holds another record", func(c *Checker, logs map[TopicPartition][]Record) {
			c.Sent("t", []byte("b"), []byte("v9"))
			logs[p1] = []Record{rec(1, 0, "b", "v1"), rec(1, 1, "b", "v9")}
		}, `acknowledged key "b" value "v3", read key "b" value "v9"`, KindLost},
		{"duplicate after a retry", func(c *Checker, logs map[TopicPartition][]Record) {
			logs[p0] = append(logs[p0], rec(0, 3, "a", "v4"))
		}, `value "v4" appears twice: t-0 offset 2 and t-0 offset 3`, KindDuplicate},
		{"duplicate across partitions", func(c *Checker, logs map[TopicPartition][]Record) {
			logs[p1] = append(logs[p1], rec(1, 2, "a", "v0"))
		}, `value "v0" appears twice`, KindDuplicate},
		{"offset repeated", func(c *Checker, logs map[TopicPartition][]Record) {
			c.Sent("t", []byte("b"), []byte("v5"))
			logs[p1] = append(logs[p1], rec(1, 1, "b", "v5"))
		}, `t-1: offset 1 follows offset 1`, KindBadOffsets},
		{"key order broken", func(c *Checker, logs map[TopicPartition][]Record) {
			logs[p0] = []Record{rec(0, 0, "a", "v0"), rec(0, 1, "a", "v4"), rec(0, 2, "a", "v2")}
		}, `key "a" out of order: its record #1 after its record #2`, KindOutOfOrder},
		{"phantom record", func(c *Checker, logs map[TopicPartition][]Record) {
			logs[p1] = append(logs[p1], rec(1, 2, "b", "never"))
		}, `value "never" was never sent`, KindPhantom},
		{"record under the wrong key", func(c *Checker, logs map[TopicPartition][]Record) {
			logs[p0][2] = rec(0, 2, "z", "v4")
		}, `value "v4" has key "z", sent with key "a"`, KindCorrupt},
		{"one offset acked for two values", func(c *Checker, logs map[TopicPartition][]Record) {
			c.Sent("t", []byte("a"), []byte("v6"))
			c.Acked(rec(0, 1, "a", "v6"))
		}, `t-0 offset 1 acknowledged twice, for value "v2" and for value "v6"`, KindConflictingAck},
		{"one value acked at two offsets", func(c *Checker, logs map[TopicPartition][]Record) {
			c.Acked(rec(0, 5, "a", "v2"))
		}, `value "v2" acknowledged at t-0 offset 1 and again at t-0 offset 5`, KindDuplicate},
		{"value sent twice", func(c *Checker, logs map[TopicPartition][]Record) {
			c.Sent("t", []byte("a"), []byte("v0"))
		}, `value "v0" sent twice to t`, KindBadHistory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, logs := goodHistory()
			tc.change(c, logs)
			_, err := c.Verify(logs)
			if err == nil {
				t.Fatal("Verify found nothing")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify: %v\nwant it to say %q", err, tc.want)
			}
			var vs *Violations
			if !errors.As(err, &vs) || vs.Counts()[tc.kind] == 0 {
				t.Fatalf("Verify: %v\nwant a violation of kind %s", err, tc.kind)
			}
		})
	}
}

func TestCheckerBoundsReport(t *testing.T) {
	c := NewChecker()
	logs := map[TopicPartition][]Record{}
	for i := range 100 {
		c.Acked(rec(0, int64(i), "k", fmt.Sprint(i)))
	}
	logs[TopicPartition{"t", 0}] = nil
	_, err := c.Verify(logs)
	if err == nil || !strings.Contains(err.Error(), "100 violations") || !strings.Contains(err.Error(), "... and 80 more") {
		t.Fatalf("Verify: %v", err)
	}
}

// TestCheckerConcurrentAcks runs the way producers use it: acks arrive on
// many goroutines. Run under -race.
func TestCheckerConcurrentAcks(t *testing.T) {
	c := NewChecker()
	const producers, each = 8, 500
	var logs [producers][]Record
	for p := range producers {
		for i := range each {
			r := rec(int32(p), int64(i), fmt.Sprint("k", p), fmt.Sprint(p, "/", i))
			c.Sent(r.Topic, r.Key, r.Value)
			logs[p] = append(logs[p], r)
		}
	}
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, r := range logs[p] {
				c.Acked(r)
				_ = c.AckedCount()
			}
		}()
	}
	wg.Wait()
	read := make(map[TopicPartition][]Record)
	for p := range producers {
		read[TopicPartition{"t", int32(p)}] = logs[p]
	}
	sum, err := c.Verify(read)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Acked != producers*each || sum.Read != producers*each || sum.Unacked != 0 {
		t.Fatalf("summary %+v", sum)
	}
}

// Live reads: what readers were served must be what the log keeps, and
// the same for every reader.
func TestCheckerLiveReads(t *testing.T) {
	c, logs := goodHistory()
	c.Read(rec(0, 0, "a", "v0"))
	c.Read(rec(0, 0, "a", "v0")) // a second reader, the same record
	c.Read(rec(1, 1, "b", "v3"))
	sum, err := c.Verify(logs)
	if err != nil || sum.LiveReads != 3 {
		t.Fatalf("stable reads: %v, %+v", err, sum)
	}
	for _, tc := range []struct {
		name string
		read Record
		want string
		kind string
	}{
		{"served, then gone", rec(0, 3, "a", "v5"), `t-0 offset 3: unstable read: value "v5" was served to a reader, and the log no longer has it`, KindUnstableRead},
		{"served, then replaced", rec(1, 0, "b", "v9"), `t-1 offset 0: unstable read: value "v9" was served to a reader, the log now has value "v1"`, KindUnstableRead},
		{"readers disagree", rec(0, 0, "a", "v7"), `t-0 offset 0: readers were served two records: value "v0" and value "v7"`, KindDivergentRead},
	} {
		c, logs := goodHistory()
		c.Read(rec(0, 0, "a", "v0"))
		c.Read(tc.read)
		_, err := c.Verify(logs)
		var vs *Violations
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &vs) || vs.Counts()[tc.kind] == 0 {
			t.Errorf("%s: %v, want it to say %q, of kind %s", tc.name, err, tc.want, tc.kind)
		}
	}
}

// A record acknowledged without an offset (librdkafka's -1001) must be
// in its partition's log; anywhere there will do.
func TestCheckerAcksWithoutAnOffset(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  map[TopicPartition][]Record
		kind string // "" for a pass
	}{
		{"present", map[TopicPartition][]Record{{"t", 0}: {rec(0, 0, "a", "v0"), rec(0, 1, "a", "v1")}}, ""},
		{"missing", map[TopicPartition][]Record{{"t", 0}: {rec(0, 0, "a", "v0")}}, KindLost},
		{"other partition", map[TopicPartition][]Record{{"t", 0}: {rec(0, 0, "a", "v0")}, {"t", 1}: {rec(1, 0, "a", "v1")}}, KindMoved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker()
			c.Sent("t", []byte("a"), []byte("v0"))
			c.Sent("t", []byte("a"), []byte("v1"))
			c.Acked(rec(0, 0, "a", "v0"))
			c.Acked(rec(0, -1001, "a", "v1"))
			sum, err := c.Verify(tc.log)
			if tc.kind == "" {
				if err != nil || sum.Acked != 2 || sum.Unacked != 0 {
					t.Fatalf("summary %+v, %v; want 2 acknowledged, none unacknowledged, no violation", sum, err)
				}
				return
			}
			var vs *Violations
			if !errors.As(err, &vs) || vs.Counts()[tc.kind] != 1 {
				t.Fatalf("%v: want one %s", err, tc.kind)
			}
		})
	}
}

// A record written twice is one duplicate, not also a record out of
// order for its key and its producer (regression: each copy was reported
// three times).
func TestCheckerDuplicateIsOneViolation(t *testing.T) {
	c := NewChecker()
	c.SentBy("p1", "t", []byte("a"), []byte("v0"))
	c.SentBy("p1", "t", []byte("a"), []byte("v1"))
	c.Acked(rec(0, 0, "a", "v0"))
	c.Acked(rec(0, 2, "a", "v1"))
	_, err := c.Verify(map[TopicPartition][]Record{{"t", 0}: {rec(0, 0, "a", "v0"), rec(0, 1, "a", "v0"), rec(0, 2, "a", "v1")}})
	var vs *Violations
	if !errors.As(err, &vs) || len(vs.All) != 1 || vs.Counts()[KindDuplicate] != 1 {
		t.Fatalf("Verify: %v, want one duplicate and nothing else", err)
	}
}

// The records of an aborted transaction may be missing from the log
// (read_committed never returns them), but a read of one, live or in the
// read-back, is KindAbortedRead; a record of a transaction whose end
// failed may be read or not.
func TestCheckerAbortedTransactions(t *testing.T) {
	c, logs := goodHistory()
	c.Sent("t", []byte("a"), []byte("x5"))
	c.Sent("t", []byte("b"), []byte("x6"))
	c.Aborted(rec(0, 3, "a", "x5"))
	c.Aborted(rec(1, 2, "b", "x6"))
	if c.AbortedCount() != 2 {
		t.Fatalf("AbortedCount %d, want 2", c.AbortedCount())
	}
	if _, err := c.Verify(logs); err != nil {
		t.Fatalf("aborted records missing from the read-back: %v", err)
	}
	// One in the read-back, one served live.
	logs[TopicPartition{"t", 0}] = append(logs[TopicPartition{"t", 0}], rec(0, 3, "a", "x5"))
	c.Read(rec(1, 2, "b", "x6"))
	res := c.VerifyAll(logs)
	var got []string
	for _, v := range res.Violations {
		if v.Kind == KindAbortedRead {
			got = append(got, v.Text)
		}
	}
	if len(got) != 2 || !strings.Contains(got[0]+got[1], "in the log read back") || !strings.Contains(got[0]+got[1], "was served to a reader") {
		t.Fatalf("aborted-read violations %q, want the read-back's and the live read's", got)
	}
}
