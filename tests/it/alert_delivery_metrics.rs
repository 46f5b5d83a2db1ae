//! Alert delivery is observable on the daemon's /metrics: with one real Alertmanager (Debian
//! `prometheus-alertmanager` on 127.0.0.1) and one that nothing listens for, the sent,
//! failed and evicted counters and the queue length move for the right destination only,
//! the destination label carries no credentials, and the families pass
//! `promtool check metrics` (when promtool is installed). And `goodput run` with
//! GOODPUT_NO_ALERT_DELIVERY=true (what the prometheus-rules kustomize component and the
//! Helm chart's `alertPath: prometheus` set) shows its alerts but sends Alertmanager nothing.
//!
//! Skips when Alertmanager is missing, unless GOODPUT_REQUIRE_TOOLS=1.

use crate::common_am;
use crate::support::PATIENCE;
use crate::tools;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common_am::{Am, Http, alertmanager_binary, free_port};
use goodput::daemon::{self, clock::SystemClock};

/// Two targets that never answer, so LLMTargetDown fires for both at once: with a queue of
/// one, the destination that is down has to evict one of them.
fn daemon_yaml(am: &str, unreachable: &str) -> String {
    format!(
        "listen: 127.0.0.1:0
evaluation_interval: 1s
scrape: {{interval: 1s, timeout: 500ms}}
targets:
  - {{name: gone-a, url: 'http://127.0.0.1:{}/metrics', engine: vllm}}
  - {{name: gone-b, url: 'http://127.0.0.1:{}/metrics', engine: vllm}}
alerting:
  alertmanagers: [{{url: '{am}'}}, {{url: '{unreachable}'}}]
  resend_interval: 1s
  timeout: 1s
  queue_capacity: 1
  rules:
    LLMTargetDown: {{for: 0s}}
",
        free_port(),
        free_port()
    )
}

/// The value of the sample of `family` whose labels include every `k="v"` in `labels`.
/// A real Alertmanager started in a temporary directory and answering, or `None` where
/// none is installed (the test then has nothing to run against).
async fn ready_alertmanager() -> Option<(tempfile::TempDir, Am, Http)> {
    let bin = alertmanager_binary()?;
    goodput::scrape::install_crypto_provider();
    let tmp = tempfile::tempdir().unwrap();
    let mut am = Am::new(&bin, tmp.path(), "am");
    am.start();
    let http = Http::new();
    http.wait_ready(&am, PATIENCE).await;
    Some((tmp, am, http))
}

fn sample(body: &str, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    body.lines()
        .filter(|l| l.strip_prefix(family).is_some_and(|r| r.starts_with('{')))
        .find(|l| labels.iter().all(|(k, v)| l.contains(&format!("{k}=\"{v}\""))))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

const DELIVERY_FAMILIES: [&str; 4] = [
    "llm_slo_alert_notifications_sent_total",
    "llm_slo_alert_notifications_failed_total",
    "llm_slo_alert_notifications_evicted_total",
    "llm_slo_alert_queue_length",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_move_for_the_destination_they_describe() {
    let Some((_tmp, am, http)) = ready_alertmanager().await else { return };

    let down_port = free_port();
    let unreachable = format!("http://pager:s3cret@127.0.0.1:{down_port}");
    let cfg =
        goodput::config::from_str(&daemon_yaml(&am.url(), &unreachable), "delivery.yaml").expect("valid config").config;
    let d = daemon::start(cfg, Arc::new(SystemClock)).await.expect("daemon starts");
    let metrics = format!("http://{}/metrics", d.local_addr());
    let up = format!("{}/api/v2/alerts", am.url());
    let down = format!("http://127.0.0.1:{down_port}/api/v2/alerts");
    let get = || async { http.0.get(&metrics).send().await.ok()?.text().await.ok() };

    // Before any alert: every series exists, at 0, for both destinations.
    let body = get().await.expect("/metrics answers");
    for dest in [&up, &down] {
        assert_eq!(sample(&body, DELIVERY_FAMILIES[0], &[("destination", dest)]), Some(0.0), "{body}");
        assert_eq!(sample(&body, DELIVERY_FAMILIES[3], &[("destination", dest)]), Some(0.0), "{body}");
    }

    let t = Instant::now();
    let body = loop {
        let body = get().await.unwrap_or_default();
        let at_am = http.names(&am).await.unwrap_or_default();
        let moved = sample(&body, DELIVERY_FAMILIES[0], &[("destination", &up)]).is_some_and(|v| v >= 1.0)
            && sample(&body, DELIVERY_FAMILIES[1], &[("destination", &down), ("outcome", "retried")])
                .is_some_and(|v| v >= 1.0)
            && sample(&body, DELIVERY_FAMILIES[2], &[("destination", &down), ("state", "firing")])
                .is_some_and(|v| v >= 1.0)
            && at_am.iter().any(|n| n == "LLMTargetDown");
        if moved {
            break body;
        }
        assert!(t.elapsed() < PATIENCE, "delivery counters did not move:\n{body}\nAlertmanager has {at_am:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };

    // The destination that is down sent nothing and holds the one alert it has room for;
    // the one that is up never failed.
    assert_eq!(sample(&body, DELIVERY_FAMILIES[0], &[("destination", &down)]), Some(0.0), "{body}");
    assert_eq!(sample(&body, DELIVERY_FAMILIES[3], &[("destination", &down)]), Some(1.0), "{body}");
    for outcome in ["retried", "dropped"] {
        assert_eq!(sample(&body, DELIVERY_FAMILIES[1], &[("destination", &up), ("outcome", outcome)]), Some(0.0));
    }
    assert_eq!(sample(&body, DELIVERY_FAMILIES[1], &[("destination", &down), ("outcome", "dropped")]), Some(0.0));
    assert!(!body.contains("s3cret") && !body.contains("pager@"), "credentials leaked into /metrics");

    // The families are what promtool's linter expects (counters end in _total, HELP, TYPE).
    // Without promtool, tools::require has noted the skip (or failed under CI).
    if let Some(promtool) = tools::require("promtool") {
        let ours: String = body
            .lines()
            .filter(|l| DELIVERY_FAMILIES.iter().any(|f| l.contains(f)))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(ours.matches("# TYPE").count(), 4, "{ours}");
        let mut child = Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(ours.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool check metrics:\n{}{}\non:\n{ours}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    tokio::time::timeout(Duration::from_secs(10), d.shutdown()).await.expect("daemon stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_alert_delivery_keeps_alerts_out_of_alertmanager() {
    let Some((tmp, am, http)) = ready_alertmanager().await else { return };
    let port = free_port();
    let cfg = tmp.path().join("goodput.yaml");
    std::fs::write(&cfg, daemon_yaml(&am.url(), &am.url()).replace("127.0.0.1:0", &format!("127.0.0.1:{port}")))
        .unwrap();
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["run", "--config"])
        .arg(&cfg)
        .env("GOODPUT_NO_ALERT_DELIVERY", "true")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let firing = || async {
        let v: serde_json::Value =
            serde_json::from_slice(&http.0.get(format!("{base}/api/v1/alerts")).send().await.ok()?.bytes().await.ok()?)
                .ok()?;
        Some(v["data"]["alerts"].as_array()?.iter().filter(|a| a["state"] == "firing").count())
    };
    let t = Instant::now();
    while firing().await != Some(2) {
        assert!(t.elapsed() < PATIENCE, "LLMTargetDown never fired in the daemon");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Several resend intervals (1 s) later, Alertmanager has still heard nothing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let at_am = http.names(&am).await;
    let body = http.0.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    let _ = daemon.kill();
    let out = daemon.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(at_am, Some(vec![]), "Alertmanager got alerts with delivery off; daemon log:\n{log}");
    assert!(!body.contains(DELIVERY_FAMILIES[0]), "no destination, so no delivery series:\n{body}");
    assert!(log.contains("alert delivery is off"), "the daemon says why nothing is sent:\n{log}");
}
