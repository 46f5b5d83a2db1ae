#!/usr/bin/env bash
# Kubernetes manifests: every kustomize target renders; core kinds pass
# kubernetes-validate --strict; ServiceMonitor/PrometheusRule pass the Prometheus Operator
# schemas (npm @kubernetes-models/prometheus-operator); each render has exactly one alert
# path (the daemon's own delivery by default, the prometheus-rules component when added, on
# the base and on the aggregator overlay); rule bodies pass promtool; the committed
# PrometheusRule equals a fresh `goodput rules` (skipped until it exists); the sidecar
# components, on a team's own Deployment (overlays/existing-vllm) and through the Helm
# post-renderer, keep the engine as it was and add goodput (scripts/ci/check_sidecar.py).
# usage: scripts/ci/k8s.sh [--update]   (--update rewrites the generated PrometheusRule)
export CI_NAME=k8s
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
UPDATE=0; [ "${1:-}" = --update ] && UPDATE=1

ensure_apt prometheus yamllint
ensure_venv kubernetes-validate==1.37.0 PyYAML==6.0.3
NPM=$(ensure_npm npm-k8s kubernetes-models@5.1.0 @kubernetes-models/prometheus-operator@6.0.0 js-yaml@5.5.0)
command -v kubectl >/dev/null || ensure_k8s_bins
KUBECTL=${KUBECTL:-$(command -v kubectl)}
cp scripts/ci/validate-k8s.mjs "$NPM/validate-k8s.mjs"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

# 1. The kustomize copies of the example configs must not drift from config/.
#    The base's copy adds `external_labels` (the Downward API's pod identity) at its end.
head -c "$(stat -c %s config/sidecar.yaml)" deploy/kubernetes/base/goodput.yaml | cmp - config/sidecar.yaml \
  || die "deploy/kubernetes/base/goodput.yaml does not start with config/sidecar.yaml: copy it over, keeping the external_labels block"
tail -n +"$(($(wc -l <config/sidecar.yaml) + 1))" deploy/kubernetes/base/goodput.yaml | grep -q '^external_labels:' \
  || die "deploy/kubernetes/base/goodput.yaml lost its external_labels block after the copy of config/sidecar.yaml"
cmp config/aggregator.yaml deploy/kubernetes/overlays/aggregator/goodput.yaml \
  || die "deploy/kubernetes/overlays/aggregator/goodput.yaml differs from config/aggregator.yaml"

# 2. YAML hygiene (duplicate keys, indentation) on the sources.
yamllint -s -d '{extends: default, rules: {line-length: {max: 160}, document-start: disable, comments: {min-spaces-from-content: 1}, braces: {max-spaces-inside: 1}, indentation: {spaces: consistent, indent-sequences: whatever}}}' \
  deploy/kubernetes config

# 3. Render and validate every kustomization. The component cannot render alone: it is
#    rendered by overlays/prometheus-rules (on base) and here on the aggregator overlay.
component=deploy/kubernetes/components/prometheus-rules
agg=$T/aggregator-prometheus-rules; mkdir -p "$agg"
rel=$(realpath --relative-to="$agg" "$ROOT")
printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\ncomponents: [%s]\n' \
  "$rel/deploy/kubernetes/overlays/aggregator" "$rel/$component" >"$agg/kustomization.yaml"
rule_files=()
for k in deploy/kubernetes/base deploy/kubernetes/overlays/* "$agg"; do
  name=$(basename "$k"); out=$T/$name.yaml
  log "kustomize $k"
  "$KUBECTL" kustomize "$k" >"$out" || die "kubectl kustomize $k failed"
  kubernetes-validate --strict --quiet --kubernetes-version 1.31.0 "$out" 2>&1 | tee "$T/kv.log" >&2 \
    || die "kubernetes-validate --strict failed on $k"
  grep -v "Couldn't find schema for kind \(ServiceMonitor\|PodMonitor\|PrometheusRule\)" "$T/kv.log" | grep -qi "warn" \
    && die "kubernetes-validate warned on $k (see above)"
  kinds=ServiceMonitor; path=daemon
  case $name in
    *prometheus-rules) kinds=ServiceMonitor,PrometheusRule; path=prometheus ;;
    existing-vllm) kinds=PodMonitor ;;
  esac
  (cd "$NPM" && node validate-k8s.mjs --expect "$kinds" "$out") >&2 \
    || die "Prometheus Operator schema validation failed on $k"
  python3 scripts/ci/check_alert_path.py "$out" --expect "$path" >&2 || die "$k must have one alert path: $path"
  if [ "$path" = prometheus ]; then
    python3 scripts/ci/extract_rules.py "$out" "$T/$name.rules.yml" || die "no PrometheusRule in $k"
    rule_files+=("$T/$name.rules.yml")
  fi
done

# 3b. The sidecar components on a team's own Deployment: with the tap (the overlay), and
#     without it (the Helm post-renderer, on the same manifests stripped of the opt-in label).
existing=deploy/kubernetes/overlays/existing-vllm
python3 scripts/ci/check_sidecar.py "$T/existing-vllm.yaml" --source "$existing/vllm.yaml" \
  --deployment llama-8b --service llama-8b --tap >&2 || die "the sidecar+tap components broke $existing"
grep -v 'goodput.dev/sidecar' "$existing/vllm.yaml" \
  | GOODPUT_DEPLOYMENT=llama-8b KUSTOMIZE="$KUBECTL kustomize" deploy/helm/post-renderer/goodput-sidecar >"$T/post.yaml" \
  || die "the goodput-sidecar post-renderer failed"
python3 scripts/ci/check_sidecar.py "$T/post.yaml" --source "$existing/vllm.yaml" --deployment llama-8b --service llama-8b >&2 \
  || die "the goodput-sidecar post-renderer broke the Deployment"

# 4. Rule bodies: PromQL parses, templates expand, durations are valid.
promtool check rules "${rule_files[@]}" >&2 || die "promtool check rules failed"

# 5. The committed PrometheusRule must equal a fresh generation.
BIN=$(goodput_bin)
committed=$component/prometheusrule.yaml
if "$BIN" rules --config deploy/kubernetes/base/goodput.yaml --format prometheusrule >"$T/gen.yaml" 2>"$T/gen.err"; then
  if [ "$UPDATE" = 1 ]; then
    cp "$T/gen.yaml" "$committed"; log "rewrote $committed"
  elif ! diff -u "$committed" "$T/gen.yaml" >&2; then
    die "$committed is stale: run scripts/ci/k8s.sh --update and commit it"
  fi
elif daemon_missing "$(cat "$T/gen.err")"; then
  daemon_skip "goodput rules, so $committed was not compared with a fresh generation: $(head -1 "$T/gen.err")"
else
  cat "$T/gen.err" >&2; die "goodput rules failed"
fi
log "PASS"
