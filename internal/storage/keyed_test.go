package storage

import (
	"testing"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/vfs"
)

// AppendInfo.Keyed: a leader's append reports whether it wrote a record
// with a non-null key, whatever the codec and wherever the key is among
// the batches; a duplicate (nothing written) and a follower's append
// (the leader reported it already) never do.
func TestAppendInfoKeyed(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), "/data/t-0", producerConfig(), OpenOptions{})
	defer l.Close()
	onlyLast := func(n int) func(int) []byte {
		return func(i int) []byte {
			if i == n-1 {
				return []byte{} // an empty key is a key
			}
			return nil
		}
	}
	keyed := func(i int) []byte { return []byte{byte('a' + i)} }
	gzip := record.DefaultBatchOptions()
	gzip.Codec = record.CodecGzip
	zstd := record.DefaultBatchOptions()
	zstd.Codec = record.CodecZstd

	for _, c := range []struct {
		name string
		data []byte
		want bool
	}{
		{"null keys", testBatch(t, 3, 10, 1, nil), false},
		{"one empty key, last of the batch", testBatch(t, 3, 10, 1, onlyLast(3)), true},
		{"keyed", testBatch(t, 2, 10, 1, keyed), true},
		{"gzip, null keys", testBatchOpts(t, gzip, 4, 10, 1, nil), false},
		{"gzip, keyed last", testBatchOpts(t, gzip, 4, 10, 1, onlyLast(4)), true},
		{"zstd, keyed", testBatchOpts(t, zstd, 4, 10, 1, keyed), true},
		{"keyed second of two batches", append(testBatch(t, 1, 10, 1, nil), testBatch(t, 1, 10, 1, keyed)...), true},
		{"two unkeyed batches", append(testBatch(t, 1, 10, 1, nil), testBatch(t, 2, 10, 1, nil)...), false},
	} {
		info, err := l.Append(c.data, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if info.Keyed != c.want {
			t.Errorf("%s: Keyed %v, want %v", c.name, info.Keyed, c.want)
		}
	}

	// An idempotent producer's retry writes nothing, so it reports
	// nothing either.
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 5, 0, 0
	b := testBatchOpts(t, opts, 2, 10, 1, keyed)
	if info, err := l.Append(append([]byte(nil), b...), 0); err != nil || !info.Keyed {
		t.Fatalf("idempotent keyed batch: %+v %v", info, err)
	}
	if info, err := l.Append(b, 0); err != nil || !info.Duplicate || info.Keyed {
		t.Fatalf("its retry: %+v %v, want a duplicate that is not Keyed", info, err)
	}

	// The other leader paths: a transactional produce, verified, and a
	// coordinator's write.
	if info, err := l.AppendVerified(testBatch(t, 1, 10, 1, keyed), 0, 0); err != nil || !info.Keyed {
		t.Fatalf("AppendVerified: %+v %v", info, err)
	}
	if info, err := l.AppendAsCoordinator(testBatch(t, 1, 10, 1, keyed), 0, false, 0); err != nil || !info.Keyed {
		t.Fatalf("AppendAsCoordinator: %+v %v", info, err)
	}
	if info, err := l.AppendAsCoordinator(testBatch(t, 1, 10, 1, nil), 0, false, 0); err != nil || info.Keyed {
		t.Fatalf("AppendAsCoordinator, null key: %+v %v", info, err)
	}

	// A follower copies batches the leader already reported.
	f := openTestLog(t, vfs.NewMem(), "/data/t-0", producerConfig(), OpenOptions{})
	defer f.Close()
	copied := testBatch(t, 2, 10, 1, keyed)
	record.SetBaseOffset(copied, 0)
	record.SetPartitionLeaderEpoch(copied, 0)
	if info, err := f.AppendAsFollower(copied); err != nil || info.Keyed {
		t.Fatalf("AppendAsFollower: %+v %v, want not Keyed", info, err)
	}
}
