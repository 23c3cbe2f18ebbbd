// Package bufpool is the data path's byte-buffer pool: one sync.Pool per
// power-of-two size class from 4 KiB to 16 MiB, shared by the protocol
// server (request frames, encoded responses) and the replica manager
// (fetch reads).
//
// Why pooled: a produce of 1 MiB batches to many partitions arrives as a
// frame of several MiB, and a fetch over 16 partitions answers as much.
// Allocating those per request made the frame reader and the response
// encoder the node's largest allocators (their growth copies showed as a
// quarter of its CPU), and every MiB allocated and dropped raises the
// peak resident memory the GC lets build up between cycles. A sync.Pool
// gives its buffers back to the GC after two idle cycles, so a burst does
// not pin memory for long.
//
// Why powers of two: finer classes (quarter steps above 1 MiB, at most 25%
// waste per buffer) were tried and raised the node's peak RSS under
// max-rate-16p-1kb-4p4c from about 230 to 390 MiB: buffers of varied
// sizes then spread over many classes, each pool keeping its own idle
// buffers, where powers of two let them share a few.
package bufpool

import (
	"math/bits"
	"sync"
)

const (
	minShift = 12 // 4 KiB
	maxShift = 24 // 16 MiB

	// MaxClassBytes is the largest pooled size; Get allocates larger
	// buffers exactly and Put leaves them to the GC.
	MaxClassBytes = 1 << maxShift
)

var pools [maxShift - minShift + 1]sync.Pool

// ClassBytes returns the size of the buffer Get(n) returns: the smallest
// class that holds n bytes, or n itself above the largest class.
func ClassBytes(n int) int {
	if n <= 1<<minShift {
		return 1 << minShift
	}
	if n > MaxClassBytes {
		return n
	}
	return 1 << bits.Len(uint(n-1))
}

// Get returns a buffer of ClassBytes(n) bytes, len == cap. Its contents
// are whatever the last user left.
func Get(n int) []byte {
	size := ClassBytes(n)
	if size > MaxClassBytes {
		return make([]byte, size)
	}
	if b, ok := pools[bits.Len(uint(size))-1-minShift].Get().(*[]byte); ok {
		return (*b)[:cap(*b)]
	}
	return make([]byte, size)
}

// Put gives b back to its class. A buffer that is not a class size (one
// allocated above the largest class, grown by append, or from elsewhere)
// is left to the GC: pooled, it would come back as a class it is smaller
// than. The caller must not use b afterwards.
func Put(b []byte) {
	c := cap(b)
	if c < 1<<minShift || c > MaxClassBytes || c&(c-1) != 0 {
		return
	}
	b = b[:0]
	pools[bits.Len(uint(c))-1-minShift].Put(&b)
}
