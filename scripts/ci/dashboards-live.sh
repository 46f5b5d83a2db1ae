#!/usr/bin/env bash
# Live dashboard check against two goodput sidecar replicas: two `goodput run` daemons on
# loopback, each watching its own simulated vLLM engine (`goodput simulate --listen`, one
# with speculative decoding, each sending its request spans to its daemon's OTLP receiver),
# both calling their target `vllm` as the Kubernetes sidecars do and told apart only by the
# external labels pod, namespace and node (set from the environment, as the Downward API
# does). A real Prometheus (127.0.0.1, random port, 2s scrapes) scrapes the daemons and the
# engines and evaluates `goodput rules` for the replicas' config (the fleet dashboard reads
# those recording rules). Then:
#   1. every dashboard expression returns data (dashboard_promql_check.py; GPU-only and
#      alert-list queries are optional), as soon as the data is there;
#   2. every per-replica query returns one series set per pod, and $pod, $namespace and
#      $window list exactly the replicas' values (dashboard_replica_check.py);
#   3. one replica's engine is stopped (by PID): the "up" queries show it 0 and the other 1.
# usage: scripts/ci/dashboards-live.sh   (DASHBOARDS_LIVE_SECONDS=90: the most to wait for data)
export CI_NAME=dashboards-live
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_apt prometheus curl
BIN=$(goodput_bin)
WAIT_FOR_DATA=${DASHBOARDS_LIVE_SECONDS:-90}
NAMESPACE=goodput-ci
PODS=(vllm-a vllm-b)
T=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT

# replica_config POD GOODPUT_PORT OTLP_PORT ENGINE_PORT: the sidecar's config (as
# deploy/kubernetes/base/goodput.yaml, on loopback ports), with the identity from the environment.
replica_config() {
  cat >"$T/$1.yaml" <<YAML
listen: 127.0.0.1:$2
otlp: {listen: 127.0.0.1:$3}
scrape: {interval: 1s, timeout: 900ms}
targets:
  - name: vllm
    url: http://127.0.0.1:$4/metrics
    engine: vllm
    model: sim-llama-8b
windows: [1m, 5m, 15m, 1h]
quantiles: [0.5, 0.9, 0.95, 0.99]
slos:
  - {name: chat, ttft: 500ms, tpot: 50ms, objective: 0.99}
  - {name: batch, ttft: 2s, tpot: 100ms, e2e: 30s, objective: 0.95}
kv_cache: {underloaded: 0.70, target_low: 0.75, target_high: 0.85, critical: 0.90}
cost: {gpu_hour_dollars: 2.50, gpus: 1}
external_labels:
  pod: \${POD_NAME}
  namespace: \${POD_NAMESPACE}
  node: \${NODE_NAME}
YAML
}

# 1. Two replicas: engine plus daemon each.
declare -A engine_pid daemon_pid gport eport
profile=spec
seed=1
for pod in "${PODS[@]}"; do
  gport[$pod]=$(free_port); eport[$pod]=$(free_port); oport=$(free_port)
  replica_config "$pod" "${gport[$pod]}" "$oport" "${eport[$pod]}"
  "$BIN" simulate --listen "127.0.0.1:${eport[$pod]}" --profile "$profile" --seed "$seed" --model sim-llama-8b \
    --otlp-traces-endpoint "http://127.0.0.1:$oport/v1/traces" >"$T/$pod-engine.log" 2>&1 &
  engine_pid[$pod]=$!; pids+=($!)
  POD_NAME=$pod POD_NAMESPACE=$NAMESPACE NODE_NAME=node-${pod#vllm-} \
    "$BIN" run --config "$T/$pod.yaml" --no-alert-delivery >"$T/$pod.log" 2>&1 &
  daemon_pid[$pod]=$!; pids+=($!)
  profile=steady; seed=$((seed + 1))
done
daemons_alive() {
  local pod
  for pod in "${PODS[@]}"; do
    curl -sf "http://127.0.0.1:${gport[$pod]}/metrics" >/dev/null 2>&1 && continue
    # Not serving (yet): a daemon that exited says why.
    if ! kill -0 "${daemon_pid[$pod]}" 2>/dev/null; then
      out=$(cat "$T/$pod.log")
      if daemon_missing "$out"; then daemon_skip "goodput run: $out"; exit 0; fi
      printf '%s\n' "$out" | tail -20 >&2; die "goodput run for $pod exited"
    fi
  done
}
for pod in "${PODS[@]}"; do
  for _ in $(seq 1 120); do
    daemons_alive
    # Into a file first: `curl | grep -q` fails under pipefail when grep stops reading early.
    curl -sf "http://127.0.0.1:${gport[$pod]}/metrics" >"$T/metrics.txt" 2>/dev/null || true
    grep -q '^llm_slo_ttft_seconds' "$T/metrics.txt" && break
    sleep 0.5
  done
  grep -q "^llm_slo_ttft_seconds.*pod=\"$pod\"" "$T/metrics.txt" \
    || { tail -20 "$T/$pod.log" >&2; die "$pod's /metrics on 127.0.0.1:${gport[$pod]} shows no llm_slo_ttft_seconds with pod=\"$pod\" after 60 s"; }
done
log "replicas ${PODS[*]} serving on 127.0.0.1:${gport[vllm-a]} and :${gport[vllm-b]}"

# 2. The fleet rules for the replicas' config (the same for both).
# (Its note that the config sets no runbook_url does not matter here.)
"$BIN" rules --config "$T/vllm-a.yaml" --format prometheus >"$T/rules.yml" 2>"$T/rules.err" \
  || { cat "$T/rules.err" >&2; die "goodput rules failed"; }

# 3. A real Prometheus scraping the daemons and the engines (which Kubernetes service
#    discovery would label with their pod), evaluating the rules.
pport=$(free_port)
cat >"$T/prometheus.yml" <<YAML
global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files: ["$T/rules.yml"]
scrape_configs:
  - job_name: goodput
    static_configs:
      - targets: ["127.0.0.1:${gport[vllm-a]}", "127.0.0.1:${gport[vllm-b]}"]
  - job_name: vllm
    static_configs:
      - {targets: ["127.0.0.1:${eport[vllm-a]}"], labels: {pod: vllm-a, namespace: $NAMESPACE}}
      - {targets: ["127.0.0.1:${eport[vllm-b]}"], labels: {pod: vllm-b, namespace: $NAMESPACE}}
YAML
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/data" \
  --web.listen-address="127.0.0.1:$pport" >"$T/prometheus.log" 2>&1 &
pids+=($!)
PROM=http://127.0.0.1:$pport
for _ in $(seq 1 100); do curl -sf "$PROM/-/ready" >/dev/null 2>&1 && break; sleep 0.2; done
curl -sf "$PROM/-/ready" >/dev/null || { tail -20 "$T/prometheus.log" >&2; die "Prometheus not ready"; }
log "Prometheus on $PROM scraping; waiting up to ${WAIT_FOR_DATA}s for every dashboard query to have data"

# 4. Every dashboard expression against it, as soon as the windows hold data.
check_all() { python3 scripts/ci/dashboard_promql_check.py "$PROM" dashboards/*.json; }
end=$((SECONDS + WAIT_FOR_DATA))
until check_all >"$T/check.txt" 2>&1; do
  daemons_alive
  if [ $SECONDS -ge $end ]; then
    grep -E 'FAIL|expressions' "$T/check.txt" >&2
    die "dashboard queries still fail after ${WAIT_FOR_DATA}s against Prometheus scraping the replicas"
  fi
  sleep 5
done
grep -E '^==|expressions' "$T/check.txt" >&2
log "every dashboard query returns data"

# 5. The replicas apart: one series set per pod, the variables from the data.
python3 scripts/ci/dashboard_replica_check.py "$PROM" --pods "vllm-a,vllm-b" --var "namespace=$NAMESPACE" \
  --var window=1m,5m,15m,1h dashboards/overview.json dashboards/target.json >&2 \
  || die "the dashboards merge replicas"

# 6. vllm-b's engine stops: its daemon reports the target down, the other stays up.
kill "${engine_pid[vllm-b]}"
wait "${engine_pid[vllm-b]}" 2>/dev/null || true
log "stopped vllm-b's engine (PID ${engine_pid[vllm-b]})"
python3 scripts/ci/dashboard_replica_check.py "$PROM" --pods "vllm-a,vllm-b" --down vllm-b --wait 30 \
  dashboards/overview.json dashboards/target.json >&2 \
  || die "the up panels do not show vllm-b down and vllm-a up"
log "PASS in ${SECONDS}s"
