package limits

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"
)

// The ingest loop's frames on the socket:
//
//	+-----------------+------------------------------------------------+
//	| length: uint32  | batch (length bytes)                           |
//	| big-endian      | +--------------+-----------+-----+-----------+ |
//	|                 | | crc32c: u32  | record 0  | ... | record n-1| |
//	|                 | +--------------+-----------+-----+-----------+ |
//	+-----------------+------------------------------------------------+
//
// The batch opens with the CRC32C (Castagnoli) of the records after it,
// as a Kafka record batch carries one in its header; the receiver checks
// it, as a broker must before it appends. Records are RecordBytes of
// random bytes each, back to back; the loop never looks inside them,
// just as a broker appends a batch without decoding its records.
//
// Invariant: 4 <= length <= 4 + BatchBytes (the receiver's buffer); a
// frame outside that is ErrCorruptBatch.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// distinctBatches is how many different batches the sender cycles
// through: enough that the receiver never checksums the same bytes twice
// in a row, few enough to build in a few milliseconds.
const distinctBatches = 4

// IngestOptions shape one bare-ingest run.
type IngestOptions struct {
	// TotalBytes is how many batch bytes to send, rounded up to whole
	// batches.
	TotalBytes int64
	// RecordBytes is each record's size and BatchBytes the size of a
	// batch's records: a batch holds BatchBytes/RecordBytes records
	// after its 4-byte CRC.
	RecordBytes int
	BatchBytes  int
	// SyncEveryBytes, when positive, adds an fdatasync each time this
	// many bytes were appended since the last, and one at the end for
	// the rest; zero leaves everything in the page cache.
	SyncEveryBytes int64
}

func (o IngestOptions) validate() error {
	switch {
	case o.TotalBytes < 1:
		return fmt.Errorf("%w: ingest size %d: must be positive", ErrInvalidConfig, o.TotalBytes)
	case o.RecordBytes < 1:
		return fmt.Errorf("%w: record size %d: must be positive", ErrInvalidConfig, o.RecordBytes)
	case o.BatchBytes < 1 || o.BatchBytes > maxBatchBytes:
		return fmt.Errorf("%w: batch size %d: allowed 1 byte to 64 MiB", ErrInvalidConfig, o.BatchBytes)
	case o.RecordBytes > o.BatchBytes:
		return fmt.Errorf("%w: record size %d does not fit a batch of %d bytes", ErrInvalidConfig, o.RecordBytes, o.BatchBytes)
	case o.SyncEveryBytes < 0:
		return fmt.Errorf("%w: sync interval %d: must not be negative", ErrInvalidConfig, o.SyncEveryBytes)
	}
	return nil
}

func (o IngestOptions) recordsPerBatch() int { return o.BatchBytes / o.RecordBytes }

// buildFrames returns distinctBatches frames of random records with
// their lengths and CRCs filled in.
func buildFrames(o IngestOptions) [][]byte {
	batchLen := 4 + o.recordsPerBatch()*o.RecordBytes
	frames := make([][]byte, distinctBatches)
	for i := range frames {
		f := randomBytes(4 + batchLen)
		binary.BigEndian.PutUint32(f[0:4], uint32(batchLen))
		binary.BigEndian.PutUint32(f[4:8], crc32.Checksum(f[8:], castagnoli))
		frames[i] = f
	}
	return frames
}

// BareIngest runs the bare ingest loop once: a sender goroutine writes
// framed batches (see the diagram above) to a loopback TCP socket as
// fast as it can; the receiver reads each frame into one reused buffer,
// checks the batch's CRC32C, and appends the batch to the file at path
// (created or truncated) with one write, with fdatasync as o says. The
// clock runs at the receiver from its go-ahead to the sender until the
// last append (and fdatasync) returns. The figure is batch bytes (frame
// length prefixes excluded) per second.
//
// This is the work a broker cannot avoid for a produce request, with
// nothing else: no request parsing, no index, no replication, no
// response. The file is left in place for the caller to remove.
func BareIngest(ctx context.Context, path string, o IngestOptions) (Sample, error) {
	if err := o.validate(); err != nil {
		return Sample{}, err
	}
	frames := buildFrames(o)
	batchLen := int64(len(frames[0]) - 4)
	// Whole batches, counted by their records' bytes so that 1 GiB of 1
	// MiB batches is 1024 batches (and 4 KiB of CRCs on top).
	recordsLen := int64(o.recordsPerBatch() * o.RecordBytes)
	batches := (o.TotalBytes + recordsLen - 1) / recordsLen

	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return Sample{}, err
	}
	defer f.Close()

	send := func(w io.Writer) error {
		for i := int64(0); i < batches; i++ {
			if _, err := w.Write(frames[i%distinctBatches]); err != nil {
				return err
			}
		}
		return nil
	}
	var elapsed time.Duration
	var appended int64
	receive := func(r io.Reader) error {
		start := time.Now()
		var err error
		appended, err = appendFrames(r, f, batches, int(batchLen), o.SyncEveryBytes)
		elapsed = time.Since(start)
		return err
	}
	if err := loopback(ctx, send, receive); err != nil {
		return Sample{}, fmt.Errorf("bare ingest: %w", err)
	}
	if err := f.Close(); err != nil {
		return Sample{}, err
	}
	s := newSample(appended, elapsed)
	s.Records = batches * int64(o.recordsPerBatch())
	return s, nil
}

// appendFrames is the receiver of the ingest loop: it reads
// frames frames from r into one buffer of maxLen bytes, checks each batch's
// CRC32C and appends the batch to f with one write, with an fdatasync
// each time syncEvery bytes were appended since the last and once at the
// end (none when syncEvery is 0). It returns the batch bytes appended.
func appendFrames(r io.Reader, f *os.File, frames int64, maxLen int, syncEvery int64) (int64, error) {
	buf := make([]byte, maxLen)
	var header [4]byte
	var appended, sinceSync int64
	for i := int64(0); i < frames; i++ {
		if _, err := io.ReadFull(r, header[:]); err != nil {
			return appended, fmt.Errorf("frame %d header: %w", i, err)
		}
		n := binary.BigEndian.Uint32(header[:])
		if n < 4 || n > uint32(len(buf)) {
			return appended, fmt.Errorf("%w: frame %d: length %d, want 4 to %d", ErrCorruptBatch, i, n, len(buf))
		}
		batch := buf[:n]
		if _, err := io.ReadFull(r, batch); err != nil {
			return appended, fmt.Errorf("frame %d: %w", i, err)
		}
		if got, want := crc32.Checksum(batch[4:], castagnoli), binary.BigEndian.Uint32(batch[:4]); got != want {
			return appended, fmt.Errorf("%w: frame %d: crc32c %08x, header says %08x", ErrCorruptBatch, i, got, want)
		}
		w, err := f.Write(batch)
		appended += int64(w)
		sinceSync += int64(w)
		if err != nil {
			return appended, fmt.Errorf("append to %s: %w", f.Name(), err)
		}
		if syncEvery > 0 && sinceSync >= syncEvery {
			if err := fdatasync(f); err != nil {
				return appended, fmt.Errorf("fdatasync %s: %w", f.Name(), err)
			}
			sinceSync = 0
		}
	}
	if syncEvery > 0 && sinceSync > 0 {
		if err := fdatasync(f); err != nil {
			return appended, fmt.Errorf("fdatasync %s: %w", f.Name(), err)
		}
	}
	return appended, nil
}
