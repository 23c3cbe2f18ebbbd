package bench

import (
	"sync"
	"sync/atomic"
)

// seqSet is the set of record counters of one producer that one
// subscription has received: a bitset that grows in chunks as the
// producer's counter does, so a run of any length costs one bit per
// record and nothing is sized in advance.
//
// Threads: add is called by every consumer of the subscription at once
// (one producer's records spread over all partitions). Bits are set with
// atomic OR; the chunk directory is copy-on-write behind an atomic
// pointer, so the common path takes no lock and a new chunk (one per
// million records) is published under grow's mutex.
type seqSet struct {
	dir  atomic.Pointer[[]*seqChunk]
	grow sync.Mutex
}

const (
	chunkBits  = 1 << 20
	chunkWords = chunkBits / 64
)

type seqChunk [chunkWords]atomic.Uint64

// add marks counter as received; it reports false when it already was
// (a duplicate).
func (s *seqSet) add(counter int64) bool {
	c := s.chunk(int(counter / chunkBits))
	bit := counter % chunkBits
	mask := uint64(1) << (bit % 64)
	return c[bit/64].Or(mask)&mask == 0
}

// chunk returns chunk i, creating it (and the directory up to it) if
// needed.
func (s *seqSet) chunk(i int) *seqChunk {
	if d := s.dir.Load(); d != nil && i < len(*d) && (*d)[i] != nil {
		return (*d)[i]
	}
	s.grow.Lock()
	defer s.grow.Unlock()
	var old []*seqChunk
	if d := s.dir.Load(); d != nil {
		old = *d
	}
	if i < len(old) && old[i] != nil {
		return old[i] // another consumer made it while this one waited
	}
	next := make([]*seqChunk, max(len(old), i+1))
	copy(next, old)
	next[i] = new(seqChunk)
	s.dir.Store(&next)
	return next[i]
}
