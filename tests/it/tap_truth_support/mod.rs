//! A live run for checking the tap against the simulator's per-request ground truth: a
//! simulated engine serving `--profile none` with a truth file, the daemon with a tap in
//! front of it, and the load generator sending a profile's workload through the tap in real
//! time. Shared by `tests/it/tap_ground_truth.rs` (one short run) and
//! `examples/tap_accuracy.rs` (the tables in docs/accuracy.md).
//!
//! The run is at wall speed on purpose: the tap times requests on the wall clock, while the
//! truth's latencies are model seconds, which equal wall seconds only at `--speed 1`
//! (docs/simulator.md#live-ground-truth).

#![allow(dead_code)]

pub mod compare;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use goodput::config::{self, Config};
use goodput::daemon::{self, clock::SystemClock};
use goodput::report::Report;
use goodput::request::RequestRecord;
use goodput_sim::config::Profile;
use goodput_sim::{SimConfig, drive, live};
use serde::Deserialize;

/// How long the run waits for the daemon to scrape or settle: as `PATIENCE` in
/// tests/it/support, which `examples/tap_accuracy.rs` does not compile. The tests run on 2
/// loaded cores in CI, and a wait ends as soon as its condition holds.
const PATIENCE: Duration = Duration::from_secs(90);

/// The configured target's name.
pub const TARGET: &str = "sim";

/// One line of the live truth file (docs/simulator.md#live-ground-truth).
#[derive(Debug, Clone, Deserialize)]
pub struct TruthLine {
    pub id: u64,
    pub request_id: Option<String>,
    pub source: Option<String>,
    pub arrival_s: f64,
    pub finish_s: f64,
    pub output_tokens: u32,
    pub ttft_s: Option<f64>,
    pub tpot_s: f64,
    pub e2e_s: f64,
    pub decode_s: f64,
    pub finish_reason: String,
}

/// What the load generator counted.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sent {
    pub sent: u64,
    pub completed: u64,
    pub failed: u64,
    pub gave_up: u64,
    pub dropped: u64,
}

/// Everything a run leaves behind.
pub struct Outcome {
    pub config: Config,
    pub tap: Vec<RequestRecord>,
    pub truth: Vec<TruthLine>,
    pub sent: Sent,
    /// Every in-flight request ended within the drain grace.
    pub drained: bool,
    /// The daemon's reports, one per `sample_every` while the load ran, then the last one.
    pub reports: Vec<Arc<Report>>,
    /// The daemon's /metrics at the end.
    pub metrics: String,
}

impl Outcome {
    pub fn last_report(&self) -> &Report {
        self.reports.last().expect("a run keeps at least its last report")
    }
}

/// The daemon's config: the tap in front of the engine at `sim_addr`, scraped every second,
/// the given `windows` and `slos` (YAML flow lists).
pub fn daemon_config(sim_addr: std::net::SocketAddr, model: &str, windows: &str, slos: &str) -> Config {
    // The tap's port is chosen at bind time (as `goodput demo` does); the placeholder only
    // passes the config's checks.
    let yaml = format!(
        "listen: 127.0.0.1:0
evaluation_interval: 1s
scrape: {{interval: 1s, timeout: 900ms}}
windows: {windows}
targets:
  - {{name: {TARGET}, url: 'http://{sim_addr}/metrics', engine: vllm, model: '{model}',
     tap: {{listen: '127.0.0.1:1', upstream: 'http://{sim_addr}'}}}}
slos: {slos}
"
    );
    let mut cfg = config::from_str(&yaml, "tap_truth.yaml").unwrap_or_else(|e| panic!("{e:?}\n{yaml}")).config;
    if let Some(tap) = cfg.targets[0].tap.as_mut() {
        tap.listen = "127.0.0.1:0".parse().unwrap();
    }
    cfg
}

/// Runs `load` through the tap for `secs` wall seconds, lets the requests in flight finish
/// (up to `grace`), and collects the records, the truth and the daemon's reports.
pub async fn run(
    load: &SimConfig,
    secs: f64,
    grace: Duration,
    windows: &str,
    slos: &str,
    sample_every: Duration,
    dir: &Path,
) -> Outcome {
    goodput::scrape::install_crypto_provider();
    let truth_path = dir.join(format!("{}-truth.jsonl", load.name));
    let mut engine = load.clone();
    engine.apply_profile(Profile::None);
    let opts = live::Options { truth: Some(truth_path.clone()), ..live::Options::speed(1.0) };
    let sim = live::serve_with(engine, "127.0.0.1:0".parse().unwrap(), opts).await.expect("the simulator starts");
    let cfg = daemon_config(sim.addr, &load.model, windows, slos);
    goodput::seen::keep_records();
    let d = daemon::start(cfg.clone(), Arc::new(SystemClock)).await.expect("the daemon starts");
    let tap = d.tap_addr(TARGET).expect("the target has a tap");

    // The histograms need a scrape from before the first request, so that the window's
    // increase counts the whole run.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !d.report().targets.iter().any(|t| t.health.up && t.health.last_successful_scrape_ms.is_some()) {
        assert!(tokio::time::Instant::now() < deadline, "the daemon never scraped the simulator");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let driver = drive::start(load, &format!("http://{tap}"), 1.0).expect("the load generator starts");
    let stats = driver.stats.clone();
    let mut reports = Vec::new();
    let started = tokio::time::Instant::now();
    let end = started + Duration::from_secs_f64(secs);
    let mut next = started + sample_every;
    while next < end {
        tokio::time::sleep_until(next).await;
        reports.push(d.report());
        next += sample_every;
    }
    tokio::time::sleep_until(end).await;
    let drained = driver.drain(grace).await;
    let (truth, last) = settle(&d, &truth_path).await;
    reports.push(last);
    let (_, metrics) = get(&format!("http://{}/metrics", d.local_addr())).await;
    let tap_records = d.tap_records(TARGET);
    d.shutdown().await;
    sim.shutdown().await;
    let sent = Sent {
        sent: stats.sent.load(Relaxed),
        completed: stats.completed.load(Relaxed),
        failed: stats.failed.load(Relaxed),
        gave_up: stats.gave_up.load(Relaxed),
        dropped: stats.dropped.load(Relaxed),
    };
    Outcome { config: cfg, tap: tap_records, truth, sent, drained, reports, metrics }
}

/// Waits (up to [`PATIENCE`]) until every request has its truth line, the request store has counted
/// every tap record, and the histograms have a scrape after the last request finished, then
/// returns the truth and the first report that holds all of it.
async fn settle(d: &daemon::Daemon, truth_path: &Path) -> (Vec<TruthLine>, Arc<Report>) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let truth = read_truth(truth_path);
        let tapped = d.tap_records(TARGET).len() as u64;
        let report = d.report();
        let counted: u64 = report
            .request_path
            .iter()
            .flat_map(|p| &p.series)
            .filter(|s| s.target == TARGET && s.source == goodput::request::DataSource::Tap)
            .flat_map(|s| s.requests.values())
            .sum();
        let last_finish_ms = truth.iter().map(|t| (t.finish_s * 1000.0).ceil() as i64).max().unwrap_or(0);
        let scraped_ms =
            report.targets.iter().find(|t| t.target == TARGET).and_then(|t| t.health.last_successful_scrape_ms);
        let settled = truth.len() as u64 >= tapped
            && counted == tapped
            && scraped_ms.is_some_and(|s| s > last_finish_ms && report.t_ms > s);
        if settled || tokio::time::Instant::now() > deadline {
            return (truth, report);
        }
    }
}

/// The complete lines of the truth file (one being written has no newline yet).
fn read_truth(path: &Path) -> Vec<TruthLine> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("truth line {l}: {e}")))
        .collect()
}

/// A GET with a fresh client: (status, body).
pub async fn get(url: &str) -> (u16, String) {
    let c = reqwest::Client::builder().no_proxy().build().unwrap();
    let r = c.get(url).send().await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The value of the sample `name{labels…}` on a text exposition.
pub fn sample(body: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    body.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, value) = l.rsplit_once(' ')?;
        let (n, rest) = series.split_once('{').unwrap_or((series, ""));
        let all = labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
        (n == name && all).then(|| value.parse().ok()).flatten()
    })
}
