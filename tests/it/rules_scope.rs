//! Scoped SLOs through a real Prometheus rule engine (`promtool test rules`): the rules
//! `goodput rules` generates for a model-scoped and two target-scoped SLOs fire for the
//! pods and models in scope and never for the others, even when those violate the SLO.
//!
//! Two pods: `pod-a` (instance a:8000) serves `llama`, `pod-b` (b:8000) serves `qwen`.
//! `chat` is scoped to model `llama`, `batch` to target `pod-b`, `edge` to target `pod-a`;
//! all three have the same thresholds. In the first test both pods are overloaded the same
//! way, so each SLO fires for its own model only. In the second only `pod-b` is, so `chat`
//! and `edge` (whose pod is healthy) stay quiet while `qwen` violates them.
//!
//! Skips when promtool is missing, unless GOODPUT_REQUIRE_TOOLS=1.

use crate::tools;

use std::path::Path;
use std::process::{Command, Output};

use tools::require;

const CONFIG: &str = r#"
targets:
  - {name: pod-a, url: "http://a:8000/metrics"}
  - {name: pod-b, url: "http://b:8000/metrics"}
windows: [1m]
slos:
  - {name: chat, ttft: 1s, tpot: 50ms, objective: 0.99, models: [llama]}
  - {name: batch, ttft: 1s, tpot: 50ms, objective: 0.99, targets: [pod-b]}
  - {name: edge, ttft: 1s, tpot: 50ms, objective: 0.99, targets: [pod-a]}
# The series start burning at 0 and the test judges at 30m: scope is under test here, not
# the wait for window coverage (tests/it/rules_promtool.rs covers that).
alerting: {min_window_coverage: 0, runbook_url: "https://goodput.example.com/runbooks/"}
"#;

const MAPPING: [&str; 4] = ["--target-instance", "pod-a=a:8000", "--target-instance", "pod-b=b:8000"];

fn goodput_rules(dir: &Path, extra: &[&str]) -> Output {
    let cfg = dir.join("goodput.yml");
    std::fs::write(&cfg, CONFIG).unwrap();
    Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["rules", "--format", "prometheus", "--config"])
        .arg(&cfg)
        .args(extra)
        .output()
        .unwrap()
}

/// One pod's vLLM series. Overloaded, per minute: 100 requests, TTFT buckets
/// 0.1/0.5/1.0/2.5/+Inf at 10/50/60/80/100 (p99 2.5 s, 60 % within 1 s), TPOT buckets
/// 0.025/0.05/0.1/+Inf at 20/50/90/100 (p99 100 ms, 50 % within 50 ms), 90 stop and
/// 10 abort: joint 0.6·0.5·0.9 = 0.27, burn 73. Healthy: everything in the lowest bucket.
fn pod(instance: &str, model: &str, overloaded: bool) -> String {
    let l = format!("instance=\"{instance}\",job=\"vllm\",model_name=\"{model}\"");
    let (ttft, tpot, stop, abort) =
        if overloaded { ([10, 50, 60, 80, 100], [20, 50, 90, 100], 90, 10) } else { ([100; 5], [100; 4], 100, 0) };
    let mut s = String::new();
    let mut series = |name: &str, labels: &str, per_minute: u32| {
        s.push_str(&format!("      - {{series: '{name}{{{labels}}}', values: '0+{per_minute}x60'}}\n"));
    };
    let ttft_name = "vllm:time_to_first_token_seconds";
    for (le, n) in ["0.1", "0.5", "1.0", "2.5", "+Inf"].iter().zip(ttft) {
        series(&format!("{ttft_name}_bucket"), &format!("{l},le=\"{le}\""), n);
    }
    series(&format!("{ttft_name}_count"), &l, 100);
    let tpot_name = "vllm:request_time_per_output_token_seconds";
    for (le, n) in ["0.025", "0.05", "0.1", "+Inf"].iter().zip(tpot) {
        series(&format!("{tpot_name}_bucket"), &format!("{l},le=\"{le}\""), n);
    }
    series(&format!("{tpot_name}_count"), &l, 100);
    series("vllm:request_success_total", &format!("{l},finished_reason=\"stop\""), stop);
    series("vllm:request_success_total", &format!("{l},finished_reason=\"abort\""), abort);
    series("vllm:generation_tokens_total", &l, 6000);
    s
}

/// Who the alert texts name: the fleet for a model scope, the targets for a target scope.
fn who(slo: &str, model: &str) -> String {
    match slo {
        "chat" => format!("{model} across the fleet"),
        "batch" => format!("{model} on pod-b"),
        _ => format!("{model} on pod-a"),
    }
}

/// The `alert_rule_test` entries for every SLO alert at 30m, firing for exactly `firing`
/// ((slo, model) pairs), with the texts of the alert table.
fn alert_tests(firing: &[(&str, &str)]) -> String {
    let mut out = String::new();
    let texts = |name: &str, slo: &str, model: &str| -> (&'static str, String, String) {
        let w = who(slo, model);
        match name {
            "LLMTTFTAboveSLO" => (
                "ticket",
                format!("p99 TTFT of {w} is 2.5s (SLO {slo}: 1s)"),
                format!("Over 5m, p99 TTFT is 2.5s, above the 1s threshold of SLO {slo}."),
            ),
            "LLMTPOTAboveSLO" => (
                "ticket",
                format!("p99 TPOT of {w} is 100ms (SLO {slo}: 50ms)"),
                format!("Over 5m, p99 TPOT is 100ms, above the 50ms threshold of SLO {slo}."),
            ),
            "LLMErrorBudgetBurnFast" => (
                "page",
                format!("{w} burns the error budget of SLO {slo} at 73.00×"),
                "Burn rate is 73.00× over 5m and above 14.4× over 1h (threshold 14.4×, objective 99.0%).".into(),
            ),
            "LLMErrorBudgetBurnSlow" => (
                "page",
                format!("{w} burns the error budget of SLO {slo} at 73.00×"),
                "Burn rate is 73.00× over 30m and above 6× over 6h (threshold 6×, objective 99.0%).".into(),
            ),
            _ => (
                "page",
                format!("Goodput of {w} diverges from throughput (SLO {slo})"),
                format!(
                    "Over 5m, only 27% of requests met SLO {slo} (threshold 90.0%) while output throughput is above 10 tokens/s."
                ),
            ),
        }
    };
    for name in [
        "LLMTTFTAboveSLO",
        "LLMTPOTAboveSLO",
        "LLMErrorBudgetBurnFast",
        "LLMErrorBudgetBurnSlow",
        "LLMGoodputDivergence",
    ] {
        out.push_str(&format!("      - eval_time: 30m\n        alertname: {name}\n        exp_alerts:"));
        if firing.is_empty() {
            out.push_str(" []");
        }
        for (slo, model) in firing {
            let (severity, summary, description) = texts(name, slo, model);
            let runbook = format!("https://goodput.example.com/runbooks/#{}", name.to_lowercase());
            out.push_str(&format!(
                "\n          - exp_labels: {{severity: {severity}, target: fleet, model: {model}, slo: {slo}}}\n            exp_annotations: {{summary: {summary:?}, description: {description:?}, runbook_url: {runbook:?}}}"
            ));
        }
        out.push('\n');
    }
    out
}

fn tests_file(rules: &str, series: &str, firing: &[(&str, &str)]) -> String {
    format!(
        "rule_files: [{rules}]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{series}    alert_rule_test:\n{}",
        alert_tests(firing)
    )
}

fn promtool_test(promtool: &Path, dir: &Path, series: &str, firing: &[(&str, &str)]) -> (bool, String) {
    let path = dir.join("tests.yml");
    std::fs::write(&path, tests_file("rules.yml", series, firing)).unwrap();
    let out = Command::new(promtool).args(["test", "rules"]).arg(&path).output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Writes the generated rules next to the tests and checks them with promtool.
fn generated_rules(promtool: &Path, dir: &Path) {
    let out = goodput_rules(dir, &MAPPING);
    assert!(out.status.success(), "goodput rules failed: {}", String::from_utf8_lossy(&out.stderr));
    let rules = dir.join("rules.yml");
    std::fs::write(&rules, &out.stdout).unwrap();
    let check = Command::new(promtool).args(["check", "rules"]).arg(&rules).output().unwrap();
    assert!(check.status.success(), "promtool check rules: {}", String::from_utf8_lossy(&check.stderr));
}

#[test]
fn each_scoped_slo_fires_for_its_own_model_only() {
    let Some(promtool) = require("promtool") else { return };
    let dir = tempfile::tempdir().unwrap();
    generated_rules(&promtool, dir.path());
    let series = pod("a:8000", "llama", true) + &pod("b:8000", "qwen", true);
    let want = [("chat", "llama"), ("batch", "qwen"), ("edge", "llama")];
    let (ok, out) = promtool_test(&promtool, dir.path(), &series, &want);
    assert!(ok, "promtool test rules failed:\n{out}");
    // Had a scope been dropped, `chat` would also fire for qwen: the harness sees that.
    let widened = [("chat", "llama"), ("chat", "qwen"), ("batch", "qwen"), ("edge", "llama")];
    let (ok, out) = promtool_test(&promtool, dir.path(), &series, &widened);
    assert!(!ok && out.contains("LLMTTFTAboveSLO"), "a widened expectation passed:\n{out}");
}

#[test]
fn an_out_of_scope_violation_fires_nothing() {
    let Some(promtool) = require("promtool") else { return };
    let dir = tempfile::tempdir().unwrap();
    generated_rules(&promtool, dir.path());
    // Only qwen on pod-b is overloaded: `chat` (llama) and `edge` (pod-a) must stay quiet.
    let series = pod("a:8000", "llama", false) + &pod("b:8000", "qwen", true);
    let (ok, out) = promtool_test(&promtool, dir.path(), &series, &[("batch", "qwen")]);
    assert!(ok, "promtool test rules failed:\n{out}");
}

#[test]
fn scopes_become_escaped_matchers_and_an_unmapped_target_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = goodput_rules(dir.path(), &MAPPING);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_saphyr::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let records = v["groups"][0]["rules"].as_array().unwrap();
    let attainment = |slo: &str| {
        records
            .iter()
            .find(|r| r["labels"]["slo"] == slo && r["labels"]["clause"] == "ttft")
            .unwrap_or_else(|| panic!("no ttft attainment for {slo}"))["expr"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(attainment("chat").contains(r#"model_name=~"llama""#), "{}", attainment("chat"));
    assert!(attainment("batch").contains(r#"instance=~"b:8000""#), "{}", attainment("batch"));
    assert!(!attainment("batch").contains("model_name=~"), "{}", attainment("batch"));

    // Without the instance of pod-b, the generator cannot write `batch`'s scope: it refuses.
    let out = goodput_rules(dir.path(), &MAPPING[..2]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("\"batch\"") && err.contains("--target-instance pod-b=HOST:PORT"), "{err}");
    assert!(out.stdout.is_empty(), "nothing is generated on a refusal");
    // A mapping for a target the config lacks is a mistake, not silently ignored.
    let out = goodput_rules(dir.path(), &["--target-instance", "pod-z=z:1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("pod-z") && err.contains("pod-a, pod-b"), "{err}");
}
