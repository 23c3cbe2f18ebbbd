package clustertest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 18, lag in records, bytes and seconds: a group's coordinator
// reports its lag on every partition, those led by other nodes too, and
// under steady produce the lag in seconds is the age of the first record
// the group has not consumed, to within a second of that record's
// produced timestamp.
//
// A producer writes to six partitions (leaders on all three nodes)
// throughout. A group consumes and commits for a while, then stops; once
// the coordinator has refreshed after the last commit, each partition's
// fjord_consumer_group_lag_seconds must be the refresh's time less the
// timestamp of the record at the committed offset (read back from the
// log), within a second; and records and bytes must be there for every
// partition.
func (e *env) consumerLag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, group, partitions = "lagged", "lagged-g", 6
	e.createTopic(t, ctx, topic, partitions, 3)
	seeds := strings.Split(e.c.Brokers(), ",")

	// Steady produce, about 200 records a second, round robin.
	pr, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	produceCtx, stopProducing := context.WithCancel(ctx)
	var produced sync.WaitGroup
	produced.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-produceCtx.Done():
				return
			case <-tick.C:
			}
			pr.Produce(produceCtx, &kgo.Record{Value: fmt.Appendf(nil, "r%06d", i)}, nil)
		}
	})
	defer func() { stopProducing(); produced.Wait() }()

	// The group consumes and commits until it has read a few hundred
	// records, from every partition (a partition it never read has no
	// commit, and so no lag to report), then leaves (its offsets stay).
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	read := map[int32]bool{}
	for consumed := 0; consumed < 600 || len(read) < partitions; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		consumed += fs.NumRecords()
		fs.EachRecord(func(r *kgo.Record) { read[r.Partition] = true })
		if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
	}
	consumer.Close()
	stoppedAt := time.Now()

	adm := kadm.NewClient(e.cl)
	coord := adm.FindGroupCoordinators(ctx, group)[group]
	if coord.Err != nil {
		t.Fatalf("finding the coordinator: %v", coord.Err)
	}
	coordinator := coord.NodeID
	scrape := func() testutil.Metrics {
		return testutil.Scrape(t, nil, "http://"+e.c.Node(coordinator).HTTPAddr()+"/metrics")
	}
	// A refresh that began after the last commit, with every partition's
	// leader answering (a leader just elected or a topic just created
	// can miss a refresh or two; refreshes come every second to five).
	var m testutil.Metrics
	testutil.Eventually(t, 60*time.Second, func() error {
		m = scrape()
		at, _ := m.Value("fjord_consumer_group_lag_refresh_timestamp_seconds")
		if at < float64(stoppedAt.UnixMilli())/1000 {
			return fmt.Errorf("the last lag refresh began at %v, before the group stopped at %v", at, stoppedAt)
		}
		if rows := len(m.ByLabel("fjord_consumer_group_lag_seconds", "partition", "group="+group)); rows != partitions {
			unknown, _ := m.Value("fjord_consumer_group_lag_unknown")
			took, _ := m.Value("fjord_consumer_group_lag_refresh_duration_seconds")
			return fmt.Errorf("lag of %d partitions reported, want %d (unknown pairs %v, the refresh took %v s)", rows, partitions, unknown, took)
		}
		return nil
	})
	refreshedAt, _ := m.Value("fjord_consumer_group_lag_refresh_timestamp_seconds")
	if unknown, _ := m.Value("fjord_consumer_group_lag_unknown"); unknown != 0 {
		t.Errorf("%v (group, partition) pairs of unknown lag", unknown)
	}

	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil || committed.Error() != nil {
		t.Fatalf("committed offsets: %v %v", err, committed.Error())
	}
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ledElsewhere := 0
	for p := range int32(partitions) {
		ps := strconv.Itoa(int(p))
		c, ok := committed.Lookup(topic, p)
		if !ok {
			t.Fatalf("partition %d has no committed offset", p)
		}
		if md.Topics[topic].Partitions[p].Leader != coordinator {
			ledElsewhere++
		}
		ts := e.timestampAt(t, ctx, topic, p, c.At)
		want := max(refreshedAt-float64(ts.UnixMilli())/1000, 0)
		secs, _ := m.Value("fjord_consumer_group_lag_seconds", "group="+group, "topic="+topic, "partition="+ps)
		records, _ := m.Value("fjord_consumer_group_lag_records", "group="+group, "topic="+topic, "partition="+ps)
		bytes, _ := m.Value("fjord_consumer_group_lag_bytes", "group="+group, "topic="+topic, "partition="+ps)
		t.Logf("partition %d (leader %d): committed %d, lag %v records, %v bytes, %.3f s (from the record's timestamp: %.3f s)",
			p, md.Topics[topic].Partitions[p].Leader, c.At, records, bytes, secs, want)
		if secs < want-1 || secs > want+1 {
			t.Errorf("partition %d: lag %.3f s, but the record at the committed offset %d was %.3f s old at the refresh", p, secs, c.At, want)
		}
		if (records > 0) != (bytes > 0) || (records > 0) != (secs > 0 || want == 0) {
			t.Errorf("partition %d: lag %v records, %v bytes, %v s: not all or none", p, records, bytes, secs)
		}
	}
	if ledElsewhere == 0 {
		t.Errorf("every partition is led by the coordinator %d: the test shows nothing about other leaders", coordinator)
	}
}

// timestampAt reads the record at offset of topic's partition p (waiting
// for it to be produced) and returns its timestamp.
func (e *env) timestampAt(t *testing.T, ctx context.Context, topic string, p int32, offset int64) time.Time {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.c.Brokers(), ",")...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(offset)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("reading %s-%d at %d: %v", topic, p, offset, err)
		}
		for _, r := range fs.Records() {
			if r.Offset == offset {
				return r.Timestamp
			}
		}
	}
}
