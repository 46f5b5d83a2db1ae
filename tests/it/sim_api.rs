//! The simulator's OpenAI API driven by the official `openai` Python SDK: token counts equal
//! `usage` and the ground truth, chunks arrive paced by the engine's steps, /metrics moves
//! by exactly the client requests under `--profile none`, a client that hangs up aborts its
//! request in the engine, and injected faults reach the SDK as errors.

use crate::sim_api_common;
use crate::sim_common;
use crate::tools;

use std::collections::HashMap;

use serde_json::Value;
use sim_api_common::{f, python, quiet, start, truth_for, u};
use sim_common::Parsed;

async fn scrape(h: &goodput_sim::live::LiveHandle) -> Parsed {
    let (status, _, body) = sim_api_common::http(h.addr, "GET", "/metrics", "", &[]).await;
    assert_eq!(status, 200);
    Parsed::new(&body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_token_counts_timing_and_metrics_match_the_truth() {
    let Some(py) = tools::python_clients() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, truth) = start(quiet(), dir.path(), None).await;
    let before = scrape(&h).await;
    assert_eq!(before.sum("vllm:request_success_total", &[]), 0.0, "no load of its own");

    let out = python(&py, &h, "basic").await;
    assert_eq!(out["missing"]["status"], 404, "an unknown model is vLLM's 404: {}", out["missing"]);
    assert_eq!(out["missing"]["type"], "NotFoundError");
    let runs = out["runs"].as_array().expect("runs");
    let (mut prompt_sum, mut output_sum) = (0, 0);
    for r in runs {
        let id = r["id"].as_str().expect("response id");
        assert!(id.ends_with(r["rid"].as_str().expect("rid")), "X-Request-Id is the id's base: {id}");
        let t = truth_for(&truth, id).await;
        let streamed = r.get("events").is_some();
        let words = if streamed {
            r["events"].as_array().expect("events").iter().map(|e| e[1].as_u64().expect("n")).sum()
        } else {
            u(r, "words")
        };
        assert_eq!(t["source"], "client");
        assert_eq!(t["finish_reason"], r["finish"], "{id}");
        assert_eq!(words, u(&t, "output_tokens"), "{id}: tokens the client got = the engine's");
        if r["rid"] == "s-nousage" {
            assert!(r["usage"].is_null() && r["usages"].as_array().expect("list").is_empty(), "no usage unasked");
        } else {
            assert_eq!(u(&r["usage"], "completion_tokens"), words, "{id}: usage = tokens received");
            assert_eq!(u(&r["usage"], "prompt_tokens"), u(&t, "prompt_tokens"), "{id}");
        }
        if r["rid"] == "s-cmpl" {
            let usages: Vec<u64> = r["usages"].as_array().expect("list").iter().filter_map(Value::as_u64).collect();
            assert_eq!(usages.len() as u64, words + 1, "continuous usage on every chunk, plus the final one");
            assert!(usages.windows(2).all(|w| w[0] <= w[1]) && usages.last() == Some(&words), "{usages:?}");
        }
        if matches!(r["rid"].as_str(), Some("s-eos" | "f-cmpl")) {
            assert_eq!(t["finish_reason"], "length", "ignore_eos runs to max_tokens");
        }
        prompt_sum += u(&t, "prompt_tokens");
        output_sum += u(&t, "output_tokens");
        if streamed && words >= 20 {
            // Real time: the first token comes when the engine made it, and the stream is
            // spread over the decode time rather than written at the end.
            let events = r["events"].as_array().expect("events");
            let first = events[0][0].as_f64().expect("t");
            let last = events[events.len() - 1][0].as_f64().expect("t");
            let (ttft, decode) = (f(&t, "ttft_s"), f(&t, "decode_s"));
            assert!(first >= ttft - 0.005 && first < ttft + 0.5, "{id}: client TTFT {first} vs engine {ttft}");
            assert!(
                last - first > 0.5 * decode && last - first < decode + 0.5,
                "{id}: spread {} vs decode {decode}",
                last - first
            );
        }
    }
    let stop = runs.iter().filter(|r| r["finish"] == "stop").count();
    assert!(stop >= 1, "below a large cap the workload distribution decides where output stops");
    let after = scrape(&h).await;
    assert_eq!(after.sum("vllm:request_success_total", &[]), runs.len() as f64, "one per client request, no more");
    assert_eq!(after.sum("vllm:prompt_tokens_total", &[]), prompt_sum as f64);
    assert_eq!(after.sum("vllm:generation_tokens_total", &[]), output_sum as f64);
    let length = runs.iter().filter(|r| r["finish"] == "length").count();
    assert_eq!(after.sum("vllm:request_success_total", &[("finished_reason", "length")]), length as f64);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_aborts_its_request_in_the_engine() {
    let Some(py) = tools::python_clients() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, truth) = start(quiet(), dir.path(), None).await;
    let out = python(&py, &h, "disconnect").await;
    let seen = u(&out, "seen");
    let t = truth_for(&truth, "chatcmpl-gone").await;
    assert_eq!(t["finish_reason"], "abort");
    let made = u(&t, "output_tokens");
    assert!(made >= seen && made < 200, "aborted soon after the client left: {made} tokens, {seen} seen of 3000");
    let m = scrape(&h).await;
    assert_eq!(m.sum("vllm:request_success_total", &[("finished_reason", "abort")]), 1.0);
    assert_eq!(m.sum("vllm:num_requests_running", &[]), 0.0, "nothing left running");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_faults_reach_the_sdk_as_errors_and_the_truth_records_them() {
    let Some(py) = tools::python_clients() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = quiet();
    cfg.faults.http_error_rate = 0.25;
    cfg.faults.stream_error_rate = 0.25;
    cfg.faults.server_abort_rate = 0.25;
    let (h, truth) = start(cfg, dir.path(), None).await;
    let out = python(&py, &h, "faults").await;
    let mut kinds: HashMap<String, usize> = HashMap::new();
    for r in out["runs"].as_array().expect("runs") {
        let rid = format!("chatcmpl-{}", r["rid"].as_str().expect("rid"));
        let t = truth_for(&truth, &rid).await;
        let fault = t["fault"].as_str().unwrap_or("none").to_string();
        let words = u(r, "words");
        match fault.as_str() {
            "http_500" => {
                assert_eq!(
                    (r["error"].as_str(), r["status"].as_u64()),
                    (Some("InternalServerError"), Some(500)),
                    "{r}"
                );
                assert_eq!((u(&t, "output_tokens"), t["finish_reason"].as_str()), (0, Some("error")));
                assert!(t["engine"].is_null(), "never reached an engine");
            }
            "stream_error" => {
                assert_eq!(r["error"], "APIError", "the in-band error event: {r}");
                assert_eq!(r["body"]["message"], "Internal server error");
                assert_eq!(t["finish_reason"], "error");
                assert!(words < u(&t, "output_tokens"), "the failing step's tokens are not sent");
            }
            "server_abort" => {
                let e = r["error"].as_str().unwrap_or("");
                assert!(e == "RemoteProtocolError" || e == "APIConnectionError", "a dropped connection: {r}");
                assert_eq!(t["finish_reason"], "abort");
                assert!(words < u(&t, "output_tokens"));
            }
            _ => {
                assert!(r["done"] == true && r["error"].is_null(), "{r}");
                assert_eq!(words, u(&t, "output_tokens"));
            }
        }
        *kinds.entry(fault).or_default() += 1;
    }
    assert_eq!(kinds.len(), 4, "24 requests at 25 % each see every kind: {kinds:?}");
    let m = scrape(&h).await;
    assert_eq!(m.sum("vllm:request_success_total", &[("finished_reason", "error")]), kinds["stream_error"] as f64);
    assert_eq!(
        m.sum("vllm:request_success_total", &[]),
        (24 - kinds["http_500"]) as f64,
        "HTTP 500s never reach the engine"
    );
    h.shutdown().await;
}
