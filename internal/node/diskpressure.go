package node

import (
	"cmp"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fjordmq/fjord/internal/metadata"
)

// The data directory's free space and the disk-pressure refusal
// (replica/diskpressure.go), for /metrics.
var (
	logDirTotalDesc  = prometheus.NewDesc("fjord_log_dir_total_bytes", "Size of the file system holding this node's data directory (-1: cannot be read).", nil, nil)
	logDirFreeDesc   = prometheus.NewDesc("fjord_log_dir_free_bytes", "Free space an unprivileged writer may use in the file system holding this node's data directory, as last read (once a second; -1: cannot be read).", nil, nil)
	logDirWarnDesc   = prometheus.NewDesc("fjord_log_dir_free_space_warn_bytes", "log.dir.free.space.warn in bytes on this node's file system.", nil, nil)
	logDirRefuseDesc = prometheus.NewDesc("fjord_log_dir_free_space_refuse_bytes", "log.dir.free.space.refuse in bytes on this node's file system: below it client produces are refused.", nil, nil)
	logDirStateDesc  = prometheus.NewDesc("fjord_log_dir_free_space_state", "0: free space above both thresholds; 1: below log.dir.free.space.warn; 2: below log.dir.free.space.refuse, client produces refused (KAFKA_STORAGE_ERROR).", nil, nil)
	refusedDiskDesc  = prometheus.NewDesc("fjord_produce_refused_disk_pressure_total", "Partition produces refused with KAFKA_STORAGE_ERROR because the data directory was short of free space, since the node started.", nil, nil)
)

type diskCollector struct{ n *Node }

func (diskCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{logDirTotalDesc, logDirFreeDesc, logDirWarnDesc, logDirRefuseDesc, logDirStateDesc, refusedDiskDesc} {
		ch <- d
	}
}

func (c diskCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.n.replicas.DiskPressure()
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	gauge(logDirTotalDesc, s.TotalBytes)
	gauge(logDirFreeDesc, s.FreeBytes)
	gauge(logDirWarnDesc, s.WarnBytes)
	gauge(logDirRefuseDesc, s.RefuseBytes)
	gauge(logDirStateDesc, int64(s.State))
	ch <- prometheus.MustNewConstMetric(refusedDiskDesc, prometheus.CounterValue, float64(s.Refused))
}

// freeSpaceFlags parses the static thresholds (validate checked them).
func freeSpaceFlags(cfg Config) (warn, refuse metadata.FreeSpace) {
	warn, _ = metadata.ParseFreeSpace(cmp.Or(cfg.LogDirFreeSpaceWarn, metadata.DefaultFreeSpaceWarn))
	refuse, _ = metadata.ParseFreeSpace(cmp.Or(cfg.LogDirFreeSpaceRefuse, metadata.DefaultFreeSpaceRefuse))
	return warn, refuse
}

// checkFreeSpaceFlags refuses a static threshold the data directory's
// file system could never meet (one in bytes at or above its size).
func checkFreeSpaceFlags(cfg Config, total int64) error {
	warn, refuse := freeSpaceFlags(cfg)
	for _, c := range []struct {
		flag string
		f    metadata.FreeSpace
	}{{"log-dir-free-space-warn", warn}, {"log-dir-free-space-refuse", refuse}} {
		if total > 0 && !c.f.Percent && c.f.Bytes >= total {
			return fmt.Errorf("%w: %s %s is not below the size of the file system holding the data directory (%d bytes): it could never be met",
				ErrInvalidConfig, c.flag, c.f, total)
		}
	}
	return nil
}
