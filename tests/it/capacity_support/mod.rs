//! Capacity against ground truth: record the simulator offline, replay the recording
//! through goodput (capacity book and alert rules included, as the daemon runs them), and
//! set each instant's capacity estimate beside the simulator's true capacity, found by a
//! sweep of load levels in the profile's arrival shape, in virtual time
//! (`goodput_sim::capacity`).
//!
//! Shared by `tests/it/capacity_*.rs` (which assert) and `examples/capacity_report.rs` (which
//! prints the tables of docs/accuracy.md#capacity).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use goodput::adapt::EngineHint;
use goodput::alert::AlertingConfig;
use goodput::capacity::{CapacityReport, RateEstimate};
use goodput::duration::Window;
use goodput::evaluate::EvalConfig;
use goodput::replay::{Recording, ReplayTarget, replay_with_requests};
use goodput::request::{RequestRecord, Source, Status, TokenCount};
use goodput::slo::{Objective, Scope, Slo};
use goodput_sim::capacity::{Sweep, Target, true_capacity};
use goodput_sim::offline::{self, Options};
use goodput_sim::{Profile, SimConfig};

pub const OBJECTIVE: f64 = 0.95;
const TTFT_S: f64 = 0.5;
const TPOT_S: f64 = 0.05;
const STEP_MS: i64 = 5_000;

/// TTFT ≤ 500 ms and TPOT ≤ 50 ms for 95 % of requests.
pub fn slo() -> Slo {
    Slo {
        name: "chat".into(),
        ttft: Some(Duration::from_secs_f64(TTFT_S)),
        tpot: Some(Duration::from_secs_f64(TPOT_S)),
        e2e: None,
        objective: Objective::new(OBJECTIVE).expect("valid objective"),
        scope: Scope::all(),
    }
}

/// The same SLO as the simulator's sweep judges it.
pub fn target() -> Target {
    Target { ttft_s: Some(TTFT_S), tpot_s: Some(TPOT_S), e2e_s: None, objective: OBJECTIVE }
}

/// The simulator's true capacity for `cfg` under [`slo`]: the engine's and the profile's,
/// pooled over the sweep's own seeds, so the same for every seed of a case (computed once).
pub fn truth(cfg: &SimConfig) -> f64 {
    static KNOWN: Mutex<BTreeMap<String, f64>> = Mutex::new(BTreeMap::new());
    let key = format!("{:?}", SimConfig { seed: 0, ..cfg.clone() });
    if let Some(t) = KNOWN.lock().expect("truth cache").get(&key) {
        return *t;
    }
    let t =
        true_capacity(cfg, &target(), &Sweep::default()).expect("sweep runs").expect("some rate meets the objective");
    KNOWN.lock().expect("truth cache").insert(key, t);
    t
}

/// One evaluation instant of a replay.
#[derive(Debug, Clone)]
pub struct Instant {
    pub t_rel_s: f64,
    pub capacity: Option<CapacityReport>,
    /// Alert names firing at this instant.
    pub firing: Vec<String>,
}

impl Instant {
    /// The interval an estimate claims: p10–p90, from the lower end's p10 to the upper
    /// end's p90 when it comes from histogram brackets.
    pub fn interval(&self) -> Option<(f64, f64, bool)> {
        let c = self.capacity.as_ref()?.slos.first()?;
        let lo: &RateEstimate = c.estimates.first()?;
        let hi: &RateEstimate = c.estimates.last()?;
        Some((lo.p10, hi.p90, lo.censored || hi.censored))
    }

    /// The point estimate: the p50 (the mean of both ends' p50s for brackets).
    pub fn p50(&self) -> Option<f64> {
        let c = self.capacity.as_ref()?.slos.first()?;
        let n = c.estimates.len() as f64;
        (n > 0.0).then(|| c.estimates.iter().map(|e| e.p50).sum::<f64>() / n)
    }
}

/// The profile's config with `seed`.
pub fn config(profile: Profile, seed: u64) -> SimConfig {
    let mut cfg = SimConfig::profile(profile);
    cfg.seed = seed;
    cfg
}

/// `ramp` on another engine: speculative decoding on (the `spec` profile's engine), so
/// the knee lies elsewhere.
pub fn ramp_spec(seed: u64) -> SimConfig {
    let mut cfg = config(Profile::Spec, seed);
    cfg.arrivals = SimConfig::profile(Profile::Ramp).arrivals;
    cfg
}

/// `ramp` with prompts twice as long: another workload, another knee.
pub fn ramp_long_prompts(seed: u64) -> SimConfig {
    let mut cfg = config(Profile::Ramp, seed);
    cfg.workload.prompt_median *= 2.0;
    cfg
}

/// A ramp slow enough for the engine to settle at each rate: 0.5 to 8 requests/s over
/// 20 minutes, the time a daily peak builds up in, compressed.
pub fn slow(mut cfg: SimConfig) -> SimConfig {
    cfg.arrivals.ramp_start_rate = 0.5;
    cfg.arrivals.rate = 8.0;
    cfg.arrivals.period_s = 1200.0;
    cfg
}

/// One case of the ground-truth check: name, config for a seed, seconds to run.
pub type Case = (&'static str, fn(u64) -> SimConfig, u64);

/// The cases the ground-truth check runs.
pub fn cases() -> Vec<Case> {
    vec![
        ("slow ramp", |s| slow(config(Profile::Ramp, s)), 2400),
        ("slow ramp, spec decoding", |s| slow(ramp_spec(s)), 2400),
        ("slow ramp, 2× prompts", |s| slow(ramp_long_prompts(s)), 2400),
        ("ramp", |s| config(Profile::Ramp, s), 1200),
        ("burst", |s| config(Profile::Burst, s), 1200),
        ("steady", |s| config(Profile::Steady, s), 1200),
    ]
}

/// Records `cfg` for `secs` (5 s scrapes), replays it every 5 s with windows of 1m and 5m
/// and the default alert rules, and returns every instant.
pub fn run(cfg: &SimConfig, secs: u64) -> Vec<Instant> {
    run_with(cfg, secs, false)
}

/// [`run`] with every finished request also given to goodput as an engine span would
/// describe it, so attainment is exact (`method="empirical"`) rather than a bracket.
pub fn run_exact(cfg: &SimConfig, secs: u64) -> Vec<Instant> {
    run_with(cfg, secs, true)
}

/// The simulator's finished requests (`requests.jsonl`) as request records.
fn records(dir: &std::path::Path, model: &str) -> Vec<RequestRecord> {
    let text = std::fs::read_to_string(dir.join("requests.jsonl")).expect("ground truth");
    text.lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            let f = |k: &str| v[k].as_f64();
            RequestRecord {
                source: Source::Otlp,
                target: v["target"].as_str().expect("target").to_string(),
                model: model.to_string(),
                status: match v["finish_reason"].as_str() {
                    Some("abort") => Status::ClientAbort,
                    Some("error") => Status::StreamError,
                    _ => Status::Ok,
                },
                finished_unix: f("finish_s").expect("finish_s"),
                e2e_s: f("e2e_s").expect("e2e_s"),
                ttft_s: f("ttft_s"),
                tpot_s: f("tpot_s"),
                prompt_tokens: v["prompt_tokens"].as_u64().map(|n| n as u32),
                output_tokens: v["output_tokens"].as_u64().map(|n| TokenCount { value: n as u32, exact: true }),
                itl: Vec::new(),
                engine: None,
                request_id: None,
            }
        })
        .collect()
}

fn run_with(cfg: &SimConfig, secs: u64, exact: bool) -> Vec<Instant> {
    let dir = record(cfg, secs);
    replay(cfg, dir.path(), exact)
}

/// [`run`] and [`run_exact`] from one recording: the simulator runs once.
pub fn run_both(cfg: &SimConfig, secs: u64) -> (Vec<Instant>, Vec<Instant>) {
    let dir = record(cfg, secs);
    (replay(cfg, dir.path(), false), replay(cfg, dir.path(), true))
}

/// Records `cfg` for `secs` (5 s scrapes) into a new directory.
fn record(cfg: &SimConfig, secs: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options { duration: Duration::from_secs(secs), scrape_interval: Duration::from_secs(5) };
    offline::run(cfg, dir.path(), &opts).expect("offline run");
    dir
}

/// Replays a recording of `cfg` in `dir`, with every finished request too when `exact`.
fn replay(cfg: &SimConfig, dir: &std::path::Path, exact: bool) -> Vec<Instant> {
    let start_ms = cfg.start_unix_s as i64 * 1000;
    let rec = Recording::scan(dir).expect("scan");
    let eval = EvalConfig {
        windows: [60, 300].iter().map(|&s| Window::new(Duration::from_secs(s)).expect("window")).collect(),
        quantiles: vec![0.5],
        slos: vec![slo()],
        ..EvalConfig::default()
    };
    let targets = [ReplayTarget { name: cfg.name.clone(), hint: EngineHint::Auto, default_model: String::new() }];
    let requests = exact.then(|| records(dir, &cfg.model));
    replay_with_requests(dir, &rec, &targets, eval, &AlertingConfig::default(), STEP_MS, requests)
        .expect("replay")
        .map(|frame| Instant {
            t_rel_s: (frame.t_ms - start_ms) as f64 / 1000.0,
            capacity: frame.report.capacity.first().cloned(),
            firing: frame
                .report
                .alerts
                .iter()
                .filter(|a| a.state == "firing")
                .filter_map(|a| a.labels.get("alertname").cloned())
                .collect(),
        })
        .collect()
}

/// When `alert` first fires, seconds since the start.
pub fn first_firing(run: &[Instant], alert: &str) -> Option<f64> {
    run.iter().find(|i| i.firing.iter().any(|a| a == alert)).map(|i| i.t_rel_s)
}
