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

// Regression (TestRollingRestart/Librdkafka in CI: a two-record batch
// written twice, the copy right after the original, as a node stopped):
// a node that learns it leads a partition between two pipelined produces
// of one idempotent producer refuses the first NOT_LEADER_OR_FOLLOWER,
// and must refuse the second the same way, not OUT_OF_ORDER_SEQUENCE_NUMBER.
// The old leader's KIP-951 answer sends the producer here before this
// node's image says it leads, so the window is real. librdkafka takes
// OUT_OF_ORDER_SEQUENCE_NUMBER on a request behind a failed one as a
// reason to bump its epoch (confluentinc/librdkafka#4953), and a bump
// renumbers every partition's queued batches from sequence 0, among
// them batches another stopped leader wrote and answered
// NOT_LEADER_OR_FOLLOWER (its epoch ended before they were committed):
// their new leader holds them, but cannot recognise them under the new
// epoch, and writes them again.
func TestPipelinedProduceBehindARefusedOneIsRefusedToo(t *testing.T) {
	const pid = 7
	idempotent := func(t *testing.T, seq int32) []byte {
		t.Helper()
		opts := record.DefaultBatchOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, 0, seq
		b := record.NewBuilder(opts)
		b.Add(nil, []byte(fmt.Sprintf("v%d", seq)), nil, time.Now().UnixMilli())
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// leadAgain runs in request 3's handler before its turn, once
	// request 2 has been answered: this node's image changes between
	// the two appends, as a new leader's does.
	leadAgain := make(chan func(), 1)
	secondAnswered := make(chan struct{})
	h := newRealReplicasHarness(t, withServer(func(s *Server) {
		s.testHookHandled = func(key int16, corr int32) {
			if key == produceKey && corr == 2 {
				close(secondAnswered)
			}
		}
		s.testHookProduceTurn = func(corr int32) {
			if corr == 3 {
				<-secondAnswered
				(<-leadAgain)()
			}
		}
	}))
	h.ctrl.addTopic("t", 1)
	setLeader := func(leader, epoch int32) {
		h.ctrl.setLeader("t", 0, leader, epoch)
		h.manager.ApplyImage(h.ctrl.Image())
	}
	leadAgain <- func() { setLeader(1, 2) }

	c := h.dial()
	if p := producePartition(t, c.roundTrip(produceReq(9, 1, "t", 0, idempotent(t, 0)))); p.ErrorCode != 0 {
		t.Fatalf("sequence 0: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	setLeader(2, 1) // another node leads for a while
	req2 := produceReq(9, 1, "t", 0, idempotent(t, 1))
	req3 := produceReq(9, 1, "t", 0, idempotent(t, 2))
	if c.send(req2) != 2 || c.send(req3) != 3 {
		t.Fatal("correlation ids")
	}
	p2 := producePartition(t, c.recv(req2, 2))
	p3 := producePartition(t, c.recv(req3, 3))
	if p2.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("sequence 1, sent while another node led: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(p2.ErrorCode))
	}
	if p3.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("sequence 2, pipelined behind the refused sequence 1: %v, want NOT_LEADER_OR_FOLLOWER too", kerr.ErrorForCode(p3.ErrorCode))
	}
	// The producer retries both, in order, and they are written once.
	for seq := int32(1); seq <= 2; seq++ {
		p := producePartition(t, c.roundTrip(produceReq(9, 1, "t", 0, idempotent(t, seq))))
		if p.ErrorCode != 0 || p.BaseOffset != int64(seq) {
			t.Fatalf("retry of sequence %d: offset %d, %v", seq, p.BaseOffset, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	// A gap after that is the producer's own: answered as Kafka does.
	if p := producePartition(t, c.roundTrip(produceReq(9, 1, "t", 0, idempotent(t, 5)))); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence 5 after 2: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(p.ErrorCode))
	}
}
