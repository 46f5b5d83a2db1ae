//! The official `openai` Python SDK through the tap: streaming chat and completions (with
//! and without usage), non-streaming, and a stream the client closes early. What the SDK
//! hands its caller must be the same directly, through the tap, and through a tap that
//! injects `include_usage`; and the tap's records must say what happened.

use crate::tap_common;
use crate::tools;

use std::path::Path;

use goodput::request::{Status, TokenCount};
use tap_common::engines::{self, Timing};
use tap_common::{TapUnder, Upstream};

const SCRIPT: &str = r#"
import json, sys, openai
c = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="sk-test", max_retries=0, timeout=30)
msgs = [{"role": "user", "content": "hi"}]
out = {}
s = c.chat.completions.create(model="llama", messages=msgs, stream=True)
out["chat_stream"] = "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices)
s = c.completions.create(model="llama", prompt="hi", stream=True, max_tokens=6)
out["completion_stream"] = "".join(ch.choices[0].text for ch in s if ch.choices)
s = c.chat.completions.create(model="llama", messages=msgs, stream=True, stream_options={"include_usage": True})
text, usage = "", None
for ch in s:
    if ch.choices:
        text += ch.choices[0].delta.content or ""
    if ch.usage:
        usage = ch.usage.completion_tokens
out["chat_stream_usage"] = [text, usage]
r = c.chat.completions.create(model="llama", messages=msgs)
out["chat"] = [r.choices[0].message.content, r.usage.completion_tokens]
r = c.completions.create(model="llama", prompt="hi", max_tokens=6)
out["completion"] = [r.choices[0].text, r.usage.completion_tokens]
s = c.chat.completions.create(model="llama", messages=msgs, stream=True)
it = iter(s)
out["first_of_closed"] = [next(it).choices[0].delta.role, next(it).choices[0].delta.content]
s.close()
print(json.dumps(out, sort_keys=True))
"#;

/// Runs the script against `base` and returns what the SDK received.
async fn sdk(python: &Path, base: String) -> serde_json::Value {
    let python = python.to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python).arg("-c").arg(SCRIPT).arg(base).output().expect("run python")
    })
    .await
    .unwrap();
    assert!(out.status.success(), "the SDK script failed:\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the script prints JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_openai_sdk_receives_the_same_through_the_tap_and_the_records_are_right() {
    let Some(python) = tools::python_clients() else { return };
    // The closed stream must still be running when the SDK closes it: 60 ms between tokens.
    let up = Upstream::start(|s| engines::vllm(s, Timing { ttft: 20, itl: 60 })).await;
    let direct = sdk(&python, format!("http://{}", up.addr)).await;
    let text = engines::text();
    let expected = serde_json::json!({
        "chat_stream": text, "completion_stream": text, "chat_stream_usage": [text, 6],
        "chat": [text, 6], "completion": [text, 6], "first_of_closed": ["assistant", "Hel"],
    });
    assert_eq!(direct, expected, "the scripted engine answers the SDK as designed");

    for inject in [false, true] {
        let tap = TapUnder::start(&format!("http://{}", up.addr), inject).await;
        let through = sdk(&python, format!("http://{}", tap.addr)).await;
        assert_eq!(through, direct, "inject_usage={inject}: the SDK received something else through the tap");
        let records = tap.records(6).await;
        let statuses: Vec<Status> = records.iter().map(|r| r.status).collect();
        assert_eq!(statuses, [[Status::Ok; 5].as_slice(), &[Status::ClientAbort]].concat(), "inject_usage={inject}");
        let n = |i: usize| records[i].output_tokens;
        let six = |exact| Some(TokenCount { value: 6, exact });
        assert_eq!(n(0), six(inject), "chat stream without usage: a lower bound unless the tap asked for usage");
        assert_eq!(n(1), six(inject), "completions stream");
        assert_eq!((n(2), n(3), n(4)), (six(true), six(true), six(true)));
        assert!(records.iter().all(|r| r.model == "llama" && r.target == "engine"));
        assert!(records[..3].iter().all(|r| r.ttft_s.is_some() && r.tpot_s.is_some()));
        assert!(records[3..5].iter().all(|r| r.ttft_s.is_none()), "non-streaming has no TTFT");
        assert!(records[5].ttft_s.is_some(), "the closed stream had its first token");
        assert_eq!(tap.stats.fault_count(), 0);
        tap.stop().await;
    }
}
