package metadata

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Free-space thresholds of a node's data directory (issue 19's disk
// pressure; replica/diskpressure.go enforces them). Kafka has no such
// settings: a full disk fails its log directory and the broker goes with
// it. Fjord refuses client produces while there is still room, so what
// must still be written (replication into the node, offset commits,
// transaction markers, compaction's new segments) has somewhere to go.
const (
	// FreeSpaceWarnConfig is log.dir.free.space.warn: below it the
	// node logs a warning and fjord_log_dir_free_space_state says 1.
	FreeSpaceWarnConfig = "log.dir.free.space.warn"
	// FreeSpaceRefuseConfig is log.dir.free.space.refuse: below it the
	// node refuses client produces with KAFKA_STORAGE_ERROR before
	// anything is appended, until free space is back above it.
	FreeSpaceRefuseConfig = "log.dir.free.space.refuse"
)

// The thresholds' defaults. The refusal's is an amount, not a share of
// the disk: what it protects (the writes that are never refused) needs a
// fixed room, whatever the disk's size.
const (
	DefaultFreeSpaceWarn   = "10%"
	DefaultFreeSpaceRefuse = "256MiB"
)

// FreeSpace is a free-space threshold: a number of bytes, or a share of
// the file system's size.
type FreeSpace struct {
	// Bytes is the threshold when Percent is false.
	Bytes int64
	// Percent, when true, makes Share the threshold.
	Percent bool
	// Share is a percentage of the file system's size, 0 to 99.
	Share float64
}

// maxFreeSpaceBytes bounds a threshold in bytes: 1 EiB, far beyond any
// file system, and far from int64's end so sums cannot overflow.
const maxFreeSpaceBytes = 1 << 60

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1},
}

// ParseFreeSpace reads a threshold: "N%" (a percentage of the file
// system's size, 0 to 99, decimals allowed), or a whole number of bytes,
// optionally with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), up to
// 1 EiB. "0" and "0%" are allowed: no threshold.
func ParseFreeSpace(s string) (FreeSpace, error) {
	v := strings.TrimSpace(s)
	if pct, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		if err != nil || math.IsNaN(f) || f < 0 || f >= 100 {
			return FreeSpace{}, fmt.Errorf("%q: want a percentage of the file system from 0%% to below 100%% (e.g. 10%%), or bytes (e.g. 512MiB)", shortForMessage(s))
		}
		return FreeSpace{Percent: true, Share: f}, nil
	}
	mult := int64(1)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > maxFreeSpaceBytes/mult {
		return FreeSpace{}, fmt.Errorf("%q: want a whole number of bytes from 0 to 1 EiB, with an optional unit (e.g. 536870912, 512MiB, 2GB), or a percentage of the file system (e.g. 10%%)", shortForMessage(s))
	}
	return FreeSpace{Bytes: n * mult}, nil
}

// Of is the threshold in bytes on a file system of total bytes.
func (f FreeSpace) Of(total int64) int64 {
	if !f.Percent {
		return f.Bytes
	}
	return int64(float64(total) * f.Share / 100)
}

// String is the threshold as ParseFreeSpace reads it.
func (f FreeSpace) String() string {
	if f.Percent {
		return strconv.FormatFloat(f.Share, 'f', -1, 64) + "%"
	}
	return strconv.FormatInt(f.Bytes, 10)
}

// CheckFreeSpaceFits refuses a threshold that can never be met on a file
// system of total bytes: an amount of bytes at or above its size would
// refuse (or warn) forever.
func CheckFreeSpaceFits(name string, f FreeSpace, total int64) error {
	if total > 0 && !f.Percent && f.Bytes >= total {
		return fmt.Errorf("%w: %s=%s is not below the size of the file system holding the data directory (%d bytes): "+
			"it could never be met", ErrInvalidConfig, name, f, total)
	}
	return nil
}

// FreeSpaceThresholds are broker's log.dir.free.space.warn and .refuse
// from the image (its own, else the cluster default); ok is false for
// each that neither sets, and the node's static settings apply.
func (img *Image) FreeSpaceThresholds(broker int32) (warn, refuse FreeSpace, warnSet, refuseSet bool) {
	if v, _, ok := img.BrokerConfig(broker, FreeSpaceWarnConfig); ok {
		warn, _ = ParseFreeSpace(v) // checked when applied
		warnSet = true
	}
	if v, _, ok := img.BrokerConfig(broker, FreeSpaceRefuseConfig); ok {
		refuse, _ = ParseFreeSpace(v)
		refuseSet = true
	}
	return warn, refuse, warnSet, refuseSet
}
