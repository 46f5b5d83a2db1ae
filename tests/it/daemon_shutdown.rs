//! SIGTERM while an evaluation runs: the `goodput` binary exits within its documented
//! shutdown bound (docs/deploy.md) instead of waiting for the evaluation, and an alert
//! notification still queued for a real webhook receiver is delivered before it exits.
//!
//! The evaluation is held by the `test-hooks` feature (`GOODPUT_TEST_EVALUATION_DELAY`):
//! a genuinely slow one depends on the machine, a held one does not.

use crate::common;
use crate::support::PATIENCE;

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

/// A webhook receiver that answers 503 until `accept` is set, then records each body.
#[derive(Default)]
struct Receiver {
    accept: AtomicBool,
    rejected: AtomicUsize,
    bodies: Mutex<Vec<serde_json::Value>>,
}

async fn hook(State(r): State<Arc<Receiver>>, body: Bytes) -> StatusCode {
    if !r.accept.load(Ordering::SeqCst) {
        r.rejected.fetch_add(1, Ordering::SeqCst);
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    r.bodies.lock().unwrap().push(serde_json::from_slice(&body).unwrap());
    StatusCode::OK
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_long_evaluation_exits_within_the_bound_and_flushes_alerts() {
    let receiver = Arc::new(Receiver::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook_url = format!("http://{}/hook", listener.local_addr().unwrap());
    let app = Router::new().route("/hook", post(hook)).with_state(receiver.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    // A target that refuses connections: LLMTargetDown (for: 0s) fires on the first evaluation.
    let down = common::Fixture::refused_addr().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.yaml");
    std::fs::write(
        &cfg,
        format!(
            "listen: 127.0.0.1:0\nevaluation_interval: 500ms\nscrape: {{interval: 200ms, timeout: 150ms}}\n\
             targets: [{{name: gone, url: 'http://{down}/metrics'}}]\n\
             alerting:\n  webhook: {{url: '{hook_url}'}}\n  resend_interval: 1h\n  rules: {{LLMTargetDown: {{for: 0s}}}}\n"
        ),
    )
    .unwrap();
    // Every evaluation after the first is held for two minutes, longer than any grace period.
    let mut child = Command::new(BIN)
        .args(["run", "--config"])
        .arg(&cfg)
        .env("GOODPUT_TEST_EVALUATION_DELAY", "120s")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let stderr = child.stderr.take().unwrap();
    let sink = log.clone();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut l = sink.lock().unwrap();
            l.push_str(&line);
            l.push('\n');
        }
    });
    let logged = |what: &str| log.lock().unwrap().contains(what);

    // The alert was sent and refused a few times (the worker now waits out a backoff of
    // seconds), and the second evaluation is held.
    let began = Instant::now();
    while !(receiver.rejected.load(Ordering::SeqCst) >= 4 && logged("test hook: this evaluation is held")) {
        if began.elapsed() > PATIENCE {
            let _ = child.kill();
            panic!(
                "no held evaluation with a queued alert after {PATIENCE:?} ({} rejected posts)\n{}",
                receiver.rejected.load(Ordering::SeqCst),
                log.lock().unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(receiver.bodies.lock().unwrap().is_empty());
    receiver.accept.store(true, Ordering::SeqCst);

    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let sent = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if sent.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("no exit within 60 s of SIGTERM\n{}", log.lock().unwrap());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let took = sent.elapsed();
    reader.join().unwrap();
    let log = log.lock().unwrap().clone();
    assert_eq!(status.code(), Some(0), "{log}");
    // The documented bound is goodput::daemon::SHUTDOWN_GRACE (5 s); the held evaluation
    // would have kept the old daemon for two minutes.
    let bound = goodput::daemon::SHUTDOWN_GRACE + Duration::from_secs(2);
    assert!(took < bound, "exit took {took:?} after SIGTERM (bound {bound:?})\n{log}");
    assert!(log.contains("abandoning the evaluation in progress"), "{log}");

    let bodies = receiver.bodies.lock().unwrap();
    let names: Vec<&str> =
        bodies.iter().flat_map(|b| b.as_array().unwrap()).filter_map(|a| a["labels"]["alertname"].as_str()).collect();
    assert_eq!(names, ["LLMTargetDown"], "the queued alert was not delivered before exit\n{log}");
}
