#!/usr/bin/env bash
# Every shipped goodput config passes `goodput check`: config/*.yaml and the kustomize
# copies under deploy/kubernetes. A deliberately broken copy must fail with file:line:column.
export CI_NAME=configs
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
BIN=$(goodput_bin)
# The Kubernetes configs name the Downward API's variables in external_labels.
export POD_NAME=ci-pod POD_NAMESPACE=ci NODE_NAME=ci-node
mapfile -t files < <(ls config/*.yaml; find deploy/kubernetes -name goodput.yaml | sort)
[ ${#files[@]} -ge 5 ] || die "expected at least 5 configs, found ${#files[@]}"
for f in "${files[@]}"; do
  if out=$("$BIN" check --config "$f" 2>&1); then
    log "ok   $f"
  elif daemon_missing "$out"; then
    daemon_skip "goodput check: $out"; exit 0
  else
    printf '%s\n' "$out" >&2; die "goodput check rejected $f"
  fi
done
# Negative control: an unknown key on line 2 must be rejected and located.
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
{ head -1 config/demo.yaml; echo "listne: 127.0.0.1:1"; tail -n +2 config/demo.yaml; } >"$T/bad.yaml"
if out=$("$BIN" check --config "$T/bad.yaml" 2>&1); then
  die "goodput check accepted an unknown key"
fi
grep -q 'bad.yaml:2:' <<<"$out" || die "error does not point at bad.yaml:2:COL: $out"
log "PASS"
