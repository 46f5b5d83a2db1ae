//! File-based discovery in a running daemon, against real HTTP engines on 127.0.0.1: a
//! target written into a Prometheus-format file is scraped on the next tick beside the
//! static one, with its labels on /metrics and in the report; removed, it is no longer
//! scraped but keeps its windows through the grace period, goes on where it was when it
//! comes back, and is dropped once the grace period passes. A file that stops parsing
//! keeps the targets it gave.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::support::PATIENCE;

use common::{FastClock, Fixture, get, metrics_samples, vllm_body};
use goodput::config;
use goodput::daemon;
use goodput::report::Report;

/// Polls the daemon's report until `ok` holds for it, for up to [`PATIENCE`].
async fn until(d: &daemon::Daemon, what: &str, ok: impl Fn(&Report) -> bool) -> Arc<Report> {
    let began = std::time::Instant::now();
    while began.elapsed() < PATIENCE {
        let r = d.report();
        if ok(&r) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: not seen within {PATIENCE:?}; last report: {:?}", d.report().targets);
}

fn target<'a>(r: &'a Report, name: &str) -> Option<&'a goodput::report::TargetReport> {
    r.targets.iter().find(|t| t.target == name)
}

/// The coverage of the target's 5m window: it grows with every scrape the window holds, and
/// falls back near 0 if the target's windows were reset.
fn coverage(r: &Report, name: &str) -> f64 {
    target(r, name)
        .and_then(|t| t.models.first())
        .and_then(|m| m.windows.iter().find(|w| w.window.label() == "5m"))
        .map_or(0.0, |w| w.coverage)
}

/// Replaces `path` atomically, as a tool writing target files should.
fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn file_sd_targets_join_vanish_return_and_are_dropped_after_the_grace_period() {
    goodput::scrape::install_crypto_provider();
    let fixed = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let found = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("engines.json");
    let yaml = format!(
        "listen: 127.0.0.1:0
evaluation_interval: 200ms
scrape: {{interval: 200ms, timeout: 150ms, target_grace: 3s}}
windows: [5m]
targets:
  - {{name: fixed, url: 'http://{}/metrics', engine: vllm}}
discovery:
  - file_sd: {{files: ['{}/*.json'], refresh: 1m}}
",
        fixed.addr,
        dir.path().display()
    );
    let cfg = config::from_str(&yaml, "file_sd.yaml").expect("valid config").config;
    // 30× the wall clock: the 5m window fills in ten seconds.
    let d = daemon::start(cfg, Arc::new(FastClock::start(1_700_000_000_000, 30.0))).await.expect("daemon starts");
    until(&d, "the static target up", |r| target(r, "fixed").is_some_and(|t| t.health.up)).await;
    assert!(target(&d.report(), "vllm-a").is_none(), "nothing is discovered before the file exists");

    let group = format!(
        r#"[{{"targets": ["{}"], "labels": {{"target": "vllm-a", "pod": "vllm-a-0", "team": "infer", "__metrics_path__": "/metrics"}}}}]"#,
        found.addr
    );
    write(&file, &group);
    let r = until(&d, "the discovered target up", |r| target(r, "vllm-a").is_some_and(|t| t.health.up)).await;
    let t = target(&r, "vllm-a").unwrap();
    assert_eq!(t.health.labels.get("pod").map(String::as_str), Some("vllm-a-0"));
    assert_eq!(t.health.labels.get("team").map(String::as_str), Some("infer"));
    assert_eq!(t.health.labels.get("discovery").map(String::as_str), Some("file_sd"));
    assert!(target(&r, "fixed").is_some_and(|t| t.health.up), "the static target stays beside it");

    // The labels are on /metrics (the fixed set) and in the JSON report (all of them).
    let (_, body) = get(&format!("http://{}/metrics", d.local_addr())).await;
    let info: Vec<_> = metrics_samples(&body).into_iter().filter(|(n, _, _)| n == "llm_slo_target_info").collect();
    assert_eq!(info.len(), 1, "one info series, for the discovered target: {info:?}");
    let l = &info[0].1;
    assert_eq!((l["target"].as_str(), l["discovery"].as_str(), l["pod"].as_str()), ("vllm-a", "file_sd", "vllm-a-0"));
    assert!(!l.contains_key("team"), "labels beyond the fixed set stay off /metrics: {l:?}");
    // The info family and the reload families pass the ecosystem's linter.
    common::promtool_check_metrics(&body);
    let (_, json) = get(&format!("http://{}/api/v1/report", d.local_addr())).await;
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let a = json["targets"].as_array().unwrap().iter().find(|t| t["target"] == "vllm-a").unwrap();
    assert_eq!(a["health"]["labels"]["team"], "infer");

    // Let the window fill, then take the target out of the file.
    until(&d, "the discovered window a quarter covered", |r| coverage(r, "vllm-a") > 0.25).await;
    write(&file, "[]");
    let r = until(&d, "the target marked vanished", |r| {
        target(r, "vllm-a").is_some_and(|t| t.health.vanished_ms.is_some())
    })
    .await;
    let kept = coverage(&r, "vllm-a");
    assert!(kept > 0.25, "a vanished target keeps its windows: coverage {kept}");
    let served = found.served();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(found.served() <= served + 1, "a vanished target is not scraped ({served} → {})", found.served());

    // Back within the grace period: the same windows, scraped again.
    write(&file, &group);
    let r = until(&d, "the target back", |r| target(r, "vllm-a").is_some_and(|t| t.health.vanished_ms.is_none())).await;
    assert!(coverage(&r, "vllm-a") >= kept, "its windows were reset: {} < {kept}", coverage(&r, "vllm-a"));
    until(&d, "the target scraped again", |_| found.served() > served + 2).await;

    // A file that no longer parses keeps what it gave.
    write(&file, "[{\"targets\": [\"oops\"");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let r = d.report();
    assert!(target(&r, "vllm-a").is_some_and(|t| t.health.vanished_ms.is_none()), "a broken file dropped its targets");

    // Gone for longer than the grace period: dropped.
    std::fs::remove_file(&file).unwrap();
    until(&d, "the target vanished", |r| target(r, "vllm-a").is_some_and(|t| t.health.vanished_ms.is_some())).await;
    until(&d, "the target dropped after its grace", |r| target(r, "vllm-a").is_none()).await;
    assert!(target(&d.report(), "fixed").is_some_and(|t| t.health.up), "the static target is untouched");
    d.shutdown().await;
}
