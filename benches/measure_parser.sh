#!/usr/bin/env bash
# Interleaved parser measurements for docs/benchmarks.md: criterion, parse_file and
# promtool/parse_file under hyperfine, three rounds, so each round sees the same load.
# Needs: promtool (Debian `prometheus`), hyperfine, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
FILE=${1:-/tmp/vllm20.prom}
cargo build --release --example gen_exposition --example parse_file
[ -f "$FILE" ] || ./target/release/examples/gen_exposition "$FILE"
median() { python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(d['results'][0]['median'])" "$1"; }
for r in 1 2 3; do
  echo "== round $r $(date -u +%T) load: $(cut -d' ' -f1-3 /proc/loadavg)"
  cargo bench --bench parse -- --warm-up-time 2 --measurement-time 8 2>&1 | grep -E "time:" | head -1
  python3 -c "import json;d=json.load(open('target/criterion/parse/vllm_like_20MB/new/estimates.json'));print('criterion median ms', d['median']['point_estimate']/1e6)"
  ./target/release/examples/parse_file "$FILE" 30 | tail -1
  hyperfine -i --warmup 1 --runs 7 --export-json /tmp/hf_promtool.json "promtool check metrics < $FILE" >/dev/null 2>&1
  echo "promtool median s $(median /tmp/hf_promtool.json)"
  hyperfine --warmup 1 --runs 7 --export-json /tmp/hf_parse.json "./target/release/examples/parse_file $FILE" >/dev/null 2>&1
  echo "parse_file process median s $(median /tmp/hf_parse.json)"
done
