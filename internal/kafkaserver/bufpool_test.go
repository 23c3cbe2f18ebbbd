package kafkaserver

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestBufferPoolClasses(t *testing.T) {
	for _, n := range []int{0, 1, 4 << 10, 4<<10 + 1, 1 << 20, 1<<20 + 1, 5 << 20, 16 << 20} {
		b := getBuffer(n)
		if len(b) < n || len(b) != cap(b) {
			t.Fatalf("getBuffer(%d): len %d cap %d", n, len(b), cap(b))
		}
		if n > 4<<10 && len(b) >= 2*n {
			t.Fatalf("getBuffer(%d) = %d bytes, twice or more", n, len(b))
		}
		putBuffer(b)
	}
	if b := getBuffer(16<<20 + 1); cap(b) != 16<<20+1 {
		t.Fatalf("above the largest class: cap %d, want exact", cap(b))
	}
	// A buffer that is not a class size is not pooled (it would come back
	// as a class it is smaller than).
	putBuffer(make([]byte, 5000))
	if b := getBuffer(5000); cap(b) != 8<<10 {
		t.Fatalf("getBuffer(5000) after putting a 5000-byte buffer: cap %d, want 8192", cap(b))
	}
}

func TestResponseSizeHintCoversFetch(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(16)
	for i := range 3 {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = "topic"
		for p := range 16 {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = int32(p)
			rp.RecordBatches = make([]byte, (i+1)*1000+p)
			rp.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 2)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if hint, n := responseSizeHint(resp), len(resp.AppendTo(nil)); hint < n {
		t.Fatalf("hint %d below the encoded size %d", hint, n)
	}
	if hint := responseSizeHint(kmsg.NewPtrProduceResponse()); hint != 0 {
		t.Fatalf("produce response hint %d, want 0", hint)
	}
}
