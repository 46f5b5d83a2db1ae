//! The delivery client against a real HTTP receiver on 127.0.0.1 (an axum server standing
//! in for a webhook): retries with backoff until the receiver recovers, the JSON it posts,
//! per-alert coalescing and the queue bound while the receiver is down, and no endless
//! retry of a batch the receiver rejects.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::support::PATIENCE;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use goodput::alert::{Fingerprint, Notification};
use goodput::deliver::{Delivery, DeliveryOptions};

#[derive(Default)]
struct Receiver {
    /// Answer 503 to this many requests first.
    fail_first: AtomicUsize,
    /// Always answer with this status when non-zero.
    always: AtomicUsize,
    requests: AtomicUsize,
    bodies: Mutex<Vec<serde_json::Value>>,
}

async fn hook(State(r): State<Arc<Receiver>>, body: Bytes) -> StatusCode {
    let n = r.requests.fetch_add(1, Ordering::SeqCst);
    let always = r.always.load(Ordering::SeqCst);
    if always != 0 {
        return StatusCode::from_u16(always as u16).unwrap();
    }
    if n < r.fail_first.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    r.bodies.lock().unwrap().push(serde_json::from_slice(&body).unwrap());
    StatusCode::OK
}

async fn serve(r: Arc<Receiver>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/hook", post(hook)).with_state(r);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/hook")
}

fn opts(capacity: usize) -> DeliveryOptions {
    DeliveryOptions {
        resend_interval: Duration::from_secs(60),
        timeout: Duration::from_secs(2),
        queue_capacity: capacity,
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(200),
    }
}

fn note(name: &str, version: &str, ends_at_ms: Option<i64>) -> Notification {
    let mut labels = BTreeMap::new();
    labels.insert("alertname".to_string(), name.to_string());
    let mut annotations = BTreeMap::new();
    annotations.insert("description".to_string(), version.to_string());
    Notification {
        fingerprint: Fingerprint::of(&labels),
        labels,
        annotations,
        starts_at_ms: 1_700_000_000_000,
        ends_at_ms,
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

async fn wait(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn parse_ms(s: &str) -> i64 {
    humantime::parse_rfc3339(s).unwrap().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

#[tokio::test]
async fn retries_until_the_receiver_recovers_and_posts_alertmanager_json() {
    let r = Arc::new(Receiver::default());
    r.fail_first.store(3, Ordering::SeqCst);
    let url = serve(r.clone()).await;
    let d = Delivery::start_urls(vec![url], opts(16)).unwrap();
    let before = now_ms();
    d.submit(&[note("Firing", "v1", None), note("Resolved", "v1", Some(1_700_000_060_000))]);
    assert!(d.flush(PATIENCE).await, "{:?}", d.stats());
    let s = &d.stats()[0];
    assert_eq!((s.failed_attempts, s.sent_batches, s.queued), (3, 1, 0));
    // Per notification: each of the three failed POSTs carried both, then one POST did.
    assert_eq!((s.retried_notifications, s.dropped_notifications, s.sent_notifications), (6, 0, 2), "{s:?}");
    let bodies = r.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1);
    let alerts = bodies[0].as_array().unwrap();
    assert_eq!(alerts.len(), 2);
    let by = |n: &str| alerts.iter().find(|a| a["labels"]["alertname"] == n).unwrap().clone();
    let (f, res) = (by("Firing"), by("Resolved"));
    assert_eq!(parse_ms(f["startsAt"].as_str().unwrap()), 1_700_000_000_000);
    assert_eq!(parse_ms(res["endsAt"].as_str().unwrap()), 1_700_000_060_000);
    // A firing alert's endsAt is 4 resend intervals after the (last) send.
    let ends = parse_ms(f["endsAt"].as_str().unwrap());
    assert!(ends >= before + 240_000 && ends <= now_ms() + 240_000, "{ends}");
    assert_eq!(f["annotations"]["description"], "v1");
}

#[tokio::test]
async fn outage_coalesces_per_alert_and_stays_bounded() {
    let r = Arc::new(Receiver::default());
    r.always.store(503, Ordering::SeqCst);
    let url = serve(r.clone()).await;
    let d = Delivery::start_urls(vec![url], opts(3)).unwrap();
    for v in 0..50 {
        d.submit(&[note("A", &format!("v{v}"), None)]);
    }
    d.submit(&[note("B", "resolved", Some(5))]);
    assert!(wait(PATIENCE, || d.stats()[0].failed_attempts >= 2).await);
    assert_eq!(d.stats()[0].queued, 2, "50 versions of A coalesce into one");
    let delivered = |i: usize| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = r.bodies.lock().unwrap()[i]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                let name = a["labels"]["alertname"].as_str().unwrap().to_string();
                (name, a["annotations"]["description"].as_str().unwrap().to_string())
            })
            .collect();
        v.sort();
        v
    };
    // Back up: the newest version of A and the resolution arrive.
    r.always.store(0, Ordering::SeqCst);
    assert!(d.flush(PATIENCE).await);
    assert_eq!(delivered(0), [("A".into(), "v49".into()), ("B".into(), "resolved".into())]);
    // Down again with more distinct alerts than the capacity: a firing one makes room,
    // the resolution stays.
    r.always.store(503, Ordering::SeqCst);
    d.submit(&[note("R", "resolved", Some(5)), note("C", "v", None), note("D", "v", None), note("E", "v", None)]);
    let s = d.stats()[0].clone();
    assert_eq!((s.queued, s.evicted_firing, s.evicted_resolved), (3, 1, 0), "{s:?}");
    r.always.store(0, Ordering::SeqCst);
    assert!(d.flush(PATIENCE).await);
    assert_eq!(delivered(1), [("D".into(), "v".into()), ("E".into(), "v".into()), ("R".into(), "resolved".into())]);
}

#[tokio::test]
async fn a_rejected_batch_is_dropped_not_retried_forever() {
    let r = Arc::new(Receiver::default());
    r.always.store(400, Ordering::SeqCst);
    let url = serve(r.clone()).await;
    let d = Delivery::start_urls(vec![url], opts(8)).unwrap();
    d.submit(&[note("Bad", "v", None)]);
    assert!(d.flush(PATIENCE).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(r.requests.load(Ordering::SeqCst), 1);
    let s = &d.stats()[0];
    assert!(s.last_error.as_deref().is_some_and(|e| e.contains("400")), "{s:?}");
    assert_eq!((s.dropped_notifications, s.retried_notifications, s.sent_notifications), (1, 0, 0), "{s:?}");
}
