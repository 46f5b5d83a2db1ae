#!/usr/bin/env bash
# Footprint as an aggregator: the daemon scraping N fake vLLM targets every INTERVAL, for
# each N given. The targets come from examples/fake_targets.rs, one process, one port,
# sharing this machine's CPUs with the daemon (its CPU share is printed separately).
#
#   cargo build --release --bin goodput --example fake_targets [--example fill_state]
#   scripts/bench/aggregator.sh [N ...]          # default: 250 500 1000 2000
#   HISTORY=21900 scripts/bench/aggregator.sh N  # full windows: the daemon starts from a
#                                                # snapshot holding HISTORY seconds of the past
#
# "Keeps up" at N means, over DURATION seconds after WARMUP:
#   - every target was scraped, each at most 1.5 intervals after its previous scrape
#     (counted by the fake server, outside the daemon),
#   - llm_slo_target_up is 1 for all N and llm_slo_scrape_errors_total did not move,
#   - the report advanced on every evaluation tick (`/api/v1/report?target=t0`, polled twice
#     per interval; the whole report is ~14 KB per target).
# rss_mib is the daemon's RSS before one final GET /metrics (after the one at the start of
# the measured span), hwm_mib its peak after it; the RSS after the warm-up, before any
# GET /metrics, is printed as a comment.
#
# With HISTORY > 0, examples/fill_state writes a state_dir snapshot of the fake targets' past
# (ingested as live scrapes are) and the daemon restores it: its windows are full from the
# start. The snapshot ends where the fill began, so the daemon starts as after a restart as
# long as the fill took (printed): its first ticks take that gap's points out of every
# window, which at a day of history (a fill of 7–9 minutes) holds them past the half-interval. The snapshot is then written every SNAPSHOT (default 60s, the config's default), and
# state_max_size is raised to fit the fleet.
#
# With SLO=1 the config has one SLO (TTFT 500 ms and TPOT 50 ms for 99 %): SLO brackets,
# error budgets and the capacity book run for every target, and fill_state fills their
# history too. The daemon logs each tick (RUST_LOG=goodput::tick=debug); the tick's wall
# time over the measured span is printed as tick_med/tick_p90/tick_max (seconds) and the
# ticks logged in it against the span's intervals.
#
# With HOSTS=each every target has a loopback address of its own (127.1.x.y, the fake server
# listening on every address): the daemon keeps a connection per target, as it does for a
# fleet of real engines, where with the default HOSTS=shared the pool holds one per
# concurrent scrape (≈ 40 at 10 000 targets) to the one fake server's address.
#
# With GZIP=1 the fake server gzips a body when the scrape asks for it (goodput does unless
# scrape.gzip is off), as engines behind prometheus_client and promhttp do; by default it
# sends every body uncompressed.
#
# Env: WARMUP (s, default 30), DURATION (s, default 120), INTERVAL (s, default 5),
#      HISTORY (s, default 0), SNAPSHOT (default 60s), SLO (0 or 1, default 0), GZIP (0 or 1),
#      REQUESTS (the requests fill_state gives the request stores: none (default), tap, otlp),
#      BIN, FAKE, FILL (binaries), PORT (daemon, 19465), FAKE_PORT (19100), FAKE_THREADS (1).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh

NS=("$@"); [ ${#NS[@]} -gt 0 ] || NS=(250 500 1000 2000)
WARMUP=${WARMUP:-30}
DURATION=${DURATION:-120}
INTERVAL=${INTERVAL:-5}
BIN=${BIN:-target/release/goodput}
FAKE=${FAKE:-target/release/examples/fake_targets}
PORT=${PORT:-19465}
FAKE_PORT=${FAKE_PORT:-19100}
FAKE_THREADS=${FAKE_THREADS:-1}
HOSTS=${HOSTS:-shared}
case "$HOSTS" in
  shared) FAKE_LISTEN=127.0.0.1 ;;
  each) FAKE_LISTEN=0.0.0.0 ;;
  *) echo "HOSTS must be shared or each, not $HOSTS" >&2; exit 2 ;;
esac
HISTORY=${HISTORY:-0}
SNAPSHOT=${SNAPSHOT:-60s}
SLO=${SLO:-0}
GZIP=${GZIP:-0}
FAKE_GZIP=(); [ "$GZIP" = 1 ] && FAKE_GZIP=(--gzip)
REQUESTS=${REQUESTS:-none}
FILL=${FILL:-target/release/examples/fill_state}
require_bin "$BIN" "cargo build --release --bin goodput"
require_bin "$FAKE" "cargo build --release --example fake_targets"

# Target i's host: the fake server's one address, or one of its own (HOSTS=each).
target_host() {
  if [ "$HOSTS" = each ]; then echo "127.1.$(($1 / 250)).$(($1 % 250 + 1))"; else echo 127.0.0.1; fi
}

work=$(mktemp -d)
fake_pid=""
daemon_pid=""
cleanup() { stop_pids "$daemon_pid" "$fake_pid"; }
trap cleanup EXIT

# A realistic exposition: the simulator's last scrape after 10 busy virtual minutes.
"$BIN" simulate --out "$work/rec" --duration 10m --profile steady --seed 1 >/dev/null
template=$(ls "$work"/rec/sim/*.prom | tail -n 1)

# Of a /metrics file (read from disk: at 10 000 targets it is hundreds of MB, which a
# shell variable would hold several times over).
errors_sum() { awk '/^llm_slo_scrape_errors_total\{/ { s += $2 } END { print s + 0 }' "$1"; }
up_count() { awk '/^llm_slo_target_up\{/ && $2 == 1 { n++ } END { print n + 0 }' "$1"; }
pct() { awk -v a="$1" -v b="$2" -v t0="$3" -v t1="$4" -v hz="$CLK_TCK" 'BEGIN { printf "%.1f", (b - a) / hz / (t1 - t0) * 100 }'; }

[ "$HISTORY" -eq 0 ] || require_bin "$FILL" "cargo build --release --example fill_state"
echo "# nproc $(nproc), $(uname -sr), interval ${INTERVAL}s, warm-up ${WARMUP}s, measured ${DURATION}s, fake server threads $FAKE_THREADS, history ${HISTORY}s, slo $SLO, requests $REQUESTS, hosts $HOSTS, gzip $GZIP"
printf '%-5s %-5s %8s %8s %8s %8s %9s %6s %7s %6s %9s %9s %8s %-16s %-16s %s\n' \
  N ok cpu_pct fake_pct rss_mib hwm_mib min_scr max_gap up errors ticks report_s metrics_s load_start load_end \
  tick_med/p90/max,logged
for n in "${NS[@]}"; do
  now=$(date +%s%3N)
  anchor=$((now - HISTORY * 1000))
  rm -rf "$work/state"
  {
    echo "listen: 127.0.0.1:$PORT"
    echo "scrape: {interval: ${INTERVAL}s}"
    if [ "$HISTORY" -gt 0 ]; then
      echo "state_dir: $work/state"
      echo "state_snapshot_interval: $SNAPSHOT"
      echo "state_max_size: $((n / 1000 + 1))GiB"
    fi
    if [ "$SLO" = 1 ]; then
      echo "slos:"
      echo "  - {name: chat, ttft: 500ms, tpot: 50ms, objective: 0.99}"
    fi
    echo "targets:"
    for ((i = 0; i < n; i++)); do echo "  - {name: t$i, url: 'http://$(target_host "$i"):$FAKE_PORT/t/$i/metrics'}"; done
  } >"$work/config.yaml"
  if [ "$HISTORY" -gt 0 ]; then
    fill_t0=$(now_s)
    "$FILL" --config "$work/config.yaml" --template "$template" --anchor-unix-ms "$anchor" --to-unix-ms "$now" \
      --step-ms $((INTERVAL * 1000)) --requests "$REQUESTS"
    echo "# $n: fill_state took $(awk -v a="$fill_t0" -v b="$(now_s)" 'BEGIN { printf "%.0f", b - a }') s," \
      "snapshot $(du -sm "$work/state" | cut -f1) MiB"
  fi
  "$FAKE" --listen "$FAKE_LISTEN:$FAKE_PORT" --targets "$n" --template "$template" --threads "$FAKE_THREADS" "${FAKE_GZIP[@]}" \
    --anchor-unix-ms "$anchor" >"$work/fake.log" 2>&1 &
  fake_pid=$!
  wait_http "http://127.0.0.1:$FAKE_PORT/stats"
  if [ "$HISTORY" -gt 0 ]; then
    # The snapshot ends where fill_state began (`now`): the daemon's first ticks take the
    # points of that gap out of every window at once, as after a restart that long.
    echo "# $n: the snapshot ends $(awk -v a="$now" -v b="$(date +%s%3N)" 'BEGIN { printf "%.0f", (b - a) / 1000 }') s before the daemon starts"
  fi
  RUST_LOG=${RUST_LOG:-info,goodput::tick=debug} "$BIN" run --config "$work/config.yaml" >"$work/daemon.log" 2>&1 &
  daemon_pid=$!
  wait_http "http://127.0.0.1:$PORT/healthz" 600
  sleep "$WARMUP"

  # The ticks since the start (the restore, then the warm-up): how long each waited for its
  # evaluations. After a restore without the windows' saved state, the first ticks wait
  # out their half-interval while every store is read once.
  tick_evaluated <"$work/daemon.log" | awk -v half="$(awk -v i="$INTERVAL" 'BEGIN { print i / 2 }')" -v n="$n" '
    { k++; if ($1 > max) max = $1; if ($1 >= half * 0.98) waited++; if (k <= 12) first = first sprintf(" %.2f", $1) }
    END { printf "# %s: ticks in the warm-up: %d, evaluation wait longest %.2f s, %d waited out the half-interval; the first ones (s):%s\n", n, k, max, waited + 0, first }'
  # Without a history there is no restore to show (and grep finding nothing is no error).
  { grep -a 'restore' "$work/daemon.log" || true; } | { grep -av 'tick' || true; } | head -n 3 | cut -c1-400 | sed "s/^/# $n: /"
  # The RSS before any /metrics is rendered: rendering one keeps buffers the allocator
  # may hold on to, in the rss_mib read at the end.
  echo "# $n: RSS after the warm-up, before any GET /metrics: $(mib "$(status_kb "$daemon_pid" VmRSS)") MiB"
  curl -fsS -o "$work/m0" --max-time 120 "http://127.0.0.1:$PORT/metrics"
  curl -fsS -o /dev/null "http://127.0.0.1:$FAKE_PORT/stats/reset"
  load_start=$(loadavg | tr ' ' /)
  t0=$(now_s); d0=$(cpu_ticks "$daemon_pid"); f0=$(cpu_ticks "$fake_pid")
  log0=$(wc -l <"$work/daemon.log")
  # Poll the report twice per interval: every tick's t_ms is seen at least once.
  : >"$work/ticks"; : >"$work/report_s"
  end=$(awk -v t="$t0" -v d="$DURATION" 'BEGIN { printf "%d", t + d }')
  while [ "$(date +%s)" -lt "$end" ]; do
    if curl -fsS -o "$work/report.json" -w '%{time_total}\n' --max-time "$INTERVAL" \
      "http://127.0.0.1:$PORT/api/v1/report?target=t0" >>"$work/report_s"; then
      grep -o '"t_ms":[0-9]*' "$work/report.json" | head -n 1 | cut -d: -f2 >>"$work/ticks" || true
    fi
    sleep "$(awk -v i="$INTERVAL" 'BEGIN { print i / 2 }')"
  done
  t1=$(now_s); d1=$(cpu_ticks "$daemon_pid"); f1=$(cpu_ticks "$fake_pid")
  load_end=$(loadavg | tr ' ' /)
  # Each tick's wall time: its evaluation, enriching and publishing (the log's durations).
  tail -n +"$((log0 + 1))" "$work/daemon.log" | tick_seconds >"$work/tick_s"
  tick_stats=$(sort -g "$work/tick_s" | awk -v want="$(awk -v d="$DURATION" -v i="$INTERVAL" 'BEGIN { printf "%d", d / i }')" '
    { v[NR] = $1 } END { if (NR == 0) { print "none"; exit }
      printf "%.2f/%.2f/%.2f,%d/%d", v[int((NR + 1) / 2)], v[int(NR * 0.9 + 0.999)], v[NR], NR, want }')
  stats=$(curl -fsS "http://127.0.0.1:$FAKE_PORT/stats")
  # RSS before /metrics is rendered (rendering it builds the whole exposition in memory).
  rss=$(status_kb "$daemon_pid" VmRSS)
  # Large fleets render a /metrics of ~70 KB per target; give it time, and count a failure.
  metrics_s=$(curl -fsS -o "$work/m1" -w '%{time_total}' --max-time 60 "http://127.0.0.1:$PORT/metrics") \
    || { metrics_s=failed; : >"$work/m1"; }
  hwm=$(status_kb "$daemon_pid" VmHWM)

  min_scr=$(awk '$1 == "min_count" { print $2 }' <<<"$stats")
  never=$(awk '$1 == "never_scraped" { print $2 }' <<<"$stats")
  max_gap=$(awk '$1 == "max_gap_ms" { print $2 }' <<<"$stats")
  up=$(up_count "$work/m1")
  errors=$(($(errors_sum "$work/m1") - $(errors_sum "$work/m0")))
  ticks=$(sort -u "$work/ticks" | grep -c . || true)
  want_ticks=$(awk -v d="$DURATION" -v i="$INTERVAL" 'BEGIN { printf "%d", d / i - 1 }')
  want_scr=$(awk -v d="$DURATION" -v i="$INTERVAL" 'BEGIN { printf "%d", d / i - 1 }')
  ok=yes
  if [ "$never" != 0 ] || [ "$min_scr" -lt "$want_scr" ] || [ "$max_gap" -gt $((INTERVAL * 1500)) ] \
    || [ "$up" -ne "$n" ] || [ "$errors" -ne 0 ] || [ "$ticks" -lt "$want_ticks" ]; then
    ok=no
  fi
  report_s=$(median <"$work/report_s")
  printf '%-5s %-5s %8s %8s %8s %8s %9s %6s %7s %6s %9s %9s %8s %-16s %-16s %s\n' "$n" "$ok" \
    "$(pct "$d0" "$d1" "$t0" "$t1")" "$(pct "$f0" "$f1" "$t0" "$t1")" \
    "$(mib "$rss")" "$(mib "$hwm")" "$min_scr/$want_scr" "$max_gap" "$up/$n" "$errors" \
    "$ticks/$want_ticks" "$report_s" "$metrics_s" "$load_start" "$load_end" "$tick_stats"
  stop_pids "$daemon_pid" "$fake_pid"; daemon_pid=""; fake_pid=""
done
rm -rf "$work"
