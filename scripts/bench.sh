#!/usr/bin/env bash
# The standard benchmark set in one sitting, and BENCHMARKS.md regenerated
# from it:
#
#   1. fjord bench limits: this machine's disk, page-cache, loopback TCP and
#      bare-ingest ceilings;
#   2. RUNS rounds (default 3) of:
#      - the single-node set: every shipped workload against a fresh local
#        node with flush.policy=ack, max-rate-16p-1kb-4p4c again with
#        flush.policy=interval and again with the raw producer, and the two
#        max-rate workloads against the NATS JetStream peer (R1);
#      - the cluster set (issue 13): max-rate-16p-1kb-4p4c on three local
#        nodes with RF=3 and acks=all under flush.policy=ack, =interval,
#        and ack with the raw producer; the same workload against three
#        NATS servers with R3 streams; and latency-16p-1kb-5k (5,000
#        records/s, the p99 ack latency target) on three nodes, ack.
#      Rounds interleave the systems, so the machine's noise (+-30% here)
#      falls on all of them alike;
#   3. fjord bench report: medians over the runs that passed their checks,
#      and every target as a ratio within the sitting, written between the
#      markers in BENCHMARKS.md.
#
# Results go to bench-results/<UTC time>/ (git-ignored); node data to
# $FJORD_BENCH_DIR, else bench-data/ (never a tmpfs).
#
# Knobs (environment): RUNS (3), DURATION (20s, the measured window of the
# timed workloads after each workload's own warmup; catchup-2gb is sized,
# not timed), WARMUP (each workload's own, 10s; set it for a smoke test),
# NO_PEER=1 to skip NATS, CLUSTER=0 to skip the cluster set, CLUSTER_ONLY=1
# to run only the cluster set (no limits, and BENCHMARKS.md is left alone:
# its report would lack the single-node figures), NO_UPDATE=1 to leave
# BENCHMARKS.md alone.
#
# A smoke test of the script itself (minutes, figures meaningless):
#   RUNS=1 DURATION=2s WARMUP=1s CLUSTER_ONLY=1 bash scripts/bench.sh
set -euo pipefail

# shellcheck source=bench-lib.sh
source "$(dirname "$0")/bench-lib.sh"

cd "$(dirname "$0")/.."
runs=${RUNS:-3}
duration=${DURATION:-20s}
cluster=${CLUSTER:-1}
cluster_only=${CLUSTER_ONLY:-0}
update=1
if [ "${NO_UPDATE:-0}" = 1 ] || [ "$cluster_only" = 1 ]; then
	update=0
fi
out=bench-results/$(date -u +%Y%m%dT%H%M%SZ)
data=${FJORD_BENCH_DIR:-$PWD/bench-data}
mkdir -p "$out" "$data"
out=$(cd "$out" && pwd)
data=$(cd "$data" && pwd)
refuse_tmpfs "$data"
machine_info "$data" | tee "$out/machine.txt"

bin=$out/fjord
go build -o "$bin" ./cmd/fjord

if [ "$cluster_only" != 1 ]; then
	echo
	echo "== limits"
	"$bin" bench limits --dir "$data" --out "$out/limits.json"
fi

timed=(--duration "$duration")
if [ -n "${WARMUP:-}" ]; then
	timed+=(--warmup "$WARMUP")
fi
fjord_run() { # label workload flush-policy round [extra flags]
	local label=$1 w=$2 policy=$3 round=$4
	shift 4
	echo
	echo "== round $round: fjord $w flush.policy=$policy ($label)"
	"$bin" bench run "$w" --local --data-dir "$data" --flush-policy "$policy" \
		--out "$out/fjord-$label-$policy/$round" "$@" || echo "!! fjord $w ($label, $policy) failed its run or checks; kept out of the medians"
}
nats_run() { # label workload round [peer flags]
	local label=$1 w=$2 round=$3
	shift 3
	if [ "${NO_PEER:-0}" = 1 ]; then
		return 0
	fi
	echo
	echo "== round $round: nats-jetstream $w ($label)"
	"$bin" bench peer nats "$w" --out "$out/nats-$label/$round" --dir "$data" "${timed[@]}" -- "$@" ||
		echo "!! nats $w ($label) failed its run or checks; kept out of the medians"
}
for round in $(seq 1 "$runs"); do
	if [ "$cluster_only" != 1 ]; then
		for w in max-rate-1p-1kb max-rate-16p-1kb-4p4c max-rate-16p-100b latency-16p-1kb-5k latency-16p-1kb-50k; do
			fjord_run 1node "$w" ack "$round" "${timed[@]}"
		done
		fjord_run 1node max-rate-16p-1kb-4p4c interval "$round" "${timed[@]}"
		fjord_run 1node-raw max-rate-16p-1kb-4p4c ack "$round" "${timed[@]}" --producer raw
		fjord_run 1node catchup-2gb ack "$round"
		for w in max-rate-1p-1kb max-rate-16p-1kb-4p4c; do
			nats_run r1 "$w" "$round"
		done
	fi
	if [ "$cluster" = 1 ] || [ "$cluster_only" = 1 ]; then
		for policy in ack interval; do
			fjord_run 3nodes max-rate-16p-1kb-4p4c "$policy" "$round" "${timed[@]}" --nodes 3
		done
		fjord_run 3nodes-raw max-rate-16p-1kb-4p4c ack "$round" "${timed[@]}" --nodes 3 --producer raw
		nats_run r3 max-rate-16p-1kb-4p4c "$round" --replicas 3
		fjord_run 3nodes latency-16p-1kb-5k ack "$round" "${timed[@]}" --nodes 3
	fi
done

echo
echo "== report"
"$bin" bench report "$out" | tee "$out/report.md"

if [ "$update" = 1 ]; then
	# The command line that made the sitting, with every knob that
	# changed it.
	knobs="RUNS=$runs DURATION=$duration"
	[ -n "${WARMUP:-}" ] && knobs+=" WARMUP=$WARMUP"
	[ "$cluster" != 1 ] && knobs+=" CLUSTER=$cluster"
	[ "${NO_PEER:-0}" = 1 ] && knobs+=" NO_PEER=1"
	# Replace what lies between the markers with this sitting's report.
	awk -v report="$out/report.md" -v cmd="$knobs bash scripts/bench.sh" '
		/<!-- bench:begin -->/ {
			print
			print ""
			print "Generated by `" cmd "`; results in `bench-results/` of that run."
			print ""
			while ((getline line < report) > 0) print line
			skip = 1
			next
		}
		/<!-- bench:end -->/ { skip = 0 }
		!skip
	' BENCHMARKS.md >"$out/BENCHMARKS.md"
	if ! grep -q '<!-- bench:begin -->' BENCHMARKS.md; then
		echo "BENCHMARKS.md has no <!-- bench:begin --> marker; report left in $out/report.md" >&2
		exit 1
	fi
	cp "$out/BENCHMARKS.md" BENCHMARKS.md
	echo "BENCHMARKS.md updated from $out"
else
	echo "BENCHMARKS.md left alone; the report is $out/report.md"
fi
