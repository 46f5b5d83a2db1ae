//! `goodput check --config NEW --against URL` against the real binary running: it lists the
//! changes reloading NEW would make, in the words and order of the daemon's own reload log
//! line, and the hash NEW would run under, which the daemon shows once it has reloaded NEW;
//! the command-line overrides the daemon runs with apply to NEW too. The same file says it
//! would change nothing; an unreachable daemon, or a NEW that does not validate, exits 1.

use crate::common;
use crate::reload_common;

use std::process::Command;

use common::{Fixture, vllm_body};
use reload_common::{BIN, Daemon, free_port};

/// `goodput check -c FILE --against URL`: (exit code, stdout, stderr).
fn check_against(file: &std::path::Path, url: &str) -> (i32, String, String) {
    let out = Command::new(BIN).args(["check", "-c"]).arg(file).args(["--against", url]).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_against_a_running_daemon_says_what_its_reload_will_do() {
    goodput::scrape::install_crypto_provider();
    let engine = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let hook = Fixture::refused_addr().await;
    let port = free_port();
    let yaml = |ttft: &str, more: &str, hook_path: &str| {
        format!(
            "listen: 127.0.0.1:{port}\nevaluation_interval: 500ms\nscrape: {{interval: 500ms}}\nwindows: [1m]\n\
             targets:\n  - {{name: a, url: 'http://{}/metrics', engine: vllm}}\n\
             alerting: {{webhook: {{url: 'http://{hook}/{hook_path}'}}}}\n\
             slos:\n  - {{name: fast, ttft: {ttft}, objective: 0.99}}\n{more}",
            engine.addr
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(dir.path(), port, &yaml("200ms", "", "one"), &["--no-alert-delivery"]);
    d.until_metric_at("llm_slo_target_up", &[("target", "a")], |v| v == 1.0).await;
    let running = d.json("/api/v1/config").await.unwrap();
    let old_hash = running["data"]["hash"].as_str().unwrap().to_string();
    assert_eq!(running["data"]["overrides"], serde_json::json!(["--no-alert-delivery"]));

    // A new threshold, a new SLO and a new webhook, which --no-alert-delivery ignores.
    let new = yaml("250ms", "  - {name: full, e2e: 10s, objective: 0.9}\n", "two");
    let file = dir.path().join("new.yaml");
    std::fs::write(&file, &new).unwrap();
    let (code, out, err) = check_against(&file, &format!("127.0.0.1:{port}"));
    assert_eq!(code, 0, "{out}{err}");
    let first = out.lines().next().unwrap();
    let said = format!("would make 2 change(s) (config hash {old_hash} → ");
    assert!(first.contains(&format!("daemon at http://127.0.0.1:{port}")) && first.contains(&said), "{out}");
    let new_hash = first.rsplit(' ').next().unwrap().trim_end_matches("):").to_string();
    let listed: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix("  ")).collect();
    assert_eq!(listed.len(), 2, "{out}");
    assert!(listed[0].starts_with("slos[fast]: ttft 200ms → 250ms ("), "{out}");
    assert!(listed[1].starts_with("slos[full]: added ("), "{out}");
    assert!(out.contains("the daemon runs with --no-alert-delivery"), "{out}");
    assert!(!out.contains("webhook"), "the override was not applied: {out}");

    // The reload does what check said, in the same words, and runs under the hash it said.
    let line = d.reload(&new).await;
    assert!(line.contains(&format!("2 change(s): {}", listed.join("; "))), "check said:\n{out}\nthe daemon:\n{line}");
    assert!(line.contains(&format!("hash={new_hash}")), "{line}");
    assert_eq!(d.metric_at("llm_slo_config_info", &[("hash", &new_hash)]).await, Some(1.0));

    let (code, out, _) = check_against(&file, &format!("http://127.0.0.1:{port}/"));
    assert_eq!(code, 0);
    assert!(out.starts_with(&format!("reloading {} into the daemon at", file.display())), "{out}");
    assert!(out.contains(&format!("would change nothing (config hash {new_hash})")), "{out}");

    // Nothing listening: exit 1, saying where it looked.
    let down = Fixture::refused_addr().await;
    let (code, out, err) = check_against(&file, &format!("http://{down}"));
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(err.contains(&format!("cannot read the running config from http://{down}/api/v1/config")), "{err}");
    assert!(err.contains("is `goodput run` listening there?"), "{err}");

    // A NEW that does not validate: its errors, and the daemon is not asked.
    std::fs::write(&file, new.replace("objective: 0.9}", "objective: 9}")).unwrap();
    let (code, _, err) = check_against(&file, &format!("http://{down}"));
    assert_eq!(code, 1);
    assert!(err.contains("objective 9 is out of range") && !err.contains("cannot read"), "{err}");
    d.stop();
}
