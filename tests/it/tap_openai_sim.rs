//! The whole request path with real parts: the official `openai` Python SDK sends streaming
//! chat and completions (and a non-streaming request) through the tap to the simulator's
//! OpenAI API, and the tap's records agree with the simulator's own per-request truth: the
//! same requests, the same output token counts, a TTFT no shorter than the engine's (the
//! client-side time the engine cannot see is all the difference allowed), and the same TPOT.

use crate::tap_common;
use crate::tools;

use std::time::Duration;

use goodput::request::{RequestRecord, Status};
use goodput_sim::config::{Profile, SimConfig};
use goodput_sim::live;
use tap_common::TapUnder;

const SCRIPT: &str = r#"
import json, sys, openai
c = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="sk-test", max_retries=0, timeout=60)
model = sys.argv[2]
out = []
msgs = [{"role": "user", "content": "tell me about the weather " * 8}]
for i in range(3):
    s = c.chat.completions.create(model=model, messages=msgs, stream=True, max_tokens=24,
                                  extra_body={"ignore_eos": True},
                                  extra_headers={"X-Request-Id": f"chat-{i}"})
    out.append(["chat-%d" % i, "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices)])
s = c.completions.create(model=model, prompt="the weather is", stream=True, max_tokens=16,
                         stream_options={"include_usage": True}, extra_body={"ignore_eos": True},
                         extra_headers={"X-Request-Id": "completion"})
text, usage = "", None
for ch in s:
    if ch.choices:
        text += ch.choices[0].text
    if ch.usage:
        usage = ch.usage.completion_tokens
out.append(["completion", text, usage])
r = c.chat.completions.create(model=model, messages=msgs, max_tokens=8, extra_body={"ignore_eos": True},
                              extra_headers={"X-Request-Id": "plain"})
out.append(["plain", r.choices[0].message.content, r.usage.completion_tokens])
print(json.dumps(out))
"#;

/// The truth file's lines for client requests, by the `X-Request-Id` the client sent (the
/// truth names the response id, which vLLM builds as `chatcmpl-<id>` or `cmpl-<id>`).
fn truth(path: &std::path::Path) -> std::collections::BTreeMap<String, serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter_map(|v| {
            let id = v["request_id"].as_str()?;
            let id = id.strip_prefix("chatcmpl-").or_else(|| id.strip_prefix("cmpl-")).unwrap_or(id);
            Some((id.to_string(), v))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_openai_sdk_through_the_tap_to_the_simulator_agrees_with_its_truth() {
    let Some(python) = tools::python_clients() else { return };
    let dir = tempfile::tempdir().unwrap();
    let truth_path = dir.path().join("requests.jsonl");
    let cfg = SimConfig::profile(Profile::None);
    let model = cfg.model.clone();
    let opts = live::Options { truth: Some(truth_path.clone()), ..live::Options::speed(1.0) };
    let sim = live::serve_with(cfg, "127.0.0.1:0".parse().unwrap(), opts).await.unwrap();
    let tap = TapUnder::start(&format!("http://{}", sim.addr), false).await;

    let base = format!("http://{}", tap.addr);
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python).arg("-c").arg(SCRIPT).arg(base).arg(model).output().unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "the SDK script failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let got: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();

    let records: Vec<RequestRecord> = tap.records(5).await;
    // The truth line is written when the engine finishes; give the last one a moment.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let truth = truth(&truth_path);
    assert_eq!(records.len(), 5, "{records:#?}");
    assert_eq!(truth.len(), 5, "{truth:#?}");
    assert!(records.iter().all(|r| r.status == Status::Ok), "{records:#?}");

    // What the SDK received is what the engine generated: one filler word per token.
    for g in &got {
        let id = g[0].as_str().unwrap();
        let words = g[1].as_str().unwrap().split_whitespace().count() as u64;
        assert_eq!(truth[id]["output_tokens"].as_u64(), Some(words), "{id}: {g}");
        if let Some(usage) = g.get(2) {
            assert_eq!(usage.as_u64(), Some(words), "{id}: usage");
        }
    }

    // The records carry no id, so they are matched to the truth by their output length and
    // TTFT order; each streaming record's TTFT is the engine's plus client-side time.
    let mut streamed: Vec<&RequestRecord> = records.iter().filter(|r| r.ttft_s.is_some()).collect();
    assert_eq!(streamed.len(), 4, "the non-streaming request has no TTFT: {records:#?}");
    streamed.sort_by(|a, b| a.finished_unix.total_cmp(&b.finished_unix));
    let order = ["chat-0", "chat-1", "chat-2", "completion"];
    for (r, id) in streamed.iter().zip(order) {
        let t = &truth[id];
        let n = r.output_tokens.expect("a token count");
        assert_eq!(u64::from(n.value), t["output_tokens"].as_u64().unwrap(), "{id}: {r:?}");
        // Chat without usage is counted event by event; the simulator sends one token per
        // event, so the count is right, but only the usage makes it exact.
        assert_eq!(n.exact, id == "completion", "{id}: {r:?}");
        let (tap_ttft, engine_ttft) = (r.ttft_s.unwrap(), t["ttft_s"].as_f64().unwrap());
        assert!(tap_ttft >= engine_ttft - 0.002, "{id}: tap TTFT {tap_ttft} < engine's {engine_ttft}");
        // About 2 ms on an idle loopback; the bound leaves room for a loaded CI machine.
        assert!(tap_ttft - engine_ttft < 0.1, "{id}: {:.1} ms outside the engine", (tap_ttft - engine_ttft) * 1e3);
        let (tap_tpot, engine_tpot) = (r.tpot_s.unwrap(), t["tpot_s"].as_f64().unwrap());
        assert!((tap_tpot - engine_tpot).abs() < 0.1 * engine_tpot + 0.001, "{id}: TPOT {tap_tpot} vs {engine_tpot}");
    }
    let plain = records.iter().find(|r| r.ttft_s.is_none()).unwrap();
    assert_eq!(plain.output_tokens.map(|n| (n.value, n.exact)), Some((8, true)), "usage of the JSON response");
    assert!(plain.tpot_s.is_none());

    tap.stop().await;
    sim.shutdown().await;
}
