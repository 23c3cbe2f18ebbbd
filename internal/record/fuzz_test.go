package record

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/snappy/xerial"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzValidate feeds arbitrary bytes to the batch decoders, twice per input:
// as given, and with batchLength and the CRC rewritten to fit the bytes, so
// that mutations get past the CRC and exercise the record parser (random
// bytes almost never carry a matching CRC-32C).
//
// Invariants, for both:
//  1. Validate, ParseHeader, ForEachRecord, Records and Filter never panic,
//     whatever the bytes and options, and every error carries one of the
//     package's sentinels.
//  2. Validating twice gives the same header and the same error.
//  3. A batch that validates, uncompressed or compressed with
//     VerifyCompressedRecords, iterates with ForEachRecord without error and
//     yields exactly NumRecords records, their offsets strictly increasing
//     within [BaseOffset, LastOffset]; Records agrees with it.
//  4. A batch valid under Client is valid without it.
//  5. SetBaseOffset and SetPartitionLeaderEpoch on a valid batch keep it
//     valid, with those fields changed and nothing else.
//  6. Filter keeping every record of a valid batch returns it unchanged;
//     keeping every other record returns a batch that validates.
//  7. ValidateBatch gives Validate's header and error, and its Keyed says
//     whether any record ForEachRecord yields has a non-nil key (false
//     for a batch that fails).
func FuzzValidate(f *testing.F) {
	for _, s := range validateSeeds(f) {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkBatchInvariants(t, b)
		if len(b) >= HeaderSize {
			fixed := append([]byte(nil), b...)
			if finishBatch(fixed) == nil {
				checkBatchInvariants(t, fixed)
			}
		}
	})
}

func checkBatchInvariants(t *testing.T, b []byte) {
	verify := ValidateOptions{VerifyCompressedRecords: true, MaxDecompressedBytes: 1 << 20}

	h, err := Validate(b, verify)
	h2, err2 := Validate(b, verify)
	if h != h2 || fmt.Sprint(err) != fmt.Sprint(err2) {
		t.Fatalf("Validate not stable: %+v %v then %+v %v", h, err, h2, err2)
	}
	v, errV := ValidateBatch(b, verify)
	if v.Header != h || fmt.Sprint(errV) != fmt.Sprint(err) || (err != nil && v.Keyed) {
		t.Fatalf("ValidateBatch %+v %v, Validate %+v %v", v, errV, h, err)
	}
	_, clientErr := Validate(b, ValidateOptions{Client: true, VerifyCompressedRecords: true, MaxDecompressedBytes: 1 << 20})
	if _, err := Validate(b, ValidateOptions{MaxBatchBytes: 100}); err != nil && !isSentinel(err) {
		t.Fatalf("error without a sentinel: %v", err)
	}
	if _, err := ParseHeader(b); err != nil && !isSentinel(err) {
		t.Fatalf("error without a sentinel: %v", err)
	}
	if err := ForEachRecord(b, func(*Record) error { return nil }); err != nil && !isSentinel(err) {
		t.Fatalf("error without a sentinel: %v", err)
	}
	if _, err := Records(b); err != nil && !isSentinel(err) {
		t.Fatalf("error without a sentinel: %v", err)
	}
	if _, _, err := Filter(nil, b, func(r *Record) bool { return r.Offset%2 == 0 }); err != nil && !isSentinel(err) {
		t.Fatalf("error without a sentinel: %v", err)
	}

	if clientErr == nil && err != nil {
		t.Fatalf("valid for a client but not for storage: %v", err)
	}
	if err != nil {
		if !isSentinel(err) || (clientErr != nil && !isSentinel(clientErr)) {
			t.Fatalf("error without a sentinel: %v / %v", err, clientErr)
		}
		return
	}

	// A valid batch iterates completely.
	n, prev, keyed := int32(0), h.BaseOffset-1, false
	err = ForEachRecord(b, func(r *Record) error {
		if r.Offset <= prev || r.Offset > h.LastOffset() {
			return fmt.Errorf("offset %d after %d, last %d", r.Offset, prev, h.LastOffset())
		}
		prev = r.Offset
		n++
		keyed = keyed || r.Key != nil
		return nil
	})
	if err != nil || n != h.NumRecords {
		t.Fatalf("valid batch iterated %d of %d records: %v", n, h.NumRecords, err)
	}
	if v.Keyed != keyed {
		t.Fatalf("ValidateBatch says keyed=%v, the records say %v", v.Keyed, keyed)
	}
	recs, err := Records(b)
	if err != nil || len(recs) != int(h.NumRecords) {
		t.Fatalf("Records: %d of %d, %v", len(recs), h.NumRecords, err)
	}

	// Leader rewrites keep it valid.
	c := append([]byte(nil), b...)
	SetBaseOffset(c, h.BaseOffset+12345)
	SetPartitionLeaderEpoch(c, h.PartitionLeaderEpoch^0x5a5a)
	hc, err := Validate(c, verify)
	want := h
	want.BaseOffset, want.PartitionLeaderEpoch = h.BaseOffset+12345, h.PartitionLeaderEpoch^0x5a5a
	if err != nil || hc != want {
		t.Fatalf("after setters: %+v %v, want %+v", hc, err, want)
	}

	// Compaction.
	all, kept, err := Filter(nil, b, func(*Record) bool { return true })
	if err != nil || kept != int(h.NumRecords) || (kept > 0 && !bytes.Equal(all, b)) {
		t.Fatalf("Filter keeping all: %d %v", kept, err)
	}
	half, kept, err := Filter(nil, b, func(r *Record) bool { return r.Offset%2 == 0 })
	if err != nil {
		t.Fatalf("Filter: %v", err)
	}
	if kept > 0 {
		if hh, err := Validate(half, ValidateOptions{VerifyCompressedRecords: true}); err != nil || hh.NumRecords != int32(kept) {
			t.Fatalf("filtered batch: %+v %v", hh, err)
		}
	}
}

// FuzzDecompress feeds arbitrary blobs to every codec's decoder.
//
// Invariants:
//  1. Decompress never panics.
//  2. It appends: whatever dst held is still there.
//  3. It never appends more than maxSize bytes; past that it fails with
//     ErrDecompressedTooLarge.
//  4. Every error is one of this package's sentinels.
//  5. What decompresses, compressed again with the same codec, decompresses
//     to the same bytes.
//  6. The result depends on the input alone: decoding it again, after the
//     pooled decoders have seen other data, gives the same bytes or error.
func FuzzDecompress(f *testing.F) {
	for _, s := range decompressSeeds(f) {
		f.Add(s.codec, s.data, s.limit)
	}
	f.Fuzz(func(t *testing.T, codec uint8, data []byte, limit uint32) {
		c := Codec(codec % 8)
		maxSize := int(limit%(1<<20)) + 1
		prefix := []byte("prefix")
		out, err := Decompress(c, append([]byte(nil), prefix...), data, maxSize)
		defer func() {
			// Other data through the same pools, then the same input again.
			if enc, err := Compress(c, nil, []byte("unrelated data, unrelated data")); err == nil {
				_, _ = Decompress(c, nil, enc, 0)
			}
			out2, err2 := Decompress(c, append([]byte(nil), prefix...), data, maxSize)
			if fmt.Sprint(err) != fmt.Sprint(err2) || (err == nil && !bytes.Equal(out, out2)) {
				t.Fatalf("second decode differs: %v then %v", err, err2)
			}
		}()
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			if !c.valid() && !errors.Is(err, ErrUnsupportedCodec) {
				t.Fatalf("codec %d: %v", c, err)
			}
			return
		}
		if !bytes.HasPrefix(out, prefix) {
			t.Fatal("dst prefix lost")
		}
		plain := out[len(prefix):]
		if len(plain) > maxSize {
			t.Fatalf("%d bytes past limit %d", len(plain), maxSize)
		}
		again, err := Compress(c, nil, plain)
		if err != nil {
			t.Fatalf("recompress: %v", err)
		}
		round, err := Decompress(c, nil, again, maxSize)
		if err != nil || !bytes.Equal(round, plain) {
			t.Fatalf("recompressed round trip: %v", err)
		}
	})
}

func isSentinel(err error) bool {
	for _, s := range []error{ErrCorruptLength, ErrInvalidMagic, ErrCorruptCRC, ErrRecordCountMismatch, ErrCorruptRecord,
		ErrBatchTooLarge, ErrUnsupportedCodec, ErrDecompressedTooLarge, ErrInvalidRecordBatch} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// The seed corpora live in testdata/fuzz/<target>/ in Go's corpus format,
// named valid-* or invalid-* (FuzzValidate) so TestFuzzSeedCorpus can check
// that each still means what its name says. Regenerate them with
//
//	go test ./internal/record -run TestFuzzSeedCorpus -update-fuzz-seeds
//
// Crashers the fuzzer finds are added beside them by `go test -fuzz` under
// hash names; those are kept as regression seeds and only have to not panic.
var updateFuzzSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite the committed fuzz seed corpus")

type validateSeed struct {
	name string
	data []byte
}

func validateSeeds(tb testing.TB) []validateSeed {
	small := []testRecord{
		{key: []byte("k1"), value: []byte("v1"), timestamp: 1000},
		{key: nil, value: []byte("null key"), timestamp: 1001, headers: []RecordHeader{{Key: "h", Value: []byte("hv")}, {Key: "n"}}},
		{key: []byte{}, value: nil, timestamp: 999},
	}
	seeds := []validateSeed{
		{"invalid-empty", []byte{}},
		{"invalid-zero-header", make([]byte, HeaderSize)},
	}
	maxLen := make([]byte, HeaderSize)
	maxLen[offMagic] = Magic
	putInt32(maxLen, offBatchLength, 1<<31-1-12)
	seeds = append(seeds, validateSeed{"invalid-max-length-header", maxLen})

	for _, c := range allCodecs {
		opts := DefaultBatchOptions()
		opts.Codec = c
		b := buildBatch(tb, opts, small)
		seeds = append(seeds,
			validateSeed{"valid-" + c.String(), b},
			validateSeed{"invalid-truncated-" + c.String(), b[:len(b)-3]},
		)
	}
	opts := DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = 9, 1, 0, true
	b := buildBatch(tb, opts, small)
	seeds = append(seeds,
		validateSeed{"valid-transactional", b},
		validateSeed{"invalid-trailing-garbage", append(append([]byte(nil), b...), "garbage"...)},
		validateSeed{"valid-empty-batch", EmptyBatch(nil, Header{BaseOffset: 10, LastOffsetDelta: 4, ProducerID: 9, ProducerEpoch: 1})},
	)
	opts = DefaultBatchOptions()
	opts.Control, opts.Transactional, opts.ProducerID, opts.ProducerEpoch = true, true, 9, 1
	bld := NewBuilder(opts)
	bld.Add(ControlRecordKey(ControlCommit), EndTxnMarkerValue(3), nil, 5)
	ctrl, err := bld.Build()
	if err != nil {
		tb.Fatal(err)
	}
	seeds = append(seeds, validateSeed{"valid-control", ctrl})

	// The Java client's snappy framing, around records kmsg encoded.
	var raw []byte
	for i := range 3 {
		raw = append(raw, kmsgRecordBytes(kmsg.Record{OffsetDelta: int32(i), Value: []byte("java")})...)
	}
	seeds = append(seeds, validateSeed{"valid-snappy-xerial", rawBatch(
		Header{LastOffsetDelta: 2, NumRecords: 3, ProducerID: -1, Attributes: int16(CodecSnappy)},
		xerial.Encode(nil, raw))})
	return seeds
}

type decompressSeed struct {
	name  string
	codec uint8
	data  []byte
	limit uint32
}

func decompressSeeds(tb testing.TB) []decompressSeed {
	sample := bytes.Repeat([]byte("fjord record bytes "), 50)
	var seeds []decompressSeed
	for _, c := range allCodecs {
		enc, err := Compress(c, nil, sample)
		if err != nil {
			tb.Fatal(err)
		}
		// Printable filler keeps the corpus files small (a zero byte takes
		// four characters quoted); far over the seed's 4 KiB limit.
		bombSize := 128 << 10
		if c == CodecNone {
			bombSize = 8 << 10
		}
		bomb, err := Compress(c, nil, bytes.Repeat([]byte("a"), bombSize))
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds,
			decompressSeed{"sample-" + c.String(), uint8(c), enc, 1 << 16},
			decompressSeed{"bomb-" + c.String(), uint8(c), bomb, 1 << 12},
			decompressSeed{"empty-" + c.String(), uint8(c), []byte{}, 100},
			decompressSeed{"truncated-" + c.String(), uint8(c), enc[:len(enc)/2], 1 << 16},
		)
	}
	seeds = append(seeds,
		decompressSeed{"xerial-snappy", uint8(CodecSnappy), xerial.Encode(nil, sample), 1 << 16},
		decompressSeed{"unknown-codec", 6, sample, 1 << 16},
	)
	return seeds
}

// marshalCorpus writes values in Go's fuzz corpus file format.
func marshalCorpus(vals ...any) []byte {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range vals {
		switch v := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
		case uint8:
			fmt.Fprintf(&b, "byte(%s)\n", strconv.QuoteRune(rune(v)))
		case uint32:
			fmt.Fprintf(&b, "uint32(%d)\n", v)
		default:
			panic(fmt.Sprintf("corpus type %T", v))
		}
	}
	return []byte(b.String())
}

// unmarshalBytesCorpus reads a one-[]byte corpus file.
func unmarshalBytesCorpus(data []byte) ([]byte, error) {
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" ||
		!strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
		return nil, fmt.Errorf("not a one-value corpus file: %q", data)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	return []byte(s), err
}

func TestFuzzSeedCorpus(t *testing.T) {
	vdir := filepath.Join("testdata", "fuzz", "FuzzValidate")
	ddir := filepath.Join("testdata", "fuzz", "FuzzDecompress")
	if *updateFuzzSeeds {
		for _, dir := range []string{vdir, ddir} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range validateSeeds(t) {
			if err := os.WriteFile(filepath.Join(vdir, s.name), marshalCorpus(s.data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range decompressSeeds(t) {
			if err := os.WriteFile(filepath.Join(ddir, s.name), marshalCorpus(s.codec, s.data, s.limit), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	entries, err := os.ReadDir(vdir)
	if err != nil {
		t.Fatal(err)
	}
	var named int
	for _, e := range entries {
		name := e.Name()
		valid, invalid := strings.HasPrefix(name, "valid-"), strings.HasPrefix(name, "invalid-")
		if !valid && !invalid {
			continue // a crasher kept as a regression seed; the fuzz target replays it
		}
		named++
		data, err := os.ReadFile(filepath.Join(vdir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 64<<10 {
			t.Errorf("%s: %d bytes, keep seeds small", name, len(data))
		}
		b, err := unmarshalBytesCorpus(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err = Validate(b, ValidateOptions{VerifyCompressedRecords: true})
		if valid != (err == nil) {
			t.Errorf("%s: Validate says %v", name, err)
		}
	}
	if want := len(validateSeeds(t)); named != want {
		t.Errorf("%d named seeds in %s, want %d: run with -update-fuzz-seeds", named, vdir, want)
	}
	dentries, err := os.ReadDir(ddir)
	if err != nil || len(dentries) < len(decompressSeeds(t)) {
		t.Errorf("%s: %d seeds, %v", ddir, len(dentries), err)
	}
	for _, e := range dentries {
		if info, err := e.Info(); err != nil || info.Size() > 64<<10 {
			t.Errorf("%s: keep seeds under 64 KiB (%v)", e.Name(), err)
		}
	}
}
