package kafkaserver

// The data path end to end inside one process: franz-go against the
// Server wired to the real replica manager over real storage files (the
// controller is still the in-memory one). This is where the frame-buffer
// reuse of the produce path and the pooled fetch buffers meet real
// appends and reads, with every codec.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/vfs"
)

// newRealReplicasHarness is a wire harness whose Server calls the real
// replica manager over real storage files in a temporary directory, fed
// every image as a controller subscriber would be.
func newRealReplicasHarness(t *testing.T, opts ...harnessOpt) *wireHarness {
	t.Helper()
	dir := t.TempDir()
	sm, err := storage.OpenManager(vfs.OS(), dir, storage.DefaultConfig(), storage.ManagerOptions{Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	rm := replica.NewManager(replica.Options{NodeID: 1, Storage: sm, Defaults: storage.DefaultConfig(), Logger: testutil.Logger(t), DataDir: dir})
	h := newWireHarness(t, append(opts, withReplicas(func(h *wireHarness) Replicas {
		h.ctrl.onImage = rm.ApplyImage
		rm.ApplyImage(h.ctrl.Image())
		h.manager = rm
		return rm
	}))...)
	// Cleanups run last-registered first: stop the server before the
	// services under it (the harness's own Close then does nothing).
	t.Cleanup(func() {
		h.srv.Close()
		if err := rm.Close(); err != nil {
			t.Error(err)
		}
		if err := sm.Close(); err != nil {
			t.Error(err)
		}
	})
	return h
}

// The log's refusals of a produce reach the client with the codes and
// the words they had when this package mapped storage's errors itself:
// the replica manager's sentinel gives the code, and the message (v8+)
// is still the storage layer's own.
func TestLogRefusalsOverTheWire(t *testing.T) {
	h := newRealReplicasHarness(t)
	h.ctrl.addTopic("t", 1)
	idempotent := func(epoch int16, seq int32) []byte {
		opts := record.DefaultBatchOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 7, epoch, seq
		b := record.NewBuilder(opts)
		b.Add(nil, []byte("v"), nil, time.Now().UnixMilli())
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	c := h.dial()
	if p := producePartition(t, c.roundTrip(produceReq(9, -1, "t", 0, idempotent(1, 0)))); p.ErrorCode != 0 {
		t.Fatalf("first idempotent batch: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	badCRC := batch(t, "c", 1)
	badCRC[len(badCRC)-1] ^= 0xff
	huge := record.NewBuilder(record.DefaultBatchOptions())
	huge.Add(nil, make([]byte, 2<<20), nil, time.Now().UnixMilli())
	tooLarge, err := huge.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		records []byte
		want    *kerr.Error
		message string // what the message starts with
	}{
		{"bad CRC", badCRC, kerr.CorruptMessage, "record: crc mismatch"},
		{"over max.message.bytes", tooLarge, kerr.MessageTooLarge, "storage: record batch too large"},
		{"sequence gap", idempotent(1, 5), kerr.OutOfOrderSequenceNumber, "out of order sequence number: "},
		{"fenced producer epoch", idempotent(0, 1), kerr.InvalidProducerEpoch, "invalid producer epoch: "},
	} {
		p := producePartition(t, c.roundTrip(produceReq(9, -1, "t", 0, tc.records)))
		if p.ErrorCode != tc.want.Code {
			t.Errorf("%s: error %s, want %s", tc.name, kerr.ErrorForCode(p.ErrorCode), tc.want)
		}
		var msg string
		if p.ErrorMessage != nil {
			msg = *p.ErrorMessage
		}
		if !strings.HasPrefix(msg, tc.message) {
			t.Errorf("%s: message %q, want it to start %q", tc.name, msg, tc.message)
		}
	}
}

// Each way a fetch answer is written: records copied into the response,
// and every partition's records sent from the page cache with sendfile
// (the default sends only answers of 64 KiB or more that way). Consumers
// read at Fetch v16 (flexible, topic ids) and, through a client capped
// at Kafka 2.0's versions, at v8 (length prefixes of four bytes).
func TestKgoAgainstRealReplicaManager(t *testing.T) {
	for _, mode := range []struct {
		name     string
		minBytes int
	}{{"copy", -1}, {"sendfile", 1}} {
		t.Run(mode.name, func(t *testing.T) { testKgoAgainstRealReplicaManager(t, mode.minBytes) })
	}
}

func testKgoAgainstRealReplicaManager(t *testing.T, sendfileMinBytes int) {
	h := newRealReplicasHarness(t, withConfig(func(c *Config) { c.SendfileMinBytes = sendfileMinBytes }))
	h.ctrl.numPartitions = 3

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	const perCodec = 300
	var produced []*kgo.Record
	for name, codec := range codecs {
		p, err := kgo.NewClient(
			kgo.SeedBrokers(h.addr),
			kgo.DefaultProduceTopic("real"),
			kgo.AllowAutoTopicCreation(),
			kgo.ProducerBatchCompression(codec),
			kgo.RequiredAcks(kgo.AllISRAcks()),
		)
		if err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i := range perCodec {
			recs = append(recs, &kgo.Record{
				Key:   []byte(fmt.Sprintf("%s-%d", name, i%13)),
				Value: []byte(fmt.Sprintf("%s value %d %x", name, i, make([]byte, i%200))),
			})
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			p.Close()
			t.Fatalf("%s: produce: %v", name, err)
		}
		p.Close()
		produced = append(produced, recs...)
	}

	for _, versions := range []struct {
		name string
		max  *kversion.Versions
	}{{"latest", kversion.Stable()}, {"kafka 2.0", kversion.V2_0_0()}} {
		before := h.srv.rangeBytesSent.Load()
		consumeAll(ctx, t, h.addr, versions.max, produced)
		sent := h.srv.rangeBytesSent.Load() - before
		if sendfileMinBytes > 0 && sent == 0 {
			t.Errorf("%s: no record bytes went out with sendfile", versions.name)
		}
		if sendfileMinBytes < 0 && sent != 0 {
			t.Errorf("%s: %d bytes went out with sendfile, which is off", versions.name, sent)
		}
	}
}

// consumeAll reads the topic "real" from the start with a client capped
// at max's versions and checks every produced record comes back once,
// where it was produced.
func consumeAll(ctx context.Context, t *testing.T, addr string, max *kversion.Versions, produced []*kgo.Record) {
	t.Helper()
	c, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.MaxVersions(max),
		kgo.ConsumeTopics("real"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.FetchMaxPartitionBytes(64<<10), // several fetches per partition
	)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := make(map[string]*kgo.Record)
	for len(got) < len(produced) {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", len(got), len(produced))
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if _, dup := got[string(r.Value)]; dup {
				t.Fatalf("duplicate %q", r.Value)
			}
			got[string(r.Value)] = r
		})
	}
	for _, want := range produced {
		r := got[string(want.Value)]
		if r == nil || r.Partition != want.Partition || r.Offset != want.Offset || string(r.Key) != string(want.Key) {
			t.Fatalf("%q: consumed %+v, produced at %d/%d", want.Value, r, want.Partition, want.Offset)
		}
	}
}
