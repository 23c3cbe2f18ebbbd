package main

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Reference: Kafka's Utils.murmur2 test vectors (as signed int32).
func TestMurmur2KafkaVectors(t *testing.T) {
	cases := []struct {
		key  string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, c := range cases {
		if got := int32(murmur2([]byte(c.key))); got != c.want {
			t.Errorf("murmur2(%q) = %d, want %d", c.key, got, c.want)
		}
	}
}

// Keyed records must land where Fjord's franz-go producer puts them, so
// the two systems see the same per-partition load.
func TestPartitionMatchesFranzGo(t *testing.T) {
	for _, partitions := range []int{1, 3, 16, 100} {
		kp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
		p := newPartitioner(partitions)
		for i := range 2000 {
			// Every tail length (0-3 bytes past a 4-byte block) and
			// the empty key occur.
			key := fmt.Appendf(nil, "key-%08d", i)[:i%13]
			want := kp.Partition(&kgo.Record{Key: key}, partitions)
			if got := p.partition(key); got != want {
				t.Fatalf("partitions=%d key=%q: got %d, franz-go %d", partitions, key, got, want)
			}
		}
	}
}

func TestPartitionRoundRobinWithoutKey(t *testing.T) {
	p := newPartitioner(4)
	for i := range 12 {
		if got := p.partition(nil); got != i%4 {
			t.Fatalf("record %d went to partition %d, want %d", i, got, i%4)
		}
	}
}
