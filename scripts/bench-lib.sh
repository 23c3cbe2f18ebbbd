# Shared by the benchmark scripts (sourced, not run): the machine
# description every BENCHMARKS.md section starts with, and dd helpers.

# machine_info prints the machine, kernel, disk under $1 and load.
machine_info() {
	local work=$1 fstype dev blk rota
	fstype=$(df -PT "$work" | awk 'NR==2 {print $2}')
	echo "== machine"
	echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "nproc:   $(nproc)"
	echo "memory:  $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	echo "kernel:  $(uname -r)"
	echo "go:      $(go version | awk '{print $3}')"
	dev=$(df -P "$work" | awk 'NR==2 {print $1}')
	blk=$(basename "$dev")
	rota=$(cat "/sys/class/block/$blk/queue/rotational" 2>/dev/null || echo "?")
	echo "disk:    $dev ($fstype), rotational=$rota, scheduler $(cat "/sys/class/block/$blk/queue/scheduler" 2>/dev/null || echo ?)"
	echo "commit:  working tree at $(git rev-parse --short HEAD 2>/dev/null || echo initial)"
	echo "data:    $work"
	echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min; other work on the machine skews everything)"
}

# refuse_tmpfs exits when $1 is on a tmpfs: that would measure memory.
refuse_tmpfs() {
	case "$(df -PT "$1" | awk 'NR==2 {print $2}')" in
	tmpfs | ramfs) echo "$1 is on a memory file system; set FJORD_BENCH_DIR to a disk" >&2; exit 1 ;;
	esac
}

# dd_mbps prints MB/s (10^6 bytes) from dd's closing line, which reads
# "N bytes (...) copied, S s, ...".
dd_mbps() { awk '/copied/ {for (i = 1; i <= NF; i++) if ($i == "s,") s = $(i-1); printf "%.0f\n", $1 / s / 1e6}'; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else printf "%.0f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
