#!/usr/bin/env bash
# goodput beside the real alternative: a Prometheus scraping the same fleet and evaluating
# `goodput rules` (the same windows, quantiles and SLOs as recording and alerting rules).
# Both run at once on this machine and are measured over the same minutes: CPU time
# (utime+stime) per wall second, RSS at the end, peak RSS. docs/footprint.md has the figures.
#
#   cargo build --profile dist --bin goodput      # the container image's build
#   cargo build --release --example fake_targets --example fill_state
#   scripts/bench/versus-prometheus.sh [fresh|full ...]     # default: fresh full
#
# fresh: both start empty, as after a first deploy.
# full:  both start at steady state. Prometheus holds HISTORY seconds (default 6 h, the
#        longest window the default alert rules read) of the targets' past, as blocks that
#        `promtool tsdb create-blocks-from openmetrics` built out of fake_targets
#        --history-out. goodput starts from a state_dir snapshot that examples/fill_state
#        built out of the same values, ingesting and evaluating PAST seconds (default a
#        day: the capacity book keeps a day of intervals) tick by tick: full windows, the
#        capacity book, the budget ledgers, the request stores (REQUESTS) and the alert
#        states. The restore counts and the capacity series at the first tick are printed.
#        docs/footprint.md has the figures.
#
# Env: N (targets, 20), INTERVAL (s, 5), WARMUP (s, 90), DURATION (s, 300), HISTORY (s,
#      21600), PAST (s, 86400, at least HISTORY), REQUESTS (tap: each target's request stores
#      get a tap's requests at its engine's rate, filled to their cap; otlp: the same as engine
#      spans; none: histograms only, the inputs Prometheus sees), BIN, FAKE, FILL (binaries), PROM
#      (prometheus), PROMTOOL, PORT (19465), PROM_PORT (19090), FAKE_PORT (19100).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh

MODES=("$@"); [ ${#MODES[@]} -gt 0 ] || MODES=(fresh full)
N=${N:-20}
INTERVAL=${INTERVAL:-5}
WARMUP=${WARMUP:-90}
DURATION=${DURATION:-300}
HISTORY=${HISTORY:-21600}
PAST=${PAST:-86400}; [ "$PAST" -ge "$HISTORY" ] || PAST=$HISTORY
REQUESTS=${REQUESTS:-tap}
BIN=${BIN:-target/dist/goodput}
FAKE=${FAKE:-target/release/examples/fake_targets}
FILL=${FILL:-target/release/examples/fill_state}
PROM=${PROM:-prometheus}
PROMTOOL=${PROMTOOL:-promtool}
PORT=${PORT:-19465}
PROM_PORT=${PROM_PORT:-19090}
FAKE_PORT=${FAKE_PORT:-19100}
require_bin "$BIN" "cargo build --profile dist --bin goodput"
require_bin "$FAKE" "cargo build --release --example fake_targets"
command -v "$PROM" >/dev/null || { echo "missing $PROM (Debian: apt-get install prometheus)" >&2; exit 2; }

work=$(mktemp -d)
fake_pid="" daemon_pid="" prom_pid=""
cleanup() { stop_pids "$daemon_pid" "$prom_pid" "$fake_pid"; rm -rf "$work"; }
trap cleanup EXIT

"$BIN" simulate --out "$work/rec" --duration 10m --profile steady --seed 1 >/dev/null
template=$(ls "$work"/rec/sim/*.prom | tail -n 1)

# One config for both: goodput reads it, `goodput rules` turns it into Prometheus rules.
{
  echo "listen: 127.0.0.1:$PORT"
  echo "scrape: {interval: ${INTERVAL}s}"
  echo "evaluation_interval: ${INTERVAL}s"
  echo "state_dir: $work/state"
  echo "slos:"
  echo "  - {name: chat, ttft: 500ms, tpot: 50ms, objective: 0.99}"
  echo "targets:"
  for ((i = 0; i < N; i++)); do echo "  - {name: t$i, url: 'http://127.0.0.1:$FAKE_PORT/t/$i/metrics'}"; done
} >"$work/goodput.yaml"
"$BIN" rules --config "$work/goodput.yaml" --format prometheus >"$work/rules.yml"
{
  echo "global: {scrape_interval: ${INTERVAL}s, evaluation_interval: ${INTERVAL}s}"
  echo "rule_files: [$work/rules.yml]"
  echo "scrape_configs:"
  echo "  - job_name: fake"
  echo "    static_configs:"
  for ((i = 0; i < N; i++)); do
    echo "      - {targets: ['127.0.0.1:$FAKE_PORT'], labels: {target: t$i, __metrics_path__: /t/$i/metrics}}"
  done
} >"$work/prometheus.yml"
"$PROMTOOL" check config "$work/prometheus.yml" >/dev/null

prom_query() { # a single instant value, or "nan"
  curl -fsS --max-time 10 "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" \
    | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "nan")'
}
pct() { awk -v a="$1" -v b="$2" -v t0="$3" -v t1="$4" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", (b - a) / hz / (t1 - t0) * 100 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.1f", b / a; else print "inf" }'; }

echo "# nproc $(nproc), $(uname -sr), $N targets every ${INTERVAL}s, requests $REQUESTS, warm-up ${WARMUP}s, measured ${DURATION}s, $("$PROM" --version 2>&1 | head -n 1)"
printf '%-6s %9s %9s %7s %9s %9s %7s %9s %9s %7s %6s %6s %9s %-16s %-16s\n' mode gp_cpu prom_cpu cpu_x \
  gp_rss prom_rss rss_x gp_hwm prom_hwm hwm_x gp_up prom_up rule_ms load_start load_end
for mode in "${MODES[@]}"; do
  rm -rf "$work/state" "$work/prom"; mkdir -p "$work/state" "$work/prom"
  now=$(date +%s%3N)
  if [ "$mode" = full ]; then
    require_bin "$FILL" "cargo build --release --example fill_state"
    anchor=$((now - PAST * 1000))
    # An hour at a time, so the OpenMetrics text never needs more than ~1 GB of disk at 20 targets.
    for ((from = now - HISTORY * 1000; from < now; from += 3600000)); do
      to=$((from + 3600000 - INTERVAL * 1000)); [ "$to" -lt "$now" ] || to=$now
      "$FAKE" --targets "$N" --template "$template" --anchor-unix-ms "$anchor" --history-out "$work/past.om" \
        --history-from-unix-ms "$from" --history-to-unix-ms "$to" --history-step-ms $((INTERVAL * 1000)) \
        --instance "127.0.0.1:$FAKE_PORT" 2>/dev/null
      "$PROMTOOL" tsdb create-blocks-from openmetrics "$work/past.om" "$work/prom" >/dev/null
      rm -f "$work/past.om"
    done
    "$FILL" --config "$work/goodput.yaml" --template "$template" --anchor-unix-ms "$anchor" --to-unix-ms "$now" \
      --step-ms $((INTERVAL * 1000)) --requests "$REQUESTS" 2>&1 | sed 's/^/# /'
  elif [ "$mode" = fresh ]; then
    anchor=$now
  else
    echo "unknown mode $mode; expected fresh or full" >&2; exit 2
  fi
  "$FAKE" --listen "127.0.0.1:$FAKE_PORT" --targets "$N" --template "$template" --anchor-unix-ms "$anchor" \
    >"$work/fake.log" 2>&1 &
  fake_pid=$!
  wait_http "http://127.0.0.1:$FAKE_PORT/stats"
  "$BIN" run --config "$work/goodput.yaml" >"$work/daemon.log" 2>&1 &
  daemon_pid=$!
  "$PROM" --config.file "$work/prometheus.yml" --storage.tsdb.path "$work/prom" \
    --web.listen-address "127.0.0.1:$PROM_PORT" --storage.tsdb.retention.time 2d >"$work/prom.log" 2>&1 &
  prom_pid=$!
  wait_http "http://127.0.0.1:$PORT/healthz"
  if [ "$mode" = full ]; then
    # What the snapshot gave back, and what the first tick that saw the targets up
    # exports: the capacity book answers with the intervals restored (a day's worth),
    # before a new one could have been estimated, and the budgets with their coverage.
    first="" started=$(now_s)
    for ((i = 0; i < 120; i++)); do
      first=$(curl -fsS --max-time 30 "http://127.0.0.1:$PORT/metrics" || true)
      grep -q '^llm_slo_capacity_intervals_used{' <<<"$first" && break
      sleep 0.5
    done
    echo "# full: $(awk -v a="$started" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }') s after /healthz answered:"
    restored=$(awk -F'[{}",=]+' '/^llm_slo_state_restore_total\{/ && /result="restored"/ { printf "%s=%d ", $3, $NF }' <<<"$first")
    echo "# full: restored sections: $restored"
    echo "# full: at the first tick: $(grep -c '^llm_slo_capacity_request_rate{' <<<"$first") capacity samples, $(grep -c '^llm_slo_error_budget_remaining_ratio{' <<<"$first") budget samples, intervals used $(awk '/^llm_slo_capacity_intervals_used\{/ { print $2; exit }' <<<"$first"), budget coverage $(awk '/^llm_slo_error_budget_period_coverage_ratio\{/ { print $2; exit }' <<<"$first")"
  fi
  wait_http "http://127.0.0.1:$PROM_PORT/-/ready" 120
  sleep "$WARMUP"

  load_start=$(loadavg | tr ' ' /)
  t0=$(now_s); g0=$(cpu_ticks "$daemon_pid"); p0=$(cpu_ticks "$prom_pid")
  sleep "$DURATION"
  t1=$(now_s); g1=$(cpu_ticks "$daemon_pid"); p1=$(cpu_ticks "$prom_pid")
  load_end=$(loadavg | tr ' ' /)
  g_rss=$(status_kb "$daemon_pid" VmRSS); p_rss=$(status_kb "$prom_pid" VmRSS)
  g_hwm=$(status_kb "$daemon_pid" VmHWM); p_hwm=$(status_kb "$prom_pid" VmHWM)
  gp_up=$(curl -fsS --max-time 30 "http://127.0.0.1:$PORT/metrics" | awk '/^llm_slo_target_up\{/ && $2 == 1 { n++ } END { print n + 0 }')
  prom_up=$(prom_query 'sum(up{job="fake"})')
  # Prometheus's own metrics, read directly: it does not scrape itself here.
  self=$(curl -fsS --max-time 10 "http://127.0.0.1:$PROM_PORT/metrics")
  rule_ms=$(awk '/^prometheus_rule_group_last_duration_seconds\{/ { s += $2 } END { print s * 1000 }' <<<"$self")
  missed=$(awk '/^prometheus_rule_group_iterations_missed_total\{/ { s += $2 } END { print s + 0 }' <<<"$self")
  echo "# $mode: rule iterations missed: $missed"
  [ "$mode" = full ] && echo "# full: Prometheus holds $(prom_query 'count(count_over_time(vllm:num_requests_running[6h]))') series with 6h of samples"
  printf '%-6s %9s %9s %7s %9s %9s %7s %9s %9s %7s %6s %6s %9.1f %-16s %-16s\n' "$mode" \
    "$(pct "$g0" "$g1" "$t0" "$t1")" "$(pct "$p0" "$p1" "$t0" "$t1")" \
    "$(ratio "$((g1 - g0))" "$((p1 - p0))")" "$(mib "$g_rss")" "$(mib "$p_rss")" "$(ratio "$g_rss" "$p_rss")" \
    "$(mib "$g_hwm")" "$(mib "$p_hwm")" "$(ratio "$g_hwm" "$p_hwm")" "$gp_up/$N" "${prom_up%.*}/$N" "$rule_ms" \
    "$load_start" "$load_end"
  stop_pids "$daemon_pid" "$prom_pid" "$fake_pid"; daemon_pid="" prom_pid="" fake_pid=""
done
