#!/usr/bin/env bash
# Footprint as a sidecar: the daemon scraping one live vLLM simulator every second with the
# default windows. Prints, per run, the daemon's CPU share of one core over DURATION seconds
# (after WARMUP), its peak RSS (VmHWM) and the load average; then the medians.
#
#   cargo build --release && scripts/bench/sidecar.sh [RUNS]
#
# Env: WARMUP (s, default 60), DURATION (s, default 180), INTERVAL (default 1s),
#      BIN (default target/release/goodput), PORT (daemon, default 19464), SIM_PORT (19001).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh

RUNS=${1:-3}
WARMUP=${WARMUP:-60}
DURATION=${DURATION:-180}
INTERVAL=${INTERVAL:-1s}
BIN=${BIN:-target/release/goodput}
PORT=${PORT:-19464}
SIM_PORT=${SIM_PORT:-19001}
require_bin "$BIN" "cargo build --release"

work=$(mktemp -d)
sim_pid=""
daemon_pid=""
cleanup() { stop_pids "$daemon_pid" "$sim_pid"; }
trap cleanup EXIT

cat >"$work/config.yaml" <<YAML
listen: 127.0.0.1:$PORT
scrape:
  interval: $INTERVAL
targets:
  - name: sim
    url: http://127.0.0.1:$SIM_PORT/metrics
YAML

echo "# nproc $(nproc), $(uname -sr), binary $BIN, interval $INTERVAL, warm-up ${WARMUP}s, measured ${DURATION}s"
printf '%-4s %9s %9s %9s %11s %3s %7s %-16s %-16s\n' run cpu_pct hwm_mib rss_mib sim_cpu_pct up errors load_start load_end
: >"$work/cpu" ; : >"$work/hwm"
for ((run = 1; run <= RUNS; run++)); do
  "$BIN" simulate --listen "127.0.0.1:$SIM_PORT" --profile steady --speed 1 >"$work/sim.log" 2>&1 &
  sim_pid=$!
  wait_http "http://127.0.0.1:$SIM_PORT/metrics"
  "$BIN" run --config "$work/config.yaml" >"$work/daemon.log" 2>&1 &
  daemon_pid=$!
  wait_http "http://127.0.0.1:$PORT/healthz"
  sleep "$WARMUP"

  load_start=$(loadavg | tr ' ' /)
  t0=$(now_s); d0=$(cpu_ticks "$daemon_pid"); s0=$(cpu_ticks "$sim_pid")
  sleep "$DURATION"
  t1=$(now_s); d1=$(cpu_ticks "$daemon_pid"); s1=$(cpu_ticks "$sim_pid")
  load_end=$(loadavg | tr ' ' /)
  hwm=$(status_kb "$daemon_pid" VmHWM); rss=$(status_kb "$daemon_pid" VmRSS)

  metrics=$(curl -fsS --max-time 5 "http://127.0.0.1:$PORT/metrics")
  up=$(awk '/^llm_slo_target_up\{/ { print $2 }' <<<"$metrics")
  errors=$(awk '/^llm_slo_scrape_errors_total\{/ { s += $2 } END { print s + 0 }' <<<"$metrics")
  awk -v u="$up" 'BEGIN { exit !(u == 1) }' || echo "warning: run $run: llm_slo_target_up is '$up', not 1" >&2

  cpu=$(awk -v a="$d0" -v b="$d1" -v t0="$t0" -v t1="$t1" -v hz="$CLK_TCK" 'BEGIN { printf "%.3f", (b - a) / hz / (t1 - t0) * 100 }')
  sim_cpu=$(awk -v a="$s0" -v b="$s1" -v t0="$t0" -v t1="$t1" -v hz="$CLK_TCK" 'BEGIN { printf "%.3f", (b - a) / hz / (t1 - t0) * 100 }')
  printf '%-4s %9s %9s %9s %11s %3s %7s %-16s %-16s\n' "$run" "$cpu" "$(mib "$hwm")" \
    "$(mib "$rss")" "$sim_cpu" "$up" "$errors" "$load_start" "$load_end"
  echo "$cpu" >>"$work/cpu"; echo "$hwm" >>"$work/hwm"

  stop_pids "$daemon_pid" "$sim_pid"; daemon_pid=""; sim_pid=""
done
echo "median: cpu $(median <"$work/cpu") % of one core, peak RSS $(median <"$work/hwm" | awk '{ printf "%.1f", $1 / 1024 }') MiB (VmHWM)"
rm -rf "$work"
