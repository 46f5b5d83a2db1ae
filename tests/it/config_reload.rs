//! Hot reload in the real binary, with its config laid out as Kubernetes mounts a
//! ConfigMap (`config.yaml → ..data/config.yaml`, `..data → ..<timestamp>`): SIGHUP
//! reloads it, and so does swapping the `..data` symlink. A target whose settings did not
//! change keeps its windows across a reload while a new one starts; a SIGHUP that changes
//! an SLO's threshold and objective, adds an SLO and changes the scrape interval applies
//! all of it within seconds, judges the scrapes already held again and keeps the 5m
//! window's coverage; a config that fails validation, or cannot be applied, leaves the
//! running one in place with `llm_slo_config_last_reload_successful` at 0 and the reason,
//! at file:line:column, in the log.

use crate::common;
use crate::reload_common;

use std::time::Duration;

use crate::support::{PATIENCE, until_async};
use common::{Fixture, metrics_samples, vllm_body};
use reload_common::{Daemon, coverage, free_port, target, up};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_and_a_configmap_swap_reload_and_a_bad_config_keeps_the_running_one() {
    goodput::scrape::install_crypto_provider();
    let a = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let b = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let head = format!(
        "listen: 127.0.0.1:{port}\nevaluation_interval: 200ms\nscrape: {{interval: 200ms, timeout: 150ms}}\nwindows: [10s]\n"
    );
    let target_a = format!("  - {{name: a, url: 'http://{}/metrics', engine: vllm}}\n", a.addr);
    let target_b = format!("  - {{name: b, url: 'http://{}/metrics', engine: vllm}}\n", b.addr);
    let mut d = Daemon::start(dir.path(), port, &format!("{head}targets:\n{target_a}"), &[]);
    let coverage = |r: &serde_json::Value, name: &str| coverage(r, name, "10s");

    let r = d.until("target a up with a third of its window", |r| up(r, "a") && coverage(r, "a") > 0.3).await;
    assert!(target(&r, "b").is_none());
    assert_eq!(d.metric("llm_slo_config_last_reload_successful").await, Some(1.0));
    let started = d.until_metric("llm_slo_config_last_reload_success_timestamp_seconds", |v| v > 0.0).await;

    // SIGHUP reloads the same file: a success, later than the start.
    d.signal(libc::SIGHUP);
    d.until_metric("llm_slo_config_last_reload_success_timestamp_seconds", |v| v > started).await;
    assert!(d.log().contains("SIGHUP: reloading the config"), "{}", d.log());

    // The ConfigMap swap adds b; a, unchanged, keeps its windows.
    let before = coverage(&d.json("/api/v1/report").await.unwrap(), "a");
    d.publish(&format!("{head}targets:\n{target_a}{target_b}"));
    let r = d.until("target b added by the symlink swap", |r| up(r, "b")).await;
    assert!(coverage(&r, "a") >= before, "a's windows were reset: {} < {before}", coverage(&r, "a"));
    assert!(d.log().contains("the config file changed: reloading it"), "{}", d.log());
    assert_eq!(d.metric("llm_slo_config_last_reload_successful").await, Some(1.0));

    // A config that fails validation: the running one stays, the metric says 0, the log
    // says where.
    d.publish(&format!("{head}targets:\n{target_a}  - {{name: c, url: 'ftp://x/metrics'}}\n"));
    d.until_metric("llm_slo_config_last_reload_successful", |v| v == 0.0).await;
    let file = dir.path().join("config.yaml").display().to_string();
    let at = format!("{file}:7:20: url: unsupported URL");
    assert!(d.log().contains(&at), "no error at {at} in the log:\n{}", d.log());
    assert!(d.log().contains("config reload failed"), "{}", d.log());
    let served = b.served();
    let r = d.until("b still scraped", |_| b.served() > served + 2).await;
    assert!(up(&r, "a") && up(&r, "b") && target(&r, "c").is_none());

    // A config that cannot be applied (its listen address is taken) is refused whole,
    // saying why: b stays.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let moved = head.replace(&port.to_string(), &taken.local_addr().unwrap().port().to_string());
    d.publish(&format!("{moved}targets:\n{target_a}"));
    d.until_log("the refused reload", |log| log.contains("config reload refused: cannot listen on")).await;
    assert_eq!(d.metric("llm_slo_config_last_reload_successful").await, Some(0.0));
    let served = b.served();
    d.until("b still scraped", |_| b.served() > served + 2).await;

    // A good config again: success, and b, removed, waits out its grace period.
    let before = coverage(&d.json("/api/v1/report").await.unwrap(), "a");
    d.publish(&format!("{head}targets:\n{target_a}"));
    d.until_metric("llm_slo_config_last_reload_successful", |v| v == 1.0).await;
    let r = d.until("b vanished", |r| target(r, "b").is_some_and(|t| t["health"]["vanished_ms"].is_i64())).await;
    assert!(coverage(&r, "a") >= before, "a's windows were reset: {} < {before}", coverage(&r, "a"));

    d.stop();
}

/// `llm_slo_window_coverage_ratio` of `target`'s 5m window on the daemon's /metrics.
async fn exported_coverage(d: &goodput::daemon::Daemon, target: &str) -> f64 {
    let (_, body) = common::get(&format!("http://{}/metrics", d.local_addr())).await;
    let s = metrics_samples(&body);
    common::sample_value(&s, "llm_slo_window_coverage_ratio", &[("target", target), ("window", "5m")]).unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reload_keeps_unchanged_targets_windows_and_starts_changed_ones_afresh() {
    use std::sync::Arc;
    goodput::scrape::install_crypto_provider();
    let engines: Vec<Fixture> =
        futures_util::future::join_all((0..3).map(|_| Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)))).await;
    let yaml = |moved: &Fixture, window: &str| {
        format!(
            "listen: 127.0.0.1:0\nevaluation_interval: 200ms\nscrape: {{interval: 200ms, timeout: 150ms}}\nwindows: [{window}]\n\
             targets:\n  - {{name: kept, url: 'http://{}/metrics', engine: vllm}}\n  - {{name: moved, url: 'http://{}/metrics', engine: vllm}}\n",
            engines[0].addr, moved.addr
        )
    };
    let load = |text: String| goodput::config::from_str(&text, "reload.yaml").expect("valid config").config;
    let clock = Arc::new(common::FastClock::start(1_700_000_000_000, 30.0));
    let d = goodput::daemon::start(load(yaml(&engines[1], "5m")), clock).await.expect("daemon starts");
    let before = until_async(PATIENCE, "the 5m windows filling", async || {
        let before = (exported_coverage(&d, "kept").await, exported_coverage(&d, "moved").await);
        (before.0 > 0.3 && before.1 > 0.3).then_some(before)
    })
    .await;

    // A new window and a new URL for `moved`, in one reload.
    let r = d.reload(load(yaml(&engines[2], "5m, 10m"))).await.expect("a reload applies live");
    let subjects: Vec<&str> = r.changes.iter().map(|c| c.subject.as_str()).collect();
    assert_eq!(subjects, ["targets[moved]", "windows"], "{:?}", r.changes);
    let served = engines[2].served();
    until_async(PATIENCE, "the moved target's new URL scraped", async || {
        (engines[2].served() > served + 1).then_some(())
    })
    .await;
    // A kept window's coverage never falls, so seeing `moved`'s fall shows its windows were
    // started afresh; `kept`'s, read at the same moment, must not have fallen.
    let after = until_async(PATIENCE, "the changed target's windows started afresh", async || {
        let after = (exported_coverage(&d, "kept").await, exported_coverage(&d, "moved").await);
        (after.1 < before.1).then_some(after)
    })
    .await;
    assert!(after.0 >= before.0, "the unchanged target's 5m window was reset: {after:?} after {before:?}");
    d.shutdown().await;
}

/// The config of the SIGHUP test: `scrape` interval, SLO `fast`'s TTFT threshold and
/// objective, and more SLOs after it.
fn tuned(port: u16, engine: &Fixture, interval: &str, ttft: &str, objective: &str, more: &str) -> String {
    format!(
        "listen: 127.0.0.1:{port}\nevaluation_interval: 500ms\nscrape: {{interval: {interval}}}\nwindows: [5m]\n\
         targets:\n  - {{name: a, url: 'http://{}/metrics', engine: vllm}}\n\
         slos:\n  - {{name: fast, ttft: {ttft}, objective: {objective}}}\n{more}",
        engine.addr
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_retunes_slos_and_the_scrape_interval_keeping_history_and_a_broken_file_changes_nothing() {
    goodput::scrape::install_crypto_provider();
    let engine = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(dir.path(), port, &tuned(port, &engine, "500ms", "100ms", "0.9", ""), &[]);
    let fast = |clause: &'static str| [("slo", "fast"), ("clause", clause)];
    let estimate = |slo: &'static str| [("slo", slo), ("clause", "joint"), ("bound", "estimate")];
    let coverage_5m = [("target", "a"), ("window", "5m")];

    // Half of vllm_body's TTFTs are at or under 100ms: attainment 0.5, exactly.
    d.until_metric_at("llm_slo_attainment_ratio", &estimate("fast"), |v| v == 0.5).await;
    assert_eq!(d.metric_at("llm_slo_threshold_seconds", &fast("ttft")).await, Some(0.1));
    assert_eq!(d.metric_at("llm_slo_objective_ratio", &[("slo", "fast")]).await, Some(0.9));
    let before = d.until_metric_at("llm_slo_window_coverage_ratio", &coverage_5m, |v| v > 0.015).await;
    let old_hash = d.json("/api/v1/config").await.unwrap()["data"]["hash"].as_str().unwrap().to_string();
    assert_eq!(d.metric_at("llm_slo_config_info", &[("hash", &old_hash)]).await, Some(1.0));

    // One file, four changes; SIGHUP at once (the file watcher would see it within a second).
    let slow = "  - {name: slow, e2e: 2500ms, objective: 0.99}\n";
    let text = tuned(port, &engine, "1s", "250ms", "0.95", slow);
    let reloads = d.reloads();
    d.publish(&text);
    d.signal(libc::SIGHUP);
    let sent = std::time::Instant::now();
    d.until_metric_at("llm_slo_threshold_seconds", &fast("ttft"), |v| v == 0.25).await;
    d.until_metric_at("llm_slo_objective_ratio", &[("slo", "fast")], |v| v == 0.95).await;
    assert!(sent.elapsed() < Duration::from_secs(10), "new SLO values after {:?}", sent.elapsed());
    assert_eq!(d.metric("llm_slo_config_last_reload_successful").await, Some(1.0));
    assert!(d.log().contains("SIGHUP: reloading the config"), "{}", d.log());

    // The scrapes already held are judged again: every TTFT is under 250ms. The new SLO is
    // evaluated over them too (every E2E is at or under 2.5 s).
    d.until_metric_at("llm_slo_attainment_ratio", &estimate("fast"), |v| v == 1.0).await;
    d.until_metric_at("llm_slo_attainment_ratio", &estimate("slow"), |v| v == 1.0).await;
    assert_eq!(d.metric_at("llm_slo_threshold_seconds", &[("slo", "slow"), ("clause", "e2e")]).await, Some(2.5));
    let after = d.metric_at("llm_slo_window_coverage_ratio", &coverage_5m).await.unwrap();
    assert!(after >= before, "the 5m window's coverage was reset: {after} after {before}");

    // One log line lists every change with what it did.
    let line = d.log().lines().filter(|l| l.contains("config reloaded")).nth(reloads).map(String::from);
    let line = line.unwrap_or_else(|| panic!("no reload line:\n{}", d.log()));
    for said in [
        "4 change(s)",
        "scrape: interval 500ms → 1s",
        "every target keeps its windows",
        "slos[fast]: objective 0.9 → 0.95, ttft 100ms → 250ms",
        "slos[slow]: added",
    ] {
        assert!(line.contains(said), "{said:?} not in {line}");
    }
    let new_hash = d.json("/api/v1/config").await.unwrap()["data"]["hash"].as_str().unwrap().to_string();
    assert_ne!(new_hash, old_hash);
    assert!(line.contains(&new_hash), "{line}");
    assert_eq!(d.metric_at("llm_slo_config_info", &[("hash", &new_hash)]).await, Some(1.0));
    assert_eq!(d.metric_at("llm_slo_config_info", &[("hash", &old_hash)]).await, None);

    // The engine is scraped every second now: at 2 scrapes, however long a loaded machine
    // took to make them, no more than one a second (at the old 500ms, twice as many).
    let (served, since) = (engine.served(), std::time::Instant::now());
    tokio::time::sleep(Duration::from_secs(3)).await;
    until_async(PATIENCE, "two scrapes at the new interval", async || (engine.served() - served >= 2).then_some(()))
        .await;
    let scraped = engine.served() - served;
    let took = since.elapsed();
    assert!(scraped <= took.as_secs() + 1, "{scraped} scrapes in {took:?} at a 1s interval");

    // A broken file: refused, with the old config running, and nothing changed.
    d.publish(&text.replace("objective: 0.95", "objective: 1.5"));
    d.signal(libc::SIGHUP);
    d.until_metric("llm_slo_config_last_reload_successful", |v| v == 0.0).await;
    let at = format!("{}:8:42: objective 1.5 is out of range", d.config_path().display());
    d.until_log("the error at its line and column", |log| log.contains(&at) && log.contains("config reload failed"))
        .await;
    let served = engine.served();
    until_async(PATIENCE, "the engine still scraped", async || (engine.served() > served).then_some(())).await;
    assert_eq!(d.metric_at("llm_slo_objective_ratio", &[("slo", "fast")]).await, Some(0.95));
    assert_eq!(d.metric_at("llm_slo_config_info", &[("hash", &new_hash)]).await, Some(1.0));
    assert_eq!(d.json("/api/v1/config").await.unwrap()["data"]["hash"], new_hash.as_str());
    let last = d.metric_at("llm_slo_window_coverage_ratio", &coverage_5m).await.unwrap();
    assert!(last >= after, "the 5m window's coverage went back: {last} after {after}");
    d.stop();
}
