//! From the store to the outputs: request windows land beside the histogram ones in the
//! report, /metrics shows them under `source`, the TTFT gap names its reference, and the
//! alert inputs take the SLO quantities from the tap, then spans, then histograms.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::alert::from_report;
use crate::canonical::HistogramKind;
use crate::duration::Window;
use crate::export::{self, ExportSample};
use crate::report::{
    Health, LatencyQuantile, ModelReport, Report, SloReport, SloStatus, SloValues, TargetReport, TtftBreakdown,
    WindowReport,
};
use crate::slo::{Bounded, Clause, Objective, Scope, Slo};

const NOW_MS: i64 = 1_700_000_100_000;

fn slo() -> Slo {
    Slo {
        name: "chat".into(),
        ttft: Some(Duration::from_millis(500)),
        tpot: None,
        e2e: None,
        objective: Objective::new(0.9).unwrap(),
        scope: Scope::all(),
    }
}

fn rec(source: Source, model: &str, at: f64, ttft: f64, status: Status) -> RequestRecord {
    RequestRecord {
        source,
        target: "t".into(),
        model: model.into(),
        status,
        finished_unix: NOW_MS as f64 / 1000.0 - at,
        e2e_s: 2.0,
        ttft_s: Some(ttft),
        tpot_s: None,
        prompt_tokens: None,
        output_tokens: Some(TokenCount { value: 10, exact: true }),
        itl: Vec::new(),
        engine: None,
        // The tap's record and the span of one request share the response's id.
        request_id: Some(format!("cmpl-{model}-{at}")),
    }
}

/// A report whose histograms say the SLO is met everywhere (attainment 1) over one window.
fn healthy_report(w: Window) -> Report {
    let values = SloValues {
        attainment: BTreeMap::from([(Clause::Ttft, Bounded::exact(1.0)), (Clause::Joint, Bounded::exact(1.0))]),
        burn_rate: Bounded::exact(0.0),
        goodput_requests_per_second: Some(Bounded::exact(1.0)),
        goodput_tokens_per_second: Some(Bounded::exact(10.0)),
        requests: 60.0,
        failed: 0.0,
    };
    let window = WindowReport {
        coverage: 1.0,
        latency: vec![LatencyQuantile { metric: HistogramKind::Ttft, quantile: 0.99, value: 0.2, bracket: None }],
        ttft_breakdown: Some(TtftBreakdown { ttft: 0.15, queue: None, prefill: None, other: None }),
        output_tokens_per_second: Some(100.0),
        slos: vec![SloReport { slo: "chat".into(), objective: 0.9, status: SloStatus::Evaluated(values) }],
        ..WindowReport::empty(w)
    };
    Report {
        t_ms: NOW_MS,
        targets: vec![TargetReport {
            target: "t".into(),
            engine: None,
            health: Health { up: true, ..Health::default() },
            models: vec![ModelReport { model: "m".into(), windows: vec![window] }].into(),
        }],
        ..Report::default()
    }
}

fn store(w: Window) -> RequestStore {
    RequestStore::new(StoreConfig {
        targets: vec!["t".into()],
        windows: vec![w],
        alert_only: Vec::new(),
        quantiles: vec![0.5, 0.99],
        slos: vec![slo()],
        max_records_per_series: 1000,
        max_series_per_target: 8,
    })
}

fn find<'a>(s: &'a [ExportSample], name: &str, labels: &[(&str, &str)]) -> Option<&'a ExportSample> {
    s.iter().find(|x| x.name == name && labels.iter().all(|(k, v)| x.labels.iter().any(|(a, b)| a == k && b == v)))
}

#[test]
fn tap_requests_override_healthy_histograms_in_export_and_alerts() {
    let w = Window::from_secs(60);
    let mut st = store(w);
    // Ten tap requests over the last 50 s: 6 fast, 2 slow, 2 failed. Spans saw 8, all fast.
    let mut recs = Vec::new();
    for i in 0..10 {
        let status = if i >= 8 { Status::HttpError(503) } else { Status::Ok };
        let mut r = rec(Source::Tap, "m", 5.0 * f64::from(i), if i < 6 { 0.3 } else { 0.9 }, status);
        if !status.is_ok() {
            r.ttft_s = None; // failed before the first token
        }
        recs.push(r);
    }
    for i in 0..8 {
        recs.push(rec(Source::Otlp, "m", 5.0 * f64::from(i), 0.1, Status::Ok));
    }
    st.ingest(recs, NOW_MS);
    let mut report = healthy_report(w);
    attach(&mut report, st.evaluate(NOW_MS), st.counters());

    let win = &report.targets[0].models[0].windows[0];
    assert_eq!(win.requests.iter().map(|r| r.source).collect::<Vec<_>>(), [DataSource::Tap, DataSource::Otlp]);
    let tap = &win.requests[0];
    let SloStatus::Evaluated(v) = &tap.slos[0].status else { panic!("{:?}", tap.slos[0].status) };
    assert_eq!(v.attainment[&Clause::Joint], Bounded::exact(0.6));
    assert_eq!(v.attainment[&Clause::Ttft], Bounded::exact(0.75), "6 of the 8 that got a first token");
    assert!((v.burn_rate.estimate - 4.0).abs() < 1e-9);
    // The tap against the spans, request by request: 6 gaps of 0.2 and 2 of 0.8.
    let gap = tap.ttft_gap.as_ref().unwrap();
    assert_eq!((gap.reference, gap.paired), (crate::request::GapReference::Otlp, 8));
    assert!((gap.mean.unwrap() - 0.35).abs() < 1e-9, "{gap:?}");
    assert!((gap.quantiles[0].1 - 0.2).abs() < 1e-9, "{gap:?}");

    let s = export::samples(&report);
    let joint = |source| {
        find(&s, export::ATTAINMENT, &[("source", source), ("clause", "joint"), ("bound", "estimate")]).unwrap().value
    };
    assert_eq!((joint("metrics"), joint("tap"), joint("otlp")), (1.0, 0.6, 1.0));
    let total =
        |status| find(&s, export::requests::REQUESTS_TOTAL, &[("source", "tap"), ("status", status)]).map(|x| x.value);
    assert_eq!((total("ok"), total("http_503"), total("client_abort")), (Some(8.0), Some(2.0), Some(0.0)));
    let good = find(&s, export::requests::GOOD_REQUESTS_TOTAL, &[("source", "tap"), ("slo", "chat")]).unwrap();
    assert_eq!(good.value, 6.0);
    let gap = find(&s, export::requests::TTFT_GAP, &[("reference", "otlp"), ("stat", "mean")]).unwrap();
    assert!((gap.value - 0.35).abs() < 1e-9);
    let pairs = |outcome| find(&s, export::requests::TTFT_GAP_REQUESTS, &[("outcome", outcome)]).map(|x| x.value);
    assert_eq!((pairs("paired"), pairs("no_engine_record")), (Some(8.0), Some(0.0)));
    let p99 = find(&s, export::TTFT, &[("source", "tap"), ("q", "0.99")]).unwrap();
    assert_eq!(p99.value, 0.9);
    // Each source's throughput, over the requests its goodput counts: 10 tap requests of
    // 10 tokens in 60 s, 8 spans; the histograms' own 100 tokens/s stays under metrics.
    let tokens =
        |source| find(&s, export::TOKENS, &[("source", source), ("direction", "output")]).map(|x| x.value).unwrap();
    assert_eq!((tokens("metrics"), tokens("tap"), tokens("otlp")), (100.0, 100.0 / 60.0, 80.0 / 60.0));
    let rps = |source| find(&s, export::REQUESTS, &[("source", source)]).map(|x| x.value);
    assert_eq!((rps("tap"), rps("otlp")), (Some(10.0 / 60.0), Some(8.0 / 60.0)));
    for source in ["tap", "otlp"] {
        let good = find(&s, export::GOODPUT_TOKENS, &[("source", source), ("bound", "upper")]).unwrap().value;
        assert!(good <= tokens(source), "{source}: goodput {good} above its own throughput");
    }

    let inputs = from_report::inputs(&report, &[slo()]);
    let wi = &inputs[0].windows[0];
    assert_eq!(wi.slo_source, DataSource::Tap);
    assert_eq!(wi.slos[0].attainment[&Clause::Joint].estimate, 0.6);
    assert_eq!(wi.ttft_p99, Some(0.9));
    assert_eq!(wi.slos[0].requests, 10.0);
    // The tap's first request began 47 s before now (finished 45 s ago after 2 s).
    assert!((wi.slo_coverage - 47.0 / 60.0).abs() < 1e-9, "{}", wi.slo_coverage);
    assert_eq!(wi.coverage, 1.0, "the scrape rules keep the scrapes' coverage");
}

#[test]
fn spans_come_next_and_histograms_last() {
    let w = Window::from_secs(60);
    let mut st = store(w);
    st.ingest([rec(Source::Otlp, "m", 10.0, 0.9, Status::Ok)], NOW_MS);
    let mut report = healthy_report(w);
    attach(&mut report, st.evaluate(NOW_MS), st.counters());
    let wi = &from_report::inputs(&report, &[slo()])[0].windows[0];
    assert_eq!((wi.slo_source, wi.slos[0].attainment[&Clause::Joint].estimate), (DataSource::Otlp, 0.0));
    // Without spans the tap's gap is absent, with its reason: the histograms are no
    // per-request partner.
    let mut st = store(w);
    st.ingest([rec(Source::Tap, "m", 10.0, 0.4, Status::Ok)], NOW_MS);
    st.ingest([], NOW_MS + crate::request::PAIR_WAIT_MS);
    let mut report = healthy_report(w);
    attach(&mut report, st.evaluate(NOW_MS + crate::request::PAIR_WAIT_MS), st.counters());
    let gap = report.targets[0].models[0].windows[0].requests[0].ttft_gap.clone().unwrap();
    assert_eq!((gap.paired, gap.mean, gap.unpaired["no_engine_record"]), (0, None, 1), "{gap:?}");
    assert!(gap.absent.is_some_and(|why| why.contains("no engine span")), "{gap:?}");
    // Nothing from requests in the window: the histograms, as before.
    let report = healthy_report(w);
    let wi = &from_report::inputs(&report, &[slo()])[0].windows[0];
    assert_eq!((wi.slo_source, wi.slo_coverage), (DataSource::Metrics, 1.0));
}

#[test]
fn a_model_only_clients_name_gets_its_own_entry() {
    let w = Window::from_secs(60);
    let mut st = store(w);
    st.ingest([rec(Source::Tap, "alias", 10.0, 0.1, Status::Ok)], NOW_MS);
    let mut report = healthy_report(w);
    attach(&mut report, st.evaluate(NOW_MS), st.counters());
    let models: Vec<&str> = report.targets[0].models.iter().map(|m| m.model.as_str()).collect();
    assert_eq!(models, ["m", "alias"]);
    let alias = &report.targets[0].models[1].windows[0];
    assert_eq!((alias.coverage, alias.requests.len()), (0.0, 1));
    let inputs = from_report::inputs(&report, &[slo()]);
    let alias_in = inputs.iter().find(|i| i.model == "alias").unwrap();
    assert!(alias_in.windows[0].slo_coverage > 0.0);
    // Its SLO rules wait for the tap's coverage; the scrape rules do not wait at all.
    let rules = crate::alert::AlertingConfig::default().rule_set();
    let waits: Vec<&str> = crate::alert::rule::readiness(&rules, &inputs)
        .into_iter()
        .filter(|r| r.model == "alias")
        .map(|r| r.alertname)
        .collect();
    assert!(waits.contains(&"LLMErrorBudgetBurnFast"), "{waits:?}");
    assert!(!waits.contains(&"LLMQueueGrowing") && !waits.contains(&"LLMPreemptionsSustained"), "{waits:?}");
}
