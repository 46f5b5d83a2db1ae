//! Made-up reports for the page's tests and its benchmark: any number of targets, each
//! with one model, two SLOs over two windows, a KV cache, latency quantiles, a down target
//! and alerts, with capacity (an interval for `chat`, a lower bound for `batch`, saturated
//! at the crest of the wave), with values that move from one evaluation to the next; and
//! their error budgets ([`budgets`]): `chat` over 7 days with some left, `batch` over 28
//! days spent three times over.

use std::collections::BTreeMap;
use std::time::Duration;

use super::facts::PageFacts;
use crate::budget::{BudgetReport, DEFAULT_PERIOD, Values};
use crate::canonical::{Engine, HistogramKind};
use crate::capacity::{CapacityReport, Method, RateEstimate, Reason, SloCapacity};
use crate::duration::Window;
use crate::report::{
    AlertJson, Health, KvBand, KvReport, LatencyQuantile, ModelReport, Report, SloReport, SloStatus, SloValues,
    TargetReport, WindowReport,
};
use crate::request::DataSource;
use crate::slo::{Bounded, Clause, Objective, Scope, Slo};

/// The facts the sample reports are drawn with: SLOs `chat` and `batch`, default KV bands.
pub fn facts() -> PageFacts {
    let slo = |name: &str, ttft_ms, tpot_ms, objective| Slo {
        name: name.into(),
        ttft: Some(Duration::from_millis(ttft_ms)),
        tpot: Some(Duration::from_millis(tpot_ms)),
        e2e: None,
        objective: Objective::new(objective).unwrap(),
        scope: Scope::all(),
    };
    PageFacts {
        slos: vec![slo("chat", 500, 50, 0.99), slo("batch", 2000, 100, 0.95)],
        windows: vec![Window::from_secs(60), Window::from_secs(300)],
        periods: vec![("chat".into(), CHAT_PERIOD)],
        ..PageFacts::default()
    }
}

/// The error-budget period of SLO `chat`; `batch` has the default.
pub const CHAT_PERIOD: Duration = Duration::from_secs(7 * 86_400);

/// The error budgets of `report`'s targets that are up: `chat` from the histograms, a
/// bracket with some budget left, a tenth of its period counted; `batch` spent 3.2 times
/// over the whole period, from a tap.
pub fn budgets(report: &Report) -> Vec<BudgetReport> {
    let budget = |t: &TargetReport, slo: &str, objective, period, source, coverage, remaining: Bounded| BudgetReport {
        target: t.target.clone(),
        model: t.models[0].model.clone(),
        slo: slo.into(),
        source,
        objective,
        period,
        coverage,
        values: Some(Values {
            requests: 120_000.0,
            attainment: Bounded::exact(1.0 - (1.0 - remaining.estimate) * (1.0 - objective)),
            consumed: Bounded {
                lower: 1.0 - remaining.upper,
                estimate: 1.0 - remaining.estimate,
                upper: 1.0 - remaining.lower,
            },
            remaining,
        }),
    };
    let chat = Bounded { lower: 0.21, estimate: 0.38, upper: 0.52 };
    report
        .targets
        .iter()
        .filter(|t| t.health.up && !t.models.is_empty())
        .flat_map(|t| {
            [
                budget(t, "chat", 0.99, CHAT_PERIOD, DataSource::Metrics, 0.1, chat),
                budget(t, "batch", 0.95, DEFAULT_PERIOD, DataSource::Tap, 1.0, Bounded::exact(-2.2)),
            ]
        })
        .collect()
}

/// The name of sample target `i`.
pub fn target_name(i: usize) -> String {
    format!("engine-{i:03}")
}

/// Evaluation `step` of `targets` targets (the last one down when there are several), at
/// 5 s per step.
pub fn report(targets: usize, step: usize) -> Report {
    let t_ms = 1_700_000_000_000 + step as i64 * 5_000;
    let wave = (step as f64 / 9.0).sin();
    let targets: Vec<TargetReport> = (0..targets)
        .map(|i| {
            let down = targets > 1 && i == targets - 1;
            target(&target_name(i), &format!("model-{}", i % 3), wave + i as f64 * 0.01, down, t_ms)
        })
        .collect();
    let capacity =
        targets.iter().filter(|t| t.health.up).map(|t| capacity(&t.target, &t.models[0].model, wave)).collect();
    let alerts =
        vec![alert("LLMKVCacheSaturated", "firing", "engine-000"), alert("LLMTTFTHigh", "pending", "engine-000")];
    Report { t_ms, targets, alerts, capacity, ..Report::default() }
}

/// Capacity of one target and model; `x` in about [-1, 1] moves the arrivals.
pub fn capacity(target: &str, model: &str, x: f64) -> CapacityReport {
    let arrivals = 4.0 + 2.0 * x;
    let estimate = |p10: f64, censored| RateEstimate {
        end: None,
        p10,
        p50: p10 * 1.1,
        p90: p10 * 1.25,
        censored,
        below_data: false,
        bins: 6,
    };
    let slo = |name: &str, objective, e: RateEstimate| SloCapacity {
        slo: name.into(),
        objective,
        method: Method::Empirical,
        estimates: vec![e],
        headroom: Some(e.p10 / arrivals),
        intervals_used: 120,
        age_seconds: Some(600.0),
    };
    let saturated = x > 0.8;
    CapacityReport {
        target: target.into(),
        model: model.into(),
        arrival_rate: Some(arrivals),
        rising: x > 0.0,
        saturated,
        reasons: if saturated { vec![Reason::QueueGrowing, Reason::CompletionsLag] } else { Vec::new() },
        slos: vec![slo("chat", 0.99, estimate(5.6, false)), slo("batch", 0.95, estimate(4.2 + x.max(0.0), true))],
        intervals: 120,
    }
}

/// One target with one model; `x` in about [-1, 1] moves every number.
pub fn target(name: &str, model: &str, x: f64, down: bool, t_ms: i64) -> TargetReport {
    // The 1h window stands for those the alert rules add: the SLO table leaves it out.
    let windows = [60, 300, 3600].into_iter().map(|s| window(Window::from_secs(s), x)).collect();
    TargetReport {
        target: name.into(),
        engine: Some(Engine::Vllm),
        health: Health {
            up: !down,
            last_error: down.then(|| "connect: connection refused (os error 111)".to_string()),
            last_scrape_duration_seconds: Some(0.004),
            errors_total: if down { BTreeMap::from([("connect".to_string(), 12)]) } else { BTreeMap::new() },
            last_successful_scrape_ms: Some(t_ms - 1_000),
            last_evaluation_ms: Some(t_ms),
            ..Health::default()
        },
        models: vec![ModelReport { model: model.into(), windows }].into(),
    }
}

fn window(w: Window, x: f64) -> WindowReport {
    let tput = 1500.0 + 400.0 * x;
    let quantile = |metric, value| LatencyQuantile { metric, quantile: 0.99, value, bracket: None };
    let kv = 0.8 + 0.12 * x;
    let slo = |name: &str, objective: f64, est: f64| {
        let joint = Bounded { lower: est - 0.004, estimate: est, upper: (est + 0.003).min(1.0) };
        SloReport {
            slo: name.into(),
            objective,
            status: SloStatus::Evaluated(SloValues {
                attainment: BTreeMap::from([(Clause::Joint, joint)]),
                burn_rate: Bounded::exact(1.0),
                goodput_requests_per_second: Some(joint.scale(5.0)),
                goodput_tokens_per_second: Some(joint.scale(tput)),
                requests: 1500.0,
                failed: 3.0,
            }),
        }
    };
    WindowReport {
        coverage: 1.0,
        latency: vec![quantile(HistogramKind::Ttft, 0.35 + 0.2 * x), quantile(HistogramKind::Tpot, 0.04 + 0.01 * x)],
        output_tokens_per_second: Some(tput),
        requests_per_second: Some(5.0),
        kv_cache: Some(KvReport {
            last: kv,
            mean: kv,
            max: kv,
            band: KvBand::Target,
            band_time: BTreeMap::from([(KvBand::Target, 1.0)]),
        }),
        slos: vec![slo("chat", 0.99, 0.99 + 0.006 * x), slo("batch", 0.95, 0.97)],
        ..WindowReport::empty(w)
    }
}

fn alert(name: &str, state: &'static str, target: &str) -> AlertJson {
    AlertJson {
        labels: BTreeMap::from([
            ("alertname".to_string(), name.to_string()),
            ("severity".to_string(), "page".to_string()),
            ("target".to_string(), target.to_string()),
            ("model".to_string(), "model-0".to_string()),
        ]),
        annotations: BTreeMap::from([
            ("summary".to_string(), format!("{name} on {target}")),
            (
                "runbook_url".to_string(),
                format!("https://goodput.example.com{}#{}", crate::alert::rule::RUNBOOKS_PATH, name.to_lowercase()),
            ),
        ]),
        state,
        active_at: "2023-11-14T22:13:20.000Z".into(),
        value: "0.93".into(),
    }
}
