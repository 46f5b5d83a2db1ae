#!/usr/bin/env bash
# Instructions a streaming request costs each proxy in front of the same upstream, counted
# by callgrind (exact, and unmoved by other load on the machine, unlike the wall-clock
# figures of `cargo bench --bench tap`): the real daemon's tap, nginx when it is on PATH,
# and the tap bench's two floors, the plainest hyper proxy and a tokio byte relay
# (benches/tap/proxies.rs); the tap twice, on the measured chat route and on a route it
# forwards without measuring (its proxying alone). Each proxy runs alone under valgrind; after WARM requests its
# counters are zeroed, N more requests go through it on one kept connection, and the
# instructions its process ran meanwhile (every thread, the daemon's own scrapes and
# evaluation included) are divided by N. docs/benchmarks.md has the figures.
#
#   cargo bench --bench tap --no-run     # builds target/release/goodput and the bench
#   scripts/bench/tap-instructions.sh
#
# Needs valgrind and python3 (Debian: apt-get install valgrind python3 curl); nginx is optional.
# Env: BIN (target/release/goodput), BENCH (the newest target/release/deps/tap-*),
# N (300), WARM (50).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
BIN=${BIN:-target/release/goodput}
BENCH=${BENCH:-$(ls -t target/release/deps/tap-* 2>/dev/null | grep -v '\.d$' | head -1 || true)}
BENCH=${BENCH:-target/release/deps/tap-*}
N=${N:-300}
WARM=${WARM:-50}
require_bin "$BIN" "cargo bench --bench tap --no-run"
require_bin "$BENCH" "cargo bench --bench tap --no-run"
for tool in valgrind callgrind_control python3 curl; do
  command -v "$tool" >/dev/null || { echo "missing $tool (Debian: apt-get install valgrind python3 curl)" >&2; exit 2; }
done

work=$(mktemp -d)
pids=()
cleanup() {
  stop_pids "${pids[@]}"
  rm -rf "$work"
}
trap cleanup EXIT

# The upstream: the tap bench's stream of one token (role event, token event, usage and
# [DONE]), chunked, each event written as its own chunk.
cat >"$work/upstream.py" <<'PY'
import http.server, json, sys
BASE = {"id": "chatcmpl-b", "object": "chat.completion.chunk", "created": 1, "model": "m"}
def event(d):
    return ("data: " + json.dumps(d, separators=(",", ":")) + "\n\n").encode()
class Engine(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_GET(self):
        body = b'vllm:num_requests_running{model_name="m",engine="0"} 0\n'
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        def chunk(b):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
            self.wfile.flush()
        choice = lambda delta: [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]
        chunk(event({**BASE, "choices": choice({"role": "assistant", "content": ""})}))
        chunk(event({**BASE, "choices": choice({"content": "tok"})}))
        usage = {"prompt_tokens": 4, "completion_tokens": 1, "total_tokens": 5}
        chunk(event({**BASE, "choices": [], "usage": usage}) + b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Engine).serve_forever()
PY

# The client: N streaming requests, one after another, on one kept connection.
cat >"$work/client.py" <<'PY'
import http.client, sys
port, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
body = '{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}'
for _ in range(n):
    conn.request("POST", path, body, {"content-type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200 or b"[DONE]" not in data:
        sys.exit(f"unexpected answer: {r.status} {data[:200]!r}")
PY

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

up=$(free_port)
python3 "$work/upstream.py" "$up" &
pids+=($!)
wait_http "http://127.0.0.1:$up/metrics"

# One proxy under callgrind: $1 its name, $2 its port, $3 the path the client posts to,
# the rest its command line.
count() {
  local name=$1 port=$2 path=$3
  shift 3
  valgrind --tool=callgrind --callgrind-out-file="$work/$name.%p" "$@" >"$work/$name.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  # Every proxy here passes a GET on to the upstream, which answers it; valgrind starts slowly.
  wait_http "http://127.0.0.1:$port/metrics" 60
  python3 "$work/client.py" "$port" "$WARM" "$path"
  callgrind_control -z "$pid" >/dev/null 2>&1
  python3 "$work/client.py" "$port" "$N" "$path"
  callgrind_control -d "$pid" >/dev/null 2>&1
  local dump="$work/$name.$pid.1" i=0
  while [ ! -s "$dump" ] && ((i++ < 100)); do sleep 0.1; done
  stop_pids "$pid"
  awk -v name="$name" -v n="$N" '/^summary:/ { printf "%-13s %7.0f instructions per request\n", name, $2 / n }' "$dump"
}

echo "instructions per streaming request, $N requests after $WARM, one kept connection ($(date -u +%FT%TZ))"

port=$(free_port)
cat >"$work/goodput.yaml" <<YAML
listen: 127.0.0.1:$(free_port)
targets:
  - name: bench
    url: http://127.0.0.1:$up/metrics
    tap: {listen: '127.0.0.1:$port', upstream: 'http://127.0.0.1:$up'}
YAML
count tap "$port" /v1/chat/completions "$BIN" run --config "$work/goodput.yaml"
# The same stream on a route the tap forwards without measuring it: the tap's proxying alone.
port2=$(free_port)
sed "s/127.0.0.1:$port'/127.0.0.1:$port2'/" "$work/goodput.yaml" >"$work/unmeasured.yaml"
count tap-unmeasured "$port2" /v1/embeddings "$BIN" run --config "$work/unmeasured.yaml"

if command -v nginx >/dev/null; then
  port=$(free_port)
  mkdir "$work/nginx"
  sed -e "s|@DIR@|$work/nginx|g" -e "s|@UPSTREAM@|127.0.0.1:$up|" -e "s|@PORT@|$port|" \
    benches/tap/nginx.conf >"$work/nginx/nginx.conf"
  count nginx "$port" /v1/chat/completions nginx -p "$work/nginx" -c "$work/nginx/nginx.conf"
else
  echo "nginx  (not on PATH: Debian apt-get install nginx-light)"
fi

for floor in hyper relay; do
  port=$(free_port)
  # valgrind follows no exec: the variable goes to it, and so to the bench binary.
  export GOODPUT_TAP_BENCH_SERVE=$floor
  count "$floor" "$port" /v1/chat/completions "$BENCH" "127.0.0.1:$port" "127.0.0.1:$up"
done
