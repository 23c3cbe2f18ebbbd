package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Kafka compresses a batch's records as one blob with the codec named in the
// attributes. Formats on the wire:
//
//   - gzip: a gzip stream (RFC 1952), possibly several members.
//   - snappy: either a raw snappy block (what franz-go and librdkafka send,
//     and what Compress writes) or xerial's framing, which the Java client
//     sends: the 8-byte magic 0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0, int32 version
//     and int32 compatible version, then chunks of a big-endian int32 length
//     and a raw snappy block each.
//   - lz4: the LZ4 frame format (not the raw block format).
//   - zstd: one or more zstd frames.
//
// Decompressing is the one place a hostile client controls how much memory
// Fjord spends, so every path checks the limit before it allocates where the
// format declares a size up front (snappy, zstd), and stops reading at the
// limit where it does not (gzip, lz4).

// Compress appends the compressed form of src to dst and returns it.
// CodecNone appends src unchanged.
func Compress(c Codec, dst, src []byte) ([]byte, error) {
	switch c {
	case CodecNone:
		return append(dst, src...), nil
	case CodecGzip:
		return compressGzip(dst, src)
	case CodecSnappy:
		n := snappy.MaxEncodedLen(len(src))
		if n < 0 {
			return dst, fmt.Errorf("%w: %d bytes is past snappy's block limit", ErrBatchTooLarge, len(src))
		}
		dst = growTail(dst, n)
		// Encode writes into the spare capacity; the append then copies
		// nothing (it only extends the length over the encoded bytes).
		return append(dst, snappy.Encode(dst[len(dst):cap(dst)], src)...), nil
	case CodecLZ4:
		return compressLZ4(dst, src)
	case CodecZstd:
		return zstdEncoder().EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("%w: %s", ErrUnsupportedCodec, c)
}

// Decompress appends the decompressed form of src to dst and returns it. It
// stops with ErrDecompressedTooLarge once more than maxSize bytes would be
// appended; maxSize <= 0 means DefaultMaxDecompressedBytes. A blob that does
// not decode is ErrCorruptRecord. On error the returned slice's contents are
// unspecified.
func Decompress(c Codec, dst, src []byte, maxSize int) ([]byte, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxDecompressedBytes
	}
	var err error
	switch c {
	case CodecNone:
		if len(src) > maxSize {
			return dst, tooLarge(c, maxSize)
		}
		return append(dst, src...), nil
	}
	if len(src) == 0 && c.valid() {
		// zstd and lz4 readers take no input as no frames and so no
		// output; every codec here writes at least a header, and Java's
		// readers refuse an empty blob, so it is damage, not an empty body.
		return dst, fmt.Errorf("%w: empty %s blob", ErrCorruptRecord, c)
	}
	switch c {
	case CodecGzip:
		dst, err = decompressGzip(dst, src, maxSize)
	case CodecSnappy:
		dst, err = decompressSnappy(dst, src, maxSize)
	case CodecLZ4:
		dst, err = decompressLZ4(dst, src, maxSize)
	case CodecZstd:
		dst, err = decompressZstd(dst, src, maxSize)
	default:
		return dst, fmt.Errorf("%w: %s", ErrUnsupportedCodec, c)
	}
	if err != nil {
		if errors.Is(err, ErrDecompressedTooLarge) {
			return dst, err
		}
		return dst, fmt.Errorf("%w: %s: %v", ErrCorruptRecord, c, err)
	}
	return dst, nil
}

func tooLarge(c Codec, maxSize int) error {
	return fmt.Errorf("%w: %s blob decompresses past %d bytes", ErrDecompressedTooLarge, c, maxSize)
}

// growTail returns dst with room for at least n more bytes past its length,
// at least doubling its capacity when it must grow so that appending chunk
// after chunk (xerial's blocks) stays linear. (slices.Grow's 1.25x growth
// for large slices measured 5 MiB of garbage for a 1 MiB xerial output.)
func growTail(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	return growTo(dst, max(len(dst)+n, 2*cap(dst)))
}

// growTo returns dst with capacity exactly c (> cap(dst)), contents kept.
func growTo(dst []byte, c int) []byte {
	grown := make([]byte, len(dst), c)
	copy(grown, dst)
	return grown
}

// readLimited appends everything r yields to dst, failing once more than
// maxSize bytes have been appended. It doubles dst as it goes but never
// allocates past the limit, so a bomb costs about twice the limit in
// allocations, however large it claims or turns out to be.
func readLimited(c Codec, r io.Reader, dst []byte, maxSize int) ([]byte, error) {
	limit := len(dst) + maxSize
	for empty := 0; ; {
		if len(dst) == cap(dst) && len(dst) < limit {
			grow := max(cap(dst)-(limit-maxSize), 4096)
			dst = growTo(dst, len(dst)+min(grow, limit-len(dst)))
		}
		var n int
		var err error
		if len(dst) < limit {
			n, err = r.Read(dst[len(dst):min(cap(dst), limit)])
			dst = dst[:len(dst)+n]
		} else {
			// Full to the limit: any further byte is one too many, and a
			// one-byte probe finds out without growing dst to hold it.
			if n, err = r.Read(make([]byte, 1)); n > 0 {
				return dst, tooLarge(c, maxSize)
			}
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
		// A decoder that keeps returning nothing must not hang the caller.
		if n > 0 {
			empty = 0
		} else if empty++; empty > 100 {
			return dst, io.ErrNoProgress
		}
	}
}

// appendWriter is an io.Writer that appends to a slice.
type appendWriter struct{ buf []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// --- gzip ---

type gzipEncoder struct {
	w   *gzip.Writer
	out appendWriter
}

var gzipEncoders = sync.Pool{New: func() any {
	e := new(gzipEncoder)
	e.w = gzip.NewWriter(&e.out)
	return e
}}

func compressGzip(dst, src []byte) ([]byte, error) {
	e := gzipEncoders.Get().(*gzipEncoder)
	defer gzipEncoders.Put(e)
	e.out.buf = dst
	e.w.Reset(&e.out)
	_, err := e.w.Write(src)
	if err == nil {
		err = e.w.Close()
	}
	dst, e.out.buf = e.out.buf, nil
	return dst, err
}

// gzip readers are not pooled. Fuzzing found klauspost's flate reader
// keeping Huffman tables across Reset (huffmanDecoder.init keeps its chunks
// and links arrays, where the standard library zeroes them), so a corrupt
// stream with an incomplete code decoded against whatever an earlier,
// unrelated batch left behind: the same bytes failed differently, and could
// in principle decode, depending on the pool. Validation must be a function
// of the bytes alone, so each decode gets a fresh reader, about 40 KiB of
// garbage; gzip is the slowest codec anyway and rare on the hot path. The
// regression seed is testdata/fuzz/FuzzValidate/9c89d44f918899dc.
func decompressGzip(dst, src []byte, maxSize int) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(src))
	if err != nil {
		return dst, err
	}
	return readLimited(CodecGzip, r, dst, maxSize)
}

// --- snappy ---

// xerialMagic opens a xerial-framed snappy blob; the version and compatible
// version int32s follow it.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

var errSnappyFraming = errors.New("malformed xerial snappy framing")

func decompressSnappy(dst, src []byte, maxSize int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return decodeSnappyBlock(dst, src, maxSize)
	}
	if len(src) < xerialHeaderSize {
		return dst, errSnappyFraming
	}
	start := len(dst)
	for p := xerialHeaderSize; p < len(src); {
		if len(src)-p < 4 {
			return dst, errSnappyFraming
		}
		n := int(binary.BigEndian.Uint32(src[p:]))
		p += 4
		if n > len(src)-p {
			return dst, errSnappyFraming
		}
		var err error
		if dst, err = decodeSnappyBlock(dst, src[p:p+n], maxSize-(len(dst)-start)); err != nil {
			return dst, err
		}
		p += n
	}
	return dst, nil
}

// decodeSnappyBlock appends one raw snappy block, checking the length it
// declares against maxSize before allocating for it.
func decodeSnappyBlock(dst, block []byte, maxSize int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return dst, err
	}
	if n > maxSize {
		return dst, tooLarge(CodecSnappy, maxSize)
	}
	dst = growTail(dst, n)
	out, err := snappy.Decode(dst[len(dst):len(dst)+n], block)
	if err != nil {
		return dst, err
	}
	if len(out) != n {
		return dst, fmt.Errorf("snappy block declared %d bytes, decoded %d", n, len(out))
	}
	return dst[:len(dst)+n], nil
}

// --- lz4 ---

type lz4Encoder struct {
	w   *lz4.Writer
	out appendWriter
}

var lz4Encoders = sync.Pool{New: func() any {
	e := new(lz4Encoder)
	e.w = lz4.NewWriter(&e.out)
	// 64 KiB blocks, as the Java client writes: every Kafka reader accepts
	// them, and a pooled writer then holds 64 KiB instead of 4 MiB. No
	// content checksum, as the Java client writes none either: the batch
	// CRC already covers these bytes, and verifying xxh32 measured two
	// thirds of lz4 decoding time.
	if err := e.w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false)); err != nil {
		panic(fmt.Sprintf("lz4 writer options: %v", err))
	}
	return e
}}

func compressLZ4(dst, src []byte) ([]byte, error) {
	e := lz4Encoders.Get().(*lz4Encoder)
	defer lz4Encoders.Put(e)
	e.out.buf = dst
	e.w.Reset(&e.out)
	_, err := e.w.Write(src)
	if err == nil {
		err = e.w.Close()
	}
	dst, e.out.buf = e.out.buf, nil
	return dst, err
}

type lz4Decoder struct {
	r   *lz4.Reader
	src bytes.Reader
}

var lz4Decoders = sync.Pool{New: func() any {
	d := new(lz4Decoder)
	d.r = lz4.NewReader(&d.src)
	return d
}}

func decompressLZ4(dst, src []byte, maxSize int) ([]byte, error) {
	d := lz4Decoders.Get().(*lz4Decoder)
	d.src.Reset(src)
	d.r.Reset(&d.src)
	dst, err := readLimited(CodecLZ4, d.r, dst, maxSize)
	d.r.Reset(nil)
	d.src.Reset(nil)
	// Only a decoder that finished cleanly goes back: after gzip's
	// Huffman tables (see decompressGzip) no decoder state left by a
	// failed decode is trusted.
	if err == nil {
		lz4Decoders.Put(d)
	}
	return dst, err
}

// --- zstd ---

// zstdEncoder is shared: EncodeAll is safe for concurrent use and keeps its
// own pool of block encoders, which are the expensive part to create.
var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault),
		// An empty input still becomes a frame, which every decoder accepts;
		// zero bytes is not valid zstd for the Java client.
		zstd.WithZeroFrames(true))
	if err != nil {
		panic(fmt.Sprintf("zstd encoder: %v", err))
	}
	return e
})

// zstdDecoder streams rather than calling DecodeAll: for a frame that does
// not declare its content size, DecodeAll grows its output by reallocation
// and only checks the limit between blocks, so a 7 KiB bomb cost 47 MiB of
// allocation against an 8 MiB limit when measured. Streaming into
// readLimited costs the frame's window plus the caller's limit.
//
// Decoders are pooled per goroutine rather than shared because the window
// limit is set per call. Concurrency 1 keeps each decoder synchronous, with
// no goroutines of its own.
type zstdDecoder struct {
	d   *zstd.Decoder
	src bytes.Reader // not a zstd "byter", so Reset never takes the DecodeAll shortcut
}

var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
	if err != nil {
		panic(fmt.Sprintf("zstd decoder: %v", err))
	}
	return &zstdDecoder{d: d}
}}

// zstdMinWindow is the smallest window limit a zstd decoder is given, even
// under a smaller maxSize: a streamed frame declares a window regardless of
// its content (zstd's levels up to 19 declare at most 8 MiB), and refusing
// a legitimate frame for its window would be wrong. A hostile frame can so
// cost up to max(maxSize, zstdMinWindow) of window memory, no more.
const zstdMinWindow = 8 << 20

func decompressZstd(dst, src []byte, maxSize int) ([]byte, error) {
	// The first frame's declared content size refuses most bombs before any
	// decoding, and otherwise sizes the output in one allocation.
	var fh zstd.Header
	if err := fh.Decode(src); err == nil && fh.HasFCS {
		if fh.FrameContentSize > uint64(maxSize) {
			return dst, tooLarge(CodecZstd, maxSize)
		}
		dst = growTail(dst, int(fh.FrameContentSize))
	}
	z := zstdDecoders.Get().(*zstdDecoder)
	z.src.Reset(src)
	window := uint64(max(maxSize, zstdMinWindow))
	err := z.d.ResetWithOptions(&z.src, zstd.WithDecoderMaxMemory(window))
	if err == nil {
		dst, err = readLimited(CodecZstd, z.d, dst, maxSize)
	}
	_ = z.d.Reset(nil) // drop the reference to src; cannot fail for nil
	z.src.Reset(nil)
	if err == nil { // as for lz4
		zstdDecoders.Put(z)
	} else {
		z.d.Close()
	}
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		// A window past the limit: the frame would need more memory than
		// the caller allows, which is the same refusal as a bomb.
		return dst, tooLarge(CodecZstd, maxSize)
	}
	return dst, err
}
