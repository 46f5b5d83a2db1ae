//! Every path that says whether requests met an SLO, held to the one judgement of a request
//! ([`judge`]) and the one definition of attainment from histograms
//! ([`HistogramCounts::attainment`]).
//!
//! Random requests go through the request store's windows (per clause and jointly), its
//! good-request counters, the capacity book's arrival cells, the error budgets, the exported
//! series and the alert inputs; each path's counts must be the judgement's. The same
//! requests, binned into engine histograms, go through the window evaluation and the error
//! budgets, which must give the definition's attainment, and the definition's joint bracket
//! must hold the share the judgement finds over the requests themselves. `goodput rules` is
//! held to both on promtool in tests/it/judgment_rules.rs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;

use super::{Bounded, Clause, HistogramClause, HistogramCounts, Objective, Scope, Slo};
use crate::alert::from_report;
use crate::budget::{BudgetBook, BudgetSpec, DEFAULT_PERIOD, tally};
use crate::canonical::{
    Bucket, CounterKind, CounterValue, Engine, FinishReason, Histogram, ModelSnapshot, Shard, Snapshot,
};
use crate::duration::Window;
use crate::evaluate::range::RangeView;
use crate::evaluate::slo::histogram_of;
use crate::evaluate::{EvalConfig, evaluate_target};
use crate::export::{self, ExportSample};
use crate::report::{Health, ModelReport, Report, SloStatus, TargetReport, WindowReport};
use crate::request::{
    CLAUSES, Compact, DataSource, RequestRecord, RequestStore, SloCounts, Source, Status, StoreConfig, TokenCount,
    Verdict, attach, judge,
};
use crate::window::TargetWindows;

const NOW_MS: i64 = 1_700_000_060_000;
const WINDOW_S: u64 = 60;

/// vLLM's default bucket bounds, as the engine exports them.
const TTFT_LE: &[f64] = &[0.05, 0.1, 0.25, 0.5, 1.0, 2.5];
const TPOT_LE: &[f64] = &[0.01, 0.025, 0.05, 0.1, 0.25];
const E2E_LE: &[f64] = &[1.0, 2.5, 5.0, 10.0, 20.0];

/// A request: finish offset into the window (s), TTFT, TPOT, E2E, status (0 ok, 1 abort,
/// 2 HTTP 503), output tokens and whether they were counted exactly.
type Raw = (f64, Option<f64>, Option<f64>, f64, u8, u32, bool);

fn raw() -> impl Strategy<Value = Raw> {
    (
        0.5f64..59.5,
        proptest::option::weighted(0.9, 0.01f64..3.0),
        proptest::option::weighted(0.9, 0.002f64..0.3),
        0.1f64..25.0,
        prop_oneof![8 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
        1u32..400,
        proptest::bool::weighted(0.8),
    )
}

fn record(r: &Raw) -> RequestRecord {
    RequestRecord {
        source: Source::Tap,
        target: "t".into(),
        model: "m".into(),
        status: match r.4 {
            0 => Status::Ok,
            1 => Status::ClientAbort,
            _ => Status::HttpError(503),
        },
        finished_unix: (NOW_MS as f64 / 1000.0) - WINDOW_S as f64 + r.0,
        e2e_s: r.3,
        ttft_s: r.1,
        tpot_s: r.2,
        prompt_tokens: Some(100),
        output_tokens: Some(TokenCount { value: r.5, exact: r.6 }),
        itl: Vec::new(),
        engine: None,
        request_id: None,
    }
}

fn slo_strategy() -> impl Strategy<Value = Slo> {
    // Thresholds on and between bucket bounds: on one, the histograms are exact.
    (
        prop::sample::select(vec![0.1, 0.25, 0.3, 0.5, 0.8, 1.0, 2.5, 4.0]),
        prop::option::of(prop::sample::select(vec![0.025, 0.04, 0.05, 0.1, 0.2])),
        prop::option::weighted(0.3, prop::sample::select(vec![5.0, 7.0, 10.0])),
    )
        .prop_map(|(ttft, tpot, e2e)| Slo {
            name: "chat".into(),
            ttft: Some(Duration::from_secs_f64(ttft)),
            tpot: tpot.map(Duration::from_secs_f64),
            e2e: e2e.map(Duration::from_secs_f64),
            objective: Objective::new(0.9).unwrap(),
            scope: Scope::all(),
        })
}

fn window() -> Window {
    Window::from_secs(WINDOW_S)
}

/// What the judgement says of `records` against `slo`, counted.
fn judged(records: &[RequestRecord], slo: &Slo) -> SloCounts {
    let mut want = SloCounts::default();
    for r in records {
        want.add(&judge(r, slo), r.output_tokens.map_or(0, |n| n.value));
    }
    want
}

fn find<'a>(s: &'a [ExportSample], name: &str, labels: &[(&str, &str)]) -> Option<&'a ExportSample> {
    s.iter().find(|x| x.name == name && labels.iter().all(|(k, v)| x.labels.iter().any(|(a, b)| a == k && b == v)))
}

fn bare_report() -> Report {
    Report {
        t_ms: NOW_MS,
        targets: vec![TargetReport {
            target: "t".into(),
            engine: None,
            health: Health { up: true, ..Health::default() },
            models: vec![ModelReport { model: "m".into(), windows: vec![WindowReport::empty(window())] }].into(),
        }],
        ..Report::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_request_path_counts_what_the_judgement_says(
        raws in proptest::collection::vec(raw(), 1..150),
        slo in slo_strategy(),
    ) {
        let records: Vec<RequestRecord> = raws.iter().map(record).collect();
        // The record as measured and the store's compact copy of it are judged alike.
        for r in &records {
            prop_assert_eq!(judge(r, &slo), judge(&Compact::of(r).unwrap(), &slo));
        }
        let want = judged(&records, &slo);
        let good = records.iter().filter(|r| judge(*r, &slo).joint == Verdict::Good).count() as u64;

        // The store's window, per clause and jointly, and its arrival cells.
        let mut store = RequestStore::new(StoreConfig {
            targets: vec!["t".into()],
            windows: vec![window()],
            alert_only: Vec::new(),
            quantiles: vec![0.5, 0.99],
            slos: vec![slo.clone()],
            max_records_per_series: 100_000,
            max_series_per_target: 4,
        });
        store.ingest(records.clone(), NOW_MS);
        let series = store.evaluate(NOW_MS);
        let win = &series[0].windows[0].1;
        prop_assert_eq!(win.requests, records.len() as u64);
        let s = &win.slos[0];
        prop_assert_eq!(s.counts[&Clause::Joint], want.joint);
        for (i, clause) in CLAUSES.iter().enumerate() {
            if slo.threshold(*clause).is_some() {
                prop_assert_eq!(s.counts[clause], want.clauses[i], "{:?}", clause);
            }
        }
        let cells = s.by_arrival.iter().fold((0, 0, 0), |a, c| {
            (a.0 + u64::from(c.population), a.1 + u64::from(c.good_lower), a.2 + u64::from(c.good_upper))
        });
        prop_assert_eq!(cells, (want.joint.population, want.joint.good_lower, want.joint.good_upper));

        // The good-request counter (llm_slo_good_requests_total).
        let counters = store.counters();
        prop_assert_eq!(counters.series[0].good_requests.get("chat"), Some(&good));

        // The error budget over its period.
        let mut book = BudgetBook::new(vec![BudgetSpec { slo: slo.clone(), period: DEFAULT_PERIOD }], vec!["t".into()]);
        book.add_records(&records);
        let budgets = book.report(NOW_MS);
        let pop = want.joint.population;
        match budgets.iter().find(|b| b.source == DataSource::Tap).and_then(|b| b.values) {
            Some(v) => {
                prop_assert_eq!(v.requests, pop as f64);
                prop_assert_eq!(v.attainment.lower, want.joint.good_lower as f64 / pop as f64);
                prop_assert_eq!(v.attainment.upper, want.joint.good_upper as f64 / pop as f64);
            }
            None => prop_assert_eq!(pop, 0),
        }

        // /metrics and the alert rules' inputs, from the report the store's windows join.
        let mut report = bare_report();
        attach(&mut report, series, counters);
        let samples = export::samples(&report);
        let inputs = from_report::inputs(&report, std::slice::from_ref(&slo));
        let alert = inputs[0].windows[0].slos.iter().find(|x| x.slo == "chat");
        if pop > 0 {
            let (lower, upper) = (want.joint.good_lower as f64 / pop as f64, want.joint.good_upper as f64 / pop as f64);
            let joint = |bound| {
                find(&samples, export::ATTAINMENT, &[("source", "tap"), ("clause", "joint"), ("bound", bound)])
                    .map(|x| x.value)
            };
            prop_assert_eq!((joint("lower"), joint("upper")), (Some(lower), Some(upper)));
            let a = alert.unwrap().attainment[&Clause::Joint];
            prop_assert_eq!((a.lower, a.upper), (lower, upper));
            prop_assert_eq!(inputs[0].windows[0].slo_source, DataSource::Tap);
        } else {
            prop_assert!(alert.is_none_or(|a| !a.evaluable));
        }
    }
}

/// The cumulative histogram of `values` over `bounds` (+Inf added), shifted by `base` so
/// that the window's increase, not the raw value, is what the paths must read.
fn histogram(values: &[f64], bounds: &[f64], base: f64) -> Histogram {
    let mut buckets: Vec<Bucket> = bounds
        .iter()
        .map(|&le| Bucket { le, count: base + values.iter().filter(|&&v| v <= le).count() as f64 })
        .collect();
    buckets.push(Bucket { le: f64::INFINITY, count: base + values.len() as f64 });
    Histogram { buckets, sum: values.iter().sum(), count: base + values.len() as f64 }
}

fn bounds(clause: Clause) -> &'static [f64] {
    match clause {
        Clause::Ttft => TTFT_LE,
        Clause::Tpot => TPOT_LE,
        _ => E2E_LE,
    }
}

/// One scrape of an engine whose histograms hold `requests` (every one measured) over
/// `base` earlier observations.
fn scrape(requests: &[Raw], slo: &Slo, base: f64) -> Arc<Snapshot> {
    let mut m = ModelSnapshot::default();
    for (clause, _) in slo.clauses() {
        let values: Vec<f64> = requests
            .iter()
            .map(|r| match clause {
                Clause::Ttft => r.1.unwrap(),
                Clause::Tpot => r.2.unwrap(),
                _ => r.3,
            })
            .collect();
        m.histograms.entry(histogram_of(clause)).or_default().push(Shard {
            key: String::new(),
            created: Some(1.0),
            value: histogram(&values, bounds(clause), base),
        });
    }
    let failed = requests.iter().filter(|r| r.4 != 0).count() as f64;
    for (reason, n) in [(FinishReason::Stop, requests.len() as f64 - failed), (FinishReason::Abort, failed)] {
        m.counters.entry(CounterKind::RequestsFinished).or_default().push(Shard {
            key: format!("finished_reason=\"{}\"", reason.as_str()),
            created: Some(1.0),
            value: CounterValue { value: base + n, reason: Some(reason) },
        });
    }
    Arc::new(Snapshot {
        engine: Engine::Vllm,
        models: BTreeMap::from([("m".to_string(), m)]),
        process_start: Some(1.0),
        families: 0,
        samples: 0,
        warnings: Vec::new(),
    })
}

fn close(a: Bounded, b: Bounded) -> bool {
    let c = |x: f64, y: f64| (x - y).abs() <= 1e-12;
    c(a.lower, b.lower) && c(a.estimate, b.estimate) && c(a.upper, b.upper)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_histogram_path_gives_the_definition_and_it_holds_the_judgement(
        raws in proptest::collection::vec(raw(), 1..150),
        slo in slo_strategy(),
    ) {
        // Every clause measured, every token count exact: each request is judged good or bad.
        let raws: Vec<Raw> = raws
            .into_iter()
            .map(|r| (r.0, Some(r.1.unwrap_or(0.2)), Some(r.2.unwrap_or(0.02)), r.3, r.4, r.5.max(2), true))
            .collect();
        let start = NOW_MS - WINDOW_S as i64 * 1000;
        let mut store = TargetWindows::new(Duration::from_secs(WINDOW_S));
        store.push(start + 5_000, scrape(&[], &slo, 1000.0));
        store.push(NOW_MS - 5_000, scrape(&raws, &slo, 1000.0));

        // The definition, on the window's increases.
        let clauses: Vec<HistogramClause> = slo
            .clauses()
            .map(|(c, t)| {
                let h = scrape(&raws, &slo, 0.0).models["m"].histograms[&histogram_of(c)][0].value.clone();
                HistogramClause::of(c, &h, t.as_secs_f64())
            })
            .collect();
        let failed = raws.iter().filter(|r| r.4 != 0).count() as f64;
        let definition =
            HistogramCounts { finished: Some(raws.len() as f64), failed, clauses, in_flight_at_start: None };
        let want = definition.attainment().unwrap();

        // The window evaluation.
        let cfg = EvalConfig { windows: vec![window()], quantiles: vec![0.99], slos: vec![slo.clone()], ..EvalConfig::default() };
        let models = evaluate_target(&store, NOW_MS, &cfg);
        let SloStatus::Evaluated(v) = &models[0].windows[0].slos[0].status else {
            panic!("not evaluated: {:?}", models[0].windows[0].slos[0].status)
        };
        prop_assert!(close(v.attainment[&Clause::Joint], want.joint), "{:?} {:?}", v.attainment, want);
        for (clause, b) in &want.clauses {
            prop_assert!(close(v.attainment[clause], *b), "{:?}: {:?} {:?}", clause, v.attainment, want);
        }
        prop_assert_eq!(v.requests, raws.len() as f64);
        prop_assert_eq!(v.failed, failed);

        // The error budget's row of the same range, and the period it adds up to.
        let view = RangeView::collect(&store, NOW_MS, WINDOW_S as i64 * 1000);
        let row = tally::histogram_row(view.model("m").unwrap(), &slo).unwrap();
        let period = tally::from_histogram_totals(&row, 0.9).unwrap();
        prop_assert!(close(period.attainment, want.joint), "{:?} {:?}", period.attainment, want.joint);

        // The judgement over the requests themselves lies inside the histograms' bracket.
        let records: Vec<RequestRecord> = raws.iter().map(record).collect();
        let counted = judged(&records, &slo).joint;
        prop_assert_eq!(counted.population, raws.len() as u64);
        let truth = counted.good_lower as f64 / counted.population as f64;
        prop_assert!(
            want.joint.lower - 1e-12 <= truth && truth <= want.joint.upper + 1e-12,
            "judged {} outside the histograms' [{}, {}]", truth, want.joint.lower, want.joint.upper
        );
        for (i, clause) in CLAUSES.iter().enumerate() {
            let Some(b) = want.clauses.get(clause) else { continue };
            let c = judged(&records, &slo).clauses[i];
            let share = c.good_lower as f64 / c.population as f64;
            prop_assert!(b.lower - 1e-12 <= share && share <= b.upper + 1e-12, "{:?}: {} outside {:?}", clause, share, b);
        }
    }
}

/// A window no scrape reached (the target went down) is not evaluable for that reason, not
/// because "the engine exposes no histogram"; the longer window that still holds the
/// engine's scrapes is evaluated from them.
#[test]
fn a_window_without_scrapes_does_not_blame_the_engine() {
    let slo = Slo {
        name: "chat".into(),
        ttft: Some(Duration::from_millis(250)),
        tpot: None,
        e2e: None,
        objective: Objective::new(0.9).unwrap(),
        scope: Scope::all(),
    };
    let raws: Vec<Raw> = vec![(1.0, Some(0.2), Some(0.02), 1.0, 0, 10, true); 5];
    let mut store = TargetWindows::new(Duration::from_secs(600));
    store.push(NOW_MS - 500_000, scrape(&[], &slo, 1000.0));
    store.push(NOW_MS - 400_000, scrape(&raws, &slo, 1000.0));
    let cfg = EvalConfig {
        windows: vec![window(), Window::from_secs(600)],
        quantiles: vec![0.99],
        slos: vec![slo],
        ..EvalConfig::default()
    };
    let models = evaluate_target(&store, NOW_MS, &cfg);
    let status = |i: usize| &models[0].windows[i].slos[0].status;
    let SloStatus::NotEvaluable { reason } = status(0) else { panic!("{:?}", status(0)) };
    assert_eq!(reason, crate::evaluate::slo::NO_SCRAPE);
    assert!(matches!(status(1), SloStatus::Evaluated(_)), "{:?}", status(1));
}
