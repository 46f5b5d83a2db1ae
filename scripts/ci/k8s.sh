#!/usr/bin/env bash
# Kubernetes manifests: every kustomize target renders; core kinds pass
# kubernetes-validate --strict; ServiceMonitor/PrometheusRule pass the Prometheus Operator
# schemas (npm @kubernetes-models/prometheus-operator); each render has exactly one alert
# path (the daemon's own delivery by default, the prometheus-rules component when added, on
# the base and on the aggregator overlay); no goodput ConfigMap name changes with its
# content, no goodput beside an engine has a probe or exits on a config that does not
# validate (it waits; with the tap it exits), and the engine is the default container; rule bodies pass promtool; the committed PrometheusRule equals a fresh
# `goodput rules` (skipped until it exists); the sidecar components, on a team's own
# Deployment (overlays/existing-vllm) and through the Helm post-renderer, keep the engine as
# it was and add goodput (scripts/ci/check_sidecar.py, which must fail on renderings broken
# on purpose), and a new config changes only the ConfigMap (scripts/ci/check_same_pods.py).
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
export NPM
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

# 1. The kustomize copies of the example configs must not drift from config/.
#    The base's copy adds `external_labels` (the Downward API's pod identity) at its end.
head -c "$(stat -c %s config/sidecar.yaml)" deploy/kubernetes/base/goodput.yaml | cmp - config/sidecar.yaml \
  || die "deploy/kubernetes/base/goodput.yaml does not start with config/sidecar.yaml: copy it over, keeping the external_labels block"
tail -n +"$(($(wc -l <config/sidecar.yaml) + 1))" deploy/kubernetes/base/goodput.yaml | grep -q '^external_labels:' \
  || die "deploy/kubernetes/base/goodput.yaml lost its external_labels block after the copy of config/sidecar.yaml"
cmp config/aggregator.yaml deploy/kubernetes/overlays/aggregator/goodput.yaml \
  || die "deploy/kubernetes/overlays/aggregator/goodput.yaml differs from config/aggregator.yaml"

cmp deploy/kubernetes/components/sidecar-tap/goodput.yaml deploy/kubernetes/overlays/existing-vllm/goodput.yaml \
  || die "deploy/kubernetes/overlays/existing-vllm/goodput.yaml differs from components/sidecar-tap/goodput.yaml"

# 2. YAML hygiene (duplicate keys, indentation) on the sources.
yamllint -s -d "$YAMLLINT_CONFIG" deploy/kubernetes config

# 3. Render and validate every kustomization. The components cannot render alone: the
#    overlays render them, and here prometheus-rules on the aggregator overlay.
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
  kinds=ServiceMonitor; path=daemon
  case $name in
    *prometheus-rules) kinds=ServiceMonitor,PrometheusRule; path=prometheus ;;
    existing-vllm) kinds=PodMonitor ;;
  esac
  validate_rendered "$out" "$kinds" "$k"
  python3 scripts/ci/check_alert_path.py "$out" --expect "$path" >&2 || die "$k must have one alert path: $path"
  python3 - "$out" <<'PY' >&2 || die "$k: a goodput config would roll the engine, an engine is not the default container, or goodput beside it would gate it"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
cms = {d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"}
cmdata = {d["metadata"]["name"]: d.get("data") or {} for d in docs if d["kind"] == "ConfigMap"}
bad = []
for d in docs:
    if d["kind"] not in ("Deployment", "StatefulSet"):
        continue
    t = d["spec"]["template"]
    pod, name = t["spec"], d["metadata"]["name"]
    # A goodput ConfigMap's name must not depend on its content (no kustomize hash suffix).
    for v in pod.get("volumes") or []:
        cm = (v.get("configMap") or {}).get("name", "")
        if cm.startswith("goodput") and cm not in ("goodput-config", "goodput-sidecar-config", "goodput-aggregator-config"):
            bad.append(f"{name}: volume {v['name']} names ConfigMap {cm}, a name that changes with the config")
        if cm and cm not in cms:
            bad.append(f"{name}: ConfigMap {cm} is not rendered")
    names = [c["name"] for c in pod["containers"]]
    if "goodput" in names and len(names) > 1:
        default = (t["metadata"].get("annotations") or {}).get("kubectl.kubernetes.io/default-container") or names[0]
        if default == "goodput":
            bad.append(f"{name}: `kubectl logs` would show goodput, not the engine")
        g = pod["containers"][names.index("goodput")]
        for probe in ("readinessProbe", "livenessProbe"):
            if probe in g:
                bad.append(f"{name}: goodput beside the engine has a {probe}")
        # A config that does not validate at start must leave goodput waiting, not restarting
        # (the pod would not be Ready); with the tap in the Service's path it must exit.
        mounted = {m["name"] for m in g.get("volumeMounts") or [] if m["mountPath"] == "/etc/goodput"}
        cm = next((v["configMap"]["name"] for v in pod.get("volumes") or [] if v["name"] in mounted and "configMap" in v), None)
        config = yaml.safe_load(cmdata.get(cm, {}).get("config.yaml") or "{}") or {}
        want = "exit" if any(t.get("tap") for t in config.get("targets") or []) else "wait"
        got = {e["name"]: e.get("value") for e in g.get("env") or []}.get("GOODPUT_ON_INVALID_CONFIG") or "exit"
        if got != want:
            bad.append(f"{name}: goodput beside the engine has GOODPUT_ON_INVALID_CONFIG={got}, not {want}")
    if d["kind"] == "Deployment" and d["spec"].get("strategy", {}).get("type") == "Recreate":
        bad.append(f"{name}: strategy Recreate stops every replica at once")
print("\n".join(bad) or f"{sys.argv[1]}: fixed ConfigMap names, engine first, no probes beside it, waits on an invalid config")
sys.exit(1 if bad else 0)
PY
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
# A config with other SLOs changes the ConfigMap and nothing else.
python3 - "$existing/goodput.yaml" "$T/other.yaml" <<'PY'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
c["slos"] = [{"name": "other", "ttft": "1s", "objective": 0.99}]
yaml.safe_dump(c, open(sys.argv[2], "w"))
PY
grep -v 'goodput.dev/sidecar' "$existing/vllm.yaml" \
  | GOODPUT_DEPLOYMENT=llama-8b GOODPUT_CONFIG="$T/other.yaml" KUSTOMIZE="$KUBECTL kustomize" \
    deploy/helm/post-renderer/goodput-sidecar >"$T/post-other.yaml" || die "the goodput-sidecar post-renderer failed"
python3 scripts/ci/check_same_pods.py "$T/post.yaml" "$T/post-other.yaml" --configmap goodput-sidecar-config >&2 \
  || die "a new goodput config changed more than the ConfigMap"
# check_sidecar.py must catch what it is there to catch: renderings broken on purpose.
python3 - "$T/existing-vllm.yaml" "$T/broken" <<'PY'
import copy, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
def variant(name, change):
    ds = copy.deepcopy(docs)
    dep = next(d for d in ds if d["kind"] == "Deployment")
    change(ds, dep["spec"]["template"]["spec"], dep)
    yaml.safe_dump_all(ds, open(f"{sys.argv[2]}-{name}.yaml", "w"))
def goodput(pod):
    return next(c for c in pod["containers"] if c["name"] == "goodput")
variant("first", lambda ds, pod, dep: pod["containers"].reverse())
variant("readiness", lambda ds, pod, dep: goodput(pod).update(readinessProbe={"httpGet": {"path": "/readyz", "port": 9464}}))
variant("liveness", lambda ds, pod, dep: goodput(pod).update(livenessProbe={"httpGet": {"path": "/healthz", "port": 9464}}))
variant("nolimit", lambda ds, pod, dep: goodput(pod)["resources"].pop("limits"))
def waits(ds, pod, dep):
    for e in goodput(pod)["env"]:
        if e["name"] == "GOODPUT_ON_INVALID_CONFIG":
            e["value"] = "wait"
variant("wait", waits)
variant("recreate", lambda ds, pod, dep: dep["spec"].update(strategy={"type": "Recreate"}))
def hashed(ds, pod, dep):
    for d in ds:
        if d["kind"] == "ConfigMap":
            d["metadata"]["name"] += "-5h2k8m4t9f"
    for v in pod["volumes"]:
        if "configMap" in v:
            v["configMap"]["name"] += "-5h2k8m4t9f"
variant("hashed", hashed)
def notap(ds, pod, dep):
    cm = next(d for d in ds if d["kind"] == "ConfigMap")
    c = yaml.safe_load(cm["data"]["config.yaml"])
    del c["targets"][0]["tap"]
    cm["data"]["config.yaml"] = yaml.safe_dump(c)
variant("notap", notap)
PY
for broken in first readiness liveness nolimit wait recreate hashed notap; do
  if python3 scripts/ci/check_sidecar.py "$T/broken-$broken.yaml" --source "$existing/vllm.yaml" \
      --deployment llama-8b --service llama-8b --tap >/dev/null 2>&1; then
    die "check_sidecar.py passed a rendering broken on purpose ($broken)"
  fi
done
# Without the tap, a goodput that exits on a config it cannot use is broken too.
python3 - "$T/post.yaml" "$T/broken-exits.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
dep = next(d for d in docs if d["kind"] == "Deployment")
g = next(c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "goodput")
g["env"] = [e for e in g["env"] if e["name"] != "GOODPUT_ON_INVALID_CONFIG"]
yaml.safe_dump_all(docs, open(sys.argv[2], "w"))
PY
if python3 scripts/ci/check_sidecar.py "$T/broken-exits.yaml" --source "$existing/vllm.yaml" \
    --deployment llama-8b --service llama-8b >/dev/null 2>&1; then
  die "check_sidecar.py passed a rendering broken on purpose (exits)"
fi
log "check_sidecar.py fails on each rendering broken on purpose"

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
