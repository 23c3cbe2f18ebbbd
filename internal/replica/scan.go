package replica

import (
	"context"
	"fmt"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
)

// scanReadBytes is how much ScanCommitted reads at a time.
const scanReadBytes = 1 << 20

// ScanCommitted calls fn with every batch of a partition this node leads,
// from its log start offset up to its high watermark, in offset order:
// how the group coordinator rebuilds its state from a __consumer_offsets
// partition it has come to lead. The high watermark is read once, at the
// start; appends made during the scan are the caller's to serialize. A
// batch aliases a buffer reused for the next read; fn must copy what it
// keeps.
func (m *Manager) ScanCommitted(ctx context.Context, topic string, partition int32, fn func(batch []byte) error) error {
	p, err := m.partition(topic, metadata.UUID{}, partition)
	if err != nil {
		return err
	}
	if _, err := p.checkLeader(-1); err != nil {
		return err
	}
	hw := p.log.HighWatermark()
	offset := p.log.LogStartOffset()
	buf := make([]byte, scanReadBytes)
	for offset < hw {
		if err := ctx.Err(); err != nil {
			return err
		}
		rr, err := p.log.ReadInto(buf, offset, scanReadBytes, hw)
		if err != nil {
			return p.explainClosed(err)
		}
		if len(rr.Records) == 0 {
			return nil // the rest is a compaction gap up to the high watermark
		}
		for b := rr.Records; len(b) > 0; {
			h, err := record.ParseHeader(b)
			if err != nil {
				return fmt.Errorf("scanning %s-%d at %d: %w", topic, partition, offset, err)
			}
			if err := fn(b[:h.Size()]); err != nil {
				return err
			}
			offset = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
	return nil
}
