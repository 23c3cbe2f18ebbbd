package txnstatetopic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/testutil"
	"github.com/fjordmq/fjord/internal/txn"
)

const self = 1 // the node id the loaders run as

// fakeLogs is a replica manager's ScanLog over batches set per
// partition of __transaction_state.
type fakeLogs struct {
	mu      sync.Mutex
	batches map[int32][][]byte
}

func (f *fakeLogs) set(p int32, batches ...[]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.batches == nil {
		f.batches = map[int32][][]byte{}
	}
	f.batches[p] = batches
}

func (f *fakeLogs) ScanLog(ctx context.Context, topic string, p int32, fn func([]byte) error) error {
	if topic != metadata.TransactionStateTopic {
		return fmt.Errorf("scan of %s", topic)
	}
	f.mu.Lock()
	batches := f.batches[p]
	f.mu.Unlock()
	for _, b := range batches {
		if err := ctx.Err(); err != nil {
			return err
		}
		// ScanLog's batch aliases a buffer it reuses: hand out a copy
		// the next call overwrites, so a replay that kept it shows.
		buf := bytes.Clone(b)
		if err := fn(buf); err != nil {
			return err
		}
		for i := range buf {
			buf[i] = 0xAA
		}
	}
	return nil
}

// fakeCoordinator records the loader's calls and the records each
// load's replay read.
type fakeCoordinator struct {
	mu      sync.Mutex
	calls   []string // "load p@epoch: n records" or "unload p"
	records map[int32][]txn.Record
}

func (f *fakeCoordinator) Load(p, epoch int32, read func(func(txn.Record) error) error) error {
	var recs []txn.Record
	err := read(func(r txn.Record) error {
		recs = append(recs, txn.Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)})
		return nil
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.records == nil {
		f.records = map[int32][]txn.Record{}
	}
	f.records[p] = recs
	f.calls = append(f.calls, fmt.Sprintf("load %d@%d: %d records", p, epoch, len(recs)))
	return err
}

func (f *fakeCoordinator) Unload(p int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("unload %d", p))
}

// sortedCalls returns the calls so far, sorted (loads run concurrently).
func (f *fakeCoordinator) sortedCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.calls)
	slices.Sort(out)
	return out
}

// stateImage is an image whose __transaction_state partition i has
// leader leaders[i] at leader epoch epochs[i]; an "orders" topic led by
// this node throughout stands for every topic that is not the
// coordinator's.
func stateImage(leaders, epochs []int32) *metadata.Image {
	img := &metadata.Image{Topics: map[string]*metadata.Topic{
		"orders": {Name: "orders", Partitions: []metadata.Partition{{Leader: self, LeaderEpoch: 9}}},
	}}
	if leaders != nil {
		t := &metadata.Topic{Name: metadata.TransactionStateTopic}
		for i, l := range leaders {
			t.Partitions = append(t.Partitions, metadata.Partition{Leader: l, LeaderEpoch: epochs[i]})
		}
		img.Topics[t.Name] = t
	}
	return img
}

func batchOf(t *testing.T, recs ...txn.Record) []byte {
	t.Helper()
	b, err := buildBatch(recs, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// commitMarkerBatch is a transaction marker's control batch, which a
// replay skips.
func commitMarkerBatch(t *testing.T) []byte {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.Control, opts.Transactional = true, true
	opts.ProducerID, opts.ProducerEpoch = 42, 0
	b := record.NewBuilder(opts)
	b.Add(record.ControlRecordKey(record.ControlCommit), []byte{0, 0, 0, 0, 0, 7}, nil, 1000)
	batch, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

// The loader loads the partitions this node leads, at their leader
// epoch (the coordinator epoch), once per epoch; loads a partition again
// when its leader epoch moves on; unloads those it stops leading,
// including all of them when the topic goes; and replays each
// partition's records in order, without control batches.
func TestLoaderFollowsLeadership(t *testing.T) {
	logs := &fakeLogs{}
	a, b := txn.Record{Key: []byte("a"), Value: []byte("1")}, txn.Record{Key: []byte("b")}
	logs.set(0, batchOf(t, a), commitMarkerBatch(t), batchOf(t, b))
	coord := &fakeCoordinator{}
	l := newLoader(coord, logs, self, slog.New(slog.DiscardHandler))
	t.Cleanup(l.Close)

	want := func(step string, calls ...string) {
		t.Helper()
		slices.Sort(calls)
		testutil.Eventually(t, 5*time.Second, func() error {
			if got := coord.sortedCalls(); !slices.Equal(got, calls) {
				return fmt.Errorf("%s: calls %q, want %q", step, got, calls)
			}
			return nil
		})
	}

	l.OnImage(nil) // before the first image: nothing
	l.OnImage(stateImage(nil, nil))
	want("no topic")
	l.OnImage(stateImage([]int32{self, 2, self}, []int32{5, 3, 7}))
	want("led", "load 0@5: 2 records", "load 2@7: 0 records")
	l.OnImage(stateImage([]int32{self, 2, self}, []int32{5, 3, 7})) // no change
	l.OnImage(stateImage([]int32{self, 2, 3}, []int32{6, 3, 8}))
	want("epoch moves, leader moves", "load 0@5: 2 records", "load 2@7: 0 records", "load 0@6: 2 records", "unload 2")
	l.OnImage(stateImage(nil, nil))
	want("topic gone", "load 0@5: 2 records", "load 2@7: 0 records", "load 0@6: 2 records", "unload 2", "unload 0")

	coord.mu.Lock()
	defer coord.mu.Unlock()
	got := coord.records[0]
	if len(got) != 2 || !bytes.Equal(got[0].Key, a.Key) || !bytes.Equal(got[0].Value, a.Value) ||
		!bytes.Equal(got[1].Key, b.Key) || got[1].Value != nil {
		t.Errorf("partition 0 replayed %q, want %q then the tombstone of %q", got, a, b.Key)
	}
}

// stateRecord is a CompleteCommit record of id at producer id pid and
// epoch, as the coordinator writes it (kmsg's TxnMetadataKey v0 and
// TxnMetadataValue v1).
func stateRecord(id string, pid int64, epoch int16) txn.Record {
	k := kmsg.NewTxnMetadataKey()
	k.TransactionalID = id
	v := kmsg.NewTxnMetadataValue()
	v.Version = 1
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = pid, epoch, 60_000
	v.State = kmsg.TransactionState(txn.StateCompleteCommit)
	v.Topics = []kmsg.TxnMetadataValueTopic{}
	v.LastUpdateTimestamp, v.StartTimestamp = 2000, 1000
	return txn.Record{Key: k.AppendTo(nil), Value: v.AppendTo(nil)}
}

// idsOn returns n transactional ids that live on partition p of
// __transaction_state.
func idsOn(p int32, n int) []string {
	var ids []string
	for i := 0; len(ids) < n; i++ {
		if id := fmt.Sprintf("txn-%d", i); txn.PartitionFor(id, DefaultPartitions) == p {
			ids = append(ids, id)
		}
	}
	return ids
}

type nopLog struct{}

func (nopLog) Append(context.Context, int32, []txn.Record) error { return errors.New("read-only") }

type nopMarkers struct{}

func (nopMarkers) WriteTxnMarkers(_ context.Context, m txn.Marker) []error {
	return make([]error, len(m.Partitions))
}

func newCoordinator(t *testing.T) *txn.Coordinator {
	c := txn.New(txn.Config{TransactionPartitions: DefaultPartitions}, nopLog{}, nopMarkers{}, nil)
	t.Cleanup(c.Close)
	return c
}

// recordedLogs keeps each info-or-above record's message and attributes.
type recordedLogs struct {
	mu   sync.Mutex
	recs []map[string]string
}

func (h *recordedLogs) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *recordedLogs) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *recordedLogs) WithGroup(string) slog.Handler                { return h }

func (h *recordedLogs) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, m)
	h.mu.Unlock()
	return nil
}

func (h *recordedLogs) matching(msg string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, m := range h.recs {
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// The loader replays a partition into the real coordinator: the last
// record of an id wins and a tombstone removes it; the wave's loads are
// logged as one line.
func TestLoaderReplaysIntoCoordinator(t *testing.T) {
	const p = 7
	ids := idsOn(p, 2)
	logs := &fakeLogs{}
	logs.set(p,
		batchOf(t, stateRecord(ids[0], 10, 1), stateRecord(ids[1], 11, 0)),
		batchOf(t, stateRecord(ids[0], 10, 2), txn.Record{Key: stateRecord(ids[1], 0, 0).Key}))
	coord := newCoordinator(t)
	recorded := &recordedLogs{}
	l := newLoader(coord, logs, self, slog.New(recorded))
	t.Cleanup(l.Close)

	leaders, epochs := make([]int32, DefaultPartitions), make([]int32, DefaultPartitions)
	for i := range leaders {
		leaders[i] = 2
	}
	leaders[p], leaders[p+1], epochs[p] = self, self, 4
	l.OnImage(stateImage(leaders, epochs))
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := len(recorded.matching("transaction coordinator loaded partitions")); n != 1 {
			return fmt.Errorf("%d summary lines", n)
		}
		return nil
	})
	s := recorded.matching("transaction coordinator loaded partitions")[0]
	if s["partitions"] != "2" || s["records"] != "4" {
		t.Errorf("summary %v: want partitions=2 records=4", s)
	}
	d := coord.DescribeTransactions(ids)
	if d[0].Err != nil || d[0].State != txn.StateCompleteCommit || d[0].ProducerID != 10 || d[0].ProducerEpoch != 2 {
		t.Errorf("%s: %+v, want CompleteCommit at producer 10 epoch 2 (its last record)", ids[0], d[0])
	}
	if !errors.Is(d[1].Err, txn.ErrTransactionalIDNotFound) {
		t.Errorf("%s, tombstoned: %+v, want TRANSACTIONAL_ID_NOT_FOUND", ids[1], d[1])
	}
	if other := idsOn(p+2, 1); !errors.Is(coord.DescribeTransactions(other)[0].Err, txn.ErrNotCoordinator) {
		t.Errorf("an id of a partition another node leads: %+v, want NOT_COORDINATOR", coord.DescribeTransactions(other)[0])
	}
}

// Hostile input: a partition whose log holds a batch that does not
// parse, records that do not parse, or records the coordinator cannot
// read fails its load with an error (logged) rather than panicking or
// serving state rebuilt around a hole: its ids answer NOT_COORDINATOR,
// and the loader forgets the partition so that the next image tries
// again. A partition loaded in the same wave is unaffected.
func TestLoaderRefusesGarbage(t *testing.T) {
	const p, good = 3, 4
	id := idsOn(p, 1)[0]
	valid := batchOf(t, stateRecord(id, 10, 1))
	garbledRecords := bytes.Clone(valid)
	for i := record.HeaderSize; i < len(garbledRecords); i++ {
		garbledRecords[i] = 0xff
	}
	for name, batch := range map[string][]byte{
		"truncated header":      valid[:20],
		"garbled records":       garbledRecords,
		"garbled key":           batchOf(t, txn.Record{Key: []byte{0, 0, 0x7f, 0xff}, Value: stateRecord(id, 10, 1).Value}),
		"garbled value":         batchOf(t, txn.Record{Key: stateRecord(id, 10, 1).Key, Value: []byte{0, 1, 0xff, 0xff, 0xff}}),
		"unknown value version": batchOf(t, txn.Record{Key: stateRecord(id, 10, 1).Key, Value: []byte{0, 9, 1, 2, 3}}),
		"impossible state": func() []byte {
			r := stateRecord(id, 10, 1)
			v := kmsg.NewTxnMetadataValue()
			if err := v.ReadFrom(r.Value); err != nil {
				t.Fatal(err)
			}
			v.State = kmsg.TransactionState(txn.StateDead) // never written
			return batchOf(t, txn.Record{Key: r.Key, Value: v.AppendTo(nil)})
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			logs := &fakeLogs{}
			logs.set(p, valid, batch)
			coord := newCoordinator(t)
			recorded := &recordedLogs{}
			l := newLoader(coord, logs, self, slog.New(recorded))
			t.Cleanup(l.Close)

			img := stateImage(make([]int32, DefaultPartitions), make([]int32, DefaultPartitions)) // node 0 leads all
			img.Topics[metadata.TransactionStateTopic].Partitions[p].Leader = self
			img.Topics[metadata.TransactionStateTopic].Partitions[good].Leader = self
			l.OnImage(img)
			testutil.Eventually(t, 5*time.Second, func() error {
				if len(recorded.matching("transaction coordinator loaded partitions")) == 0 {
					return errors.New("the wave has not finished")
				}
				return nil
			})
			failed := recorded.matching("transaction coordinator could not load partition")
			if len(failed) != 1 || failed[0]["partition"] != fmt.Sprint(p) {
				t.Fatalf("error lines %v, want one for partition %d", failed, p)
			}
			if s := recorded.matching("transaction coordinator loaded partitions")[0]; s["partitions"] != "1" {
				t.Errorf("summary %v: want partitions=1 (the good one)", s)
			}
			if err := coord.DescribeTransactions([]string{id})[0].Err; !errors.Is(err, txn.ErrNotCoordinator) {
				t.Errorf("id of the garbled partition: %v, want NOT_COORDINATOR", err)
			}
			if err := coord.DescribeTransactions(idsOn(good, 1))[0].Err; !errors.Is(err, txn.ErrTransactionalIDNotFound) {
				t.Errorf("id of the good partition: %v, want TRANSACTIONAL_ID_NOT_FOUND (loaded, empty)", err)
			}

			// Repaired (say, the bad segment replaced by a follower's):
			// the next image loads it.
			logs.set(p, valid)
			l.OnImage(img)
			testutil.Eventually(t, 5*time.Second, func() error {
				d := coord.DescribeTransactions([]string{id})[0]
				if d.Err != nil || d.ProducerID != 10 {
					return fmt.Errorf("after the repair: %+v", d)
				}
				return nil
			})
		})
	}
}
