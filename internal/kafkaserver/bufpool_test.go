package kafkaserver

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

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
