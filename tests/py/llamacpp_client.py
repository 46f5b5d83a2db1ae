"""The official `openai` client's own view of each request, for tests/it/llamacpp_real.rs.

usage: llamacpp_client.py BASE_URL SPEC_JSON

SPEC_JSON: {"seed": int, "parallel": [n_requests, n_threads], "sequential": n_requests,
            "max_tokens": [lo, hi], "slos": {name: {"ttft": s, "tpot": s, "e2e": s}}}

Sends `parallel[0]` streaming chat completions from `parallel[1]` threads sharing one client,
then `sequential` back to back from one client (each reusing its keep-alive connection), all
with `ignore_eos` so that each generates exactly its `max_tokens`. For every request it times,
as the tap defines them (docs/request-path.md): TTFT from when the client's HTTP library sends
the request (its request hook, after the SDK built it) to the first chunk with content, TPOT as (last content chunk - first) / (N - 1) with N the
final `usage.completion_tokens`, E2E to the end of the stream, and keeps the response's `id`,
which the tap records too. Then it judges each request
against each SLO (good: completed, and every clause within its limit) and prints one JSON
object: {"requests": [...], "good": {slo: count}, "errors": [...]}.
"""

import json
import random
import sys
import threading
import time

import httpx
import openai

WORDS = "the a model token engine request queue slot cache batch stream latency".split()

# When this thread's client last sent a request: httpx calls the hook just before sending.
sent = threading.local()


def mark_sent(_request):
    sent.at = time.perf_counter()


def new_client(base):
    http = httpx.Client(event_hooks={"request": [mark_sent]}, timeout=60)
    return openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0, http_client=http)


def one(client, rng_state, max_tokens):
    rng = random.Random(rng_state)
    # Prompts of 4 to 800 words spread the prefill times, and with them TTFT, over a hundred ms
    # or more: wide enough that the ms the client adds to what the tap sees shifts few verdicts.
    prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 800)))
    sent.at = None
    first = last = None
    usage = ident = None
    try:
        stream = client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": prompt}],
            max_tokens=max_tokens,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
        t0 = sent.at
        for chunk in stream:
            now = time.perf_counter()
            ident = ident or chunk.id
            if chunk.choices and chunk.choices[0].delta.content:
                first = first if first is not None else now
                last = now
            if chunk.usage is not None:
                usage = chunk.usage.completion_tokens
        end = time.perf_counter()
    except Exception as e:  # the verdict of a failed request is "bad"; say why
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    if first is None or usage is None:
        return {"ok": False, "error": f"no content or no usage (usage {usage})"}
    tpot = (last - first) / (usage - 1) if usage > 1 else None
    return {"ok": True, "id": ident, "n": usage, "ttft": first - t0, "tpot": tpot, "e2e": end - t0}


def good(r, slo):
    if not r["ok"]:
        return False
    for clause in ("ttft", "tpot", "e2e"):
        limit = slo.get(clause)
        if limit is None:
            continue
        v = r[clause]
        # Without two tokens there is no TPOT to judge: the clause holds, as in the store.
        if v is not None and v > limit:
            return False
    return True


def main(base, spec):
    # A thread that has read a chunk waits for the interpreter before it can time it: at most
    # 0.5 ms rather than the default 5 ms, which would sit inside every parallel request's TTFT.
    sys.setswitchinterval(0.0005)
    rng = random.Random(spec["seed"])
    lo, hi = spec["max_tokens"]
    n_par, threads = spec["parallel"]
    jobs = [(rng.random(), rng.randint(lo, hi)) for _ in range(n_par + spec["sequential"])]
    results = [None] * len(jobs)

    shared = new_client(base)
    next_job = iter(range(n_par))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = next(next_job, None)
            if i is None:
                return
            results[i] = one(shared, *jobs[i])

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()

    single = new_client(base)
    for i in range(n_par, len(jobs)):
        results[i] = one(single, *jobs[i])

    out = {
        "requests": results,
        "good": {name: sum(good(r, slo) for r in results) for name, slo in spec["slos"].items()},
        "errors": [r["error"] for r in results if not r["ok"]],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], json.loads(sys.argv[2]))
