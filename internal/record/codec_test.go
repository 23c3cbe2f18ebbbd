package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
)

func codecInputs() map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 300<<10)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	return map[string][]byte{
		"empty":        {},
		"one byte":     {42},
		"short":        []byte("hello, fjord"),
		"compressible": bytes.Repeat([]byte("the quick brown fox jumps "), 4000),
		"random":       random,
	}
}

func TestCodecRoundTrip(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c Codec) {
		for name, src := range codecInputs() {
			prefix := []byte("prefix")
			enc, err := Compress(c, append([]byte(nil), prefix...), src)
			if err != nil || !bytes.HasPrefix(enc, prefix) {
				t.Fatalf("%s: Compress: %v", name, err)
			}
			dec, err := Decompress(c, []byte("dst:"), enc[len(prefix):], len(src)+1)
			if err != nil {
				t.Fatalf("%s: Decompress: %v", name, err)
			}
			if !bytes.Equal(dec, append([]byte("dst:"), src...)) {
				t.Fatalf("%s: round trip changed %d bytes into %d", name, len(src), len(dec)-4)
			}
		}
	})
}

// The limit is on bytes appended: exactly maxSize decodes, one more does not.
func TestDecompressLimitIsExact(t *testing.T) {
	src := bytes.Repeat([]byte("0123456789"), 10_000)
	forEachCodec(t, func(t *testing.T, c Codec) {
		enc, err := Compress(c, nil, src)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := Decompress(c, []byte("xx"), enc, len(src)); err != nil || len(out) != len(src)+2 {
			t.Fatalf("at limit: %d bytes, %v", len(out), err)
		}
		if _, err := Decompress(c, nil, enc, len(src)-1); !errors.Is(err, ErrDecompressedTooLarge) {
			t.Fatalf("one under: %v, want ErrDecompressedTooLarge", err)
		}
	})
}

// A bomb must fail at the limit without the decoder allocating anything like
// the declared or actual decompressed size.
func TestDecompressBombCostsAtMostTheLimit(t *testing.T) {
	const bombSize, limit = 64 << 20, 1 << 20
	zeros := make([]byte, bombSize)
	bombs := map[string]func() []byte{}
	for _, c := range allCodecs[1:] {
		bombs[c.String()] = func() []byte {
			b, err := Compress(c, nil, zeros)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	// A streamed zstd frame declares no content size, so only the per-block
	// output check can stop it.
	bombs["zstd-streamed"] = func() []byte {
		var buf bytes.Buffer
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < bombSize/len(zeros[:1<<20]); i++ {
			if _, err := w.Write(zeros[:1<<20]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	// xerial with many chunks each under the limit: the total must count.
	bombs["snappy-xerial"] = func() []byte { return xerial.Encode(nil, zeros) }

	for name, mk := range bombs {
		t.Run(name, func(t *testing.T) {
			bomb := mk()
			codec := map[string]Codec{"gzip": CodecGzip, "snappy": CodecSnappy, "snappy-xerial": CodecSnappy,
				"lz4": CodecLZ4, "zstd": CodecZstd, "zstd-streamed": CodecZstd}[name]
			// Warm the pools so the measurement sees the steady state.
			if _, err := Decompress(codec, nil, bomb, limit); !errors.Is(err, ErrDecompressedTooLarge) {
				t.Fatalf("err %v, want ErrDecompressedTooLarge", err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Decompress(codec, nil, bomb, limit)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrDecompressedTooLarge) {
				t.Fatalf("err %v, want ErrDecompressedTooLarge", err)
			}
			// The output buffer may grow to about twice the limit while
			// hitting it. A zstd decoder the GC took from the pool
			// allocates its window again, up to zstdMinWindow.
			allowance := uint64(3 * limit)
			if codec == CodecZstd {
				allowance += zstdMinWindow + 1<<20
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d-byte bomb: %d bytes allocated", len(bomb), alloc)
			if alloc > allowance {
				t.Fatalf("%d-byte %s bomb cost %d bytes of allocation with a %d limit", len(bomb), name, alloc, limit)
			}
		})
	}
}

// xerialFrame builds the Java client's snappy framing by hand: magic,
// version 1, compatible version 1, then length-prefixed raw snappy blocks.
func xerialFrame(chunks ...[]byte) []byte {
	b := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	for _, c := range chunks {
		block := snappy.Encode(nil, c)
		b = binary.BigEndian.AppendUint32(b, uint32(len(block)))
		b = append(b, block...)
	}
	return b
}

func TestSnappyXerialFraming(t *testing.T) {
	a := bytes.Repeat([]byte("a"), 40_000)
	bb := []byte("second chunk")
	c := bytes.Repeat([]byte("xyz"), 30_000)
	want := append(append(append([]byte(nil), a...), bb...), c...)

	got, err := Decompress(CodecSnappy, nil, xerialFrame(a, bb, c), 0)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("three chunks: %d bytes, %v", len(got), err)
	}
	// The same framing as another implementation writes it.
	got, err = Decompress(CodecSnappy, []byte("p"), xerial.Encode(nil, want), 0)
	if err != nil || !bytes.Equal(got, append([]byte("p"), want...)) {
		t.Fatalf("klauspost xerial: %d bytes, %v", len(got), err)
	}
	if got, err := Decompress(CodecSnappy, nil, xerialFrame(), 0); err != nil || len(got) != 0 {
		t.Fatalf("no chunks: %q %v", got, err)
	}
	// The limit counts all chunks together.
	if _, err := Decompress(CodecSnappy, nil, xerialFrame(a, bb, c), len(want)-1); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Fatalf("over the limit across chunks: %v", err)
	}
	if _, err := Decompress(CodecSnappy, nil, xerialFrame(a, bb, c), len(want)); err != nil {
		t.Fatalf("at the limit across chunks: %v", err)
	}

	full := xerialFrame(a, bb)
	for name, bad := range map[string][]byte{
		"header only partly":    full[:12],
		"chunk length cut":      full[:18],
		"chunk longer than src": full[:len(full)-1],
		"chunk not snappy":      append(xerialFrame(), 0, 0, 0, 3, 0xff, 0xff, 0xff),
	} {
		if _, err := Decompress(CodecSnappy, nil, bad, 0); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: %v, want ErrCorruptRecord", name, err)
		}
	}
}

func TestDecompressRejectsDamage(t *testing.T) {
	src := bytes.Repeat([]byte("some record bytes "), 5000)
	forEachCodec(t, func(t *testing.T, c Codec) {
		if c == CodecNone {
			return
		}
		enc, err := Compress(c, nil, src)
		if err != nil {
			t.Fatal(err)
		}
		for name, bad := range map[string][]byte{
			"garbage":   []byte("this was never compressed by anyone"),
			"empty":     {},
			"truncated": enc[:len(enc)-5],
			"half":      enc[:len(enc)/2],
		} {
			out, err := Decompress(c, nil, bad, 0)
			if !errors.Is(err, ErrCorruptRecord) {
				t.Errorf("%s: %d bytes, err %v, want ErrCorruptRecord", name, len(out), err)
			}
		}
	})
}

func TestUnknownCodec(t *testing.T) {
	for _, c := range []Codec{5, 6, 7, -1} {
		if _, err := Compress(c, nil, []byte("x")); !errors.Is(err, ErrUnsupportedCodec) {
			t.Errorf("Compress(%s): %v", c, err)
		}
		if _, err := Decompress(c, nil, []byte("x"), 0); !errors.Is(err, ErrUnsupportedCodec) {
			t.Errorf("Decompress(%s): %v", c, err)
		}
	}
}

// Pooled encoders and decoders must not leak state between goroutines.
func TestCodecsConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				c := allCodecs[(g+i)%len(allCodecs)]
				src := bytes.Repeat(fmt.Appendf(nil, "g%d-i%d ", g, i), 500+i*100)
				enc, err := Compress(c, nil, src)
				if err != nil {
					errs <- err
					return
				}
				dec, err := Decompress(c, nil, enc, 0)
				if err != nil || !bytes.Equal(dec, src) {
					errs <- fmt.Errorf("%s goroutine %d iteration %d: %v", c, g, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Pooled zstd and lz4 coders can run background workers when configured for
// concurrency; this package turns that off so that a pooled coder dropped by
// the GC leaves nothing running.
func TestCodecsStartNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	src := bytes.Repeat([]byte("goroutine check "), 10_000)
	for range 3 {
		for _, c := range allCodecs {
			enc, err := Compress(c, nil, src)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Decompress(c, nil, enc, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Goroutines of earlier tests may still be exiting (fewer is fine), and
	// a decoder's worker would too if it were only slow to stop: wait for
	// the count to come back, fail if it never does.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before, %d after using every codec", before, runtime.NumGoroutine())
		}
		runtime.Gosched()
	}
}

// Regression: a pooled klauspost gzip reader kept Huffman tables from the
// previous stream, so this corrupt body (found by FuzzValidate, seed
// 9c89d44f918899dc) failed one way fresh and another after a clean decode
// of 100000 zeros. Decompress must depend on its input alone.
func TestGzipDecodeIndependentOfHistory(t *testing.T) {
	corrupt := []byte("\x1f\x8b\b\x00000000$0\x00\x00\x00!\x1f0000000000\x17\x17\x17\x17\x17\x17\x17\x170000")
	_, fresh := Decompress(CodecGzip, nil, corrupt, 1<<20)
	if !errors.Is(fresh, ErrCorruptRecord) {
		t.Fatalf("corrupt body: %v", fresh)
	}
	for _, src := range [][]byte{make([]byte, 100000), []byte("x"), bytes.Repeat([]byte("abc"), 1000)} {
		enc, err := Compress(CodecGzip, nil, src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decompress(CodecGzip, nil, enc, 1<<20); err != nil {
			t.Fatal(err)
		}
		if _, err := Decompress(CodecGzip, nil, corrupt, 1<<20); err == nil || err.Error() != fresh.Error() {
			t.Fatalf("after decoding %d bytes: %v, fresh: %v", len(src), err, fresh)
		}
	}
}
