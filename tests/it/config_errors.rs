//! `goodput check` errors: each case asserts the exact file:line:column and the wording
//! that tells the user what is expected. Positions are counted by hand from the YAML.

use goodput::config::{self, ConfigError};

const OK_TARGETS: &str = "targets:\n  - name: a\n    url: http://127.0.0.1:8000/metrics\n";

fn errors(yaml: &str) -> Vec<ConfigError> {
    match config::from_str(yaml, "config.yaml") {
        Ok(_) => panic!("expected errors for:\n{yaml}"),
        Err(e) => e.0,
    }
}

/// Asserts exactly one error, at `line:col`, whose message contains every `needle`.
fn one_error(yaml: &str, line: u32, col: u32, needles: &[&str]) {
    let errs = errors(yaml);
    assert_eq!(errs.len(), 1, "expected one error, got {errs:#?}");
    let e = &errs[0];
    let shown = e.to_string();
    assert_eq!((e.pos.line, e.pos.column), (line, col), "wrong position in {shown:?}");
    assert!(shown.starts_with(&format!("config.yaml:{line}:{col}: ")), "{shown}");
    for n in needles {
        assert!(shown.contains(n), "{shown:?} lacks {n:?}");
    }
}

#[test]
fn unknown_key_in_scrape() {
    let yaml = format!("{OK_TARGETS}scrape:\n  interval: 5s\n  intervall: 10s\n");
    one_error(
        &yaml,
        6,
        3,
        &[
            r#"unknown key "intervall" in scrape; expected one of interval, timeout, body_limit, gzip, follow_redirects, max_models, max_series, target_grace"#,
        ],
    );
}

#[test]
fn server_limits_point_at_the_value() {
    one_error(
        &format!("{OK_TARGETS}server:\n  max_connections: 0\n"),
        5,
        20,
        &["server.max_connections must be at least 1, got 0"],
    );
    one_error(&format!("{OK_TARGETS}server: {{idle_timeout: 0s}}\n"), 4, 24, &["server.idle_timeout: "]);
    one_error(
        &format!("{OK_TARGETS}server: {{header_read_timeout: soon}}\n"),
        4,
        31,
        &["server.header_read_timeout: "],
    );
    one_error(&format!("{OK_TARGETS}server: {{max_conns: 5}}\n"), 4, 10, &["unknown key \"max_conns\" in server"]);
}

#[test]
fn unknown_top_level_key() {
    let yaml = format!("listen: 127.0.0.1:9464\nlisten_addr: x\n{OK_TARGETS}");
    one_error(&yaml, 2, 1, &[r#"unknown key "listen_addr" in the top level"#, "listen, evaluation_interval, scrape"]);
}

#[test]
fn unknown_key_in_target() {
    let yaml = "targets:\n  - name: a\n    url: http://127.0.0.1:8000/metrics\n    engin: vllm\n";
    one_error(yaml, 4, 5, &[r#"unknown key "engin" in targets[0]"#, "engine"]);
}

#[test]
fn missing_target_url() {
    let yaml = "targets:\n  - name: a\n";
    let errs = errors(yaml);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(errs[0].message.contains("missing required key \"url\""), "{}", errs[0]);
    assert_eq!(errs[0].pos.line, 2, "{}", errs[0]);
}

#[test]
fn bad_duration() {
    let yaml = format!("{OK_TARGETS}scrape:\n  interval: 5x\n");
    one_error(&yaml, 5, 13, &["scrape.interval", "invalid duration", "write e.g. 5s"]);
}

#[test]
fn timeout_longer_than_interval() {
    let yaml = format!("{OK_TARGETS}scrape:\n  interval: 5s\n  timeout: 10s\n");
    one_error(&yaml, 6, 12, &["scrape.timeout (10s) is longer than scrape.interval (5s)"]);
}

#[test]
fn target_timeout_longer_than_its_interval() {
    let yaml = "targets:\n  - name: a\n    url: http://127.0.0.1:8000/metrics\n    interval: 2s\n    timeout: 3s\n";
    one_error(yaml, 5, 14, &["target \"a\": timeout (3s) is longer than its interval (2s)"]);
}

#[test]
fn duplicate_target_names() {
    let yaml = "targets:\n  - name: a\n    url: http://127.0.0.1:8000/metrics\n  - name: a\n    url: http://127.0.0.1:8001/metrics\n";
    one_error(yaml, 4, 11, &["duplicate target name \"a\""]);
}

#[test]
fn bad_urls() {
    let yaml = "targets:\n  - name: a\n    url: ftp://127.0.0.1/metrics\n  - name: b\n    url: not a url\n";
    let errs = errors(yaml);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_eq!((errs[0].pos.line, errs[0].pos.column), (3, 10));
    assert!(errs[0].message.contains("scheme \"ftp\""), "{}", errs[0]);
    assert_eq!((errs[1].pos.line, errs[1].pos.column), (5, 10));
    assert!(errs[1].message.contains("expected an http:// or https:// URL"), "{}", errs[1]);
}

#[test]
fn unknown_engine() {
    let yaml = "targets:\n  - name: a\n    url: http://127.0.0.1:8000/metrics\n    engine: ollama\n";
    one_error(
        yaml,
        4,
        13,
        &["unknown engine \"ollama\"; expected one of auto, vllm, sglang, tgi, trtllm, nim, dynamo, llamacpp"],
    );
}

#[test]
fn objective_out_of_range() {
    let yaml = format!("{OK_TARGETS}slos:\n  - name: chat\n    ttft: 500ms\n    objective: 99\n");
    one_error(&yaml, 7, 16, &["objective 99 is out of range", "strictly between 0 and 1"]);
}

#[test]
fn slo_without_clause_and_unknown_target() {
    let yaml = format!("{OK_TARGETS}slos:\n  - name: chat\n    objective: 0.99\n    targets: [a, zz]\n");
    let errs = errors(&yaml);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_eq!((errs[0].pos.line, errs[0].pos.column), (5, 11));
    assert!(errs[0].message.contains("set at least one of ttft, tpot, e2e"));
    assert_eq!((errs[1].pos.line, errs[1].pos.column), (7, 18));
    assert!(errs[1].message.contains("unknown target \"zz\"; expected one of a"));
}

#[test]
fn kv_thresholds_out_of_order() {
    let yaml = format!("{OK_TARGETS}kv_cache:\n  target_low: 0.8\n  target_high: 0.75\n");
    one_error(&yaml, 6, 16, &["kv_cache thresholds out of order: target_low (0.8) must be below target_high (0.75)"]);
}

#[test]
fn kv_threshold_out_of_unit_range() {
    let yaml = format!("{OK_TARGETS}kv_cache: {{critical: 1.5}}\n");
    one_error(&yaml, 4, 22, &["kv_cache.critical is 1.5; expected a ratio between 0 and 1"]);
}

#[test]
fn bad_quantile_and_duplicate_window() {
    let yaml = format!("{OK_TARGETS}windows: [1m, 5m, 1m]\nquantiles: [0.5, 1.0]\n");
    let errs = errors(&yaml);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_eq!((errs[0].pos.line, errs[0].pos.column), (4, 19));
    assert!(errs[0].message.contains("duplicate window 1m"));
    assert_eq!((errs[1].pos.line, errs[1].pos.column), (5, 18));
    assert!(errs[1].message.contains("quantile 1 is out of range"));
}

#[test]
fn bad_body_limit() {
    let yaml = format!("{OK_TARGETS}scrape: {{body_limit: 16 parsecs}}\n");
    one_error(&yaml, 4, 22, &["scrape.body_limit", "unknown size unit \"parsecs\""]);
}

#[test]
fn zero_or_non_integer_cardinality_limits() {
    let yaml = format!("{OK_TARGETS}scrape: {{max_models: 0}}\n");
    one_error(&yaml, 4, 22, &["scrape.max_models is 0, which would refuse every scrape", "at least 1"]);
    let yaml = format!("{OK_TARGETS}    max_series: 0\n");
    one_error(&yaml, 4, 17, &["max_series is 0"]);
    let yaml = format!("{OK_TARGETS}scrape: {{max_series: 1.5e5}}\n");
    one_error(&yaml, 4, 22, &["scrape.max_series", "whole number"]);
}

#[test]
fn bad_listen() {
    let yaml = format!("listen: localhost\n{OK_TARGETS}");
    one_error(&yaml, 1, 9, &["invalid listen address \"localhost\"; expected IP:PORT"]);
}

#[test]
fn wrong_type() {
    let yaml = format!("{OK_TARGETS}windows: 5m\n");
    one_error(&yaml, 4, 10, &["wrong type: expected a list"]);
}

#[test]
fn alerting_errors() {
    let yaml = format!(
        "{OK_TARGETS}alerting:\n  alertmanager: {{url: http://127.0.0.1:9093}}\n  rules:\n    LLMKVCacheSaturated: {{for: 2m, severity: pager}}\n"
    );
    one_error(
        &yaml,
        7,
        46,
        &[r#"alerting.rules.LLMKVCacheSaturated.severity: unknown value "pager"; expected one of page, ticket"#],
    );
    let yaml = format!("{OK_TARGETS}alerting:\n  rules:\n    LLMNope: {{enabled: false}}\n");
    one_error(&yaml, 6, 5, &["unknown key \"LLMNope\" in alerting.rules; expected one of LLMKVCacheSaturated"]);
    // Values of the alerting section are checked where they are written, like any other.
    let yaml = format!("{OK_TARGETS}alerting:\n  alertmanager: {{url: 'ftp://x'}}\n");
    one_error(&yaml, 5, 23, &["alerting.alertmanager.url: \"ftp://x\" must start with http:// or https://"]);
}

#[test]
fn runbook_url_errors_point_at_the_value_or_the_deprecated_key() {
    let yaml = format!("{OK_TARGETS}alerting:\n  runbook_url: https://rb.example/runbooks.md#top\n");
    one_error(
        &yaml,
        5,
        16,
        &["alerting.runbook_url: \"https://rb.example/runbooks.md#top\" has a #fragment", "{alertname}"],
    );
    let yaml = format!("{OK_TARGETS}alerting:\n  runbook_url: wiki/llm\n");
    one_error(
        &yaml,
        5,
        16,
        &["alerting.runbook_url: \"wiki/llm\" is not a URL", "https://goodput.example.com/runbooks/"],
    );
    let yaml = format!(
        "{OK_TARGETS}alerting:\n  runbook_url: https://rb.example/\n  runbook_base_url: https://wiki.example.com/llm\n"
    );
    one_error(
        &yaml,
        6,
        3,
        &[
            "alerting.runbook_base_url and alerting.runbook_url are both set; remove runbook_base_url, which is deprecated",
        ],
    );
}

#[test]
fn unknown_key_in_alert_rule() {
    let yaml = format!("{OK_TARGETS}alerting:\n  rules:\n    LLMTargetDown: {{fore: 1m}}\n");
    one_error(
        &yaml,
        6,
        21,
        &["unknown key \"fore\" in alerting.rules.LLMTargetDown; expected one of enabled, for, severity"],
    );
}

#[test]
fn duplicate_yaml_key() {
    let yaml = format!("{OK_TARGETS}scrape:\n  interval: 5s\n  interval: 10s\n");
    one_error(&yaml, 6, 3, &["duplicate"]);
}

#[test]
fn no_targets() {
    let errs = errors("listen: 127.0.0.1:9464\n");
    assert_eq!(errs.len(), 1);
    assert_eq!(
        errs[0].to_string(),
        "config.yaml: no targets: add a `targets:` list with at least one {name, url} entry, or a `discovery:` source"
    );
}

#[test]
fn all_errors_reported_at_once() {
    let yaml = "scrape: {interval: 0s}\ntargets:\n  - name: a\n    url: http://127.0.0.1:1/metrics\n    engine: x\nquantiles: [2]\n";
    let errs = errors(yaml);
    let lines: Vec<u32> = errs.iter().map(|e| e.pos.line).collect();
    assert_eq!(lines, vec![1, 5, 6], "{errs:#?}");
}

#[test]
fn missing_objective_points_at_the_slo() {
    let yaml = format!("{OK_TARGETS}slos:\n  - name: chat\n    ttft: 1s\n");
    one_error(&yaml, 5, 11, &["slo \"chat\" has no objective; add e.g. objective: 0.99"]);
}

#[test]
fn non_numeric_quantile() {
    let yaml = format!("{OK_TARGETS}quantiles: [0.5, abc]\n");
    one_error(&yaml, 4, 18, &[r#"quantiles[1]: wrong type: expected a plain number like 0.99, found "abc""#]);
}

#[test]
fn every_section_is_named_in_unknown_key_errors() {
    let cases = [
        (format!("{OK_TARGETS}slos:\n  - {{name: s, ttft: 1s, objective: 0.9, bogus: 1}}\n"), "slos[0]", 5),
        (format!("{OK_TARGETS}kv_cache: {{bogus: 1}}\n"), "kv_cache", 4),
        (format!("{OK_TARGETS}alerting: {{bogus: 1}}\n"), "alerting", 4),
        (format!("{OK_TARGETS}alerting: {{webhook: {{url: 'http://h', bogus: 1}}}}\n"), "alerting.webhook", 4),
    ];
    for (yaml, section, line) in cases {
        let errs = errors(&yaml);
        assert_eq!(errs.len(), 1, "{errs:#?}");
        let want = format!("unknown key \"bogus\" in {section}; expected one of ");
        assert!(errs[0].message.starts_with(&want), "{} (wanted {want:?})", errs[0]);
        assert_eq!(errs[0].pos.line, line, "{}", errs[0]);
    }
}

#[test]
fn alias_bomb_is_refused_quickly() {
    // Nine levels of ten-fold aliases: 10^9 nodes if expanded.
    let mut yaml = String::from("windows:\n  - &a0 [1m, 1m, 1m, 1m, 1m, 1m, 1m, 1m, 1m, 1m]\n");
    for i in 1..9 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        yaml.push_str(&format!("  - &a{i} [{refs}]\n"));
    }
    let began = std::time::Instant::now();
    let errs = errors(&format!("{OK_TARGETS}{yaml}"));
    assert!(began.elapsed() < std::time::Duration::from_secs(2), "took {:?}", began.elapsed());
    assert_eq!(errs.len(), 1, "{errs:#?}");
    // At the alias where the expansion passed the limit, with the limit and what to do.
    assert!((6..=13).contains(&errs[0].pos.line), "{}", errs[0]);
    let want = format!("aliases (*name) in this file repeat more than {} YAML events", config::MAX_ALIAS_EVENTS);
    assert!(errs[0].message.starts_with(&want), "{}", errs[0]);
    assert!(errs[0].message.contains("write the repeated parts out"), "{}", errs[0]);
}

#[test]
fn a_broken_target_is_reported_once_not_again_by_slos() {
    let yaml = "targets:\n  - name: a\n    url: nope\nslos:\n  - {name: s, ttft: 1s, objective: 0.9, targets: [a]}\n";
    one_error(yaml, 3, 10, &["url: invalid URL \"nope\""]);
}

#[test]
fn a_rejected_url_is_quoted_without_its_credentials() {
    let yaml = "targets:\n  - name: a\n    url: ftp://bob:pw-SECRET@h/m?token=tok-SECRET\n";
    one_error(yaml, 3, 10, &["unsupported URL \"ftp://bob:xxxxx@h/m?token=xxxxx\""]);
    let yaml = format!("{OK_TARGETS}alerting:\n  alertmanager: {{url: 'ftp://am:pw-SECRET@x'}}\n");
    one_error(&yaml, 5, 23, &["\"ftp://am:xxxxx@x\" must start with http:// or https://"]);
    for e in errors(&yaml).iter().chain(&errors("targets:\n  - name: a\n    url: ftp://bob:pw-SECRET@h/\n")) {
        assert!(!e.to_string().contains("SECRET"), "{e}");
    }
}

#[test]
fn state_max_size_is_a_size_of_at_least_a_mebibyte() {
    let with = |size: &str| format!("{OK_TARGETS}state_dir: /var/lib/goodput\nstate_max_size: {size}\n");
    one_error(&with("12 parsecs"), 5, 17, &["state_max_size: ", "unknown size unit \"parsecs\""]);
    one_error(&with("100KiB"), 5, 17, &["state_max_size: \"100KiB\" is under 1MiB", "the default is 512MiB"]);
    let state = |yaml: &str| config::from_str(yaml, "config.yaml").unwrap().config.state.unwrap();
    assert_eq!(state(&with("2GiB")).max_size, 2 << 30);
    assert_eq!(state(&format!("{OK_TARGETS}state_dir: /var/lib/goodput\n")).max_size, 512 << 20);
    // Without state_dir there is nothing to bound: a warning, not an error.
    let loaded = config::from_str(&format!("{OK_TARGETS}state_max_size: 2GiB\n"), "config.yaml").unwrap();
    assert!(loaded.config.state.is_none());
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(loaded.warnings[0].message.starts_with("state_max_size has no effect without state_dir"));
}
