//! The exact fleet rules of `goodput rules` (docs/fleet.md#exact-fleet-numbers-from-requests)
//! against real promtool: two sidecar pods of one model export their tap's request
//! counters; `promtool test rules` shows the recorded fleet attainment, goodput and burn
//! rate are the ratio of the summed counts (not a mean of the pods' ratios), that a source
//! with no requests records nothing, and that the burn-rate alerts read the tap's exact
//! numbers before the spans' and the histograms', so they fire here although the
//! histograms look healthy, and stay quiet once the tap's counters are gone.
//!
//! Skips when promtool is missing, unless GOODPUT_REQUIRE_TOOLS=1.

use crate::rules_common;
use crate::tools;

use rules_common::{goodput_rules, run};
use std::process::Command;
use tools::require_tool;

const CONFIG: &str = r#"
listen: 127.0.0.1:9464
targets: [{name: llama, url: "http://127.0.0.1:8000/metrics"}]
windows: [1m]
slos:
  - {name: chat, ttft: 1s, tpot: 50ms, objective: 0.99}
alerting:
  alertmanager: {url: "http://127.0.0.1:9093"}
"#;

/// Per 30 s, for 400 minutes (the slow burn rule's 6h window must be covered).
/// Pod a: 150 requests, all `ok`, 146 good. Pod b: 50 requests, 46 `ok` and 4 `client_abort`,
/// 4 good. Fleet: 300 good of 400 a minute, attainment 0.75, burn (1 − 0.75)/(1 − 0.99) = 25.
/// A mean of the pods' ratios would say (73/75 + 2/25)/2 ≈ 0.53.
/// The engine spans (otlp) of pod a see every request good: the tap is preferred over them.
/// Pod b's `http_500` series exists at 0: a status that never happened counts nothing.
const TAP: &str = r#"
  - {series: 'llm_slo_requests_total{job="goodput",pod="a",target="llama",model="llama",source="tap",status="ok"}', values: '0+150x800'}
  - {series: 'llm_slo_good_requests_total{job="goodput",pod="a",target="llama",model="llama",source="tap",slo="chat"}', values: '0+146x800'}
  - {series: 'llm_slo_requests_total{job="goodput",pod="b",target="llama",model="llama",source="tap",status="ok"}', values: '0+46x800'}
  - {series: 'llm_slo_requests_total{job="goodput",pod="b",target="llama",model="llama",source="tap",status="client_abort"}', values: '0+4x800'}
  - {series: 'llm_slo_requests_total{job="goodput",pod="b",target="llama",model="llama",source="tap",status="http_500"}', values: '0x800'}
  - {series: 'llm_slo_good_requests_total{job="goodput",pod="b",target="llama",model="llama",source="tap",slo="chat"}', values: '0+4x800'}
"#;

/// The spans of pod a (all good), and a source that has seen no request at all (pod c's,
/// whose counters stay at 0): it must record no attainment rather than 0/0 (and, having no
/// failure status, no failed count).
const OTLP: &str = r#"
  - {series: 'llm_slo_requests_total{job="goodput",pod="a",target="llama",model="llama",source="otlp",status="ok"}', values: '0+150x800'}
  - {series: 'llm_slo_good_requests_total{job="goodput",pod="a",target="llama",model="llama",source="otlp",slo="chat"}', values: '0+150x800'}
  - {series: 'llm_slo_requests_total{job="goodput",pod="c",target="llama",model="idle",source="tap",status="ok"}', values: '0x800'}
  - {series: 'llm_slo_good_requests_total{job="goodput",pod="c",target="llama",model="idle",source="tap",slo="chat"}', values: '0x800'}
"#;

/// The engine's histograms for the same model: every request in the lowest buckets, all
/// `stop`. By them the SLO is met (attainment 1, burn 0).
const ENGINE: &str = r#"
  - {series: 'vllm:time_to_first_token_seconds_bucket{instance="a:8000",job="vllm",model_name="llama",le="0.1"}', values: '0+200x800'}
  - {series: 'vllm:time_to_first_token_seconds_bucket{instance="a:8000",job="vllm",model_name="llama",le="1.0"}', values: '0+200x800'}
  - {series: 'vllm:time_to_first_token_seconds_bucket{instance="a:8000",job="vllm",model_name="llama",le="+Inf"}', values: '0+200x800'}
  - {series: 'vllm:time_to_first_token_seconds_count{instance="a:8000",job="vllm",model_name="llama"}', values: '0+200x800'}
  - {series: 'vllm:request_time_per_output_token_seconds_bucket{instance="a:8000",job="vllm",model_name="llama",le="0.025"}', values: '0+200x800'}
  - {series: 'vllm:request_time_per_output_token_seconds_bucket{instance="a:8000",job="vllm",model_name="llama",le="0.05"}', values: '0+200x800'}
  - {series: 'vllm:request_time_per_output_token_seconds_bucket{instance="a:8000",job="vllm",model_name="llama",le="+Inf"}', values: '0+200x800'}
  - {series: 'vllm:request_time_per_output_token_seconds_count{instance="a:8000",job="vllm",model_name="llama"}', values: '0+200x800'}
  - {series: 'vllm:request_success_total{instance="a:8000",job="vllm",model_name="llama",finished_reason="stop"}', values: '0+200x800'}
  - {series: 'vllm:generation_tokens_total{instance="a:8000",job="vllm",model_name="llama"}', values: '0+20000x800'}
  - {series: 'up{instance="a:8000",job="vllm"}', values: '1x800'}
"#;

/// A `promql_expr_test` at `at` expecting exactly `samples` (labels, value); none for `[]`.
fn expr(at: &str, q: &str, samples: &[(&str, &str)]) -> String {
    let mut s = format!("      - expr: '{q}'\n        eval_time: {at}\n        exp_samples:");
    if samples.is_empty() {
        s.push_str(" []\n");
    }
    for (labels, value) in samples {
        s.push_str(&format!("\n          - {{labels: '{labels}', value: {value}}}"));
    }
    s.push('\n');
    s
}

/// The tests file: with the tap's counters (`tap`), the exact series and the burn alerts;
/// without, the histograms alone, by which nothing burns.
fn tests_file(tap: bool) -> String {
    let mut series = String::new();
    for block in if tap { vec![TAP, OTLP, ENGINE] } else { vec![OTLP, ENGINE] } {
        series += &block.replace("\n  - ", "\n      - ");
    }
    let mut t = String::new();
    let joint = "llm_slo:attainment_ratio{clause=\"joint\",bound=\"estimate\",slo=\"chat\",window=\"1m\"";
    if tap {
        t += &expr(
            "60m",
            &format!("{joint},source=\"tap\"}}"),
            &[(&format!("{joint},source=\"tap\",model=\"llama\"}}"), "0.75")],
        );
        t += &expr(
            "60m",
            "llm_slo:window_requests{source=\"tap\",window=\"1m\"}",
            &[
                ("llm_slo:window_requests{source=\"tap\",outcome=\"finished\",model=\"llama\",window=\"1m\"}", "400"),
                ("llm_slo:window_requests{source=\"tap\",outcome=\"failed\",model=\"llama\",window=\"1m\"}", "8"),
                ("llm_slo:window_requests{source=\"tap\",outcome=\"finished\",model=\"idle\",window=\"1m\"}", "0"),
            ],
        );
        t += &expr(
            "60m",
            "round(llm_slo:goodput_requests_per_second{source=\"tap\",window=\"1m\"}, 0.0001)",
            &[("{bound=\"estimate\",model=\"llama\",slo=\"chat\",source=\"tap\",window=\"1m\"}", "5")],
        );
        t += &expr(
            "60m",
            "round(llm_slo:error_budget_burn_rate{source=\"tap\",window=\"5m\"}, 0.001)",
            &[("{model=\"llama\",slo=\"chat\",source=\"tap\",window=\"5m\"}", "25")],
        );
    }
    // The spans' numbers are recorded too (all good), and the idle pod's none at all.
    t += &expr(
        "60m",
        &format!("{joint},source=\"otlp\"}}"),
        &[(&format!("{joint},source=\"otlp\",model=\"llama\"}}"), "1")],
    );
    t += &expr("60m", &format!("{joint},model=\"idle\"}}"), &[]);
    // The histograms' own joint attainment, for comparison: 1 (every request in the lowest buckets).
    t += &expr(
        "60m",
        &format!("{joint},source=\"metrics\"}}"),
        &[(&format!("{joint},source=\"metrics\",model=\"llama\"}}"), "1")],
    );
    // Alerts: firing from the tap's burn of 25, past the 6h window's coverage.
    let firing: Vec<(String, &str)> = if tap {
        vec![
            ("ALERTS{alertname=\"LLMErrorBudgetBurnFast\",alertstate=\"firing\",model=\"llama\",severity=\"page\",slo=\"chat\",target=\"fleet\"}".into(), "1"),
            ("ALERTS{alertname=\"LLMErrorBudgetBurnSlow\",alertstate=\"firing\",model=\"llama\",severity=\"page\",slo=\"chat\",target=\"fleet\"}".into(), "1"),
        ]
    } else {
        Vec::new()
    };
    let firing: Vec<(&str, &str)> = firing.iter().map(|(l, v)| (l.as_str(), *v)).collect();
    t += &expr("390m", "ALERTS{alertname=~\"LLMErrorBudgetBurn.*\",alertstate=\"firing\"}", &firing);
    format!(
        "rule_files: [rules.yml]\nevaluation_interval: 1m\ntests:\n  - interval: 30s\n    input_series:{series}    promql_expr_test:\n{t}"
    )
}

#[test]
fn exact_fleet_rules_sum_counts_and_the_burn_alerts_prefer_them() {
    let promtool = require_tool!("promtool");
    let dir = tempfile::tempdir().unwrap();
    let rules = goodput_rules(dir.path(), CONFIG, "prometheus");
    assert!(rules.contains("goodput-slo-exact-recording"), "no exact group in:\n{rules}");
    std::fs::write(dir.path().join("rules.yml"), &rules).unwrap();
    let (ok, out) = run(Command::new(&promtool).arg("check").arg("rules").arg(dir.path().join("rules.yml")));
    assert!(ok, "promtool check rules failed:\n{out}");

    for tap in [true, false] {
        let tests = dir.path().join(format!("tests-{tap}.yml"));
        std::fs::write(&tests, tests_file(tap)).unwrap();
        let (ok, out) = run(Command::new(&promtool).arg("test").arg("rules").arg(&tests));
        assert!(ok, "promtool test rules (tap: {tap}) failed:\n{out}\n(kept in {})", dir.keep().display());
    }

    // A wrong expectation must fail, or the harness proves nothing.
    let wrong = tests_file(true).replace("value: 0.75", "value: 0.5325");
    let tests = dir.path().join("wrong.yml");
    std::fs::write(&tests, wrong).unwrap();
    let (ok, out) = run(Command::new(&promtool).arg("test").arg("rules").arg(&tests));
    assert!(!ok && out.contains("7.5E-01"), "a wrong expectation passed:\n{out}");
}
