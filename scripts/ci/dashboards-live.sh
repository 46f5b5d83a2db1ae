#!/usr/bin/env bash
# Live dashboard check: start `goodput demo` on a free loopback port, let a real Prometheus
# (127.0.0.1, random port, scrape_interval 5s) scrape its /metrics and its simulated engines'
# for a few minutes while evaluating `goodput rules` for the demo's config (the fleet
# dashboard reads those recording rules), then require every dashboard expression to return
# data (GPU-only and alert-list queries are optional; see dashboard_promql_check.py).
# usage: scripts/ci/dashboards-live.sh   (DASHBOARDS_LIVE_SECONDS=180 sets the scrape time)
export CI_NAME=dashboards-live
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_apt prometheus curl
BIN=$(goodput_bin)
SECONDS_TO_SCRAPE=${DASHBOARDS_LIVE_SECONDS:-180}
T=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT

# 1. The demo: simulated engines plus the daemon.
gport=$(free_port)
"$BIN" demo --listen "127.0.0.1:$gport" >"$T/demo.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do
  if ! kill -0 "${pids[0]}" 2>/dev/null; then
    out=$(cat "$T/demo.log")
    if daemon_missing "$out"; then daemon_skip "goodput demo: $out"; exit 0; fi
    printf '%s\n' "$out" >&2; die "goodput demo exited early"
  fi
  # Into a file first: `curl | grep -q` fails under pipefail when grep stops reading early.
  curl -sf "http://127.0.0.1:$gport/metrics" >"$T/metrics.txt" 2>/dev/null || true
  grep -q '^llm_slo_ttft_seconds' "$T/metrics.txt" && break
  sleep 0.5
done
grep -q '^llm_slo_ttft_seconds' "$T/metrics.txt" \
  || { tail -20 "$T/demo.log" >&2; die "demo's /metrics on 127.0.0.1:$gport shows no llm_slo_ttft_seconds after 60 s"; }
log "goodput demo serving on 127.0.0.1:$gport"

# 2. The fleet rules for the demo's config. Its chat SLO is scoped to target sim-chat,
#    which Prometheus knows by its engine's address (the demo's banner prints it).
engine() { sed -n "s|^ *engine $1 *http://\([^/]*\)/metrics.*|\1|p" "$T/demo.log" | head -1; }
chat=$(engine sim-chat); batch=$(engine sim-batch)
if [ -z "$chat" ] || [ -z "$batch" ]; then
  cat "$T/demo.log" >&2; die "the demo's banner names no engine addresses"
fi
"$BIN" rules --config config/demo.yaml --format prometheus --target-instance "sim-chat=$chat" >"$T/rules.yml" \
  || die "goodput rules failed on config/demo.yaml"

# 3. A real Prometheus scraping the daemon and the engines, evaluating the rules.
pport=$(free_port)
cat >"$T/prometheus.yml" <<YAML
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files: ["$T/rules.yml"]
scrape_configs:
  - job_name: goodput
    static_configs:
      - targets: ["127.0.0.1:$gport"]
  - job_name: vllm
    static_configs:
      - targets: ["$chat", "$batch"]
YAML
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/data" \
  --web.listen-address="127.0.0.1:$pport" >"$T/prometheus.log" 2>&1 &
pids+=($!)
PROM=http://127.0.0.1:$pport
for _ in $(seq 1 100); do curl -sf "$PROM/-/ready" >/dev/null 2>&1 && break; sleep 0.2; done
curl -sf "$PROM/-/ready" >/dev/null || { tail -20 "$T/prometheus.log" >&2; die "Prometheus not ready"; }
for _ in $(seq 1 60); do
  curl -s "$PROM/api/v1/targets" | grep -q '"health":"up"' && break; sleep 0.5
done
curl -s "$PROM/api/v1/targets" | grep -q '"health":"up"' || die "Prometheus cannot scrape the demo"
log "Prometheus on $PROM scraping; waiting ${SECONDS_TO_SCRAPE}s for data"
end=$((SECONDS + SECONDS_TO_SCRAPE))
while [ $SECONDS -lt $end ]; do
  kill -0 "${pids[0]}" 2>/dev/null || { tail -20 "$T/demo.log" >&2; die "goodput demo died"; }
  sleep 5
done

# 4. Every dashboard expression against it.
python3 scripts/ci/dashboard_promql_check.py "$PROM" dashboards/*.json >&2 \
  || { log "demo log tail:"; tail -5 "$T/demo.log" >&2; die "dashboard queries failed against Prometheus scraping goodput demo"; }
log "PASS"
