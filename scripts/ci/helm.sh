#!/usr/bin/env bash
# Helm chart deploy/helm/goodput: `helm lint --strict` and `helm template` for the default
# (sidecar) values and every deploy/helm/goodput/ci/*-values.yaml; the output passes
# kubernetes-validate --strict and the Prometheus Operator schemas; each render has exactly
# one alert path (`alertPath`, default daemon); rendered rules pass promtool; the rendered
# goodput config passes `goodput check` (skipped until it exists).
export CI_NAME=helm
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
CHART=deploy/helm/goodput
ensure_apt prometheus yamllint
ensure_venv kubernetes-validate==1.37.0 PyYAML==6.0.3
NPM=$(ensure_npm npm-k8s kubernetes-models@5.1.0 @kubernetes-models/prometheus-operator@6.0.0 js-yaml@5.5.0)
ensure_k8s_bins
cp scripts/ci/validate-k8s.mjs "$NPM/validate-k8s.mjs"
BIN=$(goodput_bin)
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
"$HELM" version --short >&2
yamllint -s -d '{extends: default, rules: {line-length: {max: 160}, document-start: disable, comments: {min-spaces-from-content: 1}, braces: {max-spaces-inside: 1}, indentation: {spaces: consistent, indent-sequences: whatever}}}' \
  "$CHART/Chart.yaml" "$CHART/values.yaml" "$CHART"/ci/*.yaml || die "yamllint failed on the chart values"
python3 -m json.tool "$CHART/values.schema.json" >/dev/null || die "values.schema.json is not JSON"

variants=(default)
for f in "$CHART"/ci/*-values.yaml; do [ -e "$f" ] && variants+=("$f"); done
for v in "${variants[@]}"; do
  args=(); [ "$v" != default ] && args=(-f "$v")
  name=$(basename "$v" .yaml); out=$T/$name.yaml
  log "lint + template: $v"
  "$HELM" lint --strict "$CHART" "${args[@]}" >&2 || die "helm lint --strict failed ($v)"
  "$HELM" template goodput "$CHART" --namespace llm-serving "${args[@]}" >"$out" \
    || die "helm template failed ($v)"
  kubernetes-validate --strict --quiet --kubernetes-version 1.31.0 "$out" 2>&1 | tee "$T/kv.log" >&2 \
    || die "kubernetes-validate --strict failed on the chart ($v)"
  grep -v "Couldn't find schema for kind \(ServiceMonitor\|PrometheusRule\)" "$T/kv.log" | grep -qi warn \
    && die "kubernetes-validate warned ($v)"
  (cd "$NPM" && node validate-k8s.mjs --expect Deployment,Service,ConfigMap,ServiceMonitor "$out") >&2 \
    || die "schema validation failed on the chart ($v)"
  path=daemon
  [ "$v" != default ] && grep -q '^alertPath: prometheus' "$v" && path=prometheus
  python3 scripts/ci/check_alert_path.py "$out" --expect "$path" >&2 || die "the chart must have one alert path: $path ($v)"
  if grep -q '^kind: PrometheusRule' "$out"; then
    python3 scripts/ci/extract_rules.py "$out" "$T/$name.rules.yml" || die "no rule groups in the chart ($v)"
    promtool check rules "$T/$name.rules.yml" >&2 || die "promtool check rules failed ($v)"
  fi
  python3 scripts/ci/extract_configmap.py "$out" "$T/$name.goodput.yaml" || die "no config in chart output ($v)"
  if res=$("$BIN" check --config "$T/$name.goodput.yaml" 2>&1); then
    log "goodput check on the rendered config: ok"
  elif daemon_missing "$res"; then
    daemon_skip "goodput check on the chart's config: $res"
  else
    printf '%s\n' "$res" >&2; die "goodput check rejected the chart's config ($v)"
  fi
done

# A misconfiguration must fail loudly, not render an empty target list.
if "$HELM" template goodput "$CHART" --set mode=aggregator >/dev/null 2>"$T/err"; then
  die "mode=aggregator without targets rendered; it must fail"
fi
grep -q "needs at least one entry in targets" "$T/err" || die "unexpected error: $(cat "$T/err")"
# The replaced switch fails with directions rather than rendering a second alert path.
if "$HELM" template goodput "$CHART" --set prometheusRule.enabled=true >/dev/null 2>"$T/err"; then
  die "prometheusRule.enabled rendered; it is replaced by alertPath and must fail"
fi
grep -q "replaced by alertPath" "$T/err" || die "unexpected error: $(cat "$T/err")"
# values.schema.json rejects wrong values before anything renders.
if "$HELM" template goodput "$CHART" --set-json 'slos=[{"name":"chat","objective":1.5}]' >/dev/null 2>"$T/err"; then
  die "an SLO objective of 1.5 rendered; values.schema.json must reject it"
fi
grep -q "objective" "$T/err" || die "unexpected error: $(cat "$T/err")"
log "PASS"
