package replica

import (
	"context"
	"fmt"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
)

// scanReadBytes is how much ScanLog reads at a time.
const scanReadBytes = 1 << 20

// ScanLog calls fn with every batch of a partition this node leads, from
// its log start offset to its log end offset, in order: how the group
// coordinator rebuilds its state from a __consumer_offsets partition it
// has come to lead. It reads to the log end, not the high watermark, as
// Kafka's GroupMetadataManager does: a new leader's high watermark can
// lag records its clients were already told are committed. The end is
// read once, at the start; appends made during the scan are the caller's
// to serialize. A batch aliases a buffer reused for the next read; fn
// must copy what it keeps.
func (m *Manager) ScanLog(ctx context.Context, topic string, partition int32, fn func(batch []byte) error) error {
	p, err := m.partition(topic, metadata.UUID{}, partition)
	if err != nil {
		return err
	}
	if _, err := p.checkLeader(-1); err != nil {
		return err
	}
	end := p.log.LogEndOffset()
	offset := p.log.LogStartOffset()
	buf := make([]byte, scanReadBytes)
	for offset < end {
		if err := ctx.Err(); err != nil {
			return err
		}
		rr, err := p.log.ReadInto(buf, offset, scanReadBytes, end)
		if err != nil {
			return p.logError(err)
		}
		if len(rr.Records) == 0 {
			return nil // the rest is a compaction gap up to the log end
		}
		for b := rr.Records; len(b) > 0; {
			h, err := record.ParseHeader(b)
			if err != nil {
				return fromLog(fmt.Errorf("scanning %s-%d at %d: %w", topic, partition, offset, err))
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
