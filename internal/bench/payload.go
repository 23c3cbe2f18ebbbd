package bench

import (
	"encoding/binary"
	"math/rand/v2"
)

// Every record value the runner sends starts with a 16-byte header:
//
//	0       8                       16                  messageSize
//	+-------+-----------------------+--------------------+
//	| sent  | producer | counter    | random | zeros     |
//	+-------+-----------------------+--------------------+
//	 int64   uint64: 16 | 48 bits    payloadRandomness
//	 big-endian, unix nanoseconds    of the rest is random
//
// sent is the record's intended send time, so a consumer computes the
// end-to-end latency from the value alone (producer and consumer share
// this machine's clock). The sequence is the producer's index in its
// topic in the top 16 bits and its own record counter in the low 48, so
// the consumers of a topic can tell every record apart: that is how the
// run counts records lost and duplicated.

const (
	payloadHeaderSize = 16
	// counterBits is the width of a producer's record counter in the
	// sequence; producerBits the width of its index.
	counterBits = 48
	counterMask = 1<<counterBits - 1
	// arenaSize is the random bytes the producers' payload bodies are
	// cut from, each producer from its own stretch; generating fresh
	// randomness per record would cost more than sending it.
	arenaSize = 16 << 20
)

// putHeader writes the header into the first 16 bytes of b.
func putHeader(b []byte, sentNanos int64, seq uint64) {
	binary.BigEndian.PutUint64(b[0:8], uint64(sentNanos))
	binary.BigEndian.PutUint64(b[8:16], seq)
}

// readHeader reads the header of a value; ok is false when the value is
// too short to hold one.
func readHeader(b []byte) (sentNanos int64, seq uint64, ok bool) {
	if len(b) < payloadHeaderSize {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(b[0:8])), binary.BigEndian.Uint64(b[8:16]), true
}

// sequence packs a producer index and its record counter.
func sequence(producer int, counter int64) uint64 {
	return uint64(producer)<<counterBits | uint64(counter)&counterMask
}

// splitSequence is sequence's inverse.
func splitSequence(seq uint64) (producer int, counter int64) {
	return int(seq >> counterBits), int64(seq & counterMask)
}

// newArena returns the random bytes every producer's payloads are cut
// from; it is only read once built, so all producers share it.
func newArena(rng *rand.Rand) []byte {
	b := make([]byte, arenaSize)
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	return b
}

// payloadWriter hands out one producer's values from a pool of
// buffers whose random bodies are filled once; each record rewrites
// only the header of the next buffer, round-robin. Driver.Send does not
// retain the value, so a buffer is free again as soon as Send returns.
// Used by one goroutine.
type payloadWriter struct {
	bufs [][]byte
	i    int
}

// payloadPoolBytes is at least how much each producer's pool holds:
// more than one 1 MiB batch, so no batch carries the same body twice.
const (
	payloadPoolBytes   = 3 << 19 // 1.5 MiB
	minPayloadPoolSize = 16
)

// newPayloadWriter builds the pool for values of size bytes, of which
// randomness (after the header) is random, cut from the arena starting
// at offset start; the rest of each value is zeros.
func newPayloadWriter(arena []byte, size int, randomness float64, start int) *payloadWriter {
	randomLen := int(float64(size-payloadHeaderSize)*randomness + 0.5)
	n := max((payloadPoolBytes+size-1)/size, minPayloadPoolSize)
	backing := make([]byte, n*size)
	p := &payloadWriter{bufs: make([][]byte, n)}
	off := start % (len(arena) - randomLen + 1)
	for j := range p.bufs {
		b := backing[j*size : (j+1)*size : (j+1)*size]
		if off+randomLen > len(arena) {
			off = 0
		}
		copy(b[payloadHeaderSize:], arena[off:off+randomLen])
		off += randomLen
		p.bufs[j] = b
	}
	return p
}

// next returns the value for one record, valid until the pool comes
// round to it again.
func (p *payloadWriter) next(sentNanos int64, seq uint64) []byte {
	b := p.bufs[p.i]
	if p.i++; p.i == len(p.bufs) {
		p.i = 0
	}
	putHeader(b, sentNanos, seq)
	return b
}

// numKeys is the size of the key set, as OMB's key distributors use.
const numKeys = 10_000

// keyChooser picks each record's key per the workload's distributor.
// Used by one goroutine.
type keyChooser struct {
	dist KeyDistributor
	keys [][]byte
	i    int
	rng  *rand.Rand
}

// newKeys returns the key set shared (read-only) by every producer:
// random 8-character keys, as different from one another as a real
// key space.
func newKeys(rng *rand.Rand) [][]byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	keys := make([][]byte, numKeys)
	for i := range keys {
		k := make([]byte, 8)
		for j := range k {
			k[j] = alphabet[rng.IntN(len(alphabet))]
		}
		keys[i] = k
	}
	return keys
}

func (k *keyChooser) next() []byte {
	switch k.dist {
	case KeyRoundRobin:
		key := k.keys[k.i]
		k.i = (k.i + 1) % len(k.keys)
		return key
	case RandomNano:
		return k.keys[k.rng.IntN(len(k.keys))]
	}
	return nil
}
