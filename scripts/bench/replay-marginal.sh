#!/usr/bin/env bash
# Whether a tick after hours of history costs what one after minutes does, end to end:
# `goodput replay` (windows, SLO brackets, capacity book, alert rules, one JSON line per
# instant) over the first 20 min, 1 h, 3 h and 6 h of one simulated 6 h recording, one
# target at 5 s, windows [1m, 6h], one SLO. Prints each run's CPU time (user+sys, which
# other load changes little), the 20-minute replay's cost per tick, and the marginal cost
# per tick over hours 1-6 and 3-6 with their ratio to it. docs/footprint.md has the figures.
#
#   cargo build --release --bin goodput
#   scripts/bench/replay-marginal.sh
#
# Env: BIN (target/release/goodput), RUNS (3), PROFILE (ramp), SEED (1).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
BIN=${BIN:-target/release/goodput}
RUNS=${RUNS:-3}
PROFILE=${PROFILE:-ramp}
SEED=${SEED:-1}
require_bin "$BIN" "cargo build --release --bin goodput"
command -v /usr/bin/time >/dev/null || { echo "missing /usr/bin/time (Debian: apt-get install time)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$BIN" simulate --out "$work/rec" --duration 6h --profile "$PROFILE" --seed "$SEED" --scrape-interval 5s >/dev/null 2>&1
cat >"$work/c.yaml" <<YAML
scrape: {interval: 5s}
evaluation_interval: 5s
windows: [1m, 6h]
slos:
  - {name: chat, ttft: 500ms, tpot: 50ms, objective: 0.99}
targets:
  - {name: sim, url: 'http://127.0.0.1:1/metrics'}
YAML
# Prefixes of the same recording (hard links): 20 min, 1 h, 3 h, 6 h of 5 s scrapes.
SIZES=(240 720 2160 4320)
ls "$work/rec/sim" | sort >"$work/files"
for n in "${SIZES[@]}"; do
  mkdir -p "$work/r$n/sim"
  awk -v n="$n" 'NR <= n' "$work/files" | while read -r f; do ln "$work/rec/sim/$f" "$work/r$n/sim/$f"; done
done
cpu() { # CPU seconds of one replay of prefix $1
  /usr/bin/time -f '%U %S' -o "$work/t" "$BIN" replay -c "$work/c.yaml" --recording "$work/r$1" >/dev/null 2>&1
  awk '{ print $1 + $2 }' "$work/t"
}
echo "# $(nproc) cores, load $(loadavg), profile $PROFILE, $RUNS runs; CPU s of replays of 20m / 1h / 3h / 6h, ms per tick"
printf '%-4s %7s %7s %7s %7s %9s %9s %9s %7s %7s\n' run 20m 1h 3h 6h tick_20m marg_1-6h marg_3-6h x_1-6h x_3-6h
for ((r = 1; r <= RUNS; r++)); do
  a=$(cpu 240) b=$(cpu 720) c=$(cpu 2160) d=$(cpu 4320)
  # A replay evaluates at every instant from the first to the last scrape: n - 1 ticks.
  awk -v a="$a" -v b="$b" -v c="$c" -v d="$d" -v r="$r" 'BEGIN {
    t = a / 239 * 1000; m = (d - b) / 3600 * 1000; m3 = (d - c) / 2160 * 1000
    printf "%-4s %7.2f %7.2f %7.2f %7.2f %9.3f %9.3f %9.3f %7.2f %7.2f\n", r, a, b, c, d, t, m, m3, m / t, m3 / t }'
done
