//! `otlp:` and `targets[].traces:` in the config: defaults, and each mistake reported at
//! its file:line:column with what to write instead. Positions are counted by hand.

use goodput::config::{self, ConfigError, DEFAULT_OTLP_BODY_LIMIT};

const TARGETS: &str = "targets:\n  - {name: a, url: 'http://127.0.0.1:8000/metrics'}\n  - {name: b, url: 'http://127.0.0.1:8001/metrics', traces: {service_name: vllm-b}}\n";

fn errors(yaml: &str) -> Vec<ConfigError> {
    match config::from_str(yaml, "c.yaml") {
        Ok(_) => panic!("expected errors for:\n{yaml}"),
        Err(e) => e.0,
    }
}

fn one_error(yaml: &str, line: u32, col: u32, needles: &[&str]) {
    let errs = errors(yaml);
    assert_eq!(errs.len(), 1, "expected one error, got {errs:#?}");
    let shown = errs[0].to_string();
    assert!(shown.starts_with(&format!("c.yaml:{line}:{col}: ")), "{shown}");
    for n in needles {
        assert!(shown.contains(n), "{shown:?} lacks {n:?}");
    }
}

#[test]
fn the_receiver_and_service_names_have_defaults() {
    let c = config::from_str(&format!("otlp: {{listen: 0.0.0.0:4318}}\n{TARGETS}"), "c.yaml").unwrap().config;
    let otlp = c.otlp.expect("otlp is configured");
    assert_eq!(otlp.listen, "0.0.0.0:4318".parse().unwrap());
    assert_eq!(otlp.body_limit, DEFAULT_OTLP_BODY_LIMIT);
    assert_eq!(c.targets[0].service_name(), "a", "a target's name is its default service name");
    assert_eq!(c.targets[1].service_name(), "vllm-b");
    assert!(c.targets[0].traces.is_none());

    let c = config::from_str(&format!("otlp: {{listen: '127.0.0.1:4318', body_limit: 1MiB}}\n{TARGETS}"), "c.yaml")
        .unwrap()
        .config;
    assert_eq!(c.otlp.unwrap().body_limit, 1 << 20);
    assert!(config::from_str(TARGETS, "c.yaml").unwrap().config.otlp.is_none());
}

#[test]
fn a_bad_listen_address_or_body_limit_points_at_the_value() {
    one_error(
        &format!("otlp: {{listen: localhost}}\n{TARGETS}"),
        1,
        16,
        &["otlp.listen: invalid address", "0.0.0.0:4318"],
    );
    one_error(
        &format!("otlp:\n  listen: 0.0.0.0:4318\n  body_limit: 10\n{TARGETS}"),
        3,
        15,
        &["otlp.body_limit is 10 bytes", "1KiB"],
    );
    one_error(&format!("otlp: {{listen: 0.0.0.0:4318, body_limit: lots}}\n{TARGETS}"), 1, 42, &["otlp.body_limit: "]);
    one_error(&format!("otlp: {{}}\n{TARGETS}"), 1, 7, &["missing required key \"listen\" in otlp"]);
    one_error(
        &format!("listen: 127.0.0.1:9464\notlp: {{listen: 0.0.0.0:9464}}\n{TARGETS}"),
        2,
        16,
        &["otlp.listen (0.0.0.0:9464) is the address of `listen`", "4318"],
    );
}

#[test]
fn two_targets_cannot_take_the_same_service() {
    let yaml = "otlp: {listen: 0.0.0.0:4318}\ntargets:\n  - {name: a, url: 'http://127.0.0.1:8000/metrics'}\n  - {name: b, url: 'http://127.0.0.1:8001/metrics', traces: {service_name: a}}\n";
    one_error(yaml, 4, 76, &["targets \"a\" and \"b\" both take spans of service.name \"a\"", "traces.service_name"]);
    let yaml = "targets:\n  - {name: a, url: 'http://127.0.0.1:8000/metrics', traces: {service_name: ' '}}\n";
    one_error(yaml, 2, 76, &["traces.service_name is empty", "OTEL_SERVICE_NAME"]);
    let yaml = "targets:\n  - {name: a, url: 'http://127.0.0.1:8000/metrics', traces: {service: a}}\n";
    let errs = errors(yaml);
    assert!(errs.iter().any(|e| e.to_string().contains("unknown key \"service\"")), "{errs:#?}");
}

#[test]
fn traces_without_a_receiver_is_a_warning() {
    let loaded = config::from_str(TARGETS, "c.yaml").unwrap();
    let w: Vec<String> = loaded.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(w.len(), 1, "{w:#?}");
    assert!(w[0].starts_with("c.yaml:3:61: ") && w[0].contains("without a top-level `otlp: {listen: ADDR}`"), "{w:#?}");
}

#[test]
fn goodput_check_says_where_spans_are_received_and_whose_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    std::fs::write(&path, format!("otlp: {{listen: 127.0.0.1:4318}}\n{TARGETS}")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("  receive OTLP spans on 127.0.0.1:4318 (POST /v1/traces, body limit 4194304 bytes)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(" spans of service.name \"a\"\n") && stdout.contains(" spans of service.name \"vllm-b\"\n"),
        "{stdout}"
    );
}
