#!/usr/bin/env bash
# End-to-end produce throughput of one node, with the disk's own figure
# measured in the same sitting, as BENCHMARKS.md reports it:
#
#   1. dd: raw sequential write (1 MiB blocks, fdatasync at the end),
#      three runs before and three after, median;
#   2. BenchmarkProduce (internal/e2e): one franz-go producer (idempotent,
#      acks=all, no compression, 1 KiB random records) against a real
#      `fjord serve` process over loopback, 1 and 8 partitions, topic
#      flush.policy=interval and ack; COUNT runs each, medians.
#
# The full tool with peers and latency is `fjord bench` (a later issue).
# Data goes to $FJORD_BENCH_DIR if set, else bench-data/ at the repository
# root (git-ignored); never a tmpfs.
#
# Knobs (environment): RECORDS (default 1000000 per run), COUNT (3).
set -euo pipefail

# shellcheck source=bench-lib.sh
source "$(dirname "$0")/bench-lib.sh"

cd "$(dirname "$0")/.."
root=${FJORD_BENCH_DIR:-$PWD/bench-data}
records=${RECORDS:-1000000}
count=${COUNT:-3}
mkdir -p "$root"
root=$(cd "$root" && pwd)
work=$(mktemp -d "$root/produce-XXXXXX")
out=$(mktemp)
trap 'rm -rf "$work" "$out"' EXIT

refuse_tmpfs "$work"
machine_info "$work"

f="$work/dd.bin"
writes=()
dd_writes() {
	for _ in 1 2 3; do
		rm -f "$f"
		writes+=("$(dd if=/dev/zero of="$f" bs=1M count=1024 conv=fdatasync 2>&1 | dd_mbps)")
	done
	rm -f "$f"
}

echo
echo "== dd write bs=1M count=1024 conv=fdatasync (before)"
dd_writes

echo
cmd=(go test ./internal/e2e -run '^$' -bench BenchmarkProduce -benchtime "${records}x" -count "$count" -timeout 60m)
echo "== FJORD_BENCH_DIR=$work ${cmd[*]}"
FJORD_BENCH_DIR="$work" "${cmd[@]}" | tee "$out"

echo
echo "== dd write again (after)"
dd_writes
dd_write=$(printf '%s\n' "${writes[@]}" | median)
echo "dd write runs: ${writes[*]} MB/s -> median $dd_write MB/s"

echo
echo "== medians, and as a share of the raw disk write"
for policy in interval ack; do
	for p in 1 8; do
		name="BenchmarkProduce/flush=$policy/partitions=$p"
		mbs=$(awk -v n="$name" '$1 ~ "^" n "-" {for (i = 3; i <= NF; i++) if ($(i+1) == "MB/s") print $i}' "$out" | median)
		rps=$(awk -v n="$name" '$1 ~ "^" n "-" {for (i = 3; i <= NF; i++) if ($(i+1) == "records/s") print $i}' "$out" | median)
		share=$(awk -v a="$mbs" -v b="$dd_write" 'BEGIN {printf "%.0f%%", 100 * a / b}')
		printf '%-44s %8s MB/s %10s records/s  %5s of dd\n' "flush.policy=$policy partitions=$p" "$mbs" "$rps" "$share"
	done
done
echo
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
