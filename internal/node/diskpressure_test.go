package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/testutil"
)

// mountSmallFS mounts a tmpfs of size bytes for the test and unmounts it
// at cleanup (after the node, whose cleanup is registered later, has
// closed). Mounting needs root, which CI has; without it the test fails
// saying so rather than skip.
func mountSmallFS(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("mounting a %d-byte tmpfs for the disk-pressure test (needs root, as CI runs): %v", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting the test's tmpfs: %v", err)
		}
	})
	return dir
}

// payload is record i's value: 64 KiB that say which record they are,
// random so that no compression shrinks them.
func payload(i int) []byte {
	v := make([]byte, 64<<10)
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(i))
	_, _ = rand.NewChaCha8(seed).Read(v)
	copy(v, fmt.Sprintf("record-%08d", i))
	return v
}

// fillUntilRefused produces 64 KiB records to topic, eight at a time,
// until the node refuses them; it returns how many were acknowledged and
// the refusal. A franz-go client retries KAFKA_STORAGE_ERROR (retriable);
// RecordRetries makes it give up after a few.
func fillUntilRefused(t *testing.T, n *Node, topic string, first int) (acked int, refusal error) {
	t.Helper()
	cl := newClient(t, n, kgo.RecordRetries(2), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := first; ; i += 8 {
		var recs []*kgo.Record
		for j := range 8 {
			recs = append(recs, &kgo.Record{Value: payload(i + j)})
		}
		res := cl.ProduceSync(ctx, recs...)
		for _, r := range res {
			if r.Err != nil {
				if refusal == nil {
					refusal = r.Err
				}
				continue
			}
			acked++
		}
		if refusal != nil {
			return acked, refusal
		}
		if i > 1<<20 {
			t.Fatal("a million records went into a small file system without a refusal")
		}
	}
}

// checkPayloads reads topic's partition 0 from its start and requires
// records first..first+count-1, in order, each whole.
func checkPayloads(t *testing.T, n *Node, topic string, first, count int) {
	t.Helper()
	cl := newClient(t, n, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxBytes(16<<20))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	next := first
	for next < first+count {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%s: read %d of %d acknowledged records: %v", topic, next-first, count, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch %s: %v", topic, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if next < first+count && !bytes.Equal(r.Value, payload(next)) {
				t.Fatalf("%s offset %d: not record %d as acknowledged (%q...)", topic, r.Offset, next, r.Value[:15])
			}
			next++
		})
	}
}

func diskState(t *testing.T, n *Node) (state, refused float64) {
	t.Helper()
	m := scrape(t, n)
	state, _ = m.Value("fjord_log_dir_free_space_state")
	refused, _ = m.Value("fjord_produce_refused_disk_pressure_total")
	return state, refused
}

// Acceptance point 3's first half: on a small file system (a 96 MiB
// tmpfs the test mounts), produces are refused with KAFKA_STORAGE_ERROR
// below log.dir.free.space.refuse, before the disk is full; everything
// acknowledged before is intact and readable; offset commits still go
// in; and freeing space (retention, then deleting a topic) lets writes
// resume by themselves: producers that kept retrying get through with
// no one touching them. franz-go, Sarama and a raw Produce v9 each see
// the documented error.
func TestDiskPressureOnSmallFilesystem(t *testing.T) {
	const fsSize = 96 << 20
	dir := mountSmallFS(t, fsSize)
	cfg := testConfig(t, filepath.Join(dir, "data"))
	cfg.LogDirFreeSpaceWarn = "48MiB"
	cfg.LogDirFreeSpaceRefuse = "24MiB"
	cfg.LogRetentionCheckInterval = 200 * time.Millisecond
	n := startNode(t, cfg)
	testutil.Eventually(t, 10*time.Second, n.Ready)
	adm := kadm.NewClient(newClient(t, n))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seg := map[string]*string{"segment.bytes": kadm.StringPtr("1048576")}
	for _, topic := range []string{"bulk", "filler"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, seg, topic); err != nil {
			t.Fatal(err)
		}
	}

	// Fill: the refusal comes with room still on the disk.
	acked, refusal := fillUntilRefused(t, n, "bulk", 0)
	if !errors.Is(refusal, kerr.KafkaStorageError) {
		t.Fatalf("after %d records: %v, want KAFKA_STORAGE_ERROR", acked, refusal)
	}
	_, free, err := replica.DiskSpace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("franz-go: %d records of 64 KiB acknowledged, then %v; %d MiB free", acked, refusal, free>>20)
	if free < 16<<20 || free >= 24<<20+(24<<20)/10 {
		t.Fatalf("%d bytes free at the refusal: want about the 24 MiB threshold, well short of full", free)
	}
	if state, refused := diskState(t, n); state != 2 || refused < 1 {
		t.Fatalf("fjord_log_dir_free_space_state %v, refused %v: want 2 and at least 1", state, refused)
	}

	// The documented error, as each client sees it.
	cl := newClient(t, n)
	raw := kmsg.NewPtrProduceRequest()
	raw.SetVersion(9)
	raw.Acks, raw.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "bulk"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = rawBatch(t, payload(1<<20))
	rt.Partitions = append(rt.Partitions, rp)
	raw.Topics = append(raw.Topics, rt)
	resp, err := raw.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.KafkaStorageError.Code || p.ErrorMessage == nil ||
		!strings.Contains(*p.ErrorMessage, "short of disk space") || !strings.Contains(*p.ErrorMessage, "log.dir.free.space.refuse") {
		t.Fatalf("Produce v9: error %d, message %v: want 56 KAFKA_STORAGE_ERROR saying why", p.ErrorCode, p.ErrorMessage)
	}
	t.Logf("Produce v9: %s: %s", kerr.ErrorForCode(p.ErrorCode), *p.ErrorMessage)
	sc := sarama.NewConfig()
	sc.Producer.Return.Successes = true
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Producer.Retry.Max = 1
	sc.Producer.Retry.Backoff = 50 * time.Millisecond
	sp, err := sarama.NewSyncProducer([]string{n.KafkaAddr().String()}, sc)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = sp.SendMessage(&sarama.ProducerMessage{Topic: "bulk", Value: sarama.ByteEncoder(payload(1 << 21))})
	sp.Close()
	if !errors.Is(err, sarama.ErrKafkaStorageError) {
		t.Fatalf("Sarama: %v, want ErrKafkaStorageError", err)
	}
	t.Logf("Sarama: %v", err)

	// Fetches and offset commits go on.
	checkPayloads(t, n, "bulk", 0, acked)
	if _, err := adm.CommitOffsets(ctx, "readers", kadm.OffsetsFromRecords(kgo.Record{Topic: "bulk", Partition: 0, Offset: int64(acked) - 1})); err != nil {
		t.Fatalf("offset commit under disk pressure: %v", err)
	}

	// A producer that keeps retrying (franz-go's default) waits out the
	// pressure and gets through once retention frees space.
	waiting := produceRefusedInBackground(t, n, "bulk", payload(1<<22))
	freed := time.Now()
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.bytes", Value: kadm.StringPtr("4194304")}}, "bulk"); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err != nil {
		t.Fatalf("the retrying producer, after retention freed space: %v", err)
	}
	t.Logf("the retrying producer got through %v after retention was set", time.Since(freed))
	if state, _ := diskState(t, n); state == 2 {
		t.Fatal("writes went in while the state still says refusing")
	}

	// Again, freed this time by deleting a topic.
	more, refusal := fillUntilRefused(t, n, "filler", 0)
	if !errors.Is(refusal, kerr.KafkaStorageError) {
		t.Fatalf("filling again after %d records: %v, want KAFKA_STORAGE_ERROR", more, refusal)
	}
	checkPayloads(t, n, "filler", 0, more)
	waiting = produceRefusedInBackground(t, n, "bulk", payload(1<<23))
	freed = time.Now()
	if _, err := adm.DeleteTopic(ctx, "filler"); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err != nil {
		t.Fatalf("the retrying producer, after deleting a topic freed space: %v", err)
	}
	t.Logf("the retrying producer got through %v after the topic was deleted", time.Since(freed))
	if state, refused := diskState(t, n); state == 2 || refused < 3 {
		t.Fatalf("state %v, refused %v after space returned: want below 2, and the refusals counted", state, refused)
	}
}

// produceRefusedInBackground is produceInBackground, returning once the
// node has refused the record at least once (the refusal counter grew),
// so what frees space afterwards is what lets it through.
func produceRefusedInBackground(t *testing.T, n *Node, topic string, value []byte) <-chan error {
	t.Helper()
	_, before := diskState(t, n)
	out := produceInBackground(t, n, topic, value)
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, refused := diskState(t, n); refused <= before {
			return fmt.Errorf("%v refusals, none yet of the retrying producer", refused)
		}
		return nil
	})
	return out
}

// produceInBackground produces one record with franz-go's default
// retries (until its delivery timeout) and sends the outcome.
func produceInBackground(t *testing.T, n *Node, topic string, value []byte) <-chan error {
	cl := newClient(t, n, kgo.RecordDeliveryTimeout(2*time.Minute))
	out := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out <- cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr()
	}()
	return out
}

// rawBatch is one v2 batch holding value, for a hand-made Produce.
func rawBatch(t *testing.T, value []byte) []byte {
	t.Helper()
	b := record.NewBuilder(record.DefaultBatchOptions())
	b.Add(nil, value, nil, time.Now().UnixMilli())
	data, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return data
}
