package record

import "encoding/binary"

// Kafka's varints are zigzag-encoded base-128 integers, the same bytes as
// protobuf's sint32/sint64 and encoding/binary's AppendVarint. Decoding is
// hand-written rather than binary.Varint because Kafka bounds a varint to 5
// bytes and a varlong to 10, and a record has six of them: the one-byte case
// must stay an inlined branch for Validate to run near CRC speed.
//
// A varint whose 5th byte carries bits beyond 32 is refused as corrupt (Java's
// reader silently drops them); no encoder produces one.

// readVarint decodes a varint at b[pos:]. It returns the value and the
// position after it, or ok == false if the varint runs off the end of b or is
// too long.
func readVarint(b []byte, pos int) (v int32, next int, ok bool) {
	if pos < len(b) && b[pos] < 0x80 {
		u := uint32(b[pos])
		return int32(u>>1) ^ -int32(u&1), pos + 1, true
	}
	// Two bytes: the length of every record between 64 bytes and 8 KiB.
	if pos+1 < len(b) && b[pos+1] < 0x80 {
		u := uint32(b[pos]&0x7f) | uint32(b[pos+1])<<7
		return int32(u>>1) ^ -int32(u&1), pos + 2, true
	}
	return readVarintSlow(b, pos)
}

func readVarintSlow(b []byte, pos int) (int32, int, bool) {
	var u uint32
	for shift := uint(0); shift < 35; shift += 7 {
		if pos >= len(b) {
			return 0, pos, false
		}
		c := b[pos]
		pos++
		if shift == 28 && c > 0x0f {
			return 0, pos, false
		}
		u |= uint32(c&0x7f) << shift
		if c < 0x80 {
			return int32(u>>1) ^ -int32(u&1), pos, true
		}
	}
	return 0, pos, false
}

// readVarlong is readVarint for 64-bit values (at most 10 bytes).
func readVarlong(b []byte, pos int) (v int64, next int, ok bool) {
	if pos < len(b) && b[pos] < 0x80 {
		u := uint64(b[pos])
		return int64(u>>1) ^ -int64(u&1), pos + 1, true
	}
	var u uint64
	for shift := uint(0); shift < 70; shift += 7 {
		if pos >= len(b) {
			return 0, pos, false
		}
		c := b[pos]
		pos++
		if shift == 63 && c > 0x01 {
			return 0, pos, false
		}
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), pos, true
		}
	}
	return 0, pos, false
}

func appendVarint(dst []byte, v int32) []byte { return binary.AppendVarint(dst, int64(v)) }

func appendVarlong(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

// varintLen is the encoded size of v as a varint or varlong.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
