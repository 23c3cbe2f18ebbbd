package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/testutil"
)

// BenchmarkTransactionalProduce is issue 17's acceptance point 7:
// transactional produce beside plain idempotent produce, in the same
// sitting, on one node. One franz-go producer, acks=all, no compression,
// 1 KiB records of random bytes over 4 partitions; the transactional one
// commits every 100 ms of producing (Kafka's published overhead figure,
// about 3%, is for 100 ms transactions), and reports its commit latency
// (EndTransaction after a flush: the coordinator's PrepareCommit record,
// its markers to the partitions and the answer) at the median and p99.
// b.N is the number of records; run it with a fixed count so both cases
// move the same bytes:
//
//	go test ./internal/e2e -run '^$' -bench BenchmarkTransactionalProduce -benchtime 300000x -count 3
//
// transactional-100ms takes Transactions V2 (franz-go reads the
// transaction.version feature); transactional-100ms-v1 caps the client
// below EndTxn v5, so it takes V1, as clients from before KIP-890 do.
func BenchmarkTransactionalProduce(b *testing.B) {
	b.Run("idempotent", func(b *testing.B) { benchmarkTxnProduce(b, false, false) })
	b.Run("transactional-100ms", func(b *testing.B) { benchmarkTxnProduce(b, true, false) })
	b.Run("transactional-100ms-v1", func(b *testing.B) { benchmarkTxnProduce(b, true, true) })
}

func benchmarkTxnProduce(b *testing.B, transactional, v1 bool) {
	node := testcluster.Start(b, testcluster.Options{LogLevel: "warn"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const topic, partitions = "bench", 4
	admin, err := kgo.NewClient(kgo.SeedBrokers(node.Brokers()))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	resp, err := kadm.NewClient(admin).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.Fatalf("create topic: %v", err)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(node.Brokers()),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(1 << 20),
		kgo.MaxBufferedRecords(1 << 16),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
	}
	if transactional {
		opts = append(opts, kgo.TransactionalID("bench-txn"), kgo.TransactionTimeout(time.Minute))
	}
	if v1 {
		versions := kversion.Stable()
		versions.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
		opts = append(opts, kgo.MaxVersions(versions))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()

	payloads := benchPayloads()
	var acks benchAcks
	wg, done := &acks.wg, acks.done
	var (
		commits []time.Duration
		markers int64 // the commits' markers: one per partition written
		inTxn   int   // records produced in the open transaction
	)
	commit := func() {
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		at := time.Now()
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatalf("commit: %v", err)
		}
		if inTxn > 0 {
			commits = append(commits, time.Since(at))
			markers += int64(min(inTxn, partitions))
		}
		inTxn = 0
	}
	warm := int64(0)
	if transactional {
		// One transaction before the clock starts: the producer id, the
		// coordinator's topic and its load are not what is measured.
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		for i := range partitions {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Value: payloads[i]}, done)
		}
		inTxn = partitions
		commit()
		wg.Wait()
		warm = partitions
		commits = commits[:0]
	}
	b.SetBytes(1024)
	b.ResetTimer()
	start := time.Now()
	if transactional {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
	}
	txnStart := time.Now()
	for i := range b.N {
		if transactional && time.Since(txnStart) >= 100*time.Millisecond {
			commit()
			if err := cl.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
			txnStart = time.Now()
		}
		wg.Add(1)
		inTxn++
		cl.Produce(ctx, &kgo.Record{Value: payloads[i%len(payloads)]}, done)
	}
	if transactional {
		commit()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	acks.check(b)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	if len(commits) > 0 {
		slices.Sort(commits)
		b.ReportMetric(float64(len(commits)), "commits")
		b.ReportMetric(float64(commits[len(commits)/2].Microseconds())/1000, "commit-p50-ms")
		b.ReportMetric(float64(commits[len(commits)*99/100].Microseconds())/1000, "commit-p99-ms")
	}

	// Every acknowledged record is in the log, and every marker: one per
	// partition a committed transaction wrote. A commit is answered once
	// the coordinator has decided it; its markers follow, so the last
	// commit's may still be on their way.
	want := int64(b.N) + warm + markers
	testutil.Eventually(b, 10*time.Second, func() error {
		ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		var total int64
		ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
		if total != want {
			return fmt.Errorf("log holds %d offsets, want %d (%d records, %d before the clock, %d markers)", total, want, b.N, warm, markers)
		}
		return nil
	})
}
