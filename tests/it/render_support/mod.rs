//! A report with every family /metrics can carry, for the rendering tests and bench: the
//! engine families evaluated from the fake targets' template (examples/fake_targets/) over two
//! minutes of 5 s scrapes, then requests from a tap and OTLP, error budgets, capacity, alerts,
//! rule readiness, GPUs and their derived figures, a discovered target and a failing one.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use goodput::adapt::EngineHint;
use goodput::budget::{BudgetReport, Values};
use goodput::config::Cardinality;
use goodput::duration::Window;
use goodput::evaluate::RateMode;
use goodput::evaluate::incremental::Incremental;
use goodput::gpu::derive::{BandwidthSource, Bounds, Derived, FlopsSource, Hbm, Mfu};
use goodput::gpu::reading::GpuReading;
use goodput::parse::{Limits, vllm_like_exposition};
use goodput::report::{AlertJson, Health, ModelReport, Report, RuleReadiness, TargetReport};
use goodput::request::{DataSource, RequestRecord, RequestStore, Source, Status, StoreConfig, TokenCount, attach};
use goodput::scrape::ingest;
use goodput::serve::page::sample;
use goodput::slo::Bounded;
use goodput::window::TargetWindows;

#[path = "../../../examples/fake_targets/template.rs"]
#[allow(dead_code, unused_imports)]
mod template;
use template::Template;

const INTERVAL_MS: i64 = 5_000;
const NOW_MS: i64 = 1_700_000_120_000;

const CONFIG: &str = "
slos:
  - {name: chat, ttft: 500ms, tpot: 50ms, objective: 0.99}
  - {name: batch, e2e: 30s, objective: 0.95}
targets:
  - {name: t, url: 'http://127.0.0.1:1/metrics'}
";

/// The name of target `i`, with characters a label value must escape in the first.
pub fn target_name(i: usize) -> String {
    if i == 0 { "engine-\"000\"\\a".to_string() } else { format!("engine-{i:03}") }
}

/// The evaluation settings the report was evaluated with (two SLOs, the default windows).
#[allow(dead_code)] // the enrich bench's only
pub fn eval_config() -> goodput::EvalConfig {
    goodput::config::from_str(CONFIG, "config").unwrap().config.eval_config()
}

/// `targets` targets (at least 3 for every kind of series), each with the windows of one
/// evaluated engine; target 1 serves two models.
pub fn report(targets: usize) -> Report {
    let config = goodput::config::from_str(CONFIG, "config").unwrap().config;
    let eval = config.eval_config().for_target("t");
    let template = Template::parse(&vllm_like_exposition(1, 2, 7));
    let mut store = TargetWindows::new(config.max_window());
    let start = NOW_MS - 24 * INTERVAL_MS;
    for k in 0..=24 {
        let body = template.render(1.0 + (k * INTERVAL_MS) as f64 / 600_000.0);
        let snap = ingest(body.as_bytes(), &Limits::default(), Cardinality::default(), EngineHint::Auto, "t").unwrap();
        store.push(start + k * INTERVAL_MS, Arc::new(snap));
    }
    let mut inc = Incremental::new(&eval);
    inc.advance(&mut store, NOW_MS);
    let models: Vec<ModelReport> = inc.reports(NOW_MS, &eval, RateMode::Prometheus);
    assert!(!models.is_empty(), "the template yields a model");

    let mut report = Report {
        t_ms: NOW_MS,
        targets: (0..targets)
            .map(|i| TargetReport {
                target: target_name(i),
                engine: None,
                health: Health {
                    up: true,
                    last_scrape_duration_seconds: Some(0.004 + i as f64 * 1e-4),
                    last_successful_scrape_ms: Some(NOW_MS - 1_000),
                    last_evaluation_ms: Some(NOW_MS),
                    ..Health::default()
                },
                models: models.clone().into(),
            })
            .collect(),
        limits: config.eval_config().limits(),
        ..Report::default()
    };
    enrich(&mut report, &models);
    report
}

fn enrich(report: &mut Report, models: &[ModelReport]) {
    let model = models[0].model.clone();
    let t0 = target_name(0);
    if let Some(t) = report.targets.get_mut(1) {
        let mut second = models[0].clone();
        second.model = "second-model".into();
        t.models_mut().push(second);
        t.health.labels = BTreeMap::from([
            ("discovery".to_string(), "kubernetes".to_string()),
            ("namespace".to_string(), "llm".to_string()),
            ("pod".to_string(), "vllm-1".to_string()),
            ("team".to_string(), "infer".to_string()),
        ]);
    }
    if let Some(t) = report.targets.get_mut(2) {
        t.health.up = false;
        t.health.last_error = Some("connect: connection refused".into());
        t.health.errors_total = BTreeMap::from([("connect".to_string(), 3), ("something_new".to_string(), 1)]);
        t.health.warnings_total = BTreeMap::from([("duplicate_series".to_string(), 2), ("odd_one".to_string(), 1)]);
    }
    // Requests from a tap and from spans for target 0's model.
    let windows: Vec<Window> = models[0].windows.iter().map(|w| w.window).collect();
    let mut store = RequestStore::new(StoreConfig {
        targets: vec![t0.clone()],
        alert_only: Vec::new(),
        windows,
        quantiles: vec![0.5, 0.99],
        slos: goodput::config::from_str(CONFIG, "config").unwrap().config.slos,
        max_records_per_series: 1000,
        max_series_per_target: 8,
    });
    let rec = |source, i: u32, status| RequestRecord {
        source,
        target: t0.clone(),
        model: model.clone(),
        status,
        finished_unix: NOW_MS as f64 / 1000.0 - 3.0 * f64::from(i),
        e2e_s: 2.0 + f64::from(i % 5) * 0.25,
        ttft_s: Some(0.1 + f64::from(i % 7) * 0.1),
        tpot_s: Some(0.02 + f64::from(i % 3) * 0.02),
        prompt_tokens: Some(100),
        output_tokens: Some(TokenCount { value: 50 + i, exact: !i.is_multiple_of(4) }),
        itl: Vec::new(),
        engine: None,
        // The tap's record and the span of one request share its id: the TTFT gap pairs them.
        request_id: Some(format!("cmpl-{i}")),
    };
    let mut records = Vec::new();
    for i in 0..30 {
        let status = match i % 10 {
            8 => Status::HttpError(503),
            9 => Status::ClientAbort,
            _ => Status::Ok,
        };
        records.push(rec(Source::Tap, i, status));
        records.push(rec(Source::Otlp, i, Status::Ok));
    }
    store.ingest(records, NOW_MS);
    let mut counters = store.counters();
    counters.inbox = Some(goodput::request::InboxCounts { accepted: 60, dropped: 2 });
    counters.rejected = BTreeMap::from([("unknown_target".to_string(), 4)]);
    attach(report, store.evaluate(NOW_MS), counters);

    // The GPU figures of one window, and the GPUs themselves.
    let w = &mut report.targets[0].models_mut()[0].windows[0];
    w.gpu = Some(Derived {
        mfu: Some(Mfu { ratio: 0.31, achieved_flops: 1e14, source: FlopsSource::EngineCounter }),
        hbm: Some(Hbm { ratio: 0.62, source: BandwidthSource::DramActive }),
        decode_tpot_floor_seconds: Some(0.0123),
        cost_per_million_output: Some(1.75),
        cost_per_million_good_output: Some(Bounds { lower: Some(1.8), estimate: Some(1.9), upper: None }),
    });
    report.gpus = (0..2)
        .map(|i| GpuReading {
            index: i.to_string(),
            uuid: format!("GPU-{i}"),
            name: "NVIDIA H100 80GB HBM3".into(),
            gpu_utilization_ratio: Some(0.9 - i as f64 * 0.1),
            memory_used_bytes: Some(7e10),
            memory_total_bytes: Some(8.5e10),
            power_watts: Some(512.5),
            temperature_celsius: Some(61.0),
            throttle_reasons: Some(0x4),
            ..GpuReading::default()
        })
        .collect();
    let budget = |source, values| BudgetReport {
        target: t0.clone(),
        model: model.clone(),
        slo: "chat".into(),
        source,
        objective: 0.99,
        period: Duration::from_secs(28 * 86_400),
        coverage: 0.0125,
        values,
    };
    let consumed = Bounded { lower: 0.5, estimate: 0.75, upper: 1.5 };
    let remaining = Bounded { lower: -0.5, estimate: 0.25, upper: 0.5 };
    report.budgets = vec![
        budget(
            DataSource::Metrics,
            Some(Values { requests: 1000.0, attainment: Bounded::exact(0.99), consumed, remaining }),
        ),
        budget(DataSource::Tap, None),
    ];
    report.capacity = report.targets.iter().map(|t| sample::capacity(&t.target, &t.models[0].model, 0.9)).collect();
    let alert = |name: &str, state| AlertJson {
        labels: BTreeMap::from([
            ("alertname".to_string(), name.to_string()),
            ("severity".to_string(), "page".to_string()),
            ("target".to_string(), t0.clone()),
            ("model".to_string(), model.clone()),
        ]),
        annotations: BTreeMap::new(),
        state,
        active_at: "2023-11-14T22:13:20.000Z".into(),
        value: "0.93".into(),
    };
    report.alerts = vec![alert("LLMKVCacheSaturated", "firing"), alert("LLMTTFTHigh", "pending")];
    report.alert_readiness = vec![RuleReadiness {
        alertname: "LLMGoodputDivergence",
        target: t0.clone(),
        model: model.clone(),
        window: Window::from_secs(300),
        coverage: 0.5,
        min_coverage: 0.9,
        ready: false,
        ready_in_seconds: 75.0,
    }];
}

/// External labels as a config gives them, one of which a discovered target's info series
/// carries itself.
#[allow(dead_code)] // the tests' only, not the bench's
pub fn external_labels() -> Vec<(String, String)> {
    vec![("cluster".to_string(), "prod \"east\"".to_string()), ("pod".to_string(), "goodput-7f".to_string())]
}
