package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/testutil"
)

// Retention overtaking an HTTP consumer is a gap, never a silent reset
// (issue 18, acceptance point 3, the HTTP half; point 6 for bad seeks).

// gapAnswer is a consume's answer, gaps included. Gaps is a pointer so
// that an answer without the field, or with null, is told from an empty
// list: clients rely on it being there.
type gapAnswer struct {
	Records []struct {
		Partition int32 `json:"partition"`
		Offset    int64 `json:"offset"`
	} `json:"records"`
	Gaps    *[]wireGap `json:"gaps"`
	Error   string     `json:"error"`
	Message string     `json:"message"`
}

type wireGap struct {
	Partition       int32  `json:"partition"`
	Reason          string `json:"reason"`
	Position        *int64 `json:"position"`
	CommittedOffset *int64 `json:"committed_offset"`
	LogStartOffset  int64  `json:"log_start_offset"`
	LogEndOffset    int64  `json:"log_end_offset"`
	RecordsLost     *int64 `json:"records_lost"`
}

func (g wireGap) String() string {
	opt := func(v *int64) string {
		if v == nil {
			return "null"
		}
		return fmt.Sprint(*v)
	}
	return fmt.Sprintf("partition %d %s position=%s committed=%s log=%d..%d lost=%s", g.Partition, g.Reason,
		opt(g.Position), opt(g.CommittedOffset), g.LogStartOffset, g.LogEndOffset, opt(g.RecordsLost))
}

// newGapEnv is a node whose new groups rebalance at once and whose logs
// are checked for retention every 200 ms, so that a test waits for
// neither Kafka's 3 s nor its 5 minutes.
func newGapEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, node.Config{
		NodeID: 1, DataDir: t.TempDir(),
		KafkaAddr: "127.0.0.1:0", ControllerAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		GroupInitialRebalanceDelay: -1,
		LogRetentionCheckInterval:  200 * time.Millisecond,
		Logger:                     slog.New(slog.DiscardHandler),
	})
}

// createTopicConfigs creates topic with partitions and configs.
func (e *env) createTopicConfigs(topic string, partitions int32, configs map[string]string) {
	e.t.Helper()
	c := map[string]*string{}
	for k, v := range configs {
		c[k] = &v
	}
	resp, err := e.adm.CreateTopic(context.Background(), partitions, 1, c, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// produceStamped produces one record per timestamp to partition p, each
// in its own batch (so, with a segment.bytes under two batches, in its
// own segment), and returns their offsets.
func (e *env) produceStamped(topic string, p int32, stamps ...time.Time) []int64 {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.n.KafkaAddr().String()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	var offsets []int64
	for i, ts := range stamps {
		rec := &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprint(i)), Timestamp: ts}
		if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			e.t.Fatal(err)
		}
		offsets = append(offsets, rec.Offset)
	}
	return offsets
}

// commitKafka commits group's offsets through the Kafka protocol, which
// checks them against no log (the HTTP commit refuses one outside it).
func (e *env) commitKafka(group, topic string, offsets map[int32]int64) {
	e.t.Helper()
	os := kadm.Offsets{}
	for p, o := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	resp, err := e.adm.CommitOffsets(context.Background(), group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// committedAt is group's committed offset of partition p, -1 for none.
func (e *env) committedAt(group, topic string, p int32) int64 {
	e.t.Helper()
	os, err := e.adm.FetchOffsets(context.Background(), group)
	if err != nil {
		e.t.Fatal(err)
	}
	if o, ok := os.Lookup(topic, p); ok {
		return o.At
	}
	return -1
}

// consumeGap consumes at path as a fresh instance joins, until an
// answer names a gap and want[p] records of each other partition p came,
// and returns that gap and the offsets read. Every answer must carry
// gaps, and none a record of a partition in a gap.
func (e *env) consumeGap(path string, want map[int32]int) (wireGap, map[int32][]int64) {
	e.t.Helper()
	read := map[int32][]int64{}
	var gap *wireGap
	testutil.Eventually(e.t, 30*time.Second, func() error {
		a := e.consumeChecked(path)
		for _, r := range a.Records {
			read[r.Partition] = append(read[r.Partition], r.Offset)
		}
		for _, g := range *a.Gaps {
			if gap != nil && gap.Partition != g.Partition {
				e.t.Fatalf("two partitions in a gap: %v and %v", gap, g)
			}
			gap = &g
		}
		if gap == nil {
			return fmt.Errorf("no gap yet; read %v", read)
		}
		if len(read[gap.Partition]) > 0 {
			e.t.Fatalf("records %v of partition %d, in a gap, were delivered", read[gap.Partition], gap.Partition)
		}
		for p, n := range want {
			if len(read[p]) < n {
				return fmt.Errorf("read %v, want %d records of partition %d", read, n, p)
			}
		}
		return nil
	})
	return *gap, read
}

// consumeChecked is one consume at path, which must answer 200 with a
// gaps list.
func (e *env) consumeChecked(path string) gapAnswer {
	e.t.Helper()
	var a gapAnswer
	if st := e.do("GET", path, "", &a); st != 200 {
		e.t.Fatalf("consume: %d %+v", st, a)
	}
	if a.Gaps == nil {
		e.t.Fatalf("consume: an answer without gaps: %+v", a)
	}
	return a
}

// consumeFrom consumes at path until n records of partition p came
// (after a seek), and returns their offsets; no answer may name a gap.
func (e *env) consumeFrom(path string, p int32, n int) []int64 {
	e.t.Helper()
	var read []int64
	testutil.Eventually(e.t, 30*time.Second, func() error {
		a := e.consumeChecked(path)
		if len(*a.Gaps) > 0 {
			e.t.Fatalf("a gap after the seek: %v", *a.Gaps)
		}
		for _, r := range a.Records {
			if r.Partition == p {
				read = append(read, r.Offset)
			}
		}
		if len(read) < n {
			return fmt.Errorf("read %v of partition %d, want %d records", read, p, n)
		}
		return nil
	})
	return read
}

// seek seeks as group and returns the offset the answer names.
func (e *env) seek(topic, body string) int64 {
	e.t.Helper()
	var res result
	if st := e.do("POST", "/v1/topics/"+topic+"/seek", body, &res); st != 200 {
		e.t.Fatalf("seek %s: %d %+v", body, st, res)
	}
	return res.Offset
}

// A group committed in two partitions; retention.ms deletes the records
// of partition 0 it had not read. The consume delivers partition 1 and
// names partition 0's gap, with the numbers, on every consume, without
// delivering from it or moving it; a seek to the earliest resumes it at
// the log start.
func TestConsumeReportsRetentionGap(t *testing.T) {
	e := newGapEnv(t)
	// An hour of retention, and a segment per batch (a one-record batch
	// is about 70 bytes; a batch over segment.bytes is refused) so that
	// retention deletes record by record.
	e.createTopicConfigs("aging", 2, map[string]string{"retention.ms": "3600000", "segment.bytes": "100"})
	old, now := time.Now().Add(-2*time.Hour), time.Now()
	e.produceStamped("aging", 0, old, old, old, old, old) // 0 to 4: past retention
	e.produceStamped("aging", 0, now, now, now)           // 5 to 7
	e.produceStamped("aging", 1, now, now, now)           // 0 to 2
	e.commitKafka("slow", "aging", map[int32]int64{0: 2, 1: 0})
	testutil.Eventually(t, 20*time.Second, func() error {
		starts, err := e.adm.ListStartOffsets(context.Background(), "aging")
		if err != nil {
			return err
		}
		if o, _ := starts.Lookup("aging", 0); o.Offset != 5 {
			return fmt.Errorf("partition 0 starts at %d, want 5 once retention has run", o.Offset)
		}
		return nil
	})

	const path = "/v1/topics/aging/consume?group=slow&timeout_ms=300"
	gap, read := e.consumeGap(path, map[int32]int{1: 3})
	const want = "partition 0 behind_log_start position=null committed=2 log=5..8 lost=3"
	if gap.String() != want {
		t.Fatalf("gap %v, want %s", gap, want)
	}
	if fmt.Sprint(read[1]) != "[0 1 2]" {
		t.Fatalf("partition 1 delivered %v, want [0 1 2]", read[1])
	}
	for range 3 {
		a := e.consumeChecked(path)
		if len(a.Records) > 0 || len(*a.Gaps) != 1 || (*a.Gaps)[0].String() != want {
			t.Fatalf("consume again: records %+v, gaps %v; want none and %s", a.Records, *a.Gaps, want)
		}
	}
	if c := e.committedAt("slow", "aging", 0); c != 2 {
		t.Fatalf("partition 0 committed at %d after the gap, want 2 (the server moves nothing)", c)
	}

	if o := e.seek("aging", `{"group": "slow", "partition": 0, "to": "earliest"}`); o != 5 {
		t.Fatalf("seek to the earliest answered offset %d, want 5", o)
	}
	if got := e.consumeFrom(path, 0, 3); fmt.Sprint(got) != "[5 6 7]" {
		t.Fatalf("after the seek partition 0 delivered %v, want [5 6 7]", got)
	}
}

// gapTopic makes the gap most tests start from: partition 0 has ten
// records stamped a second apart from base (offset i at base + i s),
// and a records deletion has moved its log start to 6; partition 1 has
// two. group committed 1 in partition 0 (five records below the log
// start) and 0 in partition 1. It consumes until the gap is named and
// partition 1 delivered, and checks the gap.
func (e *env) gapTopic(topic, group string) (base time.Time) {
	e.t.Helper()
	e.createTopic(topic, 2)
	base = time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	var stamps []time.Time
	for i := range 10 {
		stamps = append(stamps, base.Add(time.Duration(i)*time.Second))
	}
	e.produceStamped(topic, 0, stamps...)
	e.produceStamped(topic, 1, base, base)
	e.commitKafka(group, topic, map[int32]int64{0: 1, 1: 0})
	e.deleteRecordsBefore(topic, 0, 6)
	gap, read := e.consumeGap("/v1/topics/"+topic+"/consume?group="+group+"&timeout_ms=300", map[int32]int{1: 2})
	if want := "partition 0 behind_log_start position=null committed=1 log=6..10 lost=5"; gap.String() != want {
		e.t.Fatalf("gap %v, want %s", gap, want)
	}
	if fmt.Sprint(read[1]) != "[0 1]" {
		e.t.Fatalf("partition 1 delivered %v, want [0 1]", read[1])
	}
	return base
}

// Each way out of a gap resumes the partition where it says, and the
// gap is gone.
func TestConsumeGapSeeks(t *testing.T) {
	e := newGapEnv(t)
	for _, tc := range []struct {
		name string
		seek func(base time.Time) string // the seek's fields past group and partition
		// produce: records to produce to partition 0 after the seek,
		// for a seek to the log end.
		produce int
		first   int64
	}{
		{"earliest", func(time.Time) string { return `"to": "earliest"` }, 0, 6},
		{"latest", func(time.Time) string { return `"to": "latest"` }, 1, 10},
		{"timestamp", func(base time.Time) string {
			return fmt.Sprintf(`"timestamp": %d`, base.Add(8*time.Second).UnixMilli())
		}, 0, 8},
		{"offset", func(time.Time) string { return `"offset": 7` }, 0, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic, group := "gap-"+tc.name, "g-"+tc.name
			base := e.gapTopic(topic, group)
			if o := e.seek(topic, fmt.Sprintf(`{"group": %q, "partition": 0, %s}`, group, tc.seek(base))); o != tc.first {
				t.Fatalf("seek answered offset %d, want %d", o, tc.first)
			}
			e.produceStamped(topic, 0, make([]time.Time, tc.produce)...)
			got := e.consumeFrom("/v1/topics/"+topic+"/consume?group="+group+"&timeout_ms=300", 0, int(10+int64(tc.produce)-tc.first))
			for i, o := range got {
				if o != tc.first+int64(i) {
					t.Fatalf("after the seek partition 0 delivered %v, want %d and on in order", got, tc.first)
				}
			}
		})
	}
}

// Bad seeks of a partition in a gap are refused with a code saying
// which, and move nothing: the gap stands with the same numbers, the
// committed offset too.
func TestConsumeGapBadSeeks(t *testing.T) {
	e := newGapEnv(t)
	e.gapTopic("t", "g")
	const want = "partition 0 behind_log_start position=null committed=1 log=6..10 lost=5"
	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"group": "g", "partition": 0}`, 400, "bad_seek"},
		{`{"group": "g", "partition": 0, "offset": 7, "to": "earliest"}`, 400, "bad_seek"},
		{`{"group": "g", "partition": 0, "timestamp": 5, "to": "latest"}`, 400, "bad_seek"},
		{`{"group": "g", "partition": 0, "offset": 7, "timestamp": 5}`, 400, "bad_seek"},
		{`{"group": "g", "partition": 0, "to": "beginning"}`, 400, "bad_seek"},
		{`{"group": "g", "partition": 0, "to": "EARLIEST"}`, 400, "bad_seek"},
		{`{"group": "g", "partition": 0, "to": 7}`, 400, "malformed_json"},
		{`{"group": "g", "partition": 0, "offset": -3}`, 400, "bad_offset"},
		{`{"group": "g", "partition": 0, "timestamp": -1}`, 400, "bad_timestamp"},
		{`{"group": "g", "partition": 0, "timestamp": -2}`, 400, "bad_timestamp"},
		{`{"group": "g", "partition": 2, "to": "earliest"}`, 400, "bad_partition"},
		{`{"group": "g", "partition": 0, "offset": 3}`, 416, "offset_out_of_range"},
		{`{"group": "g", "partition": 0, "offset": 11}`, 416, "offset_out_of_range"},
		// Another instance id: none runs, so the seek would be a
		// commit, which the coordinator refuses while "g" has members.
		{`{"group": "g", "consumer": "other", "partition": 0, "to": "earliest"}`, 409, "group_conflict"},
	} {
		var res result
		if st := e.do("POST", "/v1/topics/t/seek", tc.body, &res); st != tc.status || res.Error != tc.code {
			t.Errorf("seek %s: %d %+v, want %d %s", tc.body, st, res, tc.status, tc.code)
		} else if tc.status == 416 && !strings.Contains(res.Message, "6 to 10") {
			t.Errorf("seek %s: %q does not name the log, 6 to 10", tc.body, res.Message)
		}
	}
	a := e.consumeChecked("/v1/topics/t/consume?group=g&timeout_ms=300")
	if len(a.Records) > 0 || len(*a.Gaps) != 1 || (*a.Gaps)[0].String() != want {
		t.Fatalf("after the refused seeks: records %+v, gaps %v; want none and %s", a.Records, *a.Gaps, want)
	}
	if c := e.committedAt("g", "t", 0); c != 1 {
		t.Fatalf("partition 0 committed at %d after refused seeks, want 1", c)
	}

	// With no instance left, a seek to the earliest is a commit of the
	// log start.
	var res result
	if st := e.do("DELETE", "/v1/topics/t/consume?group=g", "", &res); st != 200 {
		t.Fatalf("close the instance: %d %+v", st, res)
	}
	if o := e.seek("t", `{"group": "g", "partition": 0, "to": "earliest"}`); o != 6 {
		t.Fatalf("seek to the earliest answered offset %d, want 6", o)
	}
	if c := e.committedAt("g", "t", 0); c != 6 {
		t.Fatalf("partition 0 committed at %d after a seek to the earliest, want 6", c)
	}
}

// A position past the log end (a commit past it through the Kafka
// protocol; a truncation would do the same) is a gap too, said as
// such, with no count of records lost. It stands when the log grows over
// the position (what is written there is not what the position was
// after), until a seek resumes it.
func TestConsumeGapPastLogEnd(t *testing.T) {
	e := newGapEnv(t)
	e.createTopic("t", 2)
	e.produceN("t", 0, 3)
	e.produceN("t", 1, 2)
	e.commitKafka("ahead", "t", map[int32]int64{0: 5, 1: 0})
	const path = "/v1/topics/t/consume?group=ahead&timeout_ms=300"
	gap, read := e.consumeGap(path, map[int32]int{1: 2})
	if want := "partition 0 past_log_end position=null committed=5 log=0..3 lost=null"; gap.String() != want {
		t.Fatalf("gap %v, want %s", gap, want)
	}
	if fmt.Sprint(read[1]) != "[0 1]" {
		t.Fatalf("partition 1 delivered %v, want [0 1]", read[1])
	}

	e.produceN("t", 0, 4) // 3 to 6: the log now ends past the position
	const want = "partition 0 past_log_end position=null committed=5 log=0..7 lost=null"
	for range 5 { // enough polls for franz-go to fetch at 5 again
		a := e.consumeChecked(path)
		if len(a.Records) > 0 || len(*a.Gaps) != 1 || (*a.Gaps)[0].String() != want {
			t.Fatalf("after the log grew: records %+v, gaps %v; want none and %s", a.Records, *a.Gaps, want)
		}
	}

	if o := e.seek("t", `{"group": "ahead", "partition": 0, "offset": 3}`); o != 3 {
		t.Fatalf("seek answered offset %d, want 3", o)
	}
	if got := e.consumeFrom(path, 0, 4); fmt.Sprint(got) != "[3 4 5 6]" {
		t.Fatalf("after the seek partition 0 delivered %v, want [3 4 5 6]", got)
	}
}
