package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/storage/checkpoint"
	"github.com/fjordmq/fjord/internal/vfs"
)

// Disk faults of fjord verify --local, done to the files of a node it
// has just SIGKILLed, before the heal starts it again.
//
// A SIGKILLed node already loses what it had not fsynced (its nodes keep
// unsynced writes in memory, vfs.WriteBack): the kill and kill-all
// faults are power cuts. A disk can do worse at a power cut, and these
// are the two things the storage engine's crash tests model on its
// strict in-memory file system (vfs.MemFS.CrashTorn), done here to the
// real files of a real process:
//
//   - torn-write: the last write of each of the node's partition logs of
//     the run's topic reached the disk only in part. The part is a prefix
//     of the batch that comes next in another replica's log (what the
//     node was writing, or would have), cut short inside that batch and,
//     half the time, with its last 1 to 8 bytes garbled (zeroed or
//     random), as CrashTorn does. Recovery must cut the log back to its
//     last whole batch; the node then copies the rest from its leader.
//   - bit-flip: one bit flipped in one batch the node's recovery will
//     scan (at or past the partition's recovery point, the offset up to
//     which the log is known flushed and whole): a write that reached the
//     disk damaged. Recovery must find it by the batch's CRC and cut the
//     log there, and the node, registering as a new process, is taken out
//     of every ISR until it has copied back what it cut.
//
// Damage below a recovery point (data at rest that rots after it was
// written and checked) is not injected: Fjord, like Kafka, does not scan
// it at start and serves it as stored, and clients' CRC checks are what
// find it. A scrubber is future work; verify would then inject it too.

const (
	// maxGarbled bounds the garbled bytes at the end of a torn write,
	// as vfs.MemFS.CrashTorn's.
	maxGarbled = 8
)

// segmentBatch is one batch in a partition log's segment files.
type segmentBatch struct {
	path   string // the segment file
	pos    int64  // where the batch starts in it
	header record.Header
}

// segmentLog is what readBatches found in a partition's directory.
type segmentLog struct {
	batches []segmentBatch
	// active is the newest segment file and end where its last whole
	// batch ends (0 when it has none): where the log's next write goes.
	active string
	end    int64
}

// readBatches lists the whole batches of the log in dir, in offset
// order, stopping at the first that does not parse or is not whole (a
// torn tail from an earlier fault, which recovery cut or will).
func readBatches(dir string) (segmentLog, error) {
	var log segmentLog
	entries, err := os.ReadDir(dir)
	if err != nil {
		return log, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") && len(e.Name()) == 24 {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names) // zero-padded base offsets sort as numbers
	for _, name := range names {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			return log, err
		}
		log.active, log.end = path, 0
		for pos := 0; pos < len(b); {
			h, err := record.ParseHeader(b[pos:])
			if err != nil || pos+h.Size() > len(b) {
				break
			}
			log.batches = append(log.batches, segmentBatch{path: path, pos: int64(pos), header: h})
			pos += h.Size()
			log.end = int64(pos)
		}
	}
	return log, nil
}

// partitionLog is one partition of the run's topics on a node: its name
// and directory.
type partitionLog struct {
	tp  checkpoint.TopicPartition
	dir string
}

// partitionDirs is the run's topics' partition directories on one node.
func partitionDirs(dataDir string, topics []string, partitions int32) []partitionLog {
	var logs []partitionLog
	for _, topic := range topics {
		for p := range partitions {
			tp := checkpoint.TopicPartition{Topic: topic, Partition: p}
			logs = append(logs, partitionLog{tp, filepath.Join(dataDir, tp.String())})
		}
	}
	return logs
}

// tearWrites gives each of the topics' partition logs in dataDir a torn
// last write: a prefix of the batch that follows its last one in one of
// others (the other replicas' data directories), or of its own last
// batch when no other has more; then, half the time, its last bytes
// garbled. It says what it did, and returns how many logs it tore.
func tearWrites(dataDir string, others []string, topics []string, partitions int32, rng *rand.Rand) (string, int, error) {
	torn, bytes := 0, 0
	for _, pl := range partitionDirs(dataDir, topics, partitions) {
		own, err := readBatches(pl.dir)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && len(own.batches) == 0) {
			continue // no replica here, or nothing written yet
		}
		if err != nil {
			return "", 0, err
		}
		last := own.batches[len(own.batches)-1]
		next, err := nextBatch(others, pl.tp.String(), last.header.LastOffset()+1)
		if err != nil {
			return "", 0, err
		}
		if next == nil { // the node had all there was: tear its own last batch again
			if next, err = readBatchBytes(last); err != nil {
				return "", 0, err
			}
		}
		// Inside the batch: a whole batch would be a write that made it.
		tail := slices.Clone(next[:1+rng.IntN(len(next)-1)])
		if rng.IntN(2) == 0 {
			g := 1 + rng.IntN(min(len(tail), maxGarbled))
			garbled := tail[len(tail)-g:]
			if rng.IntN(2) == 0 {
				clear(garbled)
			} else {
				for i := range garbled {
					garbled[i] = byte(rng.Uint32())
				}
			}
		}
		if err := appendTo(own.active, own.end, tail); err != nil {
			return "", 0, err
		}
		torn++
		bytes += len(tail)
	}
	return fmt.Sprintf("a torn last write in %d of its partition logs (%d bytes in all)", torn, bytes), torn, nil
}

// nextBatch is the bytes of the batch at offset in partition's log in
// any of dataDirs, or nil when none has it.
func nextBatch(dataDirs []string, partition string, offset int64) ([]byte, error) {
	for _, d := range dataDirs {
		log, err := readBatches(filepath.Join(d, partition))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, b := range log.batches {
			if b.header.BaseOffset == offset {
				return readBatchBytes(b)
			}
		}
	}
	return nil, nil
}

func readBatchBytes(b segmentBatch) ([]byte, error) {
	f, err := os.Open(b.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, b.header.Size())
	_, err = f.ReadAt(buf, b.pos)
	return buf, err
}

// appendTo writes data at end of path (where its last whole batch ends:
// past it is what an earlier torn write left, which this replaces) and
// syncs it: what a torn write leaves is on the disk.
func appendTo(path string, end int64, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(end); err != nil {
		return err
	}
	if _, err := f.WriteAt(data, end); err != nil {
		return err
	}
	return f.Sync()
}

// flipBit flips one bit in the records of one batch of the topics'
// partition logs in dataDir, a batch at or past its log's recovery point
// (which recovery scans), drawn with rng. It says which, and returns how
// many logs it damaged (0 or 1).
func flipBit(dataDir string, topics []string, partitions int32, rng *rand.Rand) (string, int, error) {
	recovery, err := checkpoint.ReadOffsets(vfs.OS(), filepath.Join(dataDir, storage.RecoveryPointCheckpoint))
	if err != nil {
		return "", 0, fmt.Errorf("reading the recovery points: %w", err)
	}
	type candidate struct {
		tp    checkpoint.TopicPartition
		batch segmentBatch
	}
	var candidates []candidate
	for _, pl := range partitionDirs(dataDir, topics, partitions) {
		tp := pl.tp
		log, err := readBatches(pl.dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", 0, err
		}
		for _, b := range log.batches {
			if b.header.BaseOffset >= recovery[tp] && b.header.Size() > record.HeaderSize {
				candidates = append(candidates, candidate{tp, b})
			}
		}
	}
	if len(candidates) == 0 {
		return "nothing flipped: no batch of the run's topic past a recovery point", 0, nil
	}
	c := candidates[rng.IntN(len(candidates))]
	// In the records, which the CRC covers.
	at := c.batch.pos + int64(record.HeaderSize+rng.IntN(c.batch.header.Size()-record.HeaderSize))
	bit := rng.IntN(8)
	f, err := os.OpenFile(c.batch.path, os.O_RDWR, 0)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	one := make([]byte, 1)
	if _, err := f.ReadAt(one, at); err != nil {
		return "", 0, err
	}
	one[0] ^= 1 << bit
	if _, err := f.WriteAt(one, at); err != nil {
		return "", 0, err
	}
	if err := f.Sync(); err != nil {
		return "", 0, err
	}
	return fmt.Sprintf("bit %d of byte %d flipped in %s's batch at offset %d (its recovery point is %d)",
		bit, at-c.batch.pos, c.tp, c.batch.header.BaseOffset, recovery[c.tp]), 1, nil
}
