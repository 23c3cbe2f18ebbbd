package history

import (
	"cmp"
	"slices"
	"sort"
	"time"
)

// An Op is one thing a run did or saw at one offset: what a report
// lists around a violation, so the reader sees the neighbourhood of the
// anomaly (the acknowledgements before and after it, what readers were
// served, what the log holds now) and not only its one line.
type Op struct {
	// What is "acknowledged", "read" (the first reader served it) or
	// "log" (the log read back at the end holds it).
	What   string
	At     time.Time // zero for "log"
	Offset int64
	Key    []byte
	Value  []byte
}

// Around returns the operations at the offsets of tp from offset-span to
// offset+span, in offset order and, at one offset, acknowledgement, read,
// log. logs is what VerifyAll was given.
func (c *Checker) Around(logs map[TopicPartition][]Record, tp TopicPartition, offset, span int64) []Op {
	lo, hi := offset-span, offset+span
	c.mu.Lock()
	var ops []Op
	for off, a := range c.mu.acked[tp] {
		if off >= lo && off <= hi {
			ops = append(ops, Op{What: "acknowledged", At: a.at, Offset: off, Key: a.Key, Value: a.Value})
		}
	}
	for off, r := range c.mu.read[tp] {
		if off >= lo && off <= hi {
			ops = append(ops, Op{What: "read", At: r.at, Offset: off, Key: r.Key, Value: r.Value})
		}
	}
	c.mu.Unlock()
	recs := logs[tp]
	for i := sort.Search(len(recs), func(i int) bool { return recs[i].Offset >= lo }); i < len(recs) && recs[i].Offset <= hi; i++ {
		ops = append(ops, Op{What: "log", Offset: recs[i].Offset, Key: recs[i].Key, Value: recs[i].Value})
	}
	order := map[string]int{"acknowledged": 0, "read": 1, "log": 2}
	slices.SortFunc(ops, func(a, b Op) int {
		return cmp.Or(cmp.Compare(a.Offset, b.Offset), cmp.Compare(order[a.What], order[b.What]))
	})
	return ops
}
