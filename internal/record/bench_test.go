package record

import (
	"fmt"
	"hash/crc32"
	"testing"
)

// benchBatch is a batch of 1 KiB records filling about size bytes.
func benchBatch(b *testing.B, c Codec, size int) []byte {
	b.Helper()
	opts := DefaultBatchOptions()
	opts.Codec = c
	return buildBatch(b, opts, sizedRecords(size/1024, 1024-20))
}

var benchSizes = []struct {
	name string
	size int
}{{"16KiB", 16 << 10}, {"1MiB", 1 << 20}}

// BenchmarkCRC32C is the ceiling Validate is measured against: the CRC alone
// over the same bytes.
func BenchmarkCRC32C(b *testing.B) {
	for _, s := range benchSizes {
		buf := benchBatch(b, CodecNone, s.size)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				crc32.Checksum(buf[offAttributes:], crcTable)
			}
		})
	}
}

func BenchmarkParseHeader(b *testing.B) {
	buf := benchBatch(b, CodecNone, 16<<10)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHeader(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	for _, s := range benchSizes {
		buf := benchBatch(b, CodecNone, s.size)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(buf, ValidateOptions{Client: true, MaxBatchBytes: 2 << 20}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidateCompressed is the produce path for a compressed batch:
// CRC only, and with VerifyCompressedRecords for comparison.
func BenchmarkValidateCompressed(b *testing.B) {
	for _, c := range allCodecs[1:] {
		buf := benchBatch(b, c, 1<<20)
		for _, verify := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/verify=%v", c, verify), func(b *testing.B) {
				b.SetBytes(int64(len(buf)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Validate(buf, ValidateOptions{Client: true, VerifyCompressedRecords: verify}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkForEachRecord(b *testing.B) {
	for _, s := range benchSizes {
		buf := benchBatch(b, CodecNone, s.size)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			var n int
			for b.Loop() {
				if err := ForEachRecord(buf, func(r *Record) error { n += len(r.Value); return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBuild(b *testing.B) {
	recs := sizedRecords(1024, 1024-20)
	for _, c := range allCodecs {
		opts := DefaultBatchOptions()
		opts.Codec = c
		bld := NewBuilder(opts)
		var in int64
		for _, r := range recs {
			in += int64(len(r.key) + len(r.value))
		}
		b.Run(c.String()+"/1MiB", func(b *testing.B) {
			b.SetBytes(in)
			b.ReportAllocs()
			var out []byte
			for b.Loop() {
				bld.Reset(opts)
				for _, r := range recs {
					bld.Add(r.key, r.value, nil, r.timestamp)
				}
				var err error
				if out, err = bld.AppendBatch(out[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecompress(b *testing.B) {
	raw := benchBatch(b, CodecNone, 1<<20)[HeaderSize:]
	for _, c := range allCodecs[1:] {
		enc, err := Compress(c, nil, raw)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.String()+"/1MiB", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			dst := make([]byte, 0, len(raw))
			for b.Loop() {
				if dst, err = Decompress(c, dst[:0], enc, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFilter(b *testing.B) {
	for _, c := range []Codec{CodecNone, CodecZstd} {
		buf := benchBatch(b, c, 1<<20)
		b.Run(c.String()+"/1MiB", func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			var dst []byte
			for b.Loop() {
				var err error
				if dst, _, err = Filter(dst[:0], buf, func(r *Record) bool { return r.Offset%2 == 0 }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
