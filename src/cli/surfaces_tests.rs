//! One tick, every surface: the demo summary, the status page, /metrics, /api/v1/report and
//! the alerts show the same value of each quantity and say which source and window it is
//! from. The tick is the one the issue was found on: the histograms put p99 TTFT at 79.5 s
//! and bracket attainment at [95.9 %, 98.6 %], while the tap measured p99 53.7 s and an
//! attainment of 70 % over its own requests.

use std::collections::BTreeMap;
use std::time::Duration;

use goodput::alert::rule::conditions;
use goodput::alert::{AlertingConfig, from_report};
use goodput::export::{self, ExportSample};
use goodput::serve::page::{PageFacts, StatusPage};

use super::{View, render};
use crate::canonical::HistogramKind;
use crate::duration::Window;
use crate::report::WindowReport;
use crate::report::{Health, LatencyQuantile, ModelReport, Report, SloReport, SloStatus, SloValues, TargetReport};
use crate::request::{RequestRecord, RequestStore, Source, Status, StoreConfig, TokenCount, attach};
use crate::slo::{Bounded, Clause, Objective, Scope, Slo};

const NOW_MS: i64 = 1_700_000_600_000;

fn slo() -> Slo {
    Slo {
        name: "chat".into(),
        ttft: Some(Duration::from_millis(500)),
        tpot: None,
        e2e: None,
        objective: Objective::new(0.99).unwrap(),
        scope: Scope::all(),
    }
}

fn windows() -> [Window; 2] {
    [Window::from_secs(300), Window::from_secs(3600)]
}

/// The histograms' view of a window: p99 TTFT 79.5 s, attainment [95.9 %, 98.6 %], 461
/// output tokens/s.
fn histograms(w: Window) -> WindowReport {
    let joint = Bounded { lower: 0.959, estimate: 0.97, upper: 0.986 };
    let values = SloValues {
        attainment: BTreeMap::from([(Clause::Ttft, joint), (Clause::Joint, joint)]),
        burn_rate: Bounded::exact(3.0),
        goodput_requests_per_second: Some(joint.scale(2.0)),
        goodput_tokens_per_second: Some(joint.scale(461.0)),
        requests: 600.0,
        failed: 0.0,
    };
    WindowReport {
        coverage: 1.0,
        latency: vec![LatencyQuantile { metric: HistogramKind::Ttft, quantile: 0.99, value: 79.5, bracket: None }],
        output_tokens_per_second: Some(461.0),
        requests_per_second: Some(2.0),
        slos: vec![SloReport { slo: "chat".into(), objective: 0.99, status: SloStatus::Evaluated(values) }],
        ..WindowReport::empty(w)
    }
}

/// Twenty tap requests in the last four minutes: 14 fast, 6 with a 53.7 s first token; and
/// one slow request that began over an hour ago, so that the tap has watched both windows
/// whole and the alert rules may judge them.
fn tap_records() -> Vec<RequestRecord> {
    let first =
        RequestRecord { finished_unix: NOW_MS as f64 / 1000.0 - 3500.0, e2e_s: 200.0, ttft_s: Some(53.7), ..record(0) };
    std::iter::once(first).chain((0..20).map(record)).collect()
}

fn record(i: u32) -> RequestRecord {
    RequestRecord {
        source: Source::Tap,
        target: "llama".into(),
        model: "m".into(),
        status: Status::Ok,
        finished_unix: NOW_MS as f64 / 1000.0 - 10.0 * f64::from(i) - 1.0,
        e2e_s: 60.0,
        ttft_s: Some(if i < 14 { 0.3 } else { 53.7 }),
        tpot_s: None,
        prompt_tokens: Some(100),
        output_tokens: Some(TokenCount { value: 500, exact: true }),
        itl: Vec::new(),
        engine: None,
        request_id: None,
    }
}

fn tick() -> Report {
    let mut report = Report {
        t_ms: NOW_MS,
        targets: vec![TargetReport {
            target: "llama".into(),
            engine: None,
            health: Health { up: true, last_evaluation_ms: Some(NOW_MS), ..Health::default() },
            models: vec![ModelReport { model: "m".into(), windows: windows().map(histograms).to_vec() }].into(),
        }],
        ..Report::default()
    };
    let mut store = RequestStore::new(StoreConfig {
        targets: vec!["llama".into()],
        windows: windows().to_vec(),
        alert_only: Vec::new(),
        quantiles: vec![0.5, 0.99],
        slos: vec![slo()],
        max_records_per_series: 1000,
        max_series_per_target: 8,
    });
    store.ingest(tap_records(), NOW_MS);
    attach(&mut report, store.evaluate(NOW_MS), store.counters());
    report
}

fn series(samples: &[ExportSample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&ExportSample> = samples
        .iter()
        .filter(|x| x.name == name && labels.iter().all(|(k, v)| x.labels.iter().any(|(a, b)| a == k && b == v)))
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}");
    found[0].value
}

#[test]
fn every_surface_shows_one_value_per_quantity_and_names_its_source() {
    let report = tick();
    let samples = export::samples(&report);
    let json = serde_json::to_value(&report).unwrap();

    // /api/v1/report and /metrics: the tap's p99 and throughput beside the histograms'.
    let tap_p99 = series(&samples, export::TTFT, &[("source", "tap"), ("q", "0.99"), ("window", "5m")]);
    assert_eq!(tap_p99, 53.7);
    assert_eq!(series(&samples, export::TTFT, &[("source", "metrics"), ("q", "0.99"), ("window", "5m")]), 79.5);
    let tap = &json["targets"][0]["models"][0]["windows"][0]["requests"][0];
    assert_eq!(tap["source"], "tap");
    let in_json = tap["latency"].as_array().unwrap().iter().find(|l| l["quantile"] == 0.99 && l["metric"] == "ttft");
    assert_eq!(in_json.unwrap()["value"].as_f64(), Some(tap_p99));
    let tap_tokens = series(&samples, export::TOKENS, &[("source", "tap"), ("window", "5m"), ("direction", "output")]);
    assert_eq!(tap["output_tokens_per_second"].as_f64(), Some(tap_tokens));
    let good = series(
        &samples,
        export::GOODPUT_TOKENS,
        &[("source", "tap"), ("window", "5m"), ("slo", "chat"), ("bound", "estimate")],
    );
    assert!(good <= tap_tokens, "goodput {good} above its own source's throughput {tap_tokens}");

    // The alerts: each names the source and window of the value it read, and that value
    // is the /metrics series of that source and window.
    let rules = AlertingConfig::default().rule_set();
    let inputs = from_report::inputs(&report, &[slo()]);
    let fired = conditions(&rules, &inputs, None);
    let names: Vec<&str> = fired.iter().map(|c| c.labels["alertname"].as_str()).collect();
    for name in ["LLMTTFTAboveSLO", "LLMGoodputDivergence", "LLMErrorBudgetBurnFast"] {
        assert!(names.contains(&name), "{name} did not fire: {names:?}");
    }
    for c in &fired {
        let (source, window) = (c.annotations["source"].as_str(), c.annotations["window"].as_str());
        let value: f64 = c.annotations["value"].parse().unwrap();
        assert_eq!(value, c.value);
        let at = |extra: &[(&'static str, &'static str)]| {
            let mut l = vec![("source", source), ("window", window)];
            l.extend_from_slice(extra);
            l
        };
        let metrics = match c.labels["alertname"].as_str() {
            "LLMTTFTAboveSLO" => series(&samples, export::TTFT, &at(&[("q", "0.99")])),
            "LLMGoodputDivergence" => series(
                &samples,
                export::ATTAINMENT,
                &at(&[("slo", "chat"), ("clause", "joint"), ("bound", "estimate")]),
            ),
            "LLMErrorBudgetBurnFast" | "LLMErrorBudgetBurnSlow" => {
                series(&samples, export::BURN_RATE, &at(&[("slo", "chat"), ("bound", "estimate")]))
            }
            other => panic!("{other} was not expected to fire at this tick"),
        };
        assert_eq!(value, metrics, "{}: annotation {value}, /metrics {metrics}", c.labels["alertname"]);
        assert_eq!(source, "tap", "{c:?}");
    }

    // The summary: the tap's p99 in the table, its source and window named, goodput beside
    // the tap's own throughput, and the reason the tap lies outside the histograms' bracket.
    let out = render(&report, &View { windows: &windows()[..1], base_url: None });
    let row = out.lines().nth(1).unwrap();
    assert!(row.contains("53.7 s") && !row.contains("79.5"), "{out}");
    assert!(out.contains("over 5m: p99 TTFT from tap, throughput and failures from tap"), "{out}");
    assert!(out.contains("histograms' p99 TTFT 79.5 s"), "{out}");
    assert!(out.contains(&format!("goodput {good:.0} of {tap_tokens:.0} tok/s (tap)")), "{out}");
    assert!(out.contains("5m 70.0% exact from tap (histograms [95.9%–98.6%], outside)"), "{out}");
    assert!(out.contains("5m: 70.0% from tap is below the histograms' bracket: the tap also counts"), "{out}");

    // The status page: the same reading for the charts, and the same reason in the table.
    let facts = PageFacts { slos: vec![slo()], windows: windows()[..1].to_vec(), ..PageFacts::default() };
    let page = StatusPage::new(facts, 10);
    page.record(&report);
    let html = page.html(&report);
    assert!(html.contains("goodput beside throughput (from tap)"), "{html}");
    assert!(html.contains("p99 TTFT (from tap) against the SLO thresholds"), "{html}");
    assert!(html.contains("exact from tap") && html.contains("below the histograms&#39; bracket"), "{html}");
}
