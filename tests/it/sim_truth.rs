//! The simulator's own /metrics agree with its per-request ground truth, exactly.
//!
//! Expectations are recomputed from requests.jsonl / inflight.jsonl with vLLM's
//! observation points: TTFT at the first token (so in-flight requests that have one
//! count), E2E and per-request TPOT at finish, prompt tokens when prefill completes,
//! generation tokens as they come out, success by finish reason.

use crate::sim_common;

use goodput_sim::config::{Format, Profile, SimConfig};
use serde_json::Value;
use sim_common::{Parsed, bounds, f, record, sum};

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";

/// Cumulative bucket counts of `values` at the scrape's own `le` bounds.
fn expected_buckets(values: &[f64], les: &[(String, f64)]) -> Vec<f64> {
    les.iter().map(|(_, b)| values.iter().filter(|v| **v <= *b).count() as f64).collect()
}

fn check_histogram(body: &str, base: &str, values: &[f64]) {
    let les = bounds(body, base);
    assert!(les.len() > 5, "{base} has buckets");
    assert_eq!(les.last().map(|l| l.1), Some(f64::INFINITY));
    let s = Parsed::new(body);
    let got: Vec<f64> = les.iter().map(|(le, _)| s.sum(&format!("{base}_bucket"), &[("le", le)])).collect();
    assert_eq!(got, expected_buckets(values, &les), "{base} buckets");
    assert_eq!(s.sum(&format!("{base}_count"), &[]), values.len() as f64, "{base} count");
    let want_sum: f64 = values.iter().sum();
    let got_sum = s.sum(&format!("{base}_sum"), &[]);
    assert!((got_sum - want_sum).abs() <= 1e-9 * want_sum.abs().max(1.0), "{base} sum {got_sum} vs {want_sum}");
}

fn field(rows: &[Value], key: &str) -> Vec<f64> {
    rows.iter().filter_map(|r| f(r, key)).collect()
}

fn check_vllm(cfg: &SimConfig, secs: u64) -> (usize, f64) {
    let run = record(cfg, secs, 5);
    let body = run.last();
    let fin = &run.finished;
    assert!(fin.len() > 50, "enough finished requests: {}", fin.len());

    let mut ttft = field(fin, "ttft_s");
    ttft.extend(field(&run.in_flight, "ttft_s"));
    check_histogram(body, "vllm:time_to_first_token_seconds", &ttft);
    check_histogram(body, "vllm:e2e_request_latency_seconds", &field(fin, "e2e_s"));
    check_histogram(body, "vllm:request_time_per_output_token_seconds", &field(fin, "tpot_s"));
    check_histogram(body, "vllm:request_queue_time_seconds", &field(fin, "queue_s"));
    check_histogram(body, "vllm:request_prefill_time_seconds", &field(fin, "prefill_s"));
    check_histogram(body, "vllm:request_decode_time_seconds", &field(fin, "decode_s"));
    check_histogram(body, "vllm:request_generation_tokens", &field(fin, "output_tokens"));
    check_histogram(body, "vllm:request_prompt_tokens", &field(fin, "prompt_tokens"));

    // Prompt tokens count once, when prefill completes (= first token).
    let prompt: f64 = fin
        .iter()
        .chain(&run.in_flight)
        .filter(|r| f(r, "first_token_s").is_some())
        .filter_map(|r| f(r, "prompt_tokens"))
        .sum();
    assert_eq!(sum(body, "vllm:prompt_tokens_total", &[]), prompt);
    let generated: f64 = fin.iter().chain(&run.in_flight).filter_map(|r| f(r, "output_tokens")).sum();
    assert_eq!(sum(body, "vllm:generation_tokens_total", &[]), generated);
    for reason in ["stop", "length", "abort", "error"] {
        let n = fin.iter().filter(|r| r["finish_reason"] == reason).count() as f64;
        assert_eq!(sum(body, "vllm:request_success_total", &[("finished_reason", reason)]), n, "{reason}");
    }
    // Without spec decoding every token after the first is one ITL observation.
    if cfg.engine.spec_tokens == 0 {
        let with_first = fin.iter().chain(&run.in_flight).filter(|r| f(r, "first_token_s").is_some()).count() as f64;
        assert_eq!(sum(body, "vllm:inter_token_latency_seconds_count", &[]), generated - with_first);
    }
    // Every engine reports under its own `engine` label and the model name.
    for e in 0..cfg.engines {
        let e = e.to_string();
        assert_eq!(sum(body, "vllm:cache_config_info", &[("engine", &e), ("block_size", "16")]), 1.0);
        assert!(sum(body, "vllm:generation_tokens_total", &[("engine", &e), ("model_name", MODEL)]) > 0.0);
    }
    let aborts = fin.iter().filter(|r| r["finish_reason"] == "abort").count();
    (aborts, sum(body, "vllm:num_preemptions_total", &[]))
}

#[test]
fn steady_histograms_and_counters_match_ground_truth() {
    let (aborts, _) = check_vllm(&SimConfig::profile(Profile::Steady), 150);
    assert!(aborts > 0, "a few client aborts appear");
}

#[test]
fn overloaded_two_engine_run_matches_ground_truth() {
    let mut cfg = SimConfig::profile(Profile::Ramp);
    cfg.engines = 2;
    cfg.arrivals.rate = 30.0;
    cfg.arrivals.period_s = 120.0;
    let (_, preemptions) = check_vllm(&cfg, 120);
    assert!(preemptions > 0.0, "the overloaded run preempts, so recompute paths are covered");
}

#[test]
fn spec_decode_counters_are_consistent() {
    let cfg = SimConfig::profile(Profile::Spec);
    check_vllm(&cfg, 60);
    let run = record(&cfg, 60, 5);
    let body = run.last();
    let drafts = sum(body, "vllm:spec_decode_num_drafts_total", &[]);
    let draft_tokens = sum(body, "vllm:spec_decode_num_draft_tokens_total", &[]);
    let accepted = sum(body, "vllm:spec_decode_num_accepted_tokens_total", &[]);
    let per_pos: Vec<f64> = (0..cfg.engine.spec_tokens)
        .map(|p| sum(body, "vllm:spec_decode_num_accepted_tokens_per_pos_total", &[("position", &p.to_string())]))
        .collect();
    assert!(drafts > 100.0);
    assert!(draft_tokens <= drafts * f64::from(cfg.engine.spec_tokens));
    assert_eq!(per_pos.iter().sum::<f64>(), accepted);
    assert!(per_pos.windows(2).all(|w| w[0] >= w[1]), "acceptance decays with position: {per_pos:?}");
    let rate = accepted / draft_tokens;
    // Acceptance per position is geometric, so the overall rate sits below alpha.
    assert!(rate > 0.3 && rate < cfg.engine.spec_acceptance, "acceptance rate {rate}");
    // Spec steps emit several tokens per ITL observation.
    let generated = sum(body, "vllm:generation_tokens_total", &[]);
    assert!(sum(body, "vllm:inter_token_latency_seconds_count", &[]) < 0.8 * generated);
}

#[test]
fn sglang_and_tgi_formats_agree_with_ground_truth() {
    let mut cfg = SimConfig::profile(Profile::Steady);
    cfg.format = Format::Sglang;
    let run = record(&cfg, 60, 5);
    let body = run.last();
    let fin = &run.finished;
    let total = |k: &str| fin.iter().filter_map(|r| f(r, k)).sum::<f64>();
    // SGLang counts tokens when a request finishes.
    assert_eq!(sum(body, "sglang:prompt_tokens_total", &[]), total("prompt_tokens"));
    assert_eq!(sum(body, "sglang:generation_tokens_total", &[]), total("output_tokens"));
    assert_eq!(sum(body, "sglang:num_requests_total", &[]), fin.len() as f64);
    assert_eq!(sum(body, "sglang:e2e_request_latency_seconds_count", &[]), fin.len() as f64);
    let mut ttft = field(fin, "ttft_s");
    ttft.extend(field(&run.in_flight, "ttft_s"));
    check_histogram(body, "sglang:time_to_first_token_seconds", &ttft);
    assert!(!body.contains("_created"), "multiprocess mode has no _created");

    cfg.format = Format::Tgi;
    let run = record(&cfg, 60, 5);
    let body = run.last();
    let ok: Vec<&Value> = run.finished.iter().filter(|r| r["finish_reason"] != "abort").collect();
    assert_eq!(sum(body, "tgi_request_success", &[]), ok.len() as f64);
    let gen_sum: f64 = ok.iter().filter_map(|r| f(r, "output_tokens")).sum();
    assert_eq!(sum(body, "tgi_request_generated_tokens_sum", &[]), gen_sum);
    assert!(!body.contains("time_to_first_token"), "TGI has no TTFT");
    assert!(body.contains("\ntgi_request_success ") && !body.contains("tgi_request_success_total"), "no _total suffix");
}
