//! Each section reloads live in the real binary, its config swapped as a ConfigMap is:
//! alert rules and their destinations (a changed rule's firing alert resolved once at the
//! old destination, an unchanged rule's alert keeping its `activeAt` and sent again to the
//! new one), `windows` and the windows alert rules read (a new window evaluated at once
//! over the scrapes held),
//! `evaluation_interval`, `discovery`, `external_labels`, `server` limits and `state_dir`
//! (the next snapshot written to the new place; one that cannot be used refused whole).
//! Every reload is one log line naming what changed.

use crate::common;
use crate::reload_common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{PATIENCE, until_async};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use common::{Fixture, vllm_body};
use reload_common::{Daemon, coverage, free_port};

/// A webhook receiver on 127.0.0.1: every alert posted to it, as (alertname, resolved).
#[derive(Clone, Default)]
struct Hook(Arc<Mutex<Vec<(String, bool)>>>);

impl Hook {
    async fn start() -> (Hook, String) {
        let hook = Hook::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().route("/hook", post(receive)).with_state(hook.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (hook, format!("http://{addr}/hook"))
    }

    fn got(&self, name: &str, resolved: bool) -> usize {
        self.0.lock().unwrap().iter().filter(|(n, r)| n == name && *r == resolved).count()
    }

    async fn until(&self, name: &str, resolved: bool) {
        let what = format!("{name} (resolved: {resolved}) received");
        until_async(PATIENCE, &what, async || (self.got(name, resolved) > 0).then_some(())).await;
    }
}

async fn receive(State(hook): State<Hook>, body: Bytes) {
    let alerts: Vec<serde_json::Value> = serde_json::from_slice(&body).unwrap();
    let now = chrono_now();
    for a in alerts {
        let name = a["labels"]["alertname"].as_str().unwrap_or_default().to_string();
        // A resolved alert ends at or before the moment it is sent.
        let resolved = a["endsAt"].as_str().is_some_and(|e| e <= now.as_str());
        hook.0.lock().unwrap().push((name, resolved));
    }
}

/// Now as RFC 3339 with milliseconds, as alerts write their times.
fn chrono_now() -> String {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64 + 1000;
    goodput::alert::view::rfc3339_ms(ms)
}

/// The `activeAt` of the alert named `name` in /api/v1/alerts.
async fn active_at(d: &Daemon, name: &str) -> Option<String> {
    let alerts = d.json("/api/v1/alerts").await?;
    let a = alerts["data"]["alerts"].as_array()?.iter().find(|a| a["labels"]["alertname"] == name)?.clone();
    a["activeAt"].as_str().map(String::from)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alert_rules_and_destinations_reload_live() {
    goodput::scrape::install_crypto_provider();
    let engine = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let down = Fixture::refused_addr().await;
    let ((first, first_url), (second, second_url)) = (Hook::start().await, Hook::start().await);
    let port = free_port();
    let yaml = |hook: &str, kv_threshold: &str| {
        format!(
            "listen: 127.0.0.1:{port}\nevaluation_interval: 200ms\nscrape: {{interval: 200ms}}\nwindows: [10s]\n\
             targets:\n  - {{name: up, url: 'http://{}/metrics', engine: vllm}}\n  - {{name: down, url: 'http://{down}/metrics', engine: vllm}}\n\
             alerting:\n  webhook: {{url: '{hook}'}}\n  resend_interval: 1h\n  rules:\n    LLMTargetDown: {{for: 0s}}\n    \
             LLMKVCacheSaturated: {{for: 0s, threshold: {kv_threshold}}}\n",
            engine.addr
        )
    };
    let dir = tempfile::tempdir().unwrap();
    // vllm_body's KV cache is 80% used: saturated above 50%, not above 95%.
    let mut d = Daemon::start(dir.path(), port, &yaml(&first_url, "0.5"), &[]);
    first.until("LLMTargetDown", false).await;
    first.until("LLMKVCacheSaturated", false).await;
    let down_since = active_at(&d, "LLMTargetDown").await.expect("LLMTargetDown is active");

    let line = d.reload(&yaml(&second_url, "0.95")).await;
    for said in [
        "alerting: webhook http://",
        "alert delivery restarts",
        "alerting.rules[LLMKVCacheSaturated]: threshold 0.5 → 0.95",
    ] {
        assert!(line.contains(said), "{said:?} not in {line}");
    }
    assert!(!line.contains("LLMTargetDown"), "an unchanged rule is listed: {line}");
    // The changed rule's alert is resolved once, where it was sent; the unchanged rule's
    // goes on with its activeAt, and is sent to the new destination.
    first.until("LLMKVCacheSaturated", true).await;
    second.until("LLMTargetDown", false).await;
    assert_eq!(active_at(&d, "LLMTargetDown").await.as_deref(), Some(down_since.as_str()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(active_at(&d, "LLMKVCacheSaturated").await, None, "the rule fires over its new threshold");
    assert_eq!(second.got("LLMKVCacheSaturated", false), 0);
    assert_eq!(first.got("LLMKVCacheSaturated", true), 1, "resolved more than once");
    assert_eq!(first.got("LLMTargetDown", true), 0, "the unchanged rule's alert was resolved");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_evaluation_interval_and_discovery_reload_live() {
    goodput::scrape::install_crypto_provider();
    let (a, b) = (
        Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await,
        Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await,
    );
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("targets.json");
    std::fs::write(&sd, format!(r#"[{{"targets": ["{}"], "labels": {{"team": "x"}}}}]"#, b.addr)).unwrap();
    let yaml = |every: &str, windows: &str, discovery: &str| {
        format!(
            "listen: 127.0.0.1:{port}\nevaluation_interval: {every}\nscrape: {{interval: 200ms}}\nwindows: [{windows}]\n\
             targets:\n  - {{name: a, url: 'http://{}/metrics', engine: vllm}}\n{discovery}",
            a.addr
        )
    };
    let mut d = Daemon::start(dir.path(), port, &yaml("200ms", "10s", ""), &[]);
    let window = |w: &'static str| [("target", "a"), ("window", w)];
    d.until_metric_at("llm_slo_window_coverage_ratio", &window("10s"), |v| v > 0.5).await;

    // A new window is evaluated over the scrapes already held: its first value covers them.
    let line = d.reload(&yaml("200ms", "10s, 1m", "")).await;
    assert!(line.contains("windows: [10s] → [10s, 1m]"), "{line}");
    let first = d.until_metric_at("llm_slo_window_coverage_ratio", &window("1m"), |_| true).await;
    assert!(first > 0.08, "the 1m window started empty: coverage {first}");

    // A removed window is no longer exported; the one kept goes on.
    d.reload(&yaml("200ms", "1m", "")).await;
    until_async(PATIENCE, "the 10s window no longer exported", async || {
        d.metric_at("llm_slo_window_coverage_ratio", &window("10s")).await.is_none().then_some(())
    })
    .await;
    assert!(d.metric_at("llm_slo_window_coverage_ratio", &window("1m")).await.unwrap() >= first);

    // evaluation_interval 200ms → 2s: the next evaluations come 2 s apart.
    let line = d.reload(&yaml("2s", "1m", "")).await;
    assert!(line.contains("evaluation_interval: 200ms → 2s"), "{line}");
    let last_eval = [("target", "a")];
    // Watched for at least 4.5 s and until one new evaluation came, however long a loaded
    // machine takes: besides the one seen first, at most one per 2 s of watching, plus one.
    let mut seen = Vec::new();
    let began = std::time::Instant::now();
    while seen.len() < 2 || began.elapsed() < Duration::from_millis(4500) {
        assert!(began.elapsed() < PATIENCE, "no new evaluation within {PATIENCE:?}: {seen:?}");
        let v = d.metric_at("llm_slo_target_last_evaluation_timestamp_seconds", &last_eval).await.unwrap();
        if seen.last() != Some(&v) {
            seen.push(v);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let watched = began.elapsed();
    let most = watched.as_secs() as usize / 2 + 2;
    assert!(seen.len() <= most, "{} evaluations in {watched:?} at a 2s interval: {seen:?}", seen.len());

    // A discovery source added by a reload: its target is scraped; a keeps its window.
    let before = coverage(&d.json("/api/v1/report").await.unwrap(), "a", "1m");
    let discovery = format!("discovery:\n  - file_sd: {{files: ['{}']}}\n", sd.display());
    let line = d.reload(&yaml("200ms", "1m", &discovery)).await;
    assert!(line.contains("discovery:"), "{line}");
    let served = b.served();
    let r = d.until("the discovered target", |r| r["targets"].as_array().is_some_and(|t| t.len() == 2)).await;
    assert!(coverage(&r, "a", "1m") >= before, "a's window was reset");
    until_async(PATIENCE, "the discovered target scraped", async || (b.served() > served + 2).then_some(())).await;

    // A window only an alert rule reads is evaluated too, from the scrapes already held.
    let rule = format!("{discovery}alerting: {{rules: {{LLMGoodputDivergence: {{window: 45s}}}}}}\n");
    let line = d.reload(&yaml("200ms", "1m", &rule)).await;
    assert!(line.contains("alerting.rules[LLMGoodputDivergence]: window 5m → 45s"), "{line}");
    let first = d.until_metric_at("llm_slo_window_coverage_ratio", &window("45s"), |_| true).await;
    assert!(first > 0.2, "the rule's new window started empty: coverage {first}");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_labels_and_server_limits_reload_live() {
    use tokio::io::AsyncReadExt;
    goodput::scrape::install_crypto_provider();
    let engine = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let port = free_port();
    let yaml = |cluster: &str, header_timeout: &str| {
        format!(
            "listen: 127.0.0.1:{port}\nevaluation_interval: 200ms\nscrape: {{interval: 200ms}}\nwindows: [10s]\n\
             external_labels: {{cluster: {cluster}}}\nserver: {{header_read_timeout: {header_timeout}}}\n\
             targets:\n  - {{name: a, url: 'http://{}/metrics', engine: vllm}}\n",
            engine.addr
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(dir.path(), port, &yaml("east", "10s"), &[]);
    d.until_metric_at("llm_slo_target_up", &[("target", "a"), ("cluster", "east")], |v| v == 1.0).await;

    // How long a connection that sends nothing stays open, up to 3 s.
    let silent = || async move {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let t = std::time::Instant::now();
        let mut buf = [0u8; 64];
        let _ = tokio::time::timeout(Duration::from_secs(3), s.read(&mut buf)).await;
        t.elapsed()
    };
    assert!(silent().await >= Duration::from_secs(3), "closed before server.header_read_timeout (10s)");

    let line = d.reload(&yaml("west", "1s")).await;
    for said in ["external_labels: cluster east → west", "server: header_read_timeout 10s → 1s"] {
        assert!(line.contains(said), "{said:?} not in {line}");
    }
    d.until_metric_at("llm_slo_target_up", &[("target", "a"), ("cluster", "west")], |v| v == 1.0).await;
    assert_eq!(d.metric_at("llm_slo_target_up", &[("cluster", "east")]).await, None);
    let open = silent().await;
    assert!(open < Duration::from_millis(2500), "a silent connection stayed {open:?} under a 1s header_read_timeout");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_dir_reloads_to_the_next_snapshot_and_an_unusable_one_is_refused() {
    goodput::scrape::install_crypto_provider();
    let engine = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let yaml = |state: &str| {
        format!(
            "listen: 127.0.0.1:{port}\nevaluation_interval: 200ms\nscrape: {{interval: 200ms}}\nwindows: [10s]\n\
             state_snapshot_interval: 1s\n{state}targets:\n  - {{name: a, url: 'http://{}/metrics', engine: vllm}}\n",
            engine.addr
        )
    };
    let (one, two) = (dir.path().join("state-one"), dir.path().join("state-two"));
    let at = |p: &std::path::Path| format!("state_dir: '{}'\n", p.display());
    let mut d = Daemon::start(dir.path(), port, &yaml(""), &[]);
    d.until_metric_at("llm_slo_target_up", &[("target", "a")], |v| v == 1.0).await;

    let wait_for_snapshot = |p: std::path::PathBuf| async move {
        let what = format!("a snapshot in {}", p.display());
        until_async(PATIENCE, &what, async || p.join("goodput.state").is_file().then_some(())).await;
    };
    let line = d.reload(&yaml(&at(&one))).await;
    assert!(line.contains("state_dir: none →"), "{line}");
    wait_for_snapshot(one.clone()).await;
    let line = d.reload(&yaml(&at(&two))).await;
    assert!(line.contains("the next snapshot goes to"), "{line}");
    wait_for_snapshot(two.clone()).await;

    // A state_dir that cannot be made (under a regular file) refuses the whole reload.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    d.publish(&yaml(&at(&file.join("state"))).replace("windows: [10s]", "windows: [10s, 1m]"));
    d.until_metric("llm_slo_config_last_reload_successful", |v| v == 0.0).await;
    d.until_log("the refusal", |log| log.contains("config reload refused: state_dir: cannot use")).await;
    let mtime = || std::fs::metadata(two.join("goodput.state")).unwrap().modified().unwrap();
    let written = mtime();
    until_async(PATIENCE, "the next snapshot in the running state_dir", async || (mtime() > written).then_some(()))
        .await;
    assert_eq!(d.metric_at("llm_slo_window_coverage_ratio", &[("target", "a"), ("window", "1m")]).await, None);
    d.stop();
}
