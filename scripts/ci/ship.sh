#!/usr/bin/env bash
# Runs every shipping check in order; stops at the first failure.
# usage: scripts/ci/ship.sh [--live]   (--live adds dashboards-live.sh, about 30 s)
set -euo pipefail
cd "$(dirname "$0")"
checks=(shellcheck.sh versions.sh hadolint.sh configs.sh k8s.sh helm.sh recipes.sh dashboards.sh podman.sh)
[ "${1:-}" = --live ] && checks+=(dashboards-live.sh)
for c in "${checks[@]}"; do
  echo "== scripts/ci/$c"
  "./$c"
done
echo "== all shipping checks passed"
