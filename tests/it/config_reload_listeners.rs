//! Listeners rebind on reload in the real binary: a new `listen`, a tap's new `listen` and
//! a new `otlp.listen` move each server to its new address while what was in progress on
//! the old one finishes there (a completion streaming through the tap, an OTLP export
//! whose body is half sent, both across the reload); the old addresses then refuse
//! connections and the new ones serve.

use crate::common;
use crate::reload_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::support::PATIENCE;

use axum::Router;
use axum::body::Body;
use axum::routing::{get, post};
use common::vllm_body;
use futures_util::StreamExt;
use reload_common::{Daemon, free_port};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Chunks of the streamed completion, one every [`GAP`].
const CHUNKS: usize = 16;
const GAP: Duration = Duration::from_millis(250);

/// An engine: `/metrics` (vllm_body) and a completion streamed over `CHUNKS × GAP`, its end
/// held back while `hold` is set, so that a stream is still in progress however long a
/// loaded machine takes to reload.
async fn engine(hold: Arc<AtomicBool>) -> std::net::SocketAddr {
    let stream = move || {
        let hold = hold.clone();
        async move {
            let chunks = futures_util::stream::iter(0..=CHUNKS).then(move |i| {
                let hold = hold.clone();
                async move {
                    tokio::time::sleep(GAP).await;
                    while i == CHUNKS && hold.load(Ordering::Relaxed) {
                        tokio::time::sleep(GAP).await;
                    }
                    let event = if i == CHUNKS {
                        "data: [DONE]\n\n".to_string()
                    } else {
                        format!(
                            "data: {{\"id\":\"c\",\"object\":\"text_completion\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"text\":\"t{i}\"}}]}}\n\n"
                        )
                    };
                    Ok::<_, std::io::Error>(event)
                }
            });
            ([("content-type", "text/event-stream")], Body::from_stream(chunks))
        }
    };
    let n = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let app = Router::new().route("/v1/completions", post(stream)).route(
        "/metrics",
        get(move || {
            let n = n.fetch_add(1, Ordering::Relaxed) + 1;
            async move { vllm_body(n, 1_700_000_000.0) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// One span of the lone target in OTLP/JSON.
fn export() -> String {
    serde_json::json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "engine"}}]},
        "scopeSpans": [{"scope": {"name": "sglang"}, "spans": [{
            "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
            "name": "Req 1", "kind": 2,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001500000000",
            "attributes": [
                {"key": "gen_ai.latency.time_to_first_token", "value": {"doubleValue": 0.2}},
                {"key": "gen_ai.latency.e2e", "value": {"doubleValue": 1.5}},
                {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "25"}}
            ],
            "status": {}
        }]}]
    }]})
    .to_string()
}

/// Whether a connection to `port` on 127.0.0.1 is refused, waiting up to [`PATIENCE`] for it
/// to be.
async fn refused(port: u16) -> bool {
    let began = std::time::Instant::now();
    while began.elapsed() < PATIENCE {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_tap_and_otlp_rebind_and_what_is_in_progress_finishes_on_the_old_address() {
    goodput::scrape::install_crypto_provider();
    let hold = Arc::new(AtomicBool::new(true));
    let up = engine(hold.clone()).await;
    let (port, tap, otlp) = (free_port(), free_port(), free_port());
    let yaml = |port: u16, tap: u16, otlp: u16| {
        format!(
            "listen: 127.0.0.1:{port}\nevaluation_interval: 200ms\nscrape: {{interval: 200ms}}\nwindows: [10s]\n\
             otlp: {{listen: '127.0.0.1:{otlp}'}}\n\
             targets:\n  - name: a\n    url: 'http://{up}/metrics'\n    engine: vllm\n    \
             tap: {{listen: '127.0.0.1:{tap}', upstream: 'http://{up}'}}\n"
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(dir.path(), port, &yaml(port, tap, otlp), &[]);
    d.until_metric_at("llm_slo_target_up", &[("target", "a")], |v| v == 1.0).await;

    // A completion streaming through the tap, its first chunk received.
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let request = r#"{"model":"m","prompt":"hi","stream":true}"#;
    let url = |port: u16| format!("http://127.0.0.1:{port}/v1/completions");
    let response = client.post(url(tap)).header("content-type", "application/json").body(request).send().await;
    let mut stream = response.expect("the tap answers").bytes_stream();
    let first = stream.next().await.expect("a first chunk").unwrap();
    assert!(String::from_utf8_lossy(&first).contains("t0"));
    let streamed = tokio::spawn(async move {
        let mut text = String::from_utf8_lossy(&first).into_owned();
        while let Some(chunk) = stream.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk.expect("the stream goes on")));
        }
        text
    });

    // An OTLP export whose body is half sent.
    let body = export();
    let mut export_conn = tokio::net::TcpStream::connect(("127.0.0.1", otlp)).await.unwrap();
    let head = format!(
        "POST /v1/traces HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let half = body.len() / 2;
    export_conn.write_all(head.as_bytes()).await.unwrap();
    export_conn.write_all(&body.as_bytes()[..half]).await.unwrap();

    // Every listener moves at once.
    let (port2, tap2, otlp2) = (free_port(), free_port(), free_port());
    d.publish(&yaml(port2, tap2, otlp2));
    d.signal(libc::SIGHUP);
    d.port = port2;
    d.until_log("the reload", |log| log.contains("config reloaded")).await;
    let line = d.log().lines().find(|l| l.contains("config reloaded")).unwrap().to_string();
    for said in ["listen: 127.0.0.1:", "its tap moves to 127.0.0.1:", "the OTLP receiver moves to 127.0.0.1:"] {
        assert!(line.contains(said), "{said:?} not in {line}");
    }
    assert!(!streamed.is_finished(), "the stream ended before the reload");
    hold.store(false, Ordering::Relaxed);

    // What was in progress finishes on the old addresses.
    export_conn.write_all(&body.as_bytes()[half..]).await.unwrap();
    let mut answer = vec![0u8; 1024];
    let n = tokio::time::timeout(PATIENCE, export_conn.read(&mut answer)).await.unwrap().unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200"), "the export in progress got {answer}");
    drop(export_conn);
    let text = tokio::time::timeout(PATIENCE, streamed).await.expect("the stream finishes").unwrap();
    assert!(text.contains(&format!("t{}", CHUNKS - 1)) && text.contains("data: [DONE]"), "cut stream: {text}");

    // The old addresses refuse; the new ones serve.
    for old in [port, tap, otlp] {
        assert!(refused(old).await, "127.0.0.1:{old} still accepts connections after the move");
    }
    assert_eq!(d.metric("llm_slo_config_last_reload_successful").await, Some(1.0));
    let r = client.post(url(tap2)).header("content-type", "application/json").body(request).send().await;
    let text = r.expect("the tap answers on its new address").text().await.unwrap();
    assert!(text.contains("data: [DONE]"), "{text}");
    let r = client
        .post(format!("http://127.0.0.1:{otlp2}/v1/traces"))
        .header("content-type", "application/json")
        .body(export())
        .send()
        .await;
    assert_eq!(r.expect("the receiver answers on its new address").status(), 200);
    // Both exports' spans were taken, the one across the reload included.
    d.until_metric("llm_slo_otlp_spans_received_total", |v| v == 2.0).await;
    d.stop();
}
