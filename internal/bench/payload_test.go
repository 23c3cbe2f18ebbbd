package bench

import (
	"bytes"
	"compress/flate"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	b := make([]byte, 20)
	for _, tc := range []struct {
		sent     int64
		producer int
		counter  int64
	}{{0, 0, 0}, {1_700_000_000_123_456_789, 7, 42}, {-5, 999, counterMask}, {1 << 62, 1<<16 - 1, 1}} {
		putHeader(b, tc.sent, sequence(tc.producer, tc.counter))
		sent, seq, ok := readHeader(b)
		producer, counter := splitSequence(seq)
		if !ok || sent != tc.sent || producer != tc.producer || counter != tc.counter {
			t.Errorf("round trip of %+v: sent %d producer %d counter %d ok %v", tc, sent, producer, counter, ok)
		}
	}
	// The layout is the contract other tools read: big-endian sent
	// time, then the sequence.
	putHeader(b, 0x0102030405060708, sequence(0x0a0b, 0x0c0d0e0f1011))
	if want := []byte{1, 2, 3, 4, 5, 6, 7, 8, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11}; !bytes.Equal(b[:16], want) {
		t.Errorf("header bytes %x, want %x", b[:16], want)
	}
	if _, _, ok := readHeader(b[:15]); ok {
		t.Error("a 15-byte value has no header")
	}
}

func TestPayloadWriter(t *testing.T) {
	arena := newArena(rand.New(rand.NewPCG(1, 2)))
	for _, tc := range []struct {
		size       int
		randomness float64
	}{{1024, 1}, {1024, 0.5}, {100, 0}, {16, 1}} {
		pw := newPayloadWriter(arena, tc.size, tc.randomness, 12345)
		var prev []byte
		for i := range 1000 {
			v := pw.next(int64(i), sequence(2, int64(i)))
			if len(v) != tc.size {
				t.Fatalf("%+v: value of %d bytes", tc, len(v))
			}
			sent, seq, _ := readHeader(v)
			if _, c := splitSequence(seq); sent != int64(i) || c != int64(i) {
				t.Fatalf("%+v: record %d has header %d/%d", tc, i, sent, c)
			}
			body := v[payloadHeaderSize:]
			want := int(float64(len(body))*tc.randomness + 0.5)
			// The tail after the random share is zeros.
			if slices.ContainsFunc(body[want:], func(b byte) bool { return b != 0 }) {
				t.Fatalf("%+v: non-zero byte after the %d random ones", tc, want)
			}
			// Random bodies differ record to record.
			if want >= 8 && prev != nil && bytes.Equal(prev[payloadHeaderSize:], body) {
				t.Fatalf("%+v: records %d and %d have the same body", tc, i-1, i)
			}
			prev = append(prev[:0], v...)
		}
	}
}

// Random payloads leave a compressor nothing to squeeze, across a batch
// of them.
func TestPayloadsDoNotCompress(t *testing.T) {
	arena := newArena(rand.New(rand.NewPCG(3, 4)))
	for _, tc := range []struct {
		randomness float64
		minRatio   float64 // compressed / raw at least
		maxRatio   float64
	}{{1, 0.98, 1.01}, {0.5, 0.45, 0.55}} {
		pw := newPayloadWriter(arena, 1024, tc.randomness, 0)
		var raw bytes.Buffer
		for i := range 256 {
			raw.Write(pw.next(int64(i), uint64(i)))
		}
		var z bytes.Buffer
		fw, _ := flate.NewWriter(&z, flate.DefaultCompression)
		fw.Write(raw.Bytes())
		fw.Close()
		if r := float64(z.Len()) / float64(raw.Len()); r < tc.minRatio || r > tc.maxRatio {
			t.Errorf("randomness %v: a batch compresses to %.2f of its size, want %.2f..%.2f", tc.randomness, r, tc.minRatio, tc.maxRatio)
		}
	}
}

func TestKeyChooser(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	keys := newKeys(rng)
	distinct := map[string]bool{}
	for _, k := range keys {
		distinct[string(k)] = true
	}
	if len(keys) != numKeys || len(distinct) < numKeys-1 {
		t.Fatalf("%d keys, %d distinct", len(keys), len(distinct))
	}
	none := &keyChooser{dist: NoKey, keys: keys}
	if none.next() != nil {
		t.Error("NO_KEY gave a key")
	}
	rr := &keyChooser{dist: KeyRoundRobin, keys: keys, i: numKeys - 1}
	if k := rr.next(); !bytes.Equal(k, keys[numKeys-1]) {
		t.Error("KEY_ROUND_ROBIN did not start where it was put")
	}
	if k := rr.next(); !bytes.Equal(k, keys[0]) {
		t.Error("KEY_ROUND_ROBIN did not wrap around")
	}
	random := &keyChooser{dist: RandomNano, keys: keys, rng: rng}
	seen := map[string]bool{}
	for range 1000 {
		k := random.next()
		if !distinct[string(k)] {
			t.Fatalf("RANDOM_NANO gave a key outside the set: %q", k)
		}
		seen[string(k)] = true
	}
	if len(seen) < 900 {
		t.Errorf("RANDOM_NANO gave %d distinct keys in 1,000 picks from 10,000", len(seen))
	}
}
