//! Ground-truth accuracy harness: record the simulator offline, replay the recording
//! through goodput's evaluation, and set every exported SLO bracket beside the exact share
//! recomputed from the simulator's per-request ground truth over the same population.
//!
//! Shared by `tests/it/accuracy_*.rs` (which assert) and `examples/accuracy_report.rs` (which
//! prints the tables of docs/accuracy.md).

#![allow(dead_code)]

pub mod stats;
pub mod truth;

use std::path::Path;
use std::time::Duration;

use goodput::adapt::EngineHint;
use goodput::duration::Window;
use goodput::evaluate::{EvalConfig, KvThresholds};
use goodput::parse::{Limits, parse};
use goodput::replay::{Recording, ReplayTarget, replay};
use goodput::report::{SloStatus, SloValues, WindowReport};
use goodput::slo::{Bounded, Clause, Objective, Scope, Slo};
use goodput_sim::offline::{self, Options};
use goodput_sim::{Profile, SimConfig};
use truth::{Populations, Span, Truth, share};

pub const SCRAPE_INTERVAL_S: u64 = 5;
pub const WINDOWS_S: [u64; 2] = [60, 300];
const STEP_MS: i64 = 5_000;
const TARGET: &str = "sim";

/// Histogram family per clause in the vLLM format the simulator writes.
fn family(c: Clause) -> &'static str {
    match c {
        Clause::Ttft => "vllm:time_to_first_token_seconds",
        Clause::Tpot => "vllm:request_time_per_output_token_seconds",
        _ => "vllm:e2e_request_latency_seconds",
    }
}

/// The SLOs under test. `on_*` thresholds are bucket boundaries of vLLM's histograms
/// (TTFT 0.25 / 0.5 s, TPOT 0.05 s, E2E 10 s); `between` ones are not (TTFT 0.2 s lies in
/// (0.1, 0.25], TPOT 0.03 s in (0.025, 0.05], E2E 12 s in (10, 15]).
pub fn slos() -> Vec<Slo> {
    let spec = |name: &str, ttft: f64, tpot: f64, e2e: Option<f64>| Slo {
        name: name.into(),
        ttft: Some(Duration::from_secs_f64(ttft)),
        tpot: Some(Duration::from_secs_f64(tpot)),
        e2e: e2e.map(Duration::from_secs_f64),
        objective: Objective::new(0.95).expect("valid objective"),
        scope: Scope::all(),
    };
    vec![
        spec("on_interactive", 0.5, 0.05, Some(10.0)),
        spec("on_tight", 0.25, 0.05, None),
        spec("between", 0.2, 0.03, Some(12.0)),
    ]
}

/// One simulated run.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub profile: Profile,
    pub seed: u64,
    pub engines: u32,
    pub secs: u64,
}

impl Case {
    pub fn profile_name(&self) -> &'static str {
        match self.profile {
            Profile::Steady => "steady",
            Profile::Ramp => "ramp",
            Profile::Burst => "burst",
            Profile::Spec => "spec",
            Profile::None => "none",
        }
    }

    pub fn config(&self) -> SimConfig {
        let mut cfg = SimConfig::profile(self.profile);
        cfg.seed = self.seed;
        cfg.engines = self.engines;
        cfg
    }
}

/// One clause of one SLO at one instant and window.
#[derive(Debug, Clone)]
pub struct ClauseRow {
    pub profile: &'static str,
    pub seed: u64,
    pub t_rel_s: f64,
    pub window_s: u64,
    pub slo: String,
    pub clause: Clause,
    pub on_boundary: bool,
    pub got: Bounded,
    /// Exact share over the histogram's population (joint: over requests finished).
    pub truth: f64,
    /// The bracket the histogram must show: ground-truth shares at the neighbouring
    /// boundaries (None for the joint clause, which has no histogram).
    pub expected_bracket: Option<(f64, f64)>,
    /// Joint only: how far the TTFT bracket over the requests *finished* in the window lies
    /// below (lower) and above (upper) the exported one, which counts the requests whose
    /// *first token* fell in the window. Zero when the two populations agree; the joint
    /// bounds are provable only up to this shift (see docs/accuracy.md).
    pub ttft_population_shift: (f64, f64),
    /// Joint only: the bound proposed in docs/accuracy.md, which also counts every request
    /// in flight at the window's first scrape as possibly breaking TTFT. Provable from
    /// /metrics alone.
    pub in_flight_widened: Option<Bounded>,
}

/// Token goodput of one SLO at one instant and window.
#[derive(Debug, Clone)]
pub struct GoodputRow {
    pub profile: &'static str,
    pub seed: u64,
    pub t_rel_s: f64,
    pub window_s: u64,
    pub slo: String,
    pub got: Bounded,
    pub output_tokens_per_second: f64,
    /// Exact joint attainment × exported throughput (docs/architecture.md#joint-attainment).
    pub truth: f64,
    /// Output tokens of good requests / output tokens of all requests finished in the
    /// window, × throughput: weights by work instead of by request.
    pub truth_token_weighted: f64,
}

/// Everything one run produced.
pub struct CaseResult {
    pub case: Case,
    pub rows: Vec<ClauseRow>,
    pub goodput: Vec<GoodputRow>,
    /// Disagreements in population sizes or traffic status (must stay empty).
    pub population_errors: Vec<String>,
    pub evaluated: usize,
    pub no_traffic: usize,
    pub finished_requests: usize,
    pub closest_to_a_scrape_s: f64,
}

fn bucket_bounds(body: &str, family: &str) -> Vec<f64> {
    let exp = parse(body.as_bytes(), &Limits::default()).expect("scrape parses");
    let name = format!("{family}_bucket");
    let mut les: Vec<f64> = exp
        .samples
        .iter()
        .filter(|s| s.name == name)
        .filter_map(|s| exp.label(s, "le").and_then(|v| v.parse::<f64>().ok()))
        .filter(|le| le.is_finite())
        .collect();
    les.sort_by(f64::total_cmp);
    les.dedup();
    assert!(les.len() > 5, "{family} has buckets");
    les
}

/// The bracket a histogram with bounds `les` must give for `threshold` on `values`.
fn bracket(les: &[f64], values: &[f64], threshold: f64) -> (bool, (f64, f64)) {
    let at = |b: f64| share(values.iter().copied(), b).unwrap_or(f64::NAN);
    if les.contains(&threshold) {
        return (true, (at(threshold), at(threshold)));
    }
    let lo = les.iter().copied().rfind(|&le| le < threshold);
    let hi = les.iter().copied().find(|&le| le > threshold);
    (false, (lo.map_or(0.0, at), hi.map_or(1.0, at)))
}

/// Joint bounds that stay provable although TTFT is observed at the first token and the
/// other clauses at finish. Among the requests finished in the window, those whose first
/// token came inside it are in the TTFT histogram's increase; the others were in flight
/// (running, or waiting after a preemption) at the window's first scrape, so there are at
/// most `R = running + waiting` of them there. Hence, with `Nₜ` TTFT observations and `N`
/// finished requests: TTFT-breaking finished requests ≤ (1 − Lₜ)·Nₜ + R, and TTFT-meeting
/// ones ≤ Uₜ·Nₜ + R. `n_ttft` is the TTFT histogram's raw increase.
fn widened(spec: &Slo, v: &SloValues, w: &WindowReport, n_ttft: f64) -> Option<Bounded> {
    let r = w.running.as_ref()?.first + w.waiting.as_ref()?.first;
    let n = v.requests;
    if n <= 0.0 {
        return None;
    }
    let failed = v.failed / n;
    let mut lower = 1.0 - failed;
    let mut upper = 1.0 - failed;
    for (clause, _) in spec.clauses() {
        let b = v.attainment[&clause];
        if clause == Clause::Ttft {
            lower -= (((1.0 - b.lower) * n_ttft + r) / n).min(1.0);
            upper = upper.min((b.upper * n_ttft + r) / n);
        } else {
            lower -= 1.0 - b.lower;
            upper = upper.min(b.upper);
        }
    }
    let lower = lower.max(0.0).min(upper);
    let joint = v.attainment[&Clause::Joint];
    Some(Bounded { lower, estimate: joint.estimate.clamp(lower, upper), upper })
}

/// Records `case` into a temp dir, replays it, and compares every evaluated window.
pub fn run(case: Case) -> CaseResult {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = case.config();
    let opts =
        Options { duration: Duration::from_secs(case.secs), scrape_interval: Duration::from_secs(SCRAPE_INTERVAL_S) };
    offline::run(&cfg, dir.path(), &opts).expect("offline run");
    evaluate(case, dir.path(), cfg.start_unix_s as i64 * 1000)
}

fn evaluate(case: Case, dir: &Path, start_ms: i64) -> CaseResult {
    let rec = Recording::scan(dir).expect("scan");
    let scrapes: Vec<i64> = rec.targets.iter().find(|t| t.0 == TARGET).expect("target").1.iter().map(|s| s.0).collect();
    let rel_s: Vec<f64> = scrapes.iter().map(|&ms| (ms - start_ms) as f64 / 1000.0).collect();
    let truth: Truth = truth::load(dir, TARGET, start_ms as f64 / 1000.0, &rel_s);
    let first_body = std::fs::read_to_string(&rec.targets[0].1[0].1).expect("scrape");
    let les = |c: Clause| bucket_bounds(&first_body, family(c));
    let bounds =
        [(Clause::Ttft, les(Clause::Ttft)), (Clause::Tpot, les(Clause::Tpot)), (Clause::E2e, les(Clause::E2e))];

    let eval = EvalConfig {
        windows: WINDOWS_S.iter().map(|&s| Window::new(Duration::from_secs(s)).expect("window")).collect(),
        quantiles: vec![0.5],
        kv: KvThresholds::default(),
        slos: slos(),
        ..EvalConfig::default()
    };
    let targets = [ReplayTarget { name: TARGET.into(), hint: EngineHint::Auto, default_model: String::new() }];
    let mut out = CaseResult {
        case,
        rows: Vec::new(),
        goodput: Vec::new(),
        population_errors: Vec::new(),
        evaluated: 0,
        no_traffic: 0,
        finished_requests: truth.requests.iter().filter(|r| r.finish_scrape.is_some()).count(),
        closest_to_a_scrape_s: truth.closest_to_a_scrape_s,
    };
    let specs = slos();
    for frame in replay(dir, &rec, &targets, eval, STEP_MS).expect("replay") {
        let t = frame.t_ms;
        let t_rel_s = (t - start_ms) as f64 / 1000.0;
        let models = &frame.report.targets[0].models;
        assert!(models.len() <= 1, "one model");
        let Some(model) = models.first() else { continue };
        for (wi, w) in model.windows.iter().enumerate() {
            let window_s = WINDOWS_S[wi];
            let inside: Vec<usize> =
                (0..scrapes.len()).filter(|&i| scrapes[i] > t - window_s as i64 * 1000 && scrapes[i] <= t).collect();
            let span = match (inside.first(), inside.last()) {
                (Some(&a), Some(&b)) => Span { first: a, last: b },
                _ => Span { first: 0, last: 0 },
            };
            let pop = Populations::new(&truth, span);
            let ctx = format!("{} seed {} t={t_rel_s}s w={window_s}s", case.profile_name(), case.seed);
            for (slo, spec) in w.slos.iter().zip(&specs) {
                assert_eq!(slo.slo, spec.name);
                let v = match &slo.status {
                    SloStatus::Evaluated(v) => v,
                    SloStatus::NoTraffic => {
                        out.no_traffic += 1;
                        if !pop.finished.is_empty() && !pop.first_token.is_empty() {
                            out.population_errors
                                .push(format!("{ctx} {}: no traffic reported, truth has some", spec.name));
                        }
                        continue;
                    }
                    SloStatus::NotEvaluable { reason } => panic!("{ctx}: not evaluable: {reason}"),
                };
                out.evaluated += 1;
                let failed = pop.finished.iter().filter(|r| r.failed).count();
                if v.requests != pop.finished.len() as f64 || v.failed != failed as f64 {
                    out.population_errors.push(format!(
                        "{ctx} {}: exported {}/{} finished/failed, truth {}/{failed}",
                        spec.name,
                        v.requests,
                        v.failed,
                        pop.finished.len()
                    ));
                }
                let mut good: Vec<bool> = pop.finished.iter().map(|r| !r.failed).collect();
                let mut shift = (0.0, 0.0);
                for (clause, threshold) in spec.clauses() {
                    let threshold = threshold.as_secs_f64();
                    let values: Vec<f64> = match clause {
                        Clause::Ttft => pop.first_token.iter().filter_map(|r| r.ttft_s).collect(),
                        Clause::Tpot => pop.finished.iter().map(|r| r.tpot_s).collect(),
                        _ => pop.finished.iter().map(|r| r.e2e_s).collect(),
                    };
                    for (g, r) in good.iter_mut().zip(&pop.finished) {
                        let value = match clause {
                            Clause::Ttft => r.ttft_s.unwrap_or(f64::INFINITY),
                            Clause::Tpot => r.tpot_s,
                            _ => r.e2e_s,
                        };
                        *g &= value <= threshold;
                    }
                    let les = &bounds.iter().find(|b| b.0 == clause).expect("bounds").1;
                    let (on_boundary, expected) = bracket(les, &values, threshold);
                    if clause == Clause::Ttft {
                        // A request aborted before its first token is failed, hence bad
                        // anyway: counting it as meeting TTFT keeps the bound tightest.
                        let finished: Vec<f64> = pop.finished.iter().map(|r| r.ttft_s.unwrap_or(0.0)).collect();
                        let (_, (lo, hi)) = bracket(les, &finished, threshold);
                        shift = ((expected.0 - lo).max(0.0), (hi - expected.1).max(0.0));
                    }
                    out.rows.push(ClauseRow {
                        profile: case.profile_name(),
                        seed: case.seed,
                        t_rel_s,
                        window_s,
                        slo: spec.name.clone(),
                        clause,
                        on_boundary,
                        got: v.attainment[&clause],
                        truth: share(values.iter().copied(), threshold).unwrap_or(f64::NAN),
                        expected_bracket: Some(expected),
                        ttft_population_shift: (0.0, 0.0),
                        in_flight_widened: None,
                    });
                }
                let n = pop.finished.len() as f64;
                let joint_truth = good.iter().filter(|g| **g).count() as f64 / n;
                let all_on = out.rows.iter().rev().take(spec.clauses().count()).all(|r| r.on_boundary);
                out.rows.push(ClauseRow {
                    profile: case.profile_name(),
                    seed: case.seed,
                    t_rel_s,
                    window_s,
                    slo: spec.name.clone(),
                    clause: Clause::Joint,
                    on_boundary: all_on,
                    got: v.attainment[&Clause::Joint],
                    truth: joint_truth,
                    expected_bracket: None,
                    ttft_population_shift: shift,
                    in_flight_widened: widened(spec, v, w, pop.first_token.len() as f64),
                });
                if let (Some(g), Some(tps)) = (v.goodput_tokens_per_second, w.output_tokens_per_second) {
                    let tokens: f64 = pop.finished.iter().map(|r| r.output_tokens).sum();
                    let good_tokens: f64 =
                        pop.finished.iter().zip(&good).filter(|(_, g)| **g).map(|(r, _)| r.output_tokens).sum();
                    let weighted = if tokens > 0.0 { good_tokens / tokens } else { joint_truth };
                    out.goodput.push(GoodputRow {
                        profile: case.profile_name(),
                        seed: case.seed,
                        t_rel_s,
                        window_s,
                        slo: spec.name.clone(),
                        got: g,
                        output_tokens_per_second: tps,
                        truth: joint_truth * tps,
                        truth_token_weighted: weighted * tps,
                    });
                }
            }
        }
    }
    out
}
