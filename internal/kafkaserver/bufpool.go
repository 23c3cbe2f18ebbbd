package kafkaserver

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/bufpool"
)

// getBuffer and putBuffer are the shared data-path pool (internal/bufpool)
// under the names the connection code uses.
func getBuffer(n int) []byte { return bufpool.Get(n) }
func putBuffer(b []byte)     { bufpool.Put(b) }

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
