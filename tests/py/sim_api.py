"""Drives the simulator's OpenAI API with the official `openai` SDK (tests/it/sim_api.rs).

Usage: sim_api.py BASE_URL SCENARIO. Prints one JSON object: what the client saw, with
monotonic timestamps, for the Rust test to compare with the ground truth and /metrics.
"""

import json
import sys
import time

import openai

BASE, SCENARIO = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=BASE, api_key="unused", max_retries=0, timeout=60)
MODEL = client.models.list().data[0].id
MESSAGES = [{"role": "user", "content": "Tell me about continuous batching, please."}]


def stream(kind, rid, **kw):
    """One streaming request: chunk arrival times, text, usage, finish reason."""
    t0 = time.monotonic()
    headers = {"X-Request-Id": rid}
    if kind == "chat":
        s = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True, extra_headers=headers, **kw)
    else:
        s = client.completions.create(model=MODEL, prompt="Once upon a time", stream=True, extra_headers=headers, **kw)
    out = {"kind": kind, "rid": rid, "id": None, "events": [], "usage": None, "usages": [], "finish": None}
    for c in s:
        now = time.monotonic() - t0
        out["id"] = c.id
        if c.usage is not None:
            out["usages"].append(c.usage.completion_tokens)
        if not c.choices:
            out["usage"] = c.usage.model_dump()
            continue
        ch = c.choices[0]
        text = ch.delta.content if kind == "chat" else ch.text
        if text:
            out["events"].append([now, len(text.split())])
        if ch.finish_reason:
            out["finish"] = ch.finish_reason
    return out


def full(kind, rid, **kw):
    headers = {"X-Request-Id": rid}
    if kind == "chat":
        r = client.chat.completions.create(model=MODEL, messages=MESSAGES, extra_headers=headers, **kw)
        text = r.choices[0].message.content
    else:
        r = client.completions.create(model=MODEL, prompt="Once upon a time", extra_headers=headers, **kw)
        text = r.choices[0].text
    return {"kind": kind, "rid": rid, "id": r.id, "words": len(text.split()), "usage": r.usage.model_dump(),
            "finish": r.choices[0].finish_reason}


def basic():
    usage = {"include_usage": True}
    runs = [
        stream("chat", "s-chat", max_tokens=60, stream_options=usage),
        stream("completion", "s-cmpl", max_tokens=40, stream_options={**usage, "continuous_usage_stats": True}),
        stream("chat", "s-nousage", max_tokens=20),
        stream("chat", "s-eos", max_tokens=33, stream_options=usage, extra_body={"ignore_eos": True}),
        stream("chat", "s-free", max_tokens=3000, stream_options=usage),
        full("chat", "f-chat", max_tokens=50),
        full("completion", "f-cmpl", max_tokens=25, extra_body={"ignore_eos": True}),
    ]
    try:
        client.chat.completions.create(model="no-such-model", messages=MESSAGES)
        missing = None
    except openai.NotFoundError as e:
        missing = {"status": e.status_code, "type": e.body.get("type") if isinstance(e.body, dict) else None}
    return {"runs": runs, "missing": missing}


def disconnect():
    """Reads a few chunks of a long stream, then hangs up."""
    s = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True, max_tokens=3000,
                                       extra_body={"ignore_eos": True}, extra_headers={"X-Request-Id": "gone"})
    seen = 0
    for c in s:
        if c.choices and c.choices[0].delta.content:
            seen += len(c.choices[0].delta.content.split())
        if seen >= 5:
            break
    s.close()
    return {"rid": "gone", "seen": seen}


def faults():
    """Many requests under injected faults: how each one failed, as the SDK reports it."""
    out = []
    for i in range(24):
        rid = f"fault-{i}"
        rec = {"rid": rid, "error": None, "status": None, "words": 0, "done": False}
        try:
            s = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True, max_tokens=12,
                                               extra_headers={"X-Request-Id": rid})
            for c in s:
                if c.choices and c.choices[0].delta.content:
                    rec["words"] += len(c.choices[0].delta.content.split())
            rec["done"] = True
        except openai.APIStatusError as e:
            rec["error"], rec["status"] = type(e).__name__, e.status_code
        except openai.APIConnectionError as e:
            rec["error"] = type(e).__name__
        except openai.APIError as e:
            rec["error"] = "APIError"
            rec["body"] = e.body
        except Exception as e:  # noqa: BLE001 - the connection drop surfaces as httpx's own error
            rec["error"] = type(e).__name__
        out.append(rec)
    return {"runs": out}


print(json.dumps({"basic": basic, "disconnect": disconnect, "faults": faults}[SCENARIO]()))
