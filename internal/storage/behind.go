package storage

import "sort"

// BytesBehind is the log's size from the batch holding offset to the log
// end: how far a reader at offset is from the tail, to a batch's
// granularity. The fetch path asks it to tell a replay (a consumer far
// behind, reading what left the page cache long ago) from a tail read
// (replica's replay budget). It costs what locating the offset for a
// read costs (a binary search over segments and one index lookup); an
// offset outside the log answers 0.
func (l *Log) BytesBehind(offset int64) (int64, error) {
	if l.closed.Load() {
		return 0, ErrLogClosed
	}
	if offset < l.logStartOffset.Load() || offset >= l.leo.Load() {
		return 0, nil
	}
	l.segLock.RLock()
	defer l.segLock.RUnlock()
	segs := *l.segments.Load()
	i := segmentFor(segs, offset)
	var behind int64
	for j := i + 1; j < len(segs); j++ {
		behind += segs[j].size.Load()
	}
	if i >= len(segs) {
		return behind, nil
	}
	pos, _, err := segs[i].findBatch(offset)
	if err != nil {
		return 0, err
	}
	if pos < 0 {
		// Every batch of this segment is below offset (a compaction
		// gap): the reader starts in the next one.
		return behind, nil
	}
	return behind + max(segs[i].size.Load()-pos, 0), nil
}

// segmentFor is the index of the segment of segs (in offset order) that
// holds offset: the last whose base offset is at most offset, or 0.
func segmentFor(segs []*segment, offset int64) int {
	return max(sort.Search(len(segs), func(i int) bool { return segs[i].baseOffset > offset })-1, 0)
}
