#!/usr/bin/env bash
# Grafana dashboards: generated JSON is current, each dashboard type-checks against
# @grafana/schema with tsc, and every PromQL expression parses (promtool), uses only
# defined variables and, on a dashboard with $pod, keeps the replica identity in every
# aggregation. With a Prometheus URL, every expression must also return data there
# (see dashboard_promql_check.py; scripts/ci/dashboards-live.sh provides the Prometheus).
# usage: scripts/ci/dashboards.sh [http://127.0.0.1:PORT]
export CI_NAME=dashboards
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_apt prometheus
NPM=$(ensure_npm npm-grafana @grafana/schema@13.2.3 typescript@5.9.3)

python3 dashboards/generate.py --check || die "dashboards/*.json are stale"

files=()
for f in dashboards/*.json; do
  ts=$NPM/check-$(basename "$f" .json).ts
  python3 - "$ROOT/scripts/ci/dashboard-types.ts.in" "$f" "$ts" <<'PY'
import sys
tpl, dash, out = sys.argv[1:]
body = open(dash, encoding="utf-8").read().rstrip()
open(out, "w", encoding="utf-8").write(open(tpl, encoding="utf-8").read().replace("__DASHBOARD_JSON__", body) + ";\n")
PY
  files+=("$ts")
done
[ ${#files[@]} -ge 2 ] || die "expected overview.json and target.json"
log "tsc against @grafana/schema: ${files[*]##*/}"
(cd "$NPM" && npx --no-install tsc --noEmit --strict --moduleResolution bundler --module esnext --target es2022 "${files[@]}") >&2 \
  || die "dashboard JSON does not type-check against @grafana/schema"

python3 scripts/ci/dashboard_promql_check.py --promtool dashboards/*.json >&2 || die "PromQL static check failed"
if [ -n "${1:-}" ]; then
  python3 scripts/ci/dashboard_promql_check.py "$1" dashboards/*.json >&2 || die "PromQL live check failed against $1"
fi
log "PASS"
