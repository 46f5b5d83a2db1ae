//! `LLMTargetDown` from `goodput rules` pages for LLM engines only, in promtool's rule
//! engine: `up == 0` of a database or a node exporter in the same Prometheus, even one in
//! the engines' own scrape job, stays quiet. Without `--selector` an engine is a target that
//! exported vLLM's queue gauge within a day; with `--selector 'job="vllm"'` it is every
//! selected target, a pod that never served a metric included (docs/fleet.md).
//!
//! Skips when promtool is missing, unless GOODPUT_REQUIRE_TOOLS=1.

use crate::rules_common;
use crate::tools;

use rules_common::run;
use std::process::Command;
use tools::require_tool;

const CONFIG: &str = r#"
targets: [{name: llama, url: "http://127.0.0.1:8000/metrics"}]
alerting:
  runbook_url: https://rb.example/runbooks/
"#;

/// At 1-minute steps for 25 hours: a:8000 is a healthy engine; c:8000 (job vllm) and
/// e:8000 (job kubernetes-pods, which scrapes every annotated pod) are engines that went
/// down after 10 minutes; d:8000 (job vllm) never came up; r:6379 (job redis) and n:9100
/// (kubernetes-pods) are no engines, and down throughout.
const SERIES: &str = r#"
      - {series: 'up{instance="a:8000",job="vllm"}', values: '1x1500'}
      - {series: 'vllm:num_requests_waiting{instance="a:8000",job="vllm",model_name="m"}', values: '3x1500'}
      - {series: 'up{instance="c:8000",job="vllm"}', values: '1x10 0x1490'}
      - {series: 'vllm:num_requests_waiting{instance="c:8000",job="vllm",model_name="m"}', values: '3x10'}
      - {series: 'up{instance="e:8000",job="kubernetes-pods"}', values: '1x10 0x1490'}
      - {series: 'vllm:num_requests_waiting{instance="e:8000",job="kubernetes-pods",model_name="m"}', values: '3x10'}
      - {series: 'up{instance="d:8000",job="vllm"}', values: '0x1500'}
      - {series: 'up{instance="r:6379",job="redis"}', values: '0x1500'}
      - {series: 'up{instance="n:9100",job="kubernetes-pods"}', values: '0x1500'}
"#;

/// The rule file for CONFIG, with `--selector` when given.
fn rules(dir: &std::path::Path, selector: Option<&str>) -> String {
    let cfg = dir.join("goodput.yml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_goodput"));
    cmd.args(["rules", "--format", "prometheus", "--config"]).arg(&cfg);
    if let Some(s) = selector {
        cmd.args(["--selector", s]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "goodput rules failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// An `alert_rule_test` expecting LLMTargetDown firing for exactly `down` (instance, job).
fn expect(at: &str, down: &[(&str, &str)]) -> String {
    let mut s = format!("      - eval_time: {at}\n        alertname: LLMTargetDown\n        exp_alerts:");
    if down.is_empty() {
        s.push_str(" []");
    }
    for (instance, job) in down {
        s.push_str(&format!(
            "\n          - exp_labels: {{severity: page, instance: '{instance}', job: {job}, target: '{instance}'}}\
             \n            exp_annotations: {{summary: '{instance} is down', description: 'Scrapes of {instance} (job {job}) are failing; nothing about it can be measured.', runbook_url: 'https://rb.example/runbooks/#llmtargetdown'}}"
        ));
    }
    s.push('\n');
    s
}

/// Runs promtool's unit tests of the rules `selector` gives against `tests`; whether they
/// passed, and promtool's output.
fn promtool_test(promtool: &std::path::Path, selector: Option<&str>, tests: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yml"), rules(dir.path(), selector)).unwrap();
    let file = format!(
        "rule_files: [rules.yml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:{SERIES}    alert_rule_test:\n{tests}"
    );
    let path = dir.path().join("tests.yml");
    std::fs::write(&path, file).unwrap();
    run(Command::new(promtool).arg("test").arg("rules").arg(&path))
}

#[test]
fn without_a_selector_only_targets_that_exported_vllm_metrics_page() {
    let promtool = require_tool!("promtool");
    let engines = [("c:8000", "vllm"), ("e:8000", "kubernetes-pods")];
    // Pending for its `for` (1m) after the first failed scrape at 11m, firing from 12m on.
    let tests = [expect("5m", &[]), expect("30m", &engines)].concat();
    let (ok, out) = promtool_test(&promtool, None, &tests);
    assert!(ok, "promtool test rules failed:\n{out}");
    // A day after its last sample, a target no longer counts as an engine: the documented
    // limit of the construction.
    let (ok, out) = promtool_test(&promtool, None, &expect("1470m", &[]));
    assert!(ok, "promtool test rules failed:\n{out}");

    // The harness compares: expecting the database to page fails.
    let (ok, out) = promtool_test(&promtool, None, &expect("30m", &[("c:8000", "vllm"), ("r:6379", "redis")]));
    assert!(!ok && out.contains("LLMTargetDown"), "a wrong expectation passed:\n{out}");
}

#[test]
fn with_a_selector_every_selected_target_pages_and_nothing_else() {
    let promtool = require_tool!("promtool");
    let selected = [("c:8000", "vllm"), ("d:8000", "vllm")];
    let tests = [expect("30m", &selected), expect("1470m", &selected)].concat();
    let (ok, out) = promtool_test(&promtool, Some("job=\"vllm\""), &tests);
    assert!(ok, "promtool test rules failed:\n{out}");
}

#[test]
fn the_expression_is_scoped_either_way() {
    let dir = tempfile::tempdir().unwrap();
    let expr = |selector| {
        let v: serde_json::Value = serde_saphyr::from_str(&rules(dir.path(), selector)).unwrap();
        let alerts = v["groups"][1]["rules"].as_array().unwrap();
        let rule = alerts.iter().find(|r| r["alert"] == "LLMTargetDown").expect("LLMTargetDown generated");
        rule["expr"].as_str().unwrap().to_string()
    };
    let plain = expr(None);
    assert!(
        plain.contains("up == 0 and on (job, instance) present_over_time(vllm:num_requests_waiting[1d])"),
        "{plain}"
    );
    let selected = expr(Some("job=\"vllm\""));
    assert!(selected.contains("up{job=\"vllm\"} == 0") && !selected.contains("present_over_time"), "{selected}");
}
