#!/usr/bin/env bash
# Interleaved whole-path ingest measurements for docs/benchmarks.md: criterion's `ingest`
# bench for this tree and, when BASE names a directory holding the same bench built from an
# older commit (a checkout with its own target/), for that one, three rounds, medians in µs.
# Needs: python3.
set -euo pipefail
cd "$(dirname "$0")/.."
medians() {
  for d in "$1"/target/criterion/ingest/*/; do
    python3 -c "import json,sys;d=json.load(open(sys.argv[1]+'new/estimates.json'));print(f\"{sys.argv[2]:58s} {d['median']['point_estimate']/1e3:10.1f} us\")" "$d" "$(basename "$d")"
  done
}
for r in 1 2 3; do
  echo "== round $r $(date -u +%T) load: $(cut -d' ' -f1-3 /proc/loadavg)"
  for tree in ${BASE:+"$BASE"} "$PWD"; do
    (cd "$tree" && cargo bench --bench ingest -- --warm-up-time 1 --measurement-time 4 >/dev/null 2>&1)
    echo "-- $tree"; medians "$tree"
  done
done
