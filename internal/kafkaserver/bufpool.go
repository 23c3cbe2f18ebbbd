package kafkaserver

import (
	"math/bits"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Buffer pool for request frames and encoded responses: one sync.Pool per
// power-of-two size class from 4 KiB to 16 MiB. A produce of 1 MiB
// batches to many partitions arrives as a frame of several MiB, and a
// fetch over 16 partitions answers as much; allocating those per request
// made the frame reader and the response encoder the node's largest
// allocators (their growth copies showed as a quarter of its CPU), and
// every MiB allocated and dropped raises the peak resident memory the GC
// lets build up between cycles. A sync.Pool gives its buffers back to the
// GC after two idle cycles, so a burst does not pin memory for long.
// Larger buffers are allocated and left to the GC.
//
// Finer classes (quarter steps above 1 MiB, at most 25% waste per buffer)
// were tried and raised the node's peak RSS under max-rate-16p-1kb-4p4c
// from about 230 to 390 MiB: frames of varied sizes then spread over many
// classes, each pool keeping its own idle buffers, where powers of two
// let them share a few.
const (
	minPoolShift = 12 // 4 KiB
	maxPoolShift = 24 // 16 MiB
)

var bufPools [maxPoolShift - minPoolShift + 1]sync.Pool

// getBuffer returns a buffer of at least n bytes, with len == cap.
func getBuffer(n int) []byte {
	shift := minPoolShift
	if n > 1<<minPoolShift {
		shift = bits.Len(uint(n - 1))
	}
	if shift > maxPoolShift {
		return make([]byte, n)
	}
	if b, ok := bufPools[shift-minPoolShift].Get().(*[]byte); ok {
		return (*b)[:cap(*b)]
	}
	return make([]byte, 1<<shift)
}

// putBuffer gives b back to its class; a buffer of another capacity (one
// allocated above the largest class, or grown by append) is left to the
// GC. The caller must not use b afterwards.
func putBuffer(b []byte) {
	c := cap(b)
	if c < 1<<minPoolShift || c > 1<<maxPoolShift || c&(c-1) != 0 {
		return
	}
	b = b[:0]
	bufPools[bits.Len(uint(c))-1-minPoolShift].Put(&b)
}

// responseSizeHint estimates a response's encoded size when it carries
// record bytes (the bulk of it), so the writer can take a buffer that
// fits at once instead of growing one by doubling; 0 for the rest.
func responseSizeHint(resp kmsg.Response) int {
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 0
	}
	n := 64
	for i := range fr.Topics {
		t := &fr.Topics[i]
		n += 32 + len(t.Topic)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			n += 64 + len(p.RecordBatches) + 24*len(p.AbortedTransactions)
		}
	}
	return n
}
