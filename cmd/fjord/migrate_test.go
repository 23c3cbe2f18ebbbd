package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceKeyed writes n records over keys k0..k(keys-1), each key's
// values its sequence numbers from first, placed by franz-go's default
// partitioner (murmur2 of the key).
func produceKeyed(t *testing.T, topic string, first, n, keys int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers(t)), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%keys), Value: []byte(strconv.Itoa(first + i/keys))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestTopicMigrate, against a real node: a keyed topic of 4 partitions
// copied to 8 (first without --cutover, then with), each key's records
// in order on the partition murmur2 puts it in among 8; the source then
// refuses produces naming the destination, and the group that had
// consumed part of the source has the offsets that resume it.
func TestTopicMigrate(t *testing.T) {
	src, dst, group := topicName("mig-src"), topicName("mig-dst"), topicName("mig-group")
	ok(t, "", "topic", "create", src, "--partitions", "4")
	produceKeyed(t, src, 0, 400, 20)

	// The group consumes every record of the source, commits, leaves.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers(t)), kgo.ConsumerGroup(group), kgo.ConsumeTopics(src),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for got := 0; got < 400; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 400", got)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	r := ok(t, "", "topic", "migrate", src, dst, "--partitions", "8")
	if !strings.Contains(r.stdout, "caught up") || !strings.Contains(r.stderr, "copying") {
		t.Errorf("migrate without --cutover:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	produceKeyed(t, src, 20, 40, 20) // seq 20 and 21 of each key, after the copy caught up
	// A new migration of the same source to another topic is refused
	// while this one is unfinished.
	fails(t, "is being migrated to "+dst, "topic", "migrate", src, topicName("other"), "--partitions", "8", "--brokers", brokers(t))
	r = ok(t, "", "topic", "migrate", src, dst, "--cutover")
	if !strings.Contains(r.stdout, "migrated "+src+" to "+dst) || !strings.Contains(r.stderr, "moving consumer groups") {
		t.Errorf("migrate --cutover:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}

	// The destination: every record once, each key in order, on its
	// murmur2 partition among 8.
	rd, err := kgo.NewClient(kgo.SeedBrokers(brokers(t)), kgo.ConsumeTopics(dst), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	hash := kgo.StickyKeyPartitioner(nil).ForTopic(dst)
	next := map[string]int{}
	for got := 0; got < 440; {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 440 from %s", got, dst)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			got++
			k := string(rec.Key)
			if want := int32(hash.Partition(&kgo.Record{Key: rec.Key}, 8)); rec.Partition != want {
				t.Errorf("key %s in partition %d, want %d", k, rec.Partition, want)
			}
			if n, _ := strconv.Atoi(string(rec.Value)); n != next[k] {
				t.Errorf("key %s: %d after %d", k, n, next[k]-1)
			}
			next[k]++
		})
	}
	for k := range 20 {
		if n := next[fmt.Sprintf("k%d", k)]; n != 22 {
			t.Errorf("key k%d has %d records in %s, want 22", k, n, dst)
		}
	}

	// The source refuses produces, naming the destination; the
	// destination takes them.
	if r := fjord(t, "x\n", "produce", src, "--brokers", brokers(t)); r.code == 0 || !strings.Contains(r.stderr, dst) {
		t.Errorf("produce to the migrated source: exit %d, stderr %q; want a failure naming %s", r.code, r.stderr, dst)
	}
	ok(t, "x\n", "produce", dst)
	resp, err := http.Post("http://"+sharedNode(t).HTTPAddr().String()+"/v1/topics/"+src+"/produce", "application/json",
		strings.NewReader(`{"value": "eA=="}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "topic_migrated") || !strings.Contains(string(body), dst) {
		t.Errorf("HTTP produce to the migrated source: %d %s, want 409 topic_migrated naming %s", resp.StatusCode, body, dst)
	}

	// The group's offsets on the destination: it had consumed all but
	// the 40 written after the copy caught up, so it resumes at the
	// chunk that holds them, not at the start.
	adm := kadm.NewClient(rdClient(t))
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var resumed int64
	for p := range int32(8) {
		o, ok := offs.Lookup(dst, p)
		if !ok {
			t.Fatalf("group %s has no offset for %s-%d: %v", group, dst, p, offs)
		}
		resumed += o.At
	}
	if resumed == 0 {
		t.Errorf("group %s resumes %s from its start", group, dst)
	}
	// Resumed there, the group gets every record it had not consumed
	// (seq 20 and 21 of each key), and of the rest at most the chunk's.
	gc, err := kgo.NewClient(kgo.SeedBrokers(brokers(t)), kgo.ConsumerGroup(group), kgo.ConsumeTopics(dst),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	unconsumed, again := map[string]bool{}, 0
	for got := int64(0); got < 441-resumed; {
		fs := gc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the group read %d of the %d records after its offsets", got, 441-resumed)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			got++
			if n, err := strconv.Atoi(string(rec.Value)); err == nil && n >= 20 {
				unconsumed[fmt.Sprintf("%s/%d", rec.Key, n)] = true
			} else if err == nil {
				again++
			}
		})
	}
	if len(unconsumed) != 40 {
		t.Errorf("the group resumed on %s and got %d of the 40 records it had not consumed", dst, len(unconsumed))
	}
	t.Logf("resumed on %s: %d records consumed again", dst, again)

	// Run again: nothing left to do.
	r = ok(t, "", "topic", "migrate", src, dst, "--cutover")
	if !strings.Contains(r.stdout, "migrated "+src+" to "+dst) {
		t.Errorf("migrate again:\n%s", r.stdout)
	}
}

func rdClient(t *testing.T) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Issue 18, point 6: a migration that cannot be is refused with one clear
// line, and nothing is created or changed.
func TestTopicMigrateBadInput(t *testing.T) {
	src, existing := topicName("migbad-src"), topicName("migbad-existing")
	ok(t, "", "topic", "create", src, "--partitions", "4")
	ok(t, "", "topic", "create", existing, "--partitions", "8")
	fresh := topicName("migbad-new")
	b := brokers(t)
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"destination topic \"" + existing + "\" exists", []string{src, existing, "--partitions", "8"}},
		{"cannot merge", []string{src, fresh, "--partitions", "2"}},
		{"the destination is the source", []string{src, src, "--partitions", "8"}},
		{"--partitions is required", []string{src, fresh}},
		{"does not exist", []string{topicName("migbad-missing"), fresh, "--partitions", "8"}},
		{"internal to Fjord", []string{"__consumer_offsets", fresh, "--partitions", "64"}},
		{"internal to Fjord", []string{src, "__fjord_migrations", "--partitions", "8"}},
		{"contains", []string{src, "a b", "--partitions", "8"}},
		{"--partitions", []string{src, fresh, "--partitions", "0"}},
		{"--partitions", []string{src, fresh, "--partitions", "-1"}},
		{"--partitions", []string{src, fresh, "--partitions", "10001"}},
		{"--partitions", []string{src, fresh, "--partitions", "many"}},
		{"accepts 2 arg(s)", []string{src}},
	} {
		fails(t, tc.want, append(append([]string{"topic", "migrate"}, tc.args...), "--brokers", b)...)
	}
	// Nothing changed: no destination was created, the existing topic
	// keeps its partitions, the source still takes produces.
	r := ok(t, "", "topic", "list")
	if strings.Contains(r.stdout, fresh) {
		t.Errorf("a refused migration created %s:\n%s", fresh, r.stdout)
	}
	if rows := describeRows(t, ok(t, "", "topic", "describe", existing).stdout); len(rows) != 8 {
		t.Errorf("%s has %d partitions after the refusals, want 8", existing, len(rows))
	}
	ok(t, "x\n", "produce", src)
}
