package group

import (
	"fmt"
	"math"
	"unicode/utf16"
)

// PartitionFor is Kafka's placement of a group on __consumer_offsets:
// abs(javaStringHashCode(group)) % partitions, where abs is Kafka's
// Utils.abs (Math.abs, except that MinInt32, whose absolute value int32
// cannot hold, maps to 0) and the hash is Java's String.hashCode over
// UTF-16 code units. Every broker and client library agrees on it, so a
// group keeps its coordinator partition whichever implementation
// computed it. (Masking the sign bit instead, x & 0x7fffffff, differs for
// every negative hash: about half of all group ids.)
func PartitionFor(group string, partitions int32) int32 {
	if partitions <= 0 {
		panic(fmt.Sprintf("group: PartitionFor with %d partitions", partitions))
	}
	h := javaStringHashCode(group)
	switch {
	case h == math.MinInt32:
		h = 0
	case h < 0:
		h = -h
	}
	return h % partitions
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
