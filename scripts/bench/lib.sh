# Helpers shared by the footprint benchmarks (sourced, not run). Loopback only, bounded loops.

CLK_TCK=$(getconf CLK_TCK)

# utime+stime of a process, in clock ticks (proc(5) fields 14 and 15, counted after the ')').
cpu_ticks() {
  awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

# A field of /proc/PID/status in kB (VmHWM = peak RSS, VmRSS = current RSS).
status_kb() {
  awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"
}

# kB as MiB, one decimal.
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

# Waits up to $2 seconds (default 30) for a URL to answer 200; fails otherwise.
wait_http() {
  local i
  for ((i = 0; i < ${2:-30} * 10; i++)); do
    curl -fsS -o /dev/null --max-time 1 "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "no answer from $1 after ${2:-30}s" >&2
  return 1
}

# Median of numbers on stdin, one per line.
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# Seconds since the epoch with nanoseconds, for CPU-share denominators.
now_s() { date +%s.%N; }

# Stops the processes whose PIDs are given, waiting at most 5 s for each.
stop_pids() {
  local p i
  for p in "$@"; do
    [ -n "$p" ] && kill "$p" 2>/dev/null
  done
  for p in "$@"; do
    [ -z "$p" ] && continue
    for ((i = 0; i < 50; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
}

require_bin() {
  if [ ! -x "$1" ]; then
    echo "missing $1; build it first: $2" >&2
    exit 2
  fi
}

# Per `goodput::tick` debug line on stdin, the sum of the named durations in seconds, one
# line per tick; durations as Rust's Debug writes them (1.2s, 350ms, 80µs, 12ns).
tick_sum() {
  grep -a 'goodput::tick: tick ' | awk -v fields="$*" '
    BEGIN { n = split(fields, f, " "); for (i = 1; i <= n; i++) want[f[i]] = 1 }
    function secs(v) {
      if (v ~ /ms$/) return substr(v, 1, length(v) - 2) / 1e3
      if (v ~ /µs$/) return substr(v, 1, length(v) - 3) / 1e6
      if (v ~ /us$/) return substr(v, 1, length(v) - 2) / 1e6
      if (v ~ /ns$/) return substr(v, 1, length(v) - 2) / 1e9
      if (v ~ /s$/) return substr(v, 1, length(v) - 1) + 0
      return 0
    }
    { t = 0
      for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] in want) t += secs(kv[2]) }
      print t }'
}

# Seconds each tick took: its evaluation, enriching and publishing.
tick_seconds() { tick_sum evaluated enriched published; }

# Each tick's evaluation wait: a tick whose targets are not all evaluated waits half an
# interval and reports the rest as they were.
tick_evaluated() { tick_sum evaluated; }
