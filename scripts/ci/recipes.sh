#!/usr/bin/env bash
# The recipes of docs/kubernetes.md and docs/deploy.md, run as the docs show them. Every
# code block there carries a mark (scripts/ci/doc_recipes.py): `file` blocks are written into
# a directory per recipe beside a copy of this repository (`goodput/`, as the docs lay it
# out), `run` blocks are run there as written, `in` blocks must appear verbatim in the file
# they quote; a block without a mark fails. There is no cluster, so kubectl, helm and cargo
# are shims (scripts/ci/shims/): `kubectl apply` renders, `helm install`/`upgrade --install`
# run `helm template`, `cargo install` checks the package; the engine chart `vllm/vllm` is
# scripts/ci/testdata/vllm-chart served from a chart repository on 127.0.0.1, and `goodput`
# is the binary under test. Then, per recipe: every rendering validates, the sidecar
# renderings pass check_sidecar.py, the recipe's config is not the example's and passes
# `goodput check`, the image override reaches every goodput container, and the same
# commands with other SLOs give byte-identical workloads (check_same_pods.py). The container
# recipe runs in scripts/ci/podman.sh.
# usage: scripts/ci/recipes.sh
export CI_NAME=recipes
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
DOCS=(docs/kubernetes.md docs/deploy.md)
IMAGE=registry.example.com/goodput:0.1.0
ensure_venv kubernetes-validate==1.37.0 PyYAML==6.0.3
NPM=$(ensure_npm npm-k8s kubernetes-models@5.1.0 @kubernetes-models/prometheus-operator@6.0.0 js-yaml@5.5.0)
cp scripts/ci/validate-k8s.mjs "$NPM/validate-k8s.mjs"
export NPM
ensure_k8s_bins
command -v git >/dev/null || skip "git not available (to copy the repository's files)"
BIN=$(goodput_bin)
W=$(mktemp -d)
server=""
cleanup() { if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi; rm -rf "$W"; }
trap cleanup EXIT

# 1. The blocks, and a copy of the repository's files (tracked and new, as in this tree).
python3 scripts/ci/doc_recipes.py extract "${DOCS[@]}" --out "$W/docs" --repo "$ROOT" --skip container >"$W/runs.tsv" \
  || die "the docs' code blocks are not all checked (see above)"
# The extractor's own guard: an unmarked block, and an `in` block that is not in its file, fail.
fence='```'
printf 'text\n\n%ssh\nkubectl apply -k .\n%s\n' "$fence" "$fence" >"$W/unmarked.md"
printf '<!-- ci: in Cargo.toml -->\n%stoml\nname = "not-goodput"\n%s\n' "$fence" "$fence" >"$W/notin.md"
for bad in unmarked notin; do
  if python3 scripts/ci/doc_recipes.py extract "$W/$bad.md" --out "$W/bad" --repo "$ROOT" >/dev/null 2>&1; then
    die "doc_recipes.py accepted a doc with an unchecked block ($bad)"
  fi
done
mkdir -p "$W/repo"
git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
  | tar --null -T - -cf - | tar -xf - -C "$W/repo"

# 2. The shims, the binary, and Helm's state (its own repositories file: the stand-in chart
#    as `vllm`).
mkdir -p "$W/bin" "$W/helm" "$W/charts"
cp scripts/ci/shims/kubectl scripts/ci/shims/helm scripts/ci/shims/cargo "$W/bin/"
ln -s "$BIN" "$W/bin/goodput"
REAL_CARGO=$(command -v cargo || echo /nonexistent/cargo)
export REAL_KUBECTL=$KUBECTL REAL_HELM=$HELM REAL_CARGO
export HELM_CONFIG_HOME=$W/helm/config HELM_CACHE_HOME=$W/helm/cache HELM_DATA_HOME=$W/helm/data
"$HELM" package scripts/ci/testdata/vllm-chart -d "$W/charts" >/dev/null || die "helm package of the stand-in chart failed"
port=$(free_port)
"$HELM" repo index "$W/charts" --url "http://127.0.0.1:$port" || die "helm repo index failed"
python3 -m http.server --bind 127.0.0.1 --directory "$W/charts" "$port" >"$W/http.log" 2>&1 &
server=$!
for _ in $(seq 1 50); do "$HELM" repo add vllm "http://127.0.0.1:$port" >/dev/null 2>&1 && break; sleep 0.2; done
"$HELM" repo list 2>/dev/null | grep -q '^vllm' || die "could not serve the stand-in chart repository: $(cat "$W/http.log")"

# The workspace of a recipe: its files beside a copy of the repository (files under goodput/
# land in that copy), plus what the docs leave to the user: their own engine Deployment.
workspace() {
  local recipe=$1 ws=$W/ws/$1
  [ -d "$ws" ] && return 0
  mkdir -p "$ws" "$W/out/$recipe"
  cp -a "$W/repo" "$ws/goodput"
  if [ -d "$W/docs/$recipe" ]; then cp -a "$W/docs/$recipe/." "$ws/"; fi
  case $recipe in
    sidecar) cp deploy/kubernetes/overlays/existing-vllm/vllm.yaml "$ws/llm/llama-8b.yaml" ;;
  esac
}
# run_recipe RECIPE WS OUT: the recipe's run blocks, in the docs' order, in workspace WS.
run_recipe() {
  local recipe=$1 ws=$2 out=$3 r dir script
  mkdir -p "$out"
  while IFS=$'\t' read -r r dir script; do
    [ "$r" = "$recipe" ] || continue
    mkdir -p "$ws/$dir"
    log "run $recipe in $dir: $(head -1 "$script" | sed 's/^# //')"
    (cd "$ws/$dir" && RECIPE_OUT=$out PATH="$W/bin:$PATH" bash -e -o pipefail "$script") >&2 \
      || die "the recipe '$recipe' failed as the doc shows it ($(head -1 "$script" | sed 's/^# //'))"
  done <"$W/runs.tsv"
}

recipes=$(cut -f1 "$W/runs.tsv" | awk '!seen[$0]++')
for recipe in $recipes; do
  workspace "$recipe"
  run_recipe "$recipe" "$W/ws/$recipe" "$W/out/$recipe"
done

# 3. Per recipe: what it rendered, and the same commands with other SLOs. Each entry:
#    recipe, its config in the workspace, the ConfigMap it becomes, the example it must not be.
set_slos() {
  python3 - "$1" <<'PY'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
c["slos"] = [{"name": "other", "ttft": "1s", "objective": 0.99}]
yaml.safe_dump(c, open(sys.argv[1], "w"), sort_keys=False)
PY
}
# rendered_config CONFIGMAP RENDERED: the config goodput runs on, as rendered.
rendered_config() {
  python3 - "$1" "$2" <<'PY'
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[2])):
    if d and d["kind"] == "ConfigMap" and d["metadata"]["name"] == sys.argv[1]:
        sys.stdout.write(d["data"]["config.yaml"]); sys.exit(0)
sys.exit(f"no ConfigMap {sys.argv[1]} in {sys.argv[2]}")
PY
}
while read -r recipe config configmap example kinds; do
  [ -n "$recipe" ] || continue
  grep -q "^$recipe"$'\t' "$W/runs.tsv" || die "docs recipe '$recipe' is gone; update scripts/ci/recipes.sh"
  ws=$W/ws/$recipe
  outputs=("$W/out/$recipe"/*.yaml)
  [ -e "${outputs[0]}" ] || die "the recipe '$recipe' applied nothing"
  for out in "${outputs[@]}"; do
    validate_rendered "$out" "$kinds" "recipe $recipe ($(basename "$out"))"
    python3 scripts/ci/check_alert_path.py "$out" --expect daemon >&2 || die "recipe $recipe: not one alert path"
    rendered_config "$configmap" "$out" >"$W/$recipe.config.yaml" \
      || die "recipe $recipe: no goodput config in $(basename "$out")"
    POD_NAME=p POD_NAMESPACE=n NODE_NAME=x "$BIN" check --config "$W/$recipe.config.yaml" >/dev/null \
      || die "recipe $recipe: goodput check rejects the config it deploys"
    python3 - "$out" "$IMAGE" <<'PY' || die "recipe $recipe: the image override misses a goodput container"
import sys, yaml
imgs = [c["image"] for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] in ("Deployment", "StatefulSet")
        for c in d["spec"]["template"]["spec"]["containers"] if c["name"] == "goodput"]
assert imgs and all(i == sys.argv[2] for i in imgs), imgs
PY
  done
  # The recipe's config is the user's own, not the example it starts from.
  python3 - "$ws/$config" "$example" <<'PY' || die "recipe $recipe: its config has the example's SLOs; show one of the user's own"
import sys, yaml
a, b = (yaml.safe_load(open(p)) for p in sys.argv[1:3])
assert a.get("slos") != b.get("slos"), a.get("slos")
PY
  # The same commands with other SLOs: only the ConfigMap may change.
  cp -a "$ws" "$ws.other"
  set_slos "$ws.other/$config"
  run_recipe "$recipe" "$ws.other" "$W/out/$recipe.other"
  for out in "${outputs[@]}"; do
    python3 scripts/ci/check_same_pods.py "$out" "$W/out/$recipe.other/$(basename "$out")" --configmap "$configmap" >&2 \
      || die "recipe $recipe: a change of goodput's config changes more than its ConfigMap"
  done
  log "recipe $recipe: valid, its own config passes goodput check, the image is $IMAGE, a new config changes only $configmap"
done <<EOF
sidecar llm/goodput.yaml goodput-sidecar-config deploy/kubernetes/components/sidecar-tap/goodput.yaml PodMonitor,Deployment,ConfigMap
helm llm/goodput.yaml goodput-sidecar-config deploy/kubernetes/components/sidecar-tap/goodput.yaml PodMonitor,Deployment,ConfigMap
aggregator llm-aggregator/aggregator.yaml goodput-aggregator-config deploy/kubernetes/overlays/aggregator-discovery/goodput.yaml ServiceMonitor,Role,RoleBinding
base my-goodput/goodput.yaml goodput-config deploy/kubernetes/base/goodput.yaml ServiceMonitor,Deployment,ConfigMap
chart goodput/my-values.yaml goodput deploy/helm/goodput/values.yaml ServiceMonitor,Deployment,ConfigMap
EOF

# 4. The sidecar recipes keep the engine as it was (the kustomize one ran check_sidecar.py
#    itself, as the doc shows); the Helm one against the chart rendered without goodput.
(cd "$W/ws/helm/llm" && "$HELM" template llama-8b vllm/vllm -n llm >"$W/engine.yaml") || die "helm template vllm/vllm failed"
python3 scripts/ci/check_sidecar.py "$W/out/helm/helm-1.yaml" --source "$W/engine.yaml" \
  --deployment llama-8b --service llama-8b --tap >&2 || die "the post-renderer recipe broke the engine chart's Deployment"
# The base overlays as the doc lists them: each rendered and valid.
for out in "$W/out/overlays"/*.yaml; do validate_rendered "$out" ServiceMonitor "recipe overlays ($(basename "$out"))"; done
[ "$(find "$W/out/overlays" -name 'apply-*.yaml' | wc -l)" -ge 5 ] || die "recipe overlays: fewer renderings than the doc lists"
log "PASS"
