package kafkaserver

// Fetch answers sent from the page cache
//
// A partition's records in a fetch answer can come as a file range
// (replica.FetchPartitionResult.Range) instead of bytes read into a
// buffer. The writer then sends the range with sendfile: the records go
// from the page cache to the socket without being read into the node and
// copied twice more (into the encoded response, then into the socket).
// On a catch-up read that copying was most of the node's work.
//
// The response is still encoded by kmsg, never by hand: each ranged
// partition's RecordBatches is a one-byte placeholder. The writer encodes
// the response twice, with one-byte and two-byte placeholders; the two
// encodings differ only at each placeholder's length prefix and at the
// placeholder itself, so walking them side by side finds every
// placeholder exactly. Each is then replaced by its range's length prefix
// and the range itself.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/storage"
)

// DefaultSendfileMinBytes: a partition's answer of at least this much is
// sent with sendfile. Below it, one copy costs less than the descriptor,
// the system calls and the extra packet a range takes.
const DefaultSendfileMinBytes = 64 << 10

// rangedFetch is a FetchResponse some of whose partitions' records are
// file ranges: ranges[k] answers the k-th partition, in encoding order,
// whose RecordBatches is rangePlaceholder.
type rangedFetch struct {
	*kmsg.FetchResponse
	ranges []storage.FileRange
}

// rangePlaceholder marks a ranged partition's RecordBatches. One byte:
// no real record set is shorter than a batch header.
var rangePlaceholder = []byte{0}

// encodeRanged encodes rf's framed answer into dst (reset) and returns
// it with the ranges that go between its pieces: ends[k] is where the
// bytes before ranges[k] end; the bytes after the last range run to the
// end of wire.
func encodeRanged(dst []byte, sl *slot, rf *rangedFetch) (wire []byte, ends []int, err error) {
	hint := responseSizeHint(rf.FetchResponse)
	one := appendResponse(getBuffer(hint)[:0], sl)
	defer putBuffer(one)
	setPlaceholders(rf, []byte{0, 0})
	two := appendResponse(getBuffer(len(one) + len(rf.ranges))[:0], sl)
	defer putBuffer(two)
	setPlaceholders(rf, rangePlaceholder)

	flexible := sl.version >= 12
	prefixLen := 4 // int32 length (v4-v11)
	if flexible {
		prefixLen = 1 // uvarint(length+1): 2 and 3 are one byte each
	}
	wire = append(dst[:0], 0, 0, 0, 0) // the frame size, set below
	ends = make([]int, 0, len(rf.ranges))
	// The frame sizes differ (by one per range); after them the
	// encodings match up to the first placeholder's length prefix,
	// whose last byte differs (1 against 2), then the placeholder.
	i, j := 4, 4
	for k, r := range rf.ranges {
		d := mismatch(one[i:], two[j:])
		if d < 0 {
			return wire, nil, fmt.Errorf("%w: %d of %d found", errPlaceholders, k, len(rf.ranges))
		}
		from := i
		i, j = i+d, j+d
		ps, qs := i-(prefixLen-1), j-(prefixLen-1)
		if ps < from || i+1 >= len(one) || one[i+1] != 0 ||
			!isPrefixOf(one[ps:i+1], flexible, 1) || !isPrefixOf(two[qs:j+1], flexible, 2) {
			return wire, nil, fmt.Errorf("%w: range %d at %d", errPlaceholders, k, i)
		}
		wire = append(wire, one[from:ps]...)
		if flexible {
			wire = kbin.AppendUvarint(wire, uint32(r.Size+1))
		} else {
			wire = kbin.AppendInt32(wire, int32(r.Size))
		}
		ends = append(ends, len(wire))
		i, j = i+2, j+3 // past the placeholders
	}
	if !bytes.Equal(one[i:], two[j:]) {
		return wire, nil, fmt.Errorf("%w: the encodings differ after the last", errPlaceholders)
	}
	wire = append(wire, one[i:]...)
	size := len(wire) - 4
	for _, r := range rf.ranges {
		size += r.Size
	}
	binary.BigEndian.PutUint32(wire, uint32(size))
	return wire, ends, nil
}

var errPlaceholders = errors.New("fetch response: range placeholders not where kmsg encodes them")

func setPlaceholders(rf *rangedFetch, p []byte) {
	for i := range rf.Topics {
		ps := rf.Topics[i].Partitions
		for j := range ps {
			if isPlaceholder(ps[j].RecordBatches) {
				ps[j].RecordBatches = p
			}
		}
	}
}

// isPlaceholder reports whether b is a placeholder of either length.
func isPlaceholder(b []byte) bool {
	return (len(b) == 1 || len(b) == 2) && b[0] == 0 && (len(b) == 1 || b[1] == 0)
}

// mismatch returns the index of the first byte where a and b differ, or
// -1 when one is a prefix of the other.
func mismatch(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// isPrefixOf reports whether p is the length prefix of n bytes.
func isPrefixOf(p []byte, flexible bool, n int) bool {
	if flexible {
		return len(p) == 1 && int(p[0]) == n+1
	}
	return len(p) == 4 && binary.BigEndian.Uint32(p) == uint32(n)
}

// inlineRanges reads every range into the response, in place of its
// placeholder: the answer without sendfile.
func inlineRanges(rf *rangedFetch) error {
	k := 0
	for i := range rf.Topics {
		ps := rf.Topics[i].Partitions
		for j := range ps {
			if !isPlaceholder(ps[j].RecordBatches) {
				continue
			}
			if k >= len(rf.ranges) {
				return fmt.Errorf("fetch response: %d ranges for more placeholders", len(rf.ranges))
			}
			r := rf.ranges[k]
			b := make([]byte, r.Size)
			if _, err := r.File.ReadAt(b, r.Pos); err != nil {
				return fmt.Errorf("fetch response: reading a range: %w", err)
			}
			ps[j].RecordBatches = b
			k++
		}
	}
	return nil
}
