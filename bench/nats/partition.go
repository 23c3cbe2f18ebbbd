package main

import (
	"encoding/binary"
	"sync/atomic"
)

// partitioner picks the partition of a record the way Kafka's default
// producer does, so a keyed workload spreads over NATS subjects exactly
// as it spreads over Fjord partitions: murmur2 of the key, made
// positive, modulo the partition count; records without a key go
// round-robin.
//
// Kafka's newer clients are "sticky" for unkeyed records (a whole batch
// to one partition); with a per-record publish there is no batch to stick
// to, so round-robin is the per-record equivalent and spreads load
// evenly.
type partitioner struct {
	partitions uint32
	next       atomic.Uint32
}

func newPartitioner(partitions int) *partitioner {
	if partitions <= 0 {
		panic("partitioner: partitions must be positive")
	}
	return &partitioner{partitions: uint32(partitions)}
}

// partition returns the partition for key (nil: round-robin).
func (p *partitioner) partition(key []byte) int {
	if key == nil {
		return int((p.next.Add(1) - 1) % p.partitions)
	}
	return int((murmur2(key) & 0x7fffffff) % p.partitions)
}

// murmur2 is the 32-bit MurmurHash2 with Kafka's seed, written from the
// published algorithm: 4-byte little-endian blocks, then the 1-3 tail
// bytes as unsigned values, then the final avalanche.
func murmur2(data []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	h := uint32(seed) ^ uint32(len(data))
	blocks := len(data) / 4
	for i := range blocks {
		k := binary.LittleEndian.Uint32(data[i*4:])
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[blocks*4:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
