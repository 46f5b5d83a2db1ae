//! Every error in a config file is reported in one run, in every section, each at the
//! line and column of its value; limits (minimum interval, node budget, error count) say
//! what they are. Positions are counted by hand from the YAML.

use std::process::Command;

use goodput::config::{self, ConfigError};

const OK_TARGETS: &str = "targets:\n  - name: a\n    url: http://127.0.0.1:8000/metrics\n";

fn errors(yaml: &str) -> Vec<ConfigError> {
    match config::from_str(yaml, "c.yaml") {
        Ok(_) => panic!("expected errors for:\n{yaml}"),
        Err(e) => e.0,
    }
}

/// `(line, column, message)` of each error, in the order reported.
fn shown(errs: &[ConfigError]) -> Vec<(u32, u32, String)> {
    errs.iter().map(|e| (e.pos.line, e.pos.column, e.message.clone())).collect()
}

/// Asserts the errors are exactly at `want` positions, in order, each message starting with
/// its prefix.
fn assert_errors(yaml: &str, want: &[(u32, u32, &str)]) {
    let got = shown(&errors(yaml));
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for ((line, col, msg), (wl, wc, prefix)) in got.iter().zip(want) {
        assert_eq!((line, col), (wl, wc), "{msg}");
        assert!(msg.starts_with(prefix), "{msg:?} does not start with {prefix:?}");
    }
}

/// One error each in `alerting`, `gpu` and `cost`: a typo'd key, a bad duration, a wrong type.
const THREE_SECTIONS: &str = "targets:
  - name: a
    url: http://127.0.0.1:8000/metrics
alerting:
  rules:
    LLMKVCacheSaturated:
      for: 2m
      treshold: 0.9
gpu:
  nvml:
    interval: 5x
cost:
  gpu_hour_dollars: [2.5]
";

#[test]
fn three_errors_in_three_sections_are_all_reported() {
    assert_errors(
        THREE_SECTIONS,
        &[
            (
                8,
                7,
                "unknown key \"treshold\" in alerting.rules.LLMKVCacheSaturated; expected one of enabled, for, severity, threshold",
            ),
            (11, 15, "gpu.nvml.interval: invalid duration \"5x\""),
            // The rejected required value is not reported again as missing.
            (13, 21, "cost.gpu_hour_dollars: wrong type: expected a plain number like 0.99, found a list"),
        ],
    );
}

#[test]
fn check_prints_every_error_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goodput.yaml");
    std::fs::write(&path, THREE_SECTIONS).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_goodput")).args(["check", "--config"]).arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let p = path.display();
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines[0].starts_with(&format!("error: {p}:8:7: unknown key \"treshold\"")), "{stderr}");
    assert!(lines[1].starts_with(&format!("error: {p}:11:15: gpu.nvml.interval: invalid duration")), "{stderr}");
    assert!(lines[2].starts_with(&format!("error: {p}:13:21: cost.gpu_hour_dollars: wrong type")), "{stderr}");
    assert_eq!(lines[3], format!("{p}: 3 error(s); see docs/config.md for every key"), "{stderr}");
}

#[test]
fn a_list_where_a_mapping_belongs_and_a_bad_value_are_both_reported() {
    let yaml = format!("{OK_TARGETS}scrape:\n  - interval: 5s\nquantiles: [0.5, 2]\n");
    assert_errors(
        &yaml,
        &[
            (
                5,
                3,
                "scrape: wrong type: expected a mapping with the keys interval, timeout, body_limit, gzip, follow_redirects, max_models, max_series, target_grace, found a list",
            ),
            (6, 18, "quantile 2 is out of range"),
        ],
    );
    // A mapping where the target list belongs: reported once, not again as "no targets".
    let yaml = "targets:\n  name: a\n  url: http://127.0.0.1:8000/metrics\nwindows: [1m, 1x]\n";
    assert_errors(
        yaml,
        &[
            (2, 3, "targets: wrong type: expected a list (e.g. [a, b], or one `- item` per line), found a mapping"),
            (4, 15, "window: invalid duration \"1x\""),
        ],
    );
}

#[test]
fn errors_inside_a_rejected_section_and_after_it_are_found() {
    // targets[0] lacks its url; its unknown key, the SLO's bad objective and the alerting
    // typo further down are reported too, in file order.
    let yaml = "targets:\n  - name: a\n    engin: vllm\nslos:\n  - {name: s, ttft: 1s, objective: high}\nalerting: {resend_interval: 1x}\n";
    assert_errors(
        yaml,
        &[
            (2, 5, "missing required key \"url\" in targets[0]"),
            (3, 5, "unknown key \"engin\" in targets[0]"),
            // The rejected objective is not reported again as missing.
            (5, 36, "slos[0].objective: wrong type: expected a plain number like 0.99, found \"high\""),
            (6, 29, "alerting.resend_interval: invalid duration \"1x\""),
        ],
    );
}

#[test]
fn values_of_every_section_are_checked_where_written() {
    let yaml = format!(
        "{OK_TARGETS}alerting:\n  queue_capacity: 0\n  rules:\n    LLMKVCacheSaturated: {{threshold: 1.5}}\n    LLMErrorBudgetBurnFast: {{factor: -1, long_window: 0s}}\ngpu:\n  dcgm: {{url: 'ftp://h/metrics'}}\n  peaks: [{{match: a10g, bf16_tflops: 0, hbm_gbps: 600}}]\ncost: {{gpu_hour_dollars: 2.5, gpus: 0}}\n"
    );
    assert_errors(
        &yaml,
        &[
            (5, 19, "alerting.queue_capacity: 0 is out of range; expected at least 1"),
            (7, 38, "alerting.rules.LLMKVCacheSaturated.threshold: 1.5 is out of range; expected a ratio in (0, 1]"),
            (8, 38, "alerting.rules.LLMErrorBudgetBurnFast.factor: -1 is out of range; expected a number > 0"),
            (8, 55, "alerting.rules.LLMErrorBudgetBurnFast.long_window: 0s must be longer than 0s"),
            (10, 15, "gpu.dcgm.url: \"ftp://h/metrics\" must start with http:// or https://"),
            (11, 38, "gpu.peaks[0].bf16_tflops: 0 is out of range; expected a number > 0"),
            (12, 37, "cost.gpus: 0 is out of range; expected a number > 0"),
        ],
    );
}

#[test]
fn intervals_below_the_minimum_are_refused_with_the_minimum() {
    let yaml = "evaluation_interval: 10ms\nscrape: {interval: 1ms}\ntargets:\n  - {name: a, url: 'http://127.0.0.1:8000/metrics', interval: 50ms}\ngpu: {nvml: {interval: 1ms}}\nalerting: {resend_interval: 99ms}\n";
    let errs = errors(yaml);
    let at: Vec<(u32, u32)> = errs.iter().map(|e| (e.pos.line, e.pos.column)).collect();
    assert_eq!(at, [(1, 22), (2, 20), (4, 63), (5, 24), (6, 29)], "{errs:#?}");
    for e in &errs {
        assert!(e.message.contains("is shorter than the minimum interval of 100ms; use at least 100ms"), "{e}");
    }
    assert_eq!(
        config::from_str(yaml, "c.yaml").unwrap_err().0[1].message,
        "scrape.interval: 1ms is shorter than the minimum interval of 100ms; use at least 100ms (1s or more outside tests)"
    );
    // The minimum itself is accepted.
    let ok = "scrape: {interval: 100ms}\ntargets: [{name: a, url: 'http://127.0.0.1:8000/metrics'}]\n";
    let c = config::from_str(ok, "c.yaml").unwrap().config;
    assert_eq!(c.scrape.interval, goodput::duration::MIN_INTERVAL);
}

#[test]
fn a_config_over_the_node_budget_says_the_limit_and_what_to_do() {
    let items = vec!["1m"; config::MAX_NODES].join(",");
    let errs = errors(&format!("{OK_TARGETS}windows: [{items}]\n"));
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let msg = &errs[0].message;
    assert!(msg.starts_with("the file has more than 250000 YAML nodes"), "{msg}");
    assert!(msg.contains("a target or an SLO takes 5 to 10 nodes"), "{msg}");
    assert!(msg.contains("split the targets over several goodput instances"), "{msg}");
    assert!(!msg.contains("budget breached"), "{msg}");
    assert_eq!(errs[0].pos.line, 4, "{}", errs[0]);
}

#[test]
fn past_the_error_limit_the_rest_is_summarised() {
    let many = (0..150).map(|i| format!("  k{i}: 1\n")).collect::<String>();
    let errs = errors(&format!("{OK_TARGETS}scrape:\n{many}"));
    assert_eq!(errs.len(), config::MAX_ERRORS + 1, "{:#?}", &errs[..3]);
    assert_eq!((errs[0].pos.line, errs[0].pos.column), (5, 3));
    assert!(errs[0].message.starts_with("unknown key \"k0\" in scrape"), "{}", errs[0]);
    assert_eq!(errs[config::MAX_ERRORS].to_string(), "c.yaml: 50 more errors not shown; fix these and check again");
}

#[test]
fn the_root_must_be_a_mapping() {
    let errs = errors("- targets\n");
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].to_string().starts_with("c.yaml:1:1: the config must be a mapping of keys such as `targets:`"),
        "{}",
        errs[0]
    );
}

#[test]
fn sharing_a_mapping_among_a_hundred_targets_is_within_the_alias_limit() {
    let mut yaml = String::from("targets:\n");
    for i in 0..100 {
        let headers = if i == 0 { "&h {A: a, B: b, C: c, D: d, E: e}" } else { "*h" };
        yaml.push_str(&format!(
            "  - {{name: t{i}, url: 'http://127.0.0.1:{}/metrics', headers: {headers}}}\n",
            8000 + i
        ));
    }
    let c = config::from_str(&yaml, "c.yaml").unwrap_or_else(|e| panic!("{e}")).config;
    assert_eq!(c.targets.len(), 100);
    assert_eq!(c.targets[99].headers.len(), 5);
}
