#!/usr/bin/env bash
# Storage engine benchmarks with the disk's own figures measured in the same
# sitting, as BENCHMARKS.md reports them:
#
#   1. dd: raw sequential write (2 GiB, 1 MiB blocks, fdatasync at the end)
#      and page-cache read of the same file; plus 16 KiB writes with O_DSYNC,
#      how many synced writes per second the disk takes one at a time;
#   2. go test -bench on internal/storage (append, group commit, read, and
#      a plain pwrite loop as the ceiling for append), -count=3, reported
#      as medians;
#   3. storagebench: a 10k-partition manager's clean and unclean start.
#
# All data goes to one directory on the disk being measured, removed at the
# end: $FJORD_BENCH_DIR if set, else bench-data/ at the repository root
# (git-ignored).
# Do not point it at a tmpfs (/tmp on many machines): that measures memory.
#
# Knobs (environment): BENCHTIME (default 2s), COUNT (3), PARTITIONS (10000),
# COLD=1 to also run storagebench with the page cache dropped (root only).
set -euo pipefail

# shellcheck source=bench-lib.sh
source "$(dirname "$0")/bench-lib.sh"

cd "$(dirname "$0")/.."
root=${FJORD_BENCH_DIR:-$PWD/bench-data}
benchtime=${BENCHTIME:-2s}
count=${COUNT:-3}
partitions=${PARTITIONS:-10000}

made_root=0
if [ ! -d "$root" ]; then
	mkdir -p "$root"
	made_root=1
fi
work=$(mktemp -d "$root/run-XXXXXX")
out=$(mktemp)
cleanup() {
	rm -rf "$work" "$out"
	if [ "$made_root" = 1 ]; then rmdir "$root" 2>/dev/null || true; fi
}
trap cleanup EXIT

refuse_tmpfs "$work"
machine_info "$work"

# On the VM this was written on, dd's write bandwidth swings by 3-4x from one
# run to the next (the first of a series is usually the slowest), so dd
# writes run before and after the Go benchmarks and the reference is the
# median of all six.
f="$work/dd.bin"
writes=()
dd_writes() {
	for _ in 1 2 3; do
		rm -f "$f"
		writes+=("$(dd if=/dev/zero of="$f" bs=1M count=2048 conv=fdatasync 2>&1 | dd_mbps)")
	done
}

echo
echo "== dd (3 runs each, median)"
dd_writes
dd if="$f" of=/dev/null bs=1M 2>/dev/null # make sure it is all cached
reads=()
for _ in 1 2 3; do
	reads+=("$(dd if="$f" of=/dev/null bs=1M 2>&1 | dd_mbps)")
done
rm -f "$f"
dsync=()
for _ in 1 2 3; do
	rm -f "$f"
	dsync+=("$(dd if=/dev/zero of="$f" bs=16k count=1000 oflag=dsync 2>&1 | awk '/copied/ {for (i = 1; i <= NF; i++) if ($i == "s,") s = $(i-1); printf "%.0f\n", 1000 / s}')")
done
rm -f "$f"
dd_read=$(printf '%s\n' "${reads[@]}" | median)
dd_dsync=$(printf '%s\n' "${dsync[@]}" | median)
echo "dd write  bs=1M count=2048 conv=fdatasync: ${writes[*]} MB/s"
echo "dd read   bs=1M (page cache):              ${reads[*]} MB/s -> median $dd_read MB/s"
echo "dd write  bs=16k count=1000 oflag=dsync:   ${dsync[*]} writes/s -> median $dd_dsync writes/s"

echo
echo "== go test -bench (count=$count, benchtime=$benchtime)"
cmd=(go test ./internal/storage -run '^$' -bench . -benchtime="$benchtime" -count="$count" -timeout 60m)
echo "FJORD_BENCH_DIR=$work ${cmd[*]}"
FJORD_BENCH_DIR="$work" "${cmd[@]}" | tee "$out"

echo
echo "== dd write again, after the benchmarks"
dd_writes
rm -f "$f"
dd_write=$(printf '%s\n' "${writes[@]}" | median)
echo "dd write  bs=1M count=2048 conv=fdatasync: ${writes[*]} MB/s -> median of all $dd_write MB/s"

# Medians per benchmark and unit: "name unit value" lines, grouped.
medians=$(awk '/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	for (i = 3; i <= NF; i += 2) print name, $(i+1), $i
}' "$out" | sort -k1,1 -k2,2 -k3,3g | awk '
	function flush() { if (n) print key, v[int((n + 1) / 2)] }
	{ k = $1 " " $2; if (k != key) { flush(); key = k; n = 0 } v[++n] = $3 }
	END { flush() }')

echo
echo "== medians"
printf '%s\n' "$medians" | awk '{printf "%-52s %12s %s\n", $1, $3, $2}'

get() { printf '%s\n' "$medians" | awk -v n="Benchmark$1" -v u="$2" '$1 == n && $2 == u {print $3}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == 0) print "?"; else printf "%.0f%%", 100 * a / b }'; }

echo
echo "== against the targets (raw write $dd_write MB/s, page-cache read $dd_read MB/s)"
for b in 16KiB 1MiB; do
	v=$(get "Append/flush=interval/batch=$b" MB/s)
	s=$(get "Append/flush=interval/batch=$b" synced-MB/s)
	r=$(get "RawWrite/batch=$b" MB/s)
	echo "append interval   batch=$b: $v MB/s = $(ratio "$v" "$dd_write") of dd (target >= 60%), $(ratio "$v" "$r") of the pwrite loop ($r MB/s); incl. final fsync $s MB/s = $(ratio "$s" "$dd_write") of dd"
done
for a in 1 8; do
	for b in 16KiB 1MiB; do
		v=$(get "Append/flush=ack/appenders=$a/batch=$b" MB/s)
		f=$(get "Append/flush=ack/appenders=$a/batch=$b" fsyncs/s)
		g=$(get "Append/flush=ack/appenders=$a/batch=$b" appends/fsync)
		m=$(get "Append/flush=ack/appenders=$a/batch=$b" ms/fsync)
		echo "append ack x$a      batch=$b: $v MB/s = $(ratio "$v" "$dd_write") of dd, $f fsyncs/s, $g appends/fsync, $m ms/fsync"
	done
done
echo "  (target: ack, 8 appenders, 1 MiB batches >= 40% of raw)"
for api in Read ReadInto; do
	rv=$(get "Read/api=$api" MB/s)
	echo "read sequential, $api: $rv MB/s = $(ratio "$rv" 2000) of the 2 GB/s target, $(ratio "$rv" "$dd_read") of dd page-cache read"
done

echo
echo "load now: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "== storagebench (fresh process per open)"
sb=(go run ./internal/storage/storagebench -partitions "$partitions" -dir "$work")
echo "${sb[*]}"
"${sb[@]}"
if [ "${COLD:-0}" = 1 ]; then
	echo
	echo "${sb[*]} -cold"
	"${sb[@]}" -cold
fi
echo
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
