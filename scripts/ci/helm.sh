#!/usr/bin/env bash
# Helm chart deploy/helm/goodput: `helm lint --strict` and `helm template` for the default
# (sidecar) values and every deploy/helm/goodput/ci/*-values.yaml; the output passes
# kubernetes-validate --strict and the Prometheus Operator schemas; each render has exactly
# one alert path (`alertPath`, default daemon); rendered rules pass promtool; the rendered
# goodput config passes `goodput check` (skipped until it exists). Also: a typo in the values
# fails (values.schema.json is strict); the aggregator with pod discovery gets list/watch on
# pods and nothing more; in sidecar mode the engine is the first and default container,
# goodput has no probes and waits on a config that does not validate (exits with the tap),
# and two renderings with different SLOs differ only in the
# ConfigMap (scripts/ci/check_same_pods.py); the goodput-sidecar post-renderer adds the
# sidecar to another chart's Deployment (scripts/ci/check_sidecar.py).
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
export NPM
BIN=$(goodput_bin)
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
"$HELM" version --short >&2
yamllint -s -d "$YAMLLINT_CONFIG" \
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
  validate_rendered "$out" Deployment,Service,ConfigMap,ServiceMonitor "the chart ($v)"
  path=daemon
  [ "$v" != default ] && grep -q '^alertPath: prometheus' "$v" && path=prometheus
  python3 scripts/ci/check_alert_path.py "$out" --expect "$path" >&2 || die "the chart must have one alert path: $path ($v)"
  if grep -q '^kind: PrometheusRule' "$out"; then
    python3 scripts/ci/extract_rules.py "$out" "$T/$name.rules.yml" || die "no rule groups in the chart ($v)"
    promtool check rules "$T/$name.rules.yml" >&2 || die "promtool check rules failed ($v)"
  fi
  python3 scripts/ci/extract_configmap.py "$out" "$T/$name.goodput.yaml" || die "no config in chart output ($v)"
  if res=$(POD_NAME=p POD_NAMESPACE=n NODE_NAME=x "$BIN" check --config "$T/$name.goodput.yaml" 2>&1); then
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
# values.schema.json has additionalProperties: false throughout: a misspelt key fails.
if "$HELM" template goodput "$CHART" --set serviceMonitr.enabled=false >/dev/null 2>"$T/err"; then
  die "a misspelt value (serviceMonitr) rendered; values.schema.json must reject it"
fi
grep -q "serviceMonitr" "$T/err" || die "unexpected error: $(cat "$T/err")"
if "$HELM" template goodput "$CHART" --set tap.enable=true >/dev/null 2>"$T/err"; then
  die "a misspelt nested value (tap.enable) rendered; values.schema.json must reject it"
fi

# The aggregator with Kubernetes pod discovery: its own ServiceAccount, allowed to list and
# watch pods and nothing else. (Its config is `goodput check`ed with the other ci/ values above.)
disc=$CHART/ci/aggregator-discovery-values.yaml
"$HELM" lint --strict "$CHART" -f "$disc" >&2 || die "helm lint --strict failed ($disc)"
"$HELM" template goodput "$CHART" --namespace llm -f "$disc" >"$T/disc.yaml" || die "helm template failed ($disc)"
kubernetes-validate --strict --quiet --kubernetes-version 1.31.0 "$T/disc.yaml" >&2 || die "kubernetes-validate failed ($disc)"
python3 - "$T/disc.yaml" <<'PY' || die "the discovery aggregator's RBAC is wrong"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
kinds = {d["kind"]: d for d in docs}
rules = kinds["Role"]["rules"]
assert rules == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}], rules
assert "ClusterRole" not in kinds, "pod discovery in one namespace needs no ClusterRole"
pod = kinds["Deployment"]["spec"]["template"]["spec"]
sa = kinds["ServiceAccount"]["metadata"]["name"]
assert pod["serviceAccountName"] == sa and pod["automountServiceAccountToken"] is True, pod
assert kinds["RoleBinding"]["subjects"][0]["name"] == sa
cfg = yaml.safe_load(kinds["ConfigMap"]["data"]["config.yaml"])
assert cfg["discovery"][0]["kubernetes"]["selector"] == "app=vllm", cfg
assert "pod" not in cfg["external_labels"], "an aggregator must not label every target with its own pod"
print("discovery aggregator: RBAC list/watch pods only; ok")
PY
# Without discovery, no ServiceAccount and no API token in the pod.
grep -q '^kind: ServiceAccount' "$T/default.yaml" && die "the sidecar render has a ServiceAccount"

# Sidecar mode never harms the engine: the engine container first and named as the default
# container, goodput without probes, a rolling update that never surges, and a config that
# changes nothing but its ConfigMap (no checksum annotation, no name from the content).
python3 - "$T/default.yaml" "$T/sidecar-tap-values.yaml" <<'PY' || die "the chart's sidecar mode can harm the engine"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
dep = next(d for d in docs if d["kind"] == "Deployment")
tmpl = dep["spec"]["template"]
names = [c["name"] for c in tmpl["spec"]["containers"]]
assert names == ["engine", "goodput"], names
ann = tmpl["metadata"].get("annotations") or {}
assert ann.get("kubectl.kubernetes.io/default-container") == "engine", ann
assert not any(k.startswith("checksum/") for k in ann), ann
g = tmpl["spec"]["containers"][1]
assert "readinessProbe" not in g and "livenessProbe" not in g, "goodput beside the engine has a probe"
# A config that does not validate at start leaves goodput waiting, not restarting; with the
# tap, whose Service traffic goes through goodput, it exits (the default).
env = {e["name"]: e.get("value") for e in g.get("env") or []}
assert env.get("GOODPUT_ON_INVALID_CONFIG") == "wait", env
tap = [d for d in yaml.safe_load_all(open(sys.argv[2])) if d and d["kind"] == "Deployment"][0]
tg = next(c for c in tap["spec"]["template"]["spec"]["containers"] if c["name"] == "goodput")
assert "GOODPUT_ON_INVALID_CONFIG" not in {e["name"] for e in tg.get("env") or []}, tg["env"]
assert g["resources"]["limits"]["memory"] and g["resources"]["requests"]["memory"], g["resources"]
assert dep["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}, dep["spec"]["strategy"]
print("sidecar mode: engine first and default, goodput without probes and waiting on an invalid config (not with the tap), rolling update; ok")
PY
"$HELM" template goodput "$CHART" --namespace llm-serving \
  --set-json 'slos=[{"name":"other","ttft":"1s","objective":0.99}]' >"$T/other-slos.yaml" || die "helm template failed (other SLOs)"
python3 scripts/ci/check_same_pods.py "$T/default.yaml" "$T/other-slos.yaml" --configmap goodput >&2 \
  || die "a change of goodput's config changes more than the chart's ConfigMap"

# The post-renderer on another chart's Deployment: the sidecar added, the tap on its port.
vchart=scripts/ci/testdata/vllm-chart
"$HELM" template llama-8b "$vchart" >"$T/engine.yaml" || die "helm template $vchart failed"
command -v kubectl >/dev/null || export KUSTOMIZE="$KUBECTL kustomize"
GOODPUT_DEPLOYMENT=llama-8b GOODPUT_TAP=true "$HELM" template llama-8b "$vchart" \
  --post-renderer deploy/helm/post-renderer/goodput-sidecar >"$T/engine-sidecar.yaml" \
  || die "helm template with the goodput-sidecar post-renderer failed"
validate_rendered "$T/engine-sidecar.yaml" Deployment,Service,ConfigMap,PodMonitor "the post-rendered engine chart"
python3 scripts/ci/check_sidecar.py "$T/engine-sidecar.yaml" --source "$T/engine.yaml" \
  --deployment llama-8b --service llama-8b --tap >&2 || die "the post-renderer broke the engine chart's Deployment"
log "PASS"
