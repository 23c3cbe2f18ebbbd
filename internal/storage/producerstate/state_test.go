package producerstate

import (
	"bytes"
	"errors"
	"hash/crc32"
	"math"
	"reflect"
	"testing"

	"github.com/fjordmq/fjord/internal/record"
)

// hdr is a produced batch's header: n records from (pid, epoch) starting
// at sequence seq, written at offset base (when it is written).
func hdr(pid int64, epoch int16, seq int32, n int32, base int64) record.Header {
	return record.Header{
		BaseOffset:      base,
		ProducerID:      pid,
		ProducerEpoch:   epoch,
		BaseSequence:    seq,
		LastOffsetDelta: n - 1,
		NumRecords:      n,
		MaxTimestamp:    1000 + base,
	}
}

// write checks and then updates, as Log.Append does, and fails the test
// on an error.
func write(t testing.TB, s *State, hs ...record.Header) {
	t.Helper()
	if _, dup, err := s.Check(hs); err != nil || dup {
		t.Fatalf("check %+v: dup %v err %v", hs, dup, err)
	}
	for _, h := range hs {
		s.Update(h, 0)
	}
}

func TestLastSeqWraps(t *testing.T) {
	for _, c := range []struct {
		base, delta, want int32
	}{
		{0, 0, 0},
		{0, 4, 4},
		{math.MaxInt32, 0, math.MaxInt32},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 3, 1},
		{math.MaxInt32 - 4, 4, math.MaxInt32},
	} {
		if got := LastSeq(c.base, c.delta); got != c.want {
			t.Errorf("LastSeq(%d, %d) = %d, want %d", c.base, c.delta, got, c.want)
		}
	}
	if !inSequence(math.MaxInt32, 0) || inSequence(math.MaxInt32, 1) || !inSequence(4, 5) || inSequence(4, 4) {
		t.Fatal("inSequence")
	}
}

func TestCheckRules(t *testing.T) {
	s := New()
	write(t, s, hdr(7, 0, 0, 5, 0))  // seq 0-4 at 0-4
	write(t, s, hdr(7, 0, 5, 3, 10)) // seq 5-7 at 10-12
	cases := []struct {
		name    string
		h       []record.Header
		wantErr error
		wantDup *Duplicate
	}{
		{"next in sequence", []record.Header{hdr(7, 0, 8, 1, 0)}, nil, nil},
		{"gap", []record.Header{hdr(7, 0, 9, 1, 0)}, ErrOutOfOrderSequence, nil},
		{"repeat of a different range", []record.Header{hdr(7, 0, 5, 2, 0)}, ErrOutOfOrderSequence, nil},
		{"duplicate of the newest", []record.Header{hdr(7, 0, 5, 3, 0)}, nil, &Duplicate{10, 12, 1010}},
		{"duplicate of an older one", []record.Header{hdr(7, 0, 0, 5, 0)}, nil, &Duplicate{0, 4, 1000}},
		{"new epoch at 0", []record.Header{hdr(7, 1, 0, 1, 0)}, nil, nil},
		{"new epoch not at 0", []record.Header{hdr(7, 1, 8, 1, 0)}, ErrOutOfOrderSequence, nil},
		{"new producer at 0", []record.Header{hdr(8, 0, 0, 1, 0)}, nil, nil},
		// Reference: KIP-360. An unknown producer (state lost to retention
		// or expiry) may resume at any sequence.
		{"new producer not at 0", []record.Header{hdr(8, 0, 3, 1, 0)}, nil, nil},
		{"no producer id", []record.Header{hdr(-1, -1, -1, 1, 0)}, nil, nil},
		{"two in sequence", []record.Header{hdr(7, 0, 8, 2, 0), hdr(7, 0, 10, 1, 0)}, nil, nil},
		{"second of two out of order", []record.Header{hdr(7, 0, 8, 2, 0), hdr(7, 0, 8, 2, 0)}, ErrOutOfOrderSequence, nil},
		{"epoch bump inside a produce", []record.Header{hdr(7, 0, 8, 2, 0), hdr(7, 1, 0, 1, 0)}, nil, nil},
		{"epoch back inside a produce", []record.Header{hdr(7, 1, 0, 2, 0), hdr(7, 0, 8, 1, 0)}, ErrInvalidProducerEpoch, nil},
		{"two producers", []record.Header{hdr(8, 0, 0, 2, 0), hdr(7, 0, 8, 1, 0), hdr(8, 0, 2, 1, 0)}, nil, nil},
		// 0-4 at offsets 0-4 and 5-7 at 10-12 were not written together
		// (offsets 5-9 lie between them): as one produce, not a retry.
		{"retried pair not written together", []record.Header{hdr(7, 0, 0, 5, 0), hdr(7, 0, 5, 3, 0)}, ErrOutOfOrderSequence, nil},
		{"duplicate beside a new batch", []record.Header{hdr(7, 0, 5, 3, 0), hdr(7, 0, 8, 1, 0)}, ErrOutOfOrderSequence, nil},
		{"duplicate beside a plain batch", []record.Header{hdr(7, 0, 5, 3, 0), hdr(-1, -1, -1, 1, 0)}, ErrOutOfOrderSequence, nil},
	}
	s2 := s.Clone()
	write(t, s2, hdr(7, 1, 0, 1, 20))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := s.All()
			dup, isDup, err := s.Check(c.h)
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, c.wantErr)
			}
			if isDup != (c.wantDup != nil) || (isDup && dup != *c.wantDup) {
				t.Fatalf("dup %v %+v, want %+v", isDup, dup, c.wantDup)
			}
			if !reflect.DeepEqual(before, s.All()) {
				t.Fatal("Check changed the state")
			}
		})
	}
	// A fenced epoch, against the state bumped to epoch 1.
	if _, _, err := s2.Check([]record.Header{hdr(7, 0, 8, 1, 0)}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("older epoch: %v", err)
	}
	// A batch of the old epoch is no duplicate once the epoch moved on.
	if _, dup, err := s2.Check([]record.Header{hdr(7, 0, 5, 3, 0)}); dup || !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch's batch after a bump: dup %v err %v", dup, err)
	}
}

func TestRetriedProduceOfSeveralBatches(t *testing.T) {
	s := New()
	write(t, s, hdr(7, 0, 0, 2, 0), hdr(7, 0, 2, 3, 2), hdr(9, 3, 0, 1, 5))
	dup, isDup, err := s.Check([]record.Header{hdr(7, 0, 0, 2, 0), hdr(7, 0, 2, 3, 0), hdr(9, 3, 0, 1, 0)})
	if err != nil || !isDup || dup.FirstOffset != 0 || dup.LastOffset != 5 || dup.MaxTimestamp != 1005 {
		t.Fatalf("retry of a whole produce: %+v %v %v", dup, isDup, err)
	}
	// Part of it is not a retry of it.
	if _, _, err := s.Check([]record.Header{hdr(7, 0, 2, 3, 0), hdr(7, 0, 0, 2, 0)}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("retried batches out of order: %v", err)
	}
}

func TestUpdateKeepsFiveBatches(t *testing.T) {
	s := New()
	for i := range int32(8) {
		write(t, s, hdr(1, 2, i*2, 2, int64(i)*10))
	}
	e, _ := s.Get(1)
	if len(e.Batches) != MaxBatches || e.Batches[0].FirstSeq != 6 || e.Batches[4].LastSeq != 15 || e.Epoch != 2 {
		t.Fatalf("entry %+v", e)
	}
	if e.LastTimestamp != 1070 {
		t.Fatalf("last timestamp %d", e.LastTimestamp)
	}
	// The sixth newest is gone: a retry of it is out of order, not a
	// duplicate (Kafka's limit too).
	if _, _, err := s.Check([]record.Header{hdr(1, 2, 4, 2, 0)}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("retry of the sixth newest: %v", err)
	}
}

func TestUpdateFromLeaderNeverRefuses(t *testing.T) {
	s := New()
	s.Update(hdr(1, 5, 40, 2, 0), 0) // unknown producer not at 0
	s.Update(hdr(1, 3, 0, 1, 2), 0)  // older epoch
	e, _ := s.Get(1)
	if e.Epoch != 3 || len(e.Batches) != 1 || e.Batches[0].FirstOffset != 2 {
		t.Fatalf("follower state %+v", e)
	}
	// A transaction marker moves the epoch: the new epoch starts empty,
	// so the next batch must be sequence 0.
	m := hdr(1, 4, -1, 1, 3)
	m.Attributes = 0x20 // control
	s.Update(m, 0)
	e, _ = s.Get(1)
	if e.Epoch != 4 || len(e.Batches) != 0 {
		t.Fatalf("after marker %+v", e)
	}
	if _, _, err := s.Check([]record.Header{hdr(1, 4, 1, 1, 0)}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("after marker, seq 1: %v", err)
	}
	if _, _, err := s.Check([]record.Header{hdr(1, 4, 0, 1, 0)}); err != nil {
		t.Fatalf("after marker, seq 0: %v", err)
	}
}

func TestSequenceWraparound(t *testing.T) {
	s := New()
	s.Update(hdr(1, 0, math.MaxInt32-4, 3, 0), 0) // ..MaxInt32-2
	h := hdr(1, 0, math.MaxInt32-1, 3, 3)         // MaxInt32-1, MaxInt32, 0
	write(t, s, h)
	if e, _ := s.Get(1); e.Batches[1].LastSeq != 0 {
		t.Fatalf("wrapped batch %+v", e.Batches[1])
	}
	if dup, isDup, err := s.Check([]record.Header{h}); err != nil || !isDup || dup.FirstOffset != 3 {
		t.Fatalf("retry of the wrapping batch: %+v %v %v", dup, isDup, err)
	}
	write(t, s, hdr(1, 0, 1, 1, 6))
	if _, _, err := s.Check([]record.Header{hdr(1, 0, 0, 1, 0)}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("0 again after the wrap: %v", err)
	}
}

func TestRemoveExpired(t *testing.T) {
	s := New()
	s.Update(hdr(1, 0, 0, 1, 0), 10_000)
	// Batch timestamps far in the past do not matter: the broker saw
	// producer 2 later.
	old := hdr(2, 0, 0, 1, 1)
	old.MaxTimestamp = 5
	s.Update(old, 10_500)
	if n := s.RemoveExpired(11_000, 1000); n != 1 {
		t.Fatalf("removed %d", n)
	}
	if _, ok := s.Get(1); ok {
		t.Fatal("producer 1 kept")
	}
	if _, ok := s.Get(2); !ok {
		t.Fatal("producer 2 removed")
	}
	// Loaded producers count as seen when loaded.
	loaded, err := DecodeSnapshot(s.AppendSnapshot(nil, 2), 2, 20_000)
	if err != nil {
		t.Fatal(err)
	}
	if n := loaded.RemoveExpired(20_999, 1000); n != 0 {
		t.Fatalf("removed %d just after loading", n)
	}
	if n := loaded.RemoveExpired(21_000, 1000); n != 1 {
		t.Fatalf("removed %d a whole expiration after loading", n)
	}
}

func snapshotFixture(t testing.TB) *State {
	s := New()
	for i := range int32(7) {
		write(t, s, hdr(int64(i%3)*1000, int16(i%3), i/3*2, 2, int64(i)*4))
	}
	m := hdr(5, 9, -1, 1, 40)
	m.Attributes = 0x20
	s.Update(m, 0) // a producer with an epoch and no batches
	return s
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := snapshotFixture(t)
	b := s.AppendSnapshot(nil, 41)
	got, err := DecodeSnapshot(b, 41, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.All(), s.All()) {
		t.Fatalf("decoded %+v\nwant %+v", got.All(), s.All())
	}
	if !bytes.Equal(got.AppendSnapshot(nil, 41), b) {
		t.Fatal("re-encoding differs")
	}
	empty, err := DecodeSnapshot(New().AppendSnapshot(nil, 0), 0, 0)
	if err != nil || empty.Len() != 0 {
		t.Fatalf("empty snapshot: %v", err)
	}
	if _, err := DecodeSnapshot(b, 40, 0); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("named for another offset: %v", err)
	}
	// Offsets at or past the snapshot's offset cannot be in it.
	if _, err := DecodeSnapshot(s.AppendSnapshot(nil, 20), 20, 0); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("batches past the offset: %v", err)
	}
}

// Every truncation and every single-bit flip of a snapshot is refused:
// the CRC covers all of it.
func TestSnapshotDamageDetected(t *testing.T) {
	b := snapshotFixture(t).AppendSnapshot(nil, 41)
	for n := range len(b) {
		if _, err := DecodeSnapshot(b[:n], 41, 0); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("cut to %d bytes: %v", n, err)
		}
	}
	for i := range len(b) * 8 {
		c := bytes.Clone(b)
		c[i/8] ^= 1 << (i % 8)
		if _, err := DecodeSnapshot(c, 41, 0); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
	}
	if _, err := DecodeSnapshot(append(bytes.Clone(b), 0), 41, 0); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatal("trailing byte accepted")
	}
}

func TestSnapshotUnknownVersion(t *testing.T) {
	b := New().AppendSnapshot(nil, 7)
	b[5] = 4 // version 4, CRC fixed up: a file from a newer Fjord
	body := b[:len(b)-crcSize]
	b = append(bytes.Clone(body), 0, 0, 0, 0)
	putCRC(b)
	if _, err := DecodeSnapshot(b, 7, 0); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("version 4: %v", err)
	}
}

func putCRC(b []byte) {
	body := b[:len(b)-crcSize]
	c := crc32.Checksum(body, castagnoli)
	b[len(body)], b[len(body)+1], b[len(body)+2], b[len(body)+3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
}

func TestSnapshotFileName(t *testing.T) {
	if n := SnapshotFileName(368769); n != "00000000000000368769.snapshot" {
		t.Fatal(n)
	}
	if o, ok := ParseSnapshotFileName("00000000000000368769.snapshot"); !ok || o != 368769 {
		t.Fatal(o, ok)
	}
	for _, n := range []string{"00000000000000368769.log", "0000000000000368769.snapshot", "-0000000000000368769.snapshot", "00000000000000368769.snapshot.tmp"} {
		if _, ok := ParseSnapshotFileName(n); ok {
			t.Errorf("%q parsed", n)
		}
	}
}

// FuzzDecodeSnapshot: any input decodes without panicking, and whatever
// decodes re-encodes to the same bytes (the format has one encoding per
// state, so nothing is silently dropped or changed). With fixCRC the input
// gets a correct CRC first, so the checks behind the CRC are reached.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(New().AppendSnapshot(nil, 0), int64(0), false)
	s := New()
	s.Update(hdr(3, 1, 0, 4, 0), 0)
	s.Update(hdr(4, 0, 0, 1, 4), 0)
	f.Add(s.AppendSnapshot(nil, 5), int64(5), true)
	f.Add(snapshotFixture(f).AppendSnapshot(nil, 41), int64(41), true)
	f.Fuzz(func(t *testing.T, b []byte, offset int64, fixCRC bool) {
		if fixCRC && len(b) >= crcSize {
			putCRC(b)
		}
		st, err := DecodeSnapshot(b, offset, 0)
		if err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("error not ErrCorruptSnapshot: %v", err)
			}
			return
		}
		if got := st.AppendSnapshot(nil, offset); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded differently:\n%x\n%x", got, b)
		}
	})
}
