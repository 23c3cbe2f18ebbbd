package record

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// keyedRecords builds records whose keys are given one per record: nil
// is a null key (length -1), anything else a key, []byte{} included.
func keyedRecords(keys ...[]byte) []kmsg.Record {
	recs := make([]kmsg.Record, len(keys))
	for i, k := range keys {
		recs[i] = kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i), Key: k, Value: []byte("value")}
	}
	return recs
}

// ValidateBatch's Keyed: whether any record has a non-null key, for
// every codec, wherever in the batch the key is; an empty key is a key
// (murmur2 places it on one partition like any other).
func TestValidateBatchKeyed(t *testing.T) {
	cases := []struct {
		name string
		keys [][]byte
		want bool
	}{
		{"one null key", [][]byte{nil}, false},
		{"all null keys", [][]byte{nil, nil, nil}, false},
		{"all keyed", [][]byte{[]byte("a"), []byte("b"), []byte("c")}, true},
		{"keyed first", [][]byte{[]byte("a"), nil, nil}, true},
		{"keyed last", [][]byte{nil, nil, []byte("z")}, true},
		{"keyed in the middle", [][]byte{nil, []byte("m"), nil}, true},
		{"empty key", [][]byte{{}}, true},
		{"empty key among null ones", [][]byte{nil, {}, nil}, true},
	}
	forEachCodec(t, func(t *testing.T, c Codec) {
		for _, tc := range cases {
			b := kmsgBatch(t, c, sampleKmsgHeader(len(tc.keys)), keyedRecords(tc.keys...))
			for _, client := range []bool{false, true} {
				v, err := ValidateBatch(b, ValidateOptions{Client: client, VerifyCompressedRecords: true})
				if err != nil {
					t.Fatalf("%s (client %v): %v", tc.name, client, err)
				}
				if v.Keyed != tc.want {
					t.Errorf("%s (client %v): Keyed %v, want %v", tc.name, client, v.Keyed, tc.want)
				}
				if h, err := Validate(b, ValidateOptions{Client: client, VerifyCompressedRecords: true}); err != nil || h != v.Header {
					t.Errorf("%s: Validate %+v %v, ValidateBatch %+v", tc.name, h, err, v.Header)
				}
			}
			// Without VerifyCompressedRecords a compressed body is not
			// walked, so nothing is known of its keys.
			v, err := ValidateBatch(b, ValidateOptions{})
			want := tc.want && c == CodecNone
			if err != nil || v.Keyed != want {
				t.Errorf("%s unverified: Keyed %v %v, want %v", tc.name, v.Keyed, err, want)
			}
		}
	})
}

// A batch that fails validation reports no key, even when a record
// before the damage had one: nothing of a refused batch is written.
func TestValidateBatchKeyedFalseOnError(t *testing.T) {
	recs := keyedRecords([]byte("k"), nil)
	var raw []byte
	for _, r := range recs {
		raw = append(raw, kmsgRecordBytes(r)...)
	}
	raw = append(raw, 0x7f) // garbage after the last record
	h := Header{NumRecords: 2, LastOffsetDelta: 1, ProducerID: -1}
	b := rawBatch(h, raw)
	v, err := ValidateBatch(b, ValidateOptions{VerifyCompressedRecords: true})
	if !errors.Is(err, ErrCorruptRecord) && !errors.Is(err, ErrRecordCountMismatch) {
		t.Fatalf("trailing garbage: %v, want a corrupt record", err)
	}
	if v.Keyed {
		t.Fatal("a refused batch reported Keyed")
	}
}

// The produce path asks for keys on every batch; for an uncompressed
// one that must cost no garbage, as Validate costs none.
func TestValidateBatchDoesNotAllocate(t *testing.T) {
	b := buildBatch(t, DefaultBatchOptions(), append(sizedRecords(16, 1000), testRecord{key: nil, value: []byte("v")}))
	allocs := testing.AllocsPerRun(100, func() {
		if v, err := ValidateBatch(b, ValidateOptions{Client: true, VerifyCompressedRecords: true}); err != nil || !v.Keyed {
			t.Fatal(v.Keyed, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("ValidateBatch allocates %v times per run", allocs)
	}
}
