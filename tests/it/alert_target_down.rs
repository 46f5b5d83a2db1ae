//! `LLMTargetDown` while the tap still measures: a target whose /metrics answers 500 but whose
//! requests go through the daemon's tap is a ticket that names the tap; it pages only once
//! nothing measures the engine (no request in the shortest window), before the first request
//! and again after the last one has left the window. A real daemon, tap and HTTP upstream on
//! 127.0.0.1.

use crate::support::PATIENCE;
use crate::tap_common;

use std::sync::Arc;
use std::time::Duration;

use goodput::config;
use goodput::daemon::{self, clock::SystemClock};
use goodput::report::AlertJson;
use tap_common::engines::{self, TIMING};
use tap_common::{Reply, Upstream, fetch, post, send};

/// The `LLMTargetDown` alerts of the daemon's latest report.
fn target_down(d: &daemon::Daemon) -> Vec<AlertJson> {
    d.report().alerts.iter().filter(|a| a.labels["alertname"] == "LLMTargetDown").cloned().collect()
}

/// Waits up to [`PATIENCE`] for the only `LLMTargetDown` to have `severity`, and returns it.
async fn wait_for(d: &daemon::Daemon, severity: &str) -> AlertJson {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let alerts = target_down(d);
        if let [a] = alerts.as_slice()
            && a.labels["severity"] == severity
            && a.state == "firing"
        {
            return a.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "no lone firing {severity} LLMTargetDown: {alerts:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn target_down_is_a_ticket_while_the_tap_measures_and_a_page_when_nothing_does() {
    goodput::scrape::install_crypto_provider();
    let up = Upstream::start(|s| match s.path.as_str() {
        "/metrics" => Reply::new(500, "text/plain", vec![send("engine metrics broken\n")]),
        _ => engines::by_path(s, TIMING),
    })
    .await;
    let port = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let yaml = format!(
        "listen: 127.0.0.1:0
evaluation_interval: 500ms
scrape: {{interval: 500ms, timeout: 400ms}}
windows: [3s]
targets:
  - name: llama
    url: http://{up}/metrics
    model: llama
    tap: {{listen: '127.0.0.1:{port}', upstream: 'http://{up}'}}
alerting:
  rules: {{LLMTargetDown: {{for: 0s}}}}
",
        up = up.addr
    );
    let cfg = config::from_str(&yaml, "down.yaml").expect("valid config").config;
    let d = daemon::start(cfg, Arc::new(SystemClock)).await.expect("daemon starts");
    let tap: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();

    // Nothing measures it: a page, as ever.
    let page = wait_for(&d, "page").await;
    assert!(page.annotations["description"].contains("nothing about it can be measured"), "{page:#?}");

    // Requests through the tap: the same outage is a ticket that says what still works.
    let chat = r#"{"model":"llama","messages":[{"role":"user","content":"hi"}],"stream":true}"#;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let ticket = loop {
        let got = fetch(tap, post("/v1/chat/completions", chat)).await;
        assert!(got.text().ends_with("data: [DONE]\n\n"), "the tap serves while /metrics fails");
        let alerts = target_down(&d);
        if let Some(t) = alerts.iter().find(|a| a.labels["severity"] == "ticket") {
            break t.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "no ticket while the tap measures: {alerts:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(ticket.labels["target"], "llama");
    assert_eq!(
        ticket.annotations["summary"],
        "target llama's metrics endpoint is down; its requests are still measured by the tap"
    );
    let description = &ticket.annotations["description"];
    assert!(description.contains("queue, KV cache and token counters are not read"), "{description}");
    assert!(description.contains("its requests are still measured by the tap (latency"), "{description}");
    assert!(!description.contains("nothing about it can be measured"), "{description}");
    assert!(d.report().targets.iter().all(|t| !t.health.up), "the scrapes still fail");

    // The last request leaves the 3 s window: nothing measures it any more, and it pages.
    let page = wait_for(&d, "page").await;
    assert!(page.annotations["description"].contains("nothing about it can be measured"), "{page:#?}");
    d.shutdown().await;
}
