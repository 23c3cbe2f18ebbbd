package replica

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
)

// Disk pressure (issue 19): two thresholds on the data directory's free
// space. Below log.dir.free.space.warn the node warns; below
// log.dir.free.space.refuse it refuses client produces before anything
// is appended, with KAFKA_STORAGE_ERROR (retriable: franz-go, Sarama and
// librdkafka all retry it, after a metadata refresh), and takes them
// again by itself once free space is back.
//
// What is never refused: replication into this node (a follower that
// skipped records its leader committed would no longer be a copy),
// coordinators' writes to the internal topics (offset commits,
// transaction state and markers: refusing them would wedge consumers and
// transactions, and they are small), and everything that frees space:
// retention, compaction, DeleteRecords, topic deletion. The refusal's
// threshold is the room those writes have; below it they go on until the
// disk is full, and then a write fails and the log is taken offline
// (storage's fail path), never acknowledged and lost.
//
// Free space is read with statfs once a second (DefaultDiskPollInterval),
// not on every append. Between two reads, client appends draw on a
// budget, the free space read less the refusal's threshold: an append
// larger than what is left is refused at once, so a fast producer cannot
// run a second past the threshold. The budget is reset at each read and
// counts client appends only; replication into the node is bounded by
// what its leaders accept.

// DefaultDiskPollInterval is how often the data directory's free space
// is read.
const DefaultDiskPollInterval = time.Second

// Disk pressure states, as fjord_log_dir_free_space_state reports them.
const (
	DiskOK     = 0
	DiskWarn   = 1
	DiskRefuse = 2
)

// DiskPressureStats is the data directory's free space at the last read,
// for the node's metrics.
type DiskPressureStats struct {
	// TotalBytes and FreeBytes are the file system's size and what an
	// unprivileged writer may still use; -1 before the first read or
	// when statfs fails.
	TotalBytes, FreeBytes int64
	// WarnBytes and RefuseBytes are the thresholds in bytes on this
	// file system.
	WarnBytes, RefuseBytes int64
	// State is DiskOK, DiskWarn or DiskRefuse.
	State int
	// Refused counts the client produces refused for disk pressure since
	// the node started (one per partition of a request).
	Refused int64
}

// diskPressure is the manager's view of its data directory's free space.
type diskPressure struct {
	m *Manager
	// statfs reads the file system's size and free space: DiskSpace,
	// or a test's.
	statfs func(dir string) (total, free int64, err error)
	// static are the node's flags (--log-dir-free-space-warn,
	// --log-dir-free-space-refuse), used where the image sets nothing.
	staticWarn, staticRefuse metadata.FreeSpace

	// thresholds are the configs in force: the image's, else static.
	// Written by ApplyImage, read by the poller.
	thresholds atomic.Pointer[freeSpaceThresholds]

	// refusing is read by every client append; the poller and an
	// exhausted budget set it.
	refusing atomic.Bool
	// budget is the bytes client appends may still write before the
	// next read: free space less the refusal threshold at the last read,
	// less what client appends wrote since.
	budget  atomic.Int64
	refused atomic.Int64

	// mu guards the last read and the state, which the poller writes and
	// stats and the refusal's message read.
	mu struct {
		sync.Mutex
		total, free         int64
		warnAt, refuseAt    int64
		state               int
		statErr             bool
		resumeAt, refusedAt int64
	}
}

type freeSpaceThresholds struct {
	warn, refuse metadata.FreeSpace
}

func newDiskPressure(m *Manager, warn, refuse metadata.FreeSpace) *diskPressure {
	d := &diskPressure{m: m, statfs: DiskSpace, staticWarn: warn, staticRefuse: refuse}
	d.thresholds.Store(&freeSpaceThresholds{warn: warn, refuse: refuse})
	d.mu.total, d.mu.free = -1, -1
	// No budget until the first read: the first read happens before the
	// manager serves anything (NewManager), so this only matters when
	// the data directory cannot be read, and then nothing is refused.
	d.budget.Store(1 << 62)
	return d
}

// applyImage takes the thresholds from img (broker's own, else the
// cluster default, else the static flags) and reads the disk at once when
// they changed, so a new threshold bites without waiting for the poll.
func (d *diskPressure) applyImage(img *metadata.Image) {
	warn, refuse, warnSet, refuseSet := img.FreeSpaceThresholds(d.m.opts.NodeID)
	if !warnSet {
		warn = d.staticWarn
	}
	if !refuseSet {
		refuse = d.staticRefuse
	}
	if old := d.thresholds.Load(); old.warn == warn && old.refuse == refuse {
		return
	}
	d.thresholds.Store(&freeSpaceThresholds{warn: warn, refuse: refuse})
	d.check()
}

// run reads the disk every interval until the manager closes.
func (d *diskPressure) run(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-d.m.closing:
			return
		case <-t.C:
			d.check()
		}
	}
}

// check reads the data directory's free space and moves the state.
// Refusing stops below the refusal threshold and resumes once free space
// is a margin above it (a tenth of it, at least 1 MiB), so a disk
// hovering at the threshold does not flap with every read.
func (d *diskPressure) check() {
	dir := d.m.opts.DataDir
	if dir == "" {
		return
	}
	total, free, err := d.statfs(dir)
	th := d.thresholds.Load()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		// Keep the last state: a statfs that fails once says nothing
		// about the space. Say so once per run of failures.
		if !d.mu.statErr {
			d.m.log.Error("cannot read the data directory's free space; disk pressure is judged on the last reading", "dir", dir, "err", err)
		}
		d.mu.statErr = true
		return
	}
	d.mu.statErr = false
	refuseAt := th.refuse.Of(total)
	warnAt := max(th.warn.Of(total), refuseAt)
	resumeAt := refuseAt + max(refuseAt/10, 1<<20)
	d.mu.total, d.mu.free, d.mu.warnAt, d.mu.refuseAt, d.mu.resumeAt = total, free, warnAt, refuseAt, resumeAt

	refusing := d.refusing.Load()
	switch {
	case !refusing && free < refuseAt:
		refusing = true
	case refusing && free >= resumeAt:
		refusing = false
	}
	state := DiskOK
	switch {
	case refusing:
		state = DiskRefuse
	case free < warnAt:
		state = DiskWarn
	}
	d.budget.Store(free - refuseAt)
	d.refusing.Store(refusing)
	if state == d.mu.state {
		return
	}
	attrs := []any{"dir", dir, "free_bytes", free, "total_bytes", total,
		"warn_below", th.warn.String(), "refuse_below", th.refuse.String()}
	switch state {
	case DiskRefuse:
		d.m.log.Error("data directory below log.dir.free.space.refuse: refusing client produces (KAFKA_STORAGE_ERROR) until space is freed; "+
			"fetches, replication, retention, compaction and deletions go on", attrs...)
	case DiskWarn:
		d.m.log.Warn("data directory below log.dir.free.space.warn", attrs...)
	default:
		d.m.log.Info("data directory free space is back above its thresholds", attrs...)
	}
	if d.mu.state == DiskRefuse {
		d.m.log.Info("taking client produces again", "dir", dir, "free_bytes", free, "refused_meanwhile", d.refused.Load()-d.mu.refusedAt)
	}
	if state == DiskRefuse {
		d.mu.refusedAt = d.refused.Load()
	}
	d.mu.state = state
}

// admit is asked before a client append of n bytes: nil, or the refusal.
func (d *diskPressure) admit(n int) error {
	if !d.refusing.Load() && d.budget.Add(-int64(n)) >= 0 {
		return nil
	}
	// Either refusing already, or this append would take the disk below
	// the threshold before the next read: refuse it, and everything after
	// it until a read finds the space back.
	d.refusing.Store(true)
	d.refused.Add(1)
	d.mu.Lock()
	free, refuseAt := d.mu.free, d.mu.refuseAt
	d.mu.Unlock()
	th := d.thresholds.Load()
	return fmt.Errorf("%w: node %d is short of disk space: its data directory has %s free, log.dir.free.space.refuse is %s (%s): "+
		"produces are refused until space is freed (retention, DeleteRecords, deleting topics); fetches go on",
		ErrStorage, d.m.opts.NodeID, formatBytes(free), th.refuse, formatBytes(refuseAt))
}

func (d *diskPressure) stats() DiskPressureStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return DiskPressureStats{
		TotalBytes: d.mu.total, FreeBytes: d.mu.free,
		WarnBytes: d.mu.warnAt, RefuseBytes: d.mu.refuseAt,
		State: d.mu.state, Refused: d.refused.Load(),
	}
}

// DiskPressure reports the data directory's free space at the last read.
func (m *Manager) DiskPressure() DiskPressureStats { return m.disk.stats() }

// formatBytes is n in the largest binary unit that keeps it whole to a
// tenth, for messages.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n), 0
	for f >= unit && u < 4 {
		f /= unit
		u++
	}
	return fmt.Sprintf("%.1f %s", f, [...]string{"B", "KiB", "MiB", "GiB", "TiB"}[u])
}
