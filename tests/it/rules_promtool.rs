//! `goodput rules` against real promtool: the generated rules pass `promtool check rules`,
//! and `promtool test rules` unit tests (written here from hand-computed expectations) show
//! every alert firing for an overloaded model and staying quiet for a healthy one, and the
//! recording rules computing the expected quantiles, attainment and burn rate.
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
  runbook_url: "https://rb.example/{alertname}"
"#;

/// `goodput rules` reads the daemon's config with the daemon's loader, which wants targets.
const TARGETS: &str = "targets: [{name: llama, url: \"http://127.0.0.1:8000/metrics\"}]\n";

/// Two pods serve two models: `bad` (a:8000) is overloaded, `good` (b:8000) is healthy,
/// and c:8000, an engine seen once, is down, for 400 minutes (enough to cover the slow burn
/// rule's 6h window); so is r:6379 of another job, which is no engine and must not page.
/// Per minute, `bad` finishes 100 requests: TTFT buckets 0.1/0.5/1.0/2.5/+Inf hold 10/50/60/80/100 (attainment at 1 s: 0.6; p99 falls in +Inf, so 2.5 s); TPOT buckets
/// 0.025/0.05/0.1/+Inf hold 20/50/90/100 (attainment at 50 ms: 0.5; p99 0.1 s); 90 stop and
/// 10 abort (success 0.9). Joint estimate 0.6·0.5·0.9 = 0.27, lower max(0, 0.6+0.5+0.9−2) = 0,
/// upper 0.5; burn (1−0.27)/0.01 = 73. Output 6000 tokens/min = 100/s. KV 0.95, 30
/// preemptions/min = 0.5/s, waiting grows by 2/min. `good` has everything in the lowest
/// bucket, KV 0.5, no preemptions, 50 waiting but flat.
const SERIES: &str = r#"
  - {series: 'vllm:time_to_first_token_seconds_bucket{instance="a:8000",job="vllm",model_name="bad",le="0.1"}', values: '0+10x400'}
  - {series: 'vllm:time_to_first_token_seconds_bucket{instance="a:8000",job="vllm",model_name="bad",le="0.5"}', values: '0+50x400'}
  - {series: 'vllm:time_to_first_token_seconds_bucket{instance="a:8000",job="vllm",model_name="bad",le="1.0"}', values: '0+60x400'}
  - {series: 'vllm:time_to_first_token_seconds_bucket{instance="a:8000",job="vllm",model_name="bad",le="2.5"}', values: '0+80x400'}
  - {series: 'vllm:time_to_first_token_seconds_bucket{instance="a:8000",job="vllm",model_name="bad",le="+Inf"}', values: '0+100x400'}
  - {series: 'vllm:time_to_first_token_seconds_count{instance="a:8000",job="vllm",model_name="bad"}', values: '0+100x400'}
  - {series: 'vllm:request_time_per_output_token_seconds_bucket{instance="a:8000",job="vllm",model_name="bad",le="0.025"}', values: '0+20x400'}
  - {series: 'vllm:request_time_per_output_token_seconds_bucket{instance="a:8000",job="vllm",model_name="bad",le="0.05"}', values: '0+50x400'}
  - {series: 'vllm:request_time_per_output_token_seconds_bucket{instance="a:8000",job="vllm",model_name="bad",le="0.1"}', values: '0+90x400'}
  - {series: 'vllm:request_time_per_output_token_seconds_bucket{instance="a:8000",job="vllm",model_name="bad",le="+Inf"}', values: '0+100x400'}
  - {series: 'vllm:request_time_per_output_token_seconds_count{instance="a:8000",job="vllm",model_name="bad"}', values: '0+100x400'}
  - {series: 'vllm:request_success_total{instance="a:8000",job="vllm",model_name="bad",finished_reason="stop"}', values: '0+90x400'}
  - {series: 'vllm:request_success_total{instance="a:8000",job="vllm",model_name="bad",finished_reason="abort"}', values: '0+10x400'}
  - {series: 'vllm:generation_tokens_total{instance="a:8000",job="vllm",model_name="bad"}', values: '0+6000x400'}
  - {series: 'vllm:kv_cache_usage_perc{instance="a:8000",job="vllm",model_name="bad"}', values: '0.95x400'}
  - {series: 'vllm:num_preemptions_total{instance="a:8000",job="vllm",model_name="bad"}', values: '0+30x400'}
  - {series: 'vllm:num_requests_waiting{instance="a:8000",job="vllm",model_name="bad"}', values: '0+2x400'}
  - {series: 'up{instance="a:8000",job="vllm"}', values: '1x400'}
  - {series: 'vllm:time_to_first_token_seconds_bucket{instance="b:8000",job="vllm",model_name="good",le="0.1"}', values: '0+100x400'}
  - {series: 'vllm:time_to_first_token_seconds_bucket{instance="b:8000",job="vllm",model_name="good",le="0.5"}', values: '0+100x400'}
  - {series: 'vllm:time_to_first_token_seconds_bucket{instance="b:8000",job="vllm",model_name="good",le="1.0"}', values: '0+100x400'}
  - {series: 'vllm:time_to_first_token_seconds_bucket{instance="b:8000",job="vllm",model_name="good",le="2.5"}', values: '0+100x400'}
  - {series: 'vllm:time_to_first_token_seconds_bucket{instance="b:8000",job="vllm",model_name="good",le="+Inf"}', values: '0+100x400'}
  - {series: 'vllm:time_to_first_token_seconds_count{instance="b:8000",job="vllm",model_name="good"}', values: '0+100x400'}
  - {series: 'vllm:request_time_per_output_token_seconds_bucket{instance="b:8000",job="vllm",model_name="good",le="0.025"}', values: '0+100x400'}
  - {series: 'vllm:request_time_per_output_token_seconds_bucket{instance="b:8000",job="vllm",model_name="good",le="0.05"}', values: '0+100x400'}
  - {series: 'vllm:request_time_per_output_token_seconds_bucket{instance="b:8000",job="vllm",model_name="good",le="0.1"}', values: '0+100x400'}
  - {series: 'vllm:request_time_per_output_token_seconds_bucket{instance="b:8000",job="vllm",model_name="good",le="+Inf"}', values: '0+100x400'}
  - {series: 'vllm:request_time_per_output_token_seconds_count{instance="b:8000",job="vllm",model_name="good"}', values: '0+100x400'}
  - {series: 'vllm:request_success_total{instance="b:8000",job="vllm",model_name="good",finished_reason="stop"}', values: '0+100x400'}
  - {series: 'vllm:generation_tokens_total{instance="b:8000",job="vllm",model_name="good"}', values: '0+6000x400'}
  - {series: 'vllm:kv_cache_usage_perc{instance="b:8000",job="vllm",model_name="good"}', values: '0.5x400'}
  - {series: 'vllm:num_preemptions_total{instance="b:8000",job="vllm",model_name="good"}', values: '0+0x400'}
  - {series: 'vllm:num_requests_waiting{instance="b:8000",job="vllm",model_name="good"}', values: '50x400'}
  - {series: 'up{instance="b:8000",job="vllm"}', values: '1x400'}
  - {series: 'up{instance="c:8000",job="vllm"}', values: '0x400'}
  - {series: 'vllm:num_requests_waiting{instance="c:8000",job="vllm",model_name="bad"}', values: '0'}
  - {series: 'up{instance="r:6379",job="redis"}', values: '0x400'}
"#;

fn rb(name: &str) -> String {
    format!("https://rb.example/{name}")
}

/// One `alert_rule_test` entry expecting exactly `alerts` (labels, summary, description).
fn alert_test(at: &str, name: &str, alerts: &[(&str, String, String)]) -> String {
    let mut s = format!("      - eval_time: {at}\n        alertname: {name}\n        exp_alerts:");
    if alerts.is_empty() {
        s.push_str(" []\n");
    }
    for (labels, summary, description) in alerts {
        s.push_str(&format!(
            "\n          - exp_labels: {{{labels}}}\n            exp_annotations: {{summary: {summary:?}, description: {description:?}, runbook_url: {:?}}}",
            rb(name)
        ));
    }
    s.push('\n');
    s
}

fn expr_test(expr: &str, labels: &str, value: &str) -> String {
    format!(
        "      - expr: '{expr}'\n        eval_time: 10m\n        exp_samples: [{{labels: '{labels}', value: {value}}}]\n"
    )
}

fn tests_file(rules: &str, fleet_bad: bool) -> String {
    let fleet =
        |slo: bool| format!("severity: page, target: fleet, model: bad{}", if slo { ", slo: chat" } else { "" });
    let ticket = "severity: ticket, target: fleet, model: bad, slo: chat";
    let mut alerts = String::new();
    // `for: 2m`: pending at 1m, firing at 2m.
    alerts += &alert_test("1m", "LLMKVCacheSaturated", &[]);
    let kv = (
        "severity: page, instance: 'a:8000', job: vllm, model_name: bad, model: bad, target: 'a:8000'",
        "KV cache of bad on a:8000 is 95% full".to_string(),
        "KV-cache usage is 95%, above the critical level 90.0%; preemptions and swapping get likely.".to_string(),
    );
    alerts += &alert_test("2m", "LLMKVCacheSaturated", std::slice::from_ref(&kv));
    let div = fleet(true);
    let mut firing = vec![
        ("LLMKVCacheSaturated", vec![kv]),
        (
            "LLMGoodputDivergence",
            vec![(
                div.as_str(),
                "Goodput of bad across the fleet diverges from throughput (SLO chat)".to_string(),
                "Over 5m, only 27% of requests met SLO chat (threshold 90.0%) while output throughput is above 10 tokens/s."
                    .to_string(),
            )],
        ),
        (
            "LLMTTFTAboveSLO",
            vec![(
                ticket,
                "p99 TTFT of bad across the fleet is 2.5s (SLO chat: 1s)".to_string(),
                "Over 5m, p99 TTFT is 2.5s, above the 1s threshold of SLO chat.".to_string(),
            )],
        ),
        (
            "LLMTPOTAboveSLO",
            vec![(
                ticket,
                "p99 TPOT of bad across the fleet is 100ms (SLO chat: 50ms)".to_string(),
                "Over 5m, p99 TPOT is 100ms, above the 50ms threshold of SLO chat.".to_string(),
            )],
        ),
        (
            "LLMErrorBudgetBurnFast",
            vec![(
                div.as_str(),
                "bad across the fleet burns the error budget of SLO chat at 73.00×".to_string(),
                "Burn rate is 73.00× over 5m and above 14.4× over 1h (threshold 14.4×, objective 99.0%).".to_string(),
            )],
        ),
        (
            "LLMErrorBudgetBurnSlow",
            vec![(
                div.as_str(),
                "bad across the fleet burns the error budget of SLO chat at 73.00×".to_string(),
                "Burn rate is 73.00× over 30m and above 6× over 6h (threshold 6×, objective 99.0%).".to_string(),
            )],
        ),
        (
            "LLMTargetDown",
            vec![(
                "severity: page, instance: 'c:8000', job: vllm, target: 'c:8000'",
                "c:8000 is down".to_string(),
                "Scrapes of c:8000 (job vllm) are failing; nothing about it can be measured.".to_string(),
            )],
        ),
        (
            "LLMPreemptionsSustained",
            vec![(
                "severity: ticket, instance: 'a:8000', model: bad, target: 'a:8000'",
                "bad on a:8000 preempts 0.500 requests/s".to_string(),
                "Over 5m, the engine preempted 0.500 requests/s (threshold 0.1); KV cache is too small for the load."
                    .to_string(),
            )],
        ),
        (
            "LLMQueueGrowing",
            vec![(
                "severity: ticket, instance: 'a:8000', model: bad, target: 'a:8000'",
                "Queue of bad on a:8000 is growing: 60 waiting".to_string(),
                "Waiting requests rose over 5m to 60 (alerting from 10); arrivals exceed capacity.".to_string(),
            )],
        ),
    ];
    if !fleet_bad {
        // A wrong expectation, to prove promtool really compares: nothing firing for `bad`.
        firing[1].1.clear();
    }
    for (name, a) in &firing {
        if name.starts_with("LLMErrorBudgetBurn") {
            // Their long windows (1h, 6h) are 50% and 8% covered at 30m: they wait, not
            // even pending. Six and a half hours in, both are covered and firing.
            alerts += &alert_test("30m", name, &[]);
            alerts += &alert_test("390m", name, a);
        } else {
            alerts += &alert_test("30m", name, a);
        }
    }
    let w = "window=\"5m\"";
    let mut exprs = String::new();
    let r = |e: &str, n: &str| format!("round({e}, {n})");
    exprs += &expr_test(
        &r(&format!("llm_slo:attainment_ratio{{model=\"bad\",clause=\"ttft\",{w}}}"), "0.001"),
        &format!("{{model=\"bad\",slo=\"chat\",clause=\"ttft\",source=\"metrics\",{w}}}"),
        "0.6",
    );
    exprs += &expr_test(
        &r(&format!("llm_slo:attainment_ratio{{model=\"bad\",clause=\"tpot\",{w}}}"), "0.001"),
        &format!("{{model=\"bad\",slo=\"chat\",clause=\"tpot\",source=\"metrics\",{w}}}"),
        "0.5",
    );
    for (bound, v) in [("estimate", "0.27"), ("lower", "0"), ("upper", "0.5")] {
        exprs += &expr_test(
            &r(&format!("llm_slo:attainment_ratio{{model=\"bad\",clause=\"joint\",bound=\"{bound}\",{w}}}"), "0.001"),
            &format!("{{model=\"bad\",slo=\"chat\",clause=\"joint\",bound=\"{bound}\",source=\"metrics\",{w}}}"),
            v,
        );
    }
    exprs += &expr_test(
        &r(&format!("llm_slo:error_budget_burn_rate{{model=\"good\",{w}}}"), "0.001"),
        &format!("{{model=\"good\",slo=\"chat\",source=\"metrics\",{w}}}"),
        "0",
    );
    exprs += &expr_test(
        &r(&format!("llm_slo:error_budget_burn_rate{{model=\"bad\",{w}}}"), "0.001"),
        &format!("{{model=\"bad\",slo=\"chat\",source=\"metrics\",{w}}}"),
        "73",
    );
    exprs += &expr_test(
        &format!("llm_slo:ttft_seconds{{model=\"bad\",q=\"0.99\",{w}}}"),
        &format!("llm_slo:ttft_seconds{{model=\"bad\",q=\"0.99\",source=\"metrics\",{w}}}"),
        "2.5",
    );
    exprs += &expr_test(
        &r(&format!("llm_slo:goodput_tokens_per_second{{model=\"bad\",bound=\"upper\",{w}}}"), "0.001"),
        &format!("{{model=\"bad\",slo=\"chat\",bound=\"upper\",source=\"metrics\",{w}}}"),
        "50",
    );
    // Coverage at 10m: data since 0 found at a resolution of 36 s, (600 + 36) / 3600.
    exprs += &expr_test(
        &r("llm_slo:window_coverage_ratio{model=\"bad\",window=\"1h\"}", "0.001"),
        "{model=\"bad\",window=\"1h\"}",
        "0.177",
    );
    exprs += &expr_test(
        "llm_slo:window_coverage_ratio{model=\"good\",window=\"5m\"}",
        "llm_slo:window_coverage_ratio{model=\"good\",window=\"5m\"}",
        "1",
    );
    let series = SERIES.replace("\n  - ", "\n      - ");
    format!(
        "rule_files: [{rules}]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:{series}    alert_rule_test:\n{alerts}    promql_expr_test:\n{exprs}"
    )
}

#[test]
fn generated_rules_pass_promtool_check_and_unit_tests() {
    let promtool = require_tool!("promtool");
    let dir = tempfile::tempdir().unwrap();
    let rules = goodput_rules(dir.path(), CONFIG, "prometheus");
    let rules_path = dir.path().join("rules.yml");
    std::fs::write(&rules_path, &rules).unwrap();
    let (ok, out) = run(Command::new(&promtool).arg("check").arg("rules").arg(&rules_path));
    assert!(ok, "promtool check rules failed:\n{out}");

    let tests_path = dir.path().join("tests.yml");
    std::fs::write(&tests_path, tests_file("rules.yml", true)).unwrap();
    if std::env::var_os("GOODPUT_KEEP_RULES_TEST").is_some() {
        std::fs::copy(&rules_path, std::env::temp_dir().join("goodput-rules.yml")).unwrap();
        std::fs::copy(&tests_path, std::env::temp_dir().join("goodput-rules-tests.yml")).unwrap();
    }
    let (ok, out) = run(Command::new(&promtool).arg("test").arg("rules").arg(&tests_path));
    assert!(ok, "promtool test rules failed:\n{out}\n(tests file kept at {})", dir.keep().display());

    // The same harness with one wrong expectation must fail, or it proves nothing.
    std::fs::write(&tests_path, tests_file("rules.yml", false)).unwrap();
    let (ok, out) = run(Command::new(&promtool).arg("test").arg("rules").arg(&tests_path));
    assert!(!ok && out.contains("LLMGoodputDivergence"), "a wrong expectation passed:\n{out}");
}

#[test]
fn prometheusrule_wraps_the_same_groups() {
    let dir = tempfile::tempdir().unwrap();
    let plain: serde_json::Value = serde_saphyr::from_str(&goodput_rules(dir.path(), CONFIG, "prometheus")).unwrap();
    let pr: serde_json::Value = serde_saphyr::from_str(&goodput_rules(dir.path(), CONFIG, "prometheusrule")).unwrap();
    assert_eq!(pr["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(pr["kind"], "PrometheusRule");
    assert_eq!(pr["metadata"]["name"], "goodput");
    assert_eq!(pr["spec"], plain);
    let alerts: Vec<&str> =
        plain["groups"][1]["rules"].as_array().unwrap().iter().filter_map(|r| r["alert"].as_str()).collect();
    for name in [
        "LLMKVCacheSaturated",
        "LLMGoodputDivergence",
        "LLMTTFTAboveSLO",
        "LLMTPOTAboveSLO",
        "LLMErrorBudgetBurnFast",
        "LLMErrorBudgetBurnSlow",
        "LLMTargetDown",
        "LLMPreemptionsSustained",
        "LLMQueueGrowing",
    ] {
        assert_eq!(alerts.iter().filter(|a| **a == name).count(), 1, "{name} in {alerts:?}");
    }
}

/// Each latency histogram's bucket rate is recorded once per window and every quantile reads
/// that recording, so Prometheus computes the rate over the raw buckets once, not four times.
#[test]
fn each_bucket_rate_is_recorded_once_and_the_quantiles_read_it() {
    let dir = tempfile::tempdir().unwrap();
    let plain: serde_json::Value = serde_saphyr::from_str(&goodput_rules(dir.path(), CONFIG, "prometheus")).unwrap();
    let rules = plain["groups"][0]["rules"].as_array().unwrap();
    let exprs: Vec<&str> = rules.iter().filter_map(|r| r["expr"].as_str()).collect();
    // The config's window and those the latency alerts read have quantiles; the burn windows
    // need none.
    let mut checked = Vec::new();
    for w in ["1m", "5m", "30m", "1h", "6h"] {
        for (family, metric) in [
            ("llm_slo:ttft_seconds", "vllm:time_to_first_token_seconds"),
            ("llm_slo:tpot_seconds", "vllm:request_time_per_output_token_seconds"),
            ("llm_slo:e2e_seconds", "vllm:e2e_request_latency_seconds"),
        ] {
            let raw = format!("rate({metric}_bucket[{w}])");
            let recorded: Vec<&serde_json::Value> = rules
                .iter()
                .filter(|r| r["record"] == format!("{family}_bucket:rate") && r["labels"]["window"] == w)
                .collect();
            if recorded.is_empty() {
                // Only the windows an alert reads quantiles at have them.
                assert!(!exprs.iter().any(|e| e.contains(&raw)), "{raw} computed without a recording");
                continue;
            }
            assert_eq!(recorded.len(), 1, "{family} at {w}");
            assert_eq!(exprs.iter().filter(|e| e.contains(&raw)).count(), 1, "{raw} computed more than once");
            let quantiles: Vec<&str> = rules
                .iter()
                .filter(|r| r["record"] == family && r["labels"]["window"] == w)
                .map(|r| r["expr"].as_str().unwrap())
                .collect();
            assert_eq!(quantiles.len(), 4, "{family} at {w}");
            checked.push(w);
            for q in quantiles {
                assert!(q.contains(&format!("{family}_bucket:rate{{window=\"{w}\"}}")) && !q.contains("rate("), "{q}");
            }
        }
    }
    checked.dedup();
    assert!(checked.len() >= 2 && checked.contains(&"1m"), "quantile windows {checked:?}");
}

#[test]
fn disabled_rules_and_bad_configs() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yml");
    std::fs::write(
        &cfg,
        format!("{TARGETS}slos: [{{name: chat, ttft: 1s, objective: 0.99}}]\nalerting: {{rules: {{LLMQueueGrowing: {{enabled: false}}}}}}\n"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["rules", "--format", "prometheus", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success() && !text.contains("LLMQueueGrowing") && text.contains("LLMKVCacheSaturated"));
    std::fs::write(&cfg, format!("{TARGETS}slos: [{{name: chat, ttft: fast, objective: 0.99}}]\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_goodput")).args(["rules", "--config"]).arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ttft"));
}

#[test]
fn clamped_factor_and_selector_reach_the_promql() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yml");
    std::fs::write(&cfg, format!("{TARGETS}slos: [{{name: batch, ttft: 5s, objective: 0.9}}]\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["rules", "--format", "prometheus", "--selector", "job=\"vllm\"", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    let rules = v["groups"][1]["rules"].as_array().unwrap();
    let expr = |name: &str| rules.iter().find(|r| r["alert"] == name).unwrap()["expr"].as_str().unwrap().to_string();
    // 14.4 exceeds 1/(1 − 0.9), the highest possible burn: clamped, compared with >=.
    let max = 1.0 / (1.0 - 0.9_f64);
    assert!(expr("LLMErrorBudgetBurnFast").contains(&format!(">= {max}")), "{}", expr("LLMErrorBudgetBurnFast"));
    // 6 is reachable: kept, compared with >.
    assert!(expr("LLMErrorBudgetBurnSlow").contains("> 6 "), "{}", expr("LLMErrorBudgetBurnSlow"));
    assert!(expr("LLMTargetDown").contains("up{job=\"vllm\"} == 0"));
    let records = v["groups"][0]["rules"].as_array().unwrap();
    let mut seen = 0;
    for r in records {
        for piece in r["expr"].as_str().unwrap().split("vllm:").skip(1) {
            let rest = piece.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
            assert!(rest.starts_with("{job=\"vllm\""), "unselected series in {}", r["expr"]);
            seen += 1;
        }
    }
    assert!(seen > 20);
}

#[test]
fn an_unquoted_selector_is_refused_not_emitted() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yml");
    std::fs::write(&cfg, format!("{TARGETS}slos: [{{name: chat, ttft: 1s, objective: 0.99}}]\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["rules", "--format", "prometheus", "--selector", "job=vllm", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "no rules are printed for a bad selector");
    assert!(stderr.contains("must be quoted, like job=\"vllm\""), "{stderr}");
}
