//! State that survives restarts (docs/deploy.md#state-across-restarts): the `goodput`
//! binary scrapes a live simulator next to a second daemon that never stops, and is
//! restarted mid-run, once with SIGTERM and once with SIGKILL. After each restart its
//! windows read the same as the never-stopped daemon's (coverage and rates within what one
//! snapshot interval and the restart gap can change), its firing alert keeps its
//! `activeAt`, and a real Alertmanager, with a webhook receiver behind it, is sent no
//! resolution and sees no new start. Without the snapshot the restarted daemon's 1m window
//! would hold a few seconds, and the alert would start over.
//!
//! Separately: a `state_dir` that cannot be written leaves the daemon serving, with the
//! failure counted.

use crate::common;
use crate::common_am;
use crate::net;
use crate::support::PATIENCE;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use common::{get, metrics_samples};
use common_am::{Am, Http, alertmanager_binary};

const BIN: &str = env!("CARGO_BIN_EXE_goodput");
const KV: &str = "LLMKVCacheSaturated";
/// `state_snapshot_interval` of the restarted daemon, in seconds.
const SNAPSHOT_S: u64 = 2;

type Samples = Vec<(String, HashMap<String, String>, f64)>;

fn spawn(args: &[&str], log: &Path) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    Command::new(BIN)
        .args(args)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("start goodput {args:?}: {e}"))
}

/// A child stopped when the test ends, however it ends.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    let rc = unsafe { libc::kill(child.id() as i32, sig) };
    assert_eq!(rc, 0, "kill({}, {sig})", child.id());
}

async fn samples(port: u16) -> Option<Samples> {
    let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(3)).build().unwrap();
    let r = client.get(format!("http://127.0.0.1:{port}/metrics")).send().await.ok()?;
    Some(metrics_samples(&r.text().await.ok()?))
}

fn value(s: &Samples, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    s.iter().find(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).is_some_and(|x| x == v))).map(|x| x.2)
}

/// The sum of every `name` series with `labels`, `None` when there is none.
fn total(s: &Samples, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let matching =
        s.iter().filter(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).is_some_and(|x| x == v)));
    matching.map(|x| x.2).reduce(|a, b| a + b)
}

/// Waits until `port` serves a /metrics with `name{labels}`, at most `limit`.
async fn wait_for(port: u16, name: &str, labels: &[(&str, &str)], limit: Duration) -> Samples {
    let t = Instant::now();
    loop {
        if let Some(s) = samples(port).await
            && value(&s, name, labels).is_some()
        {
            return s;
        }
        assert!(t.elapsed() < limit, "no {name}{labels:?} on :{port} after {limit:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The activeAt of the firing KV alert on /api/v1/alerts, if there is one.
async fn kv_active_at(port: u16) -> Option<String> {
    let (status, body) = get(&format!("http://127.0.0.1:{port}/api/v1/alerts")).await;
    let v: serde_json::Value = serde_json::from_str(&body).ok().filter(|_| status == 200)?;
    v["data"]["alerts"]
        .as_array()?
        .iter()
        .find(|a| a["labels"]["alertname"] == KV && a["state"] == "firing")
        .and_then(|a| a["activeAt"].as_str().map(String::from))
}

/// The webhook behind Alertmanager: every alert of every notification, as (status, startsAt).
/// Times are compared parsed: the webhook writes Go's RFC 3339 with trailing zeros trimmed
/// (`.68Z`), the API always three digits (`.680Z`).
#[derive(Default)]
struct Hook(Mutex<Vec<(String, Option<SystemTime>)>>);

fn instant(s: Option<&str>) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(s?).ok()
}

async fn hook(State(h): State<Arc<Hook>>, body: Bytes) -> &'static str {
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    for a in v["alerts"].as_array().into_iter().flatten().filter(|a| a["labels"]["alertname"] == KV) {
        let status = a["status"].as_str().unwrap_or_default().to_string();
        h.0.lock().unwrap().push((status, instant(a["startsAt"].as_str())));
    }
    "ok"
}

/// `am: None` evaluates the alert rules without delivering: the never-stopped daemon's
/// alert has the restarted one's labels, and two senders of one alert would make
/// Alertmanager's `startsAt` whichever posted last.
fn config(dir: &Path, name: &str, listen: u16, sim: u16, am: Option<&str>, state: Option<&Path>) -> PathBuf {
    let state = state
        .map(|d| format!("state_dir: {}\nstate_snapshot_interval: {SNAPSHOT_S}s\n", d.display()))
        .unwrap_or_default();
    let delivery = am.map(|am| format!("  alertmanager: {{url: '{am}'}}\n")).unwrap_or_default();
    let yaml = format!(
        "listen: 127.0.0.1:{listen}
evaluation_interval: 1s
scrape: {{interval: 1s, timeout: 900ms}}
targets: [{{name: sim, url: 'http://127.0.0.1:{sim}/metrics'}}]
windows: [1m]
{state}alerting:
{delivery}  resend_interval: 5s
  rules: {{{KV}: {{threshold: 0.0001, for: 3s}}}}
"
    );
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    path
}

/// The restarted daemon's 1m window against the never-stopped one's.
fn compare(restarted: &Samples, steady: &Samples, when: &str) {
    let w = [("target", "sim"), ("window", "1m")];
    let cov = |s: &Samples| value(s, "llm_slo_window_coverage_ratio", &w).unwrap_or(0.0);
    let (a, b) = (cov(restarted), cov(steady));
    // One snapshot interval and the restart gap, of a 60 s window; without the snapshot
    // the restarted daemon would cover a few seconds of it.
    assert!(b > 0.4, "{when}: the never-stopped daemon covers {b} of its 1m window");
    assert!((a - b).abs() <= 0.15, "{when}: coverage {a} after the restart, {b} never stopped");
    for name in ["llm_slo_tokens_per_second", "llm_slo_requests_per_second"] {
        let (x, y) = (value(restarted, name, &w), value(steady, name, &w));
        let (Some(x), Some(y)) = (x, y) else { panic!("{when}: {name} missing: {x:?} {y:?}") };
        assert!(y > 0.0 && ((x - y) / y).abs() <= 0.10, "{when}: {name} {x} after the restart, {y} never stopped");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_daemon_carries_on_where_it_stopped() {
    let Some(am_bin) = alertmanager_binary() else { return };
    goodput::scrape::install_crypto_provider();
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("goodput.log");

    let hooked = Arc::new(Hook::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook_url = format!("http://{}/hook", listener.local_addr().unwrap());
    let app = Router::new().route("/hook", post(hook)).with_state(hooked.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let mut am = Am::new(&am_bin, tmp.path(), "am");
    std::fs::write(
        am.dir.join("am.yml"),
        format!(
            "route: {{receiver: hook, group_by: [alertname], group_wait: 1s, group_interval: 1s, repeat_interval: 1h}}\n\
             receivers: [{{name: hook, webhook_configs: [{{url: '{hook_url}', send_resolved: true}}]}}]\n"
        ),
    )
    .unwrap();
    am.start();
    let http = Http::new();
    http.wait_ready(&am, PATIENCE).await;

    let sim_port = net::free_port();
    let _sim = Proc(spawn(&["simulate", "--listen", &format!("127.0.0.1:{sim_port}"), "--profile", "steady"], &log));
    let (a_port, b_port) = (net::free_port(), net::free_port());
    let state = tmp.path().join("state");
    let a_cfg = config(tmp.path(), "restarted", a_port, sim_port, Some(&am.url()), Some(&state));
    let b_cfg = config(tmp.path(), "steady", b_port, sim_port, None, None);
    let run = |cfg: &Path| spawn(&["run", "--config", cfg.to_str().unwrap()], &log);
    let mut a = Proc(run(&a_cfg));
    let _b = Proc(run(&b_cfg));

    // The alert fires and reaches the webhook; the windows fill for half a minute.
    let started = Instant::now();
    let mut active_at = None;
    while active_at.is_none() || hooked.0.lock().unwrap().is_empty() {
        assert!(started.elapsed() < PATIENCE, "{KV} never fired and reached the webhook");
        tokio::time::sleep(Duration::from_millis(500)).await;
        active_at = kv_active_at(a_port).await;
    }
    let starts_at = hooked.0.lock().unwrap()[0].1;
    assert!(starts_at.is_some(), "the webhook's startsAt parses");
    tokio::time::sleep(Duration::from_secs(30).saturating_sub(started.elapsed())).await;

    for (sig, when) in [(libc::SIGTERM, "after SIGTERM"), (libc::SIGKILL, "after SIGKILL")] {
        signal(&a.0, sig);
        let t = Instant::now();
        while a.0.try_wait().unwrap().is_none() {
            assert!(t.elapsed() < Duration::from_secs(10), "the daemon did not exit {when}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        a = Proc(run(&a_cfg));
        let restored = wait_for(a_port, "llm_slo_window_coverage_ratio", &[("window", "1m")], PATIENCE).await;
        assert!(
            value(&restored, "llm_slo_state_restore_total", &[("part", "windows"), ("result", "restored")])
                == Some(1.0)
                && value(&restored, "llm_slo_state_restore_total", &[("part", "alerts"), ("result", "restored")])
                    == Some(1.0),
            "{when}: windows and alerts restored"
        );
        for r in ["mismatch", "corrupt", "truncated", "left_out", "not_a_snapshot", "version"] {
            assert_eq!(total(&restored, "llm_slo_state_restore_total", &[("result", r)]), Some(0.0), "{when}: {r}");
        }
        // A few evaluations after the restart, both daemons read the same minute.
        tokio::time::sleep(Duration::from_secs(4)).await;
        let (x, y) = (samples(a_port).await.unwrap(), samples(b_port).await.unwrap());
        compare(&x, &y, when);
        assert_eq!(kv_active_at(a_port).await, active_at, "{when}: the alert keeps its start");
        tokio::time::sleep(Duration::from_secs(6)).await;
    }

    // Alertmanager was never told the alert ended, and still has it from its first start.
    let notified = hooked.0.lock().unwrap().clone();
    assert!(notified.iter().all(|(status, s)| status == "firing" && *s == starts_at), "webhook saw {notified:?}");
    assert_eq!(http.resolved_received(&am).await, Some(0.0), "resolutions sent to Alertmanager");
    let alerts = http.alerts(&am).await.unwrap();
    let kv: Vec<_> = alerts.iter().filter(|a| a["labels"]["alertname"] == KV).collect();
    assert_eq!(kv.len(), 1, "{alerts:?}");
    assert_eq!(instant(kv[0]["startsAt"].as_str()), starts_at);
    assert_eq!(kv[0]["status"]["state"], "active");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_state_dir_keeps_the_daemon_serving() {
    goodput::scrape::install_crypto_provider();
    let tmp = tempfile::tempdir().unwrap();
    let fixture = common::Fixture::counting(|n| common::vllm_body(n, 1.0)).await;
    // Its parent is a file: the directory can never be made, whoever runs the test.
    let blocked = tmp.path().join("file");
    std::fs::write(&blocked, "not a directory").unwrap();
    let port = net::free_port();
    let cfg = tmp.path().join("c.yaml");
    std::fs::write(
        &cfg,
        format!(
            "listen: 127.0.0.1:{port}\nevaluation_interval: 200ms\nscrape: {{interval: 200ms, timeout: 150ms}}\n\
             targets: [{{name: llama, url: 'http://{}/metrics'}}]\nwindows: [1m]\n\
             state_dir: {}\nstate_snapshot_interval: 1s\n",
            fixture.addr,
            blocked.join("state").display()
        ),
    )
    .unwrap();
    let log = tmp.path().join("goodput.log");
    let _d = Proc(spawn(&["run", "--config", cfg.to_str().unwrap()], &log));
    let s = wait_for(port, "llm_slo_state_snapshot_errors_total", &[("reason", "io")], PATIENCE).await;
    let t = Instant::now();
    let mut s = s;
    while value(&s, "llm_slo_state_snapshot_errors_total", &[("reason", "io")]) < Some(2.0) {
        assert!(t.elapsed() < PATIENCE, "no failed snapshot counted");
        tokio::time::sleep(Duration::from_millis(250)).await;
        s = samples(port).await.unwrap();
    }
    // Still scraping and evaluating, and never wrote a snapshot.
    assert_eq!(value(&s, "llm_slo_target_up", &[("target", "llama")]), Some(1.0));
    assert!(value(&s, "llm_slo_window_coverage_ratio", &[("window", "1m")]).is_some_and(|c| c > 0.0));
    assert_eq!(value(&s, "llm_slo_state_last_snapshot_timestamp_seconds", &[]), Some(0.0));
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(logged.matches("cannot write the state snapshot").count(), 1, "logged once:\n{logged}");
}
