package group

import (
	"fmt"
	"unicode/utf16"
)

// PartitionFor is Kafka's placement of a group on __consumer_offsets:
// abs(javaStringHashCode(group)) % partitions, where abs is Kafka's
// Utils.abs (x & 0x7fffffff, so MinInt32 maps to 0, not to itself) and
// the hash is Java's String.hashCode over UTF-16 code units. Every broker
// and client library agrees on it, so a group keeps its coordinator
// partition whichever implementation computed it.
func PartitionFor(group string, partitions int32) int32 {
	if partitions <= 0 {
		panic(fmt.Sprintf("group: PartitionFor with %d partitions", partitions))
	}
	return (javaStringHashCode(group) & 0x7fffffff) % partitions
}

// javaStringHashCode is java.lang.String.hashCode: s[0]*31^(n-1) + ... +
// s[n-1] over UTF-16 code units, in wrapping int32 arithmetic. Invalid
// UTF-8 decodes to U+FFFD, as the Java broker's UTF-8 decoder does.
func javaStringHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + hi
			h = 31*h + lo
			continue
		}
		h = 31*h + r
	}
	return h
}
