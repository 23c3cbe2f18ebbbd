package storage

// Retention deletes whole segments, oldest first, only segments wholly
// below the high watermark, and never while a reader is inside one:
//
//   - below the log start offset (DeleteRecords moved it past them);
//   - retention.ms: the segment's largest timestamp is older than it;
//   - retention.bytes: the log is larger than it by at least the segment.
//
// When every segment including a non-empty active one has expired, the log
// rolls first so the expired data can go, as Kafka does; the new active
// segment starts at the log end offset.
//
// A pass also expires idle idempotent producers and deletes the producer
// state snapshots below the new log start offset (see producer.go).

// RetentionResult says what a retention pass removed.
type RetentionResult struct {
	SegmentsDeleted int
	BytesDeleted    int64
}

// ApplyRetention runs one retention pass.
func (l *Log) ApplyRetention() (RetentionResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var res RetentionResult
	if err := l.checkWritable(); err != nil {
		return res, err
	}
	cfg := l.cfg.Load()
	nowMs := l.now().UnixMilli()
	l.expireProducersLocked(cfg, nowMs)
	segs := *l.segments.Load()

	total := l.Size()
	n := 0 // segments to delete: a prefix
	for n < len(segs) {
		s := segs[n]
		active := n == len(segs)-1
		var nextBase int64
		if active {
			nextBase = l.leo.Load()
		} else {
			nextBase = segs[n+1].baseOffset
		}
		size := s.size.Load()
		expired := false
		switch {
		case nextBase <= l.logStartOffset.Load() && !active:
			expired = true
		case cfg.CleanupPolicy.Delete() && cfg.RetentionMs >= 0 && size > 0:
			ts, err := s.maxTimestamp()
			if err != nil {
				return res, err
			}
			expired = ts >= 0 && nowMs-ts > cfg.RetentionMs
		}
		if !expired && cfg.CleanupPolicy.Delete() && cfg.RetentionBytes >= 0 && size > 0 {
			expired = total-size >= cfg.RetentionBytes
		}
		if !expired || nextBase > l.highWatermark.Load() {
			// Never delete above the high watermark, as Kafka does: a
			// record not yet on every in-sync replica could otherwise
			// vanish from the leader before a consumer may see it.
			break
		}
		if active {
			if size == 0 {
				break
			}
			// Roll so the expired active segment can be deleted.
			if _, err := l.rollLocked(l.leo.Load()); err != nil {
				return res, l.fail("roll", err)
			}
			segs = *l.segments.Load()
		}
		total -= size
		n++
	}
	if n == 0 {
		return res, nil
	}
	l.segLock.Lock()
	for _, s := range segs[:n] {
		res.BytesDeleted += s.size.Load()
		if err := s.remove(); err != nil {
			l.segLock.Unlock()
			return res, l.fail("retention", err)
		}
	}
	kept := append([]*segment(nil), segs[n:]...)
	l.segments.Store(&kept)
	l.segLock.Unlock()
	res.SegmentsDeleted = n
	if err := l.fs.SyncDir(l.dir); err != nil {
		return res, l.fail("retention", err)
	}
	start := max(l.logStartOffset.Load(), kept[0].baseOffset)
	l.logStartOffset.Store(start)
	// Raise the high watermark to the new start if it is below (it is not:
	// retention deletes only below it), without a load-then-store that
	// could undo a concurrent SetHighWatermark and hide acknowledged
	// records until the next advance.
	for hw := l.highWatermark.Load(); hw < start && !l.highWatermark.CompareAndSwap(hw, start); hw = l.highWatermark.Load() {
	}
	if err := l.epochs.TruncateFromStart(start); err != nil {
		return res, l.fail("retention", err)
	}
	l.deleteSnapshotsBelowLocked(start)
	l.log.Info("retention deleted segments", "log", l.name, "segments", n, "bytes", res.BytesDeleted, "log_start_offset", start)
	return res, nil
}
