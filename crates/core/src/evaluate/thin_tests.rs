//! Alert-only windows: what they export, what their state keeps, that a configured
//! window still exports everything, and what the store keeps beyond the configured windows.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::incremental::Incremental;
use super::*;
use crate::canonical::{
    Bucket, CounterValue, Engine, FinishReason, GaugeKind, Histogram, HistogramKind, ModelSnapshot, Shard, Snapshot,
};
use crate::export;
use crate::report::{Health, Report, TargetReport};
use crate::slo::{Objective, Scope, Slo};

/// The `i`th scrape of one vLLM-like rank with every kind of series the tests look for.
fn scrape(i: u32) -> Arc<Snapshot> {
    let n = f64::from(i) * 3.0;
    let mut m = ModelSnapshot::default();
    fn shard<T>(key: &str, value: T) -> Shard<T> {
        Shard { key: key.into(), created: Some(1.7e9), value }
    }
    for (kind, share) in [(HistogramKind::Ttft, 0.75), (HistogramKind::Tpot, 0.5), (HistogramKind::E2e, 0.25)] {
        let buckets = vec![
            Bucket { le: 0.1, count: (n * share).floor() },
            Bucket { le: 1.0, count: n },
            Bucket { le: f64::INFINITY, count: n },
        ];
        m.histograms.entry(kind).or_default().push(shard("", Histogram { buckets, sum: 0.25 * n, count: n }));
    }
    let counter = |value, reason| CounterValue { value, reason };
    m.counters
        .entry(CounterKind::RequestsFinished)
        .or_default()
        .push(shard("finished_reason=\"stop\"", counter(n, Some(FinishReason::Stop))));
    m.counters.entry(CounterKind::GenerationTokens).or_default().push(shard("", counter(40.0 * n, None)));
    m.counters.entry(CounterKind::PromptTokens).or_default().push(shard("", counter(90.0 * n, None)));
    for (kind, v) in [(GaugeKind::KvCacheUsage, 0.5), (GaugeKind::Running, 4.0), (GaugeKind::Waiting, f64::from(i % 3))]
    {
        m.gauges.entry(kind).or_default().push(Shard { key: String::new(), created: None, value: v });
    }
    Arc::new(Snapshot {
        engine: Engine::Vllm,
        models: BTreeMap::from([("m".to_string(), m)]),
        process_start: Some(1.7e9),
        families: 0,
        samples: 0,
        warnings: Vec::new(),
    })
}

fn secs(s: u64) -> Window {
    Window::from_secs(s)
}

/// 1m configured; 2m and 3m read only by the rules, 3m by a latency rule too.
fn cfg(alert_only: bool) -> EvalConfig {
    let slo = Slo {
        name: "chat".into(),
        ttft: Some(Duration::from_millis(500)),
        tpot: None,
        e2e: None,
        objective: Objective::new(0.9).unwrap(),
        scope: Scope::all(),
    };
    EvalConfig {
        windows: vec![secs(60), secs(120), secs(180)],
        quantiles: vec![0.5, 0.99],
        slos: vec![slo],
        alert_only: if alert_only {
            vec![
                AlertWindow { window: secs(120), quantiles: vec![] },
                AlertWindow { window: secs(180), quantiles: vec![0.99] },
            ]
        } else {
            vec![]
        },
        ..EvalConfig::default()
    }
}

fn filled() -> (TargetWindows, i64) {
    let mut store = TargetWindows::new(Duration::from_secs(180));
    let mut t = 0;
    for i in 0..60 {
        t = 1_000_000 + i64::from(i) * 5_000;
        store.push(t, scrape(i));
    }
    (store, t)
}

/// The (family, window) pairs exported for `reports`.
fn exported(models: Vec<ModelReport>) -> BTreeSet<(&'static str, String)> {
    let report = Report {
        targets: vec![TargetReport {
            target: "a".into(),
            engine: None,
            health: Health { up: true, ..Health::default() },
            models: models.into(),
        }],
        ..Report::default()
    };
    let samples = export::samples(&report);
    samples.into_iter().filter_map(|s| Some((s.name, s.labels.iter().find(|l| l.0 == "window")?.1.clone()))).collect()
}

#[test]
fn an_alert_only_window_exports_what_the_rules_read_and_a_configured_one_everything() {
    let (store, now) = filled();
    let got = exported(evaluate_target(&store, now, &cfg(true)));
    let families = |w: &str| got.iter().filter(|(_, x)| x == w).map(|(f, _)| *f).collect::<BTreeSet<_>>();
    let read_by_rules = [
        export::ATTAINMENT,
        export::BURN_RATE,
        export::WINDOW_REQUESTS,
        export::GOODPUT_REQUESTS,
        export::WINDOW_COVERAGE,
    ];
    let not_read = [
        export::E2E,
        export::KV_UTILIZATION,
        export::KV_BAND_TIME,
        export::LATENCY_MEAN,
        export::FINISHED_BY_REASON,
        export::RUNNING,
        export::TTFT_COMPONENT,
    ];
    for w in ["2m", "3m"] {
        let f = families(w);
        for want in read_by_rules {
            assert!(f.contains(want), "{w} lacks {want}: {f:?}");
        }
        for unwanted in not_read {
            assert!(!f.contains(unwanted), "{w} exports {unwanted}: {f:?}");
        }
    }
    // Only the latency rule's window has a quantile, and only the p99 it compares.
    assert!(!families("2m").contains(export::TTFT) && !families("2m").contains(export::TPOT));
    let ttft: Vec<_> = export::samples(&Report {
        targets: vec![TargetReport {
            target: "a".into(),
            engine: None,
            health: Health { up: true, ..Health::default() },
            models: evaluate_target(&store, now, &cfg(true)).into(),
        }],
        ..Report::default()
    })
    .into_iter()
    .filter(|s| s.name == export::TTFT && s.labels.iter().any(|l| l == &("window", "3m".to_string())))
    .map(|s| s.labels.iter().find(|l| l.0 == export::QUANTILE_LABEL).map(|l| l.1.clone()))
    .collect();
    assert_eq!(ttft, vec![Some("0.99".to_string())]);
    // A configured window exports every family the engine feeds, and the same window
    // configured exports them too.
    let configured = families("1m");
    for want in read_by_rules.iter().chain(&not_read).chain(&[export::TTFT, export::TPOT]) {
        assert!(configured.contains(want), "1m lacks {want}: {configured:?}");
    }
    let full = exported(evaluate_target(&store, now, &cfg(false)));
    assert!(full.contains(&(export::KV_UTILIZATION, "2m".to_string())));
}

#[test]
fn an_alert_only_window_reports_the_full_windows_values_for_what_it_keeps() {
    let (mut store, now) = filled();
    let (thin, full) = (evaluate_target(&store, now, &cfg(true)), evaluate_target(&store, now, &cfg(false)));
    let (t, f) = (&thin[0].windows[1], &full[0].windows[1]);
    assert_eq!(format!("{:?}", t.slos), format!("{:?}", f.slos));
    assert_eq!(
        (t.requests_per_second, t.output_tokens_per_second),
        (f.requests_per_second, f.output_tokens_per_second)
    );
    assert_eq!(t.coverage, f.coverage);
    assert!(t.input_tokens_per_second.is_none() && f.input_tokens_per_second.is_some());
    // The incremental state of the thin windows holds fewer series, for the same reports.
    let mut lean = Incremental::new(&cfg(true));
    let mut wide = Incremental::new(&cfg(false));
    lean.advance(&mut store, now);
    wide.advance(&mut store, now);
    assert_eq!(format!("{:?}", lean.reports(now, &cfg(true), RateMode::Prometheus)), format!("{thin:?}"));
    let series = |inc: &Incremental| {
        inc.views().iter().map(|(_, v)| v.model("m").map_or(0, |m| m.series().len())).collect::<Vec<_>>()
    };
    let (s_lean, s_wide) = (series(&lean), series(&wide));
    assert_eq!(s_lean[0], s_wide[0], "the configured window keeps every series");
    assert!(s_lean[1] * 2 < s_wide[1], "thin {s_lean:?} vs full {s_wide:?}");
    assert!(lean.heap_bytes() < wide.heap_bytes());
}

#[test]
fn the_store_thins_to_what_the_alert_only_windows_longer_than_every_configured_one_keep() {
    // 1m configured, 2m and 3m alert-only: full scrapes for 1m, the union of what 2m and 3m
    // keep beyond it (3m's latency rule adds TPOT to the SLO's TTFT).
    let t = Thinning::of(&cfg(true)).expect("thins");
    assert_eq!(t.full_ms, 60_000);
    let (two, three) = (Thin::of(&cfg(true), secs(120)).unwrap(), Thin::of(&cfg(true), secs(180)).unwrap());
    let mut quantities = vec![Quantity::SpecAccepted(0), Quantity::SpecAccepted(3)];
    for &k in HistogramKind::ALL {
        quantities.extend([Quantity::bucket(k, 0.5), Quantity::Sum(k), Quantity::Count(k)]);
    }
    for &k in CounterKind::ALL {
        quantities.extend([Quantity::Counter(k, None), Quantity::Counter(k, Some(FinishReason::Abort))]);
    }
    quantities.extend(GaugeKind::ALL.iter().map(|&k| Quantity::Gauge(k)));
    for q in quantities {
        assert_eq!(t.kept.keeps(q), two.keeps(q) || three.keeps(q), "{q:?}");
    }
    let bucket = |k| Quantity::bucket(k, 0.5);
    assert!(t.kept.keeps(bucket(HistogramKind::Tpot)) && !t.kept.keeps(bucket(HistogramKind::E2e)));
    // Buckets only: the brackets and quantiles read no `_sum` or `_count`.
    assert!(!t.kept.keeps(Quantity::Sum(HistogramKind::Tpot)) && !t.kept.keeps(Quantity::Count(HistogramKind::Tpot)));
    // Nothing to thin when a configured window is the longest, or no window is alert-only.
    assert_eq!(Thinning::of(&cfg(false)), None);
    let longest_configured = EvalConfig { windows: vec![secs(60), secs(120), secs(180), secs(240)], ..cfg(true) };
    assert_eq!(Thinning::of(&longest_configured), None);
    // An alert-only window inside the full part adds nothing to what is kept.
    let inside = EvalConfig {
        windows: vec![secs(60), secs(120), secs(180), secs(240)],
        alert_only: vec![
            AlertWindow { window: secs(60), quantiles: vec![0.99] },
            AlertWindow { window: secs(240), quantiles: vec![] },
        ],
        ..cfg(true)
    };
    let t = Thinning::of(&inside).unwrap();
    assert_eq!(t.full_ms, 180_000);
    assert!(!t.kept.keeps(Quantity::bucket(HistogramKind::Tpot, 0.5)));
}

#[test]
fn a_thinned_store_reports_what_a_whole_one_does() {
    // Ten minutes at 5 s, evaluated every tick: everything older than 1m is thin, and the
    // 2m and 3m windows read thin scrapes as they leave. A reset at 400 s, and the E2E
    // histogram (kept by no window) gone for a minute.
    let cfg = cfg(true);
    let (mut store, mut whole) =
        (TargetWindows::new(Duration::from_secs(180)), TargetWindows::new(Duration::from_secs(180)));
    let mut inc = Incremental::new(&cfg);
    for i in 0..120u32 {
        let t = 1_000_000 + i64::from(i) * 5_000;
        let mut snap = (*scrape(if i >= 80 { i - 80 } else { i })).clone();
        if (40..52).contains(&i) {
            snap.models.values_mut().for_each(|m| drop(m.histograms.remove(&HistogramKind::E2e)));
        }
        let snap = Arc::new(snap);
        store.push(t, snap.clone());
        whole.push(t, snap);
        let want = evaluate_target(&whole, t, &cfg);
        super::incremental::tests::assert_same(&want, &inc.evaluate(&mut store, t, &cfg), &format!("tick {i}"));
        super::incremental::tests::assert_same(&want, &evaluate_target(&store, t, &cfg), &format!("reference {i}"));
    }
    assert_eq!(store.len(), whole.len());
    assert_eq!(store.thin_points(), store.len() - 12, "older than 1m");
    let keys = |w: &TargetWindows| w.stored_points().next().map(|(_, l, _)| l.keys.len());
    assert!(keys(&store) < keys(&whole), "{:?} vs {:?} series", keys(&store), keys(&whole));
}

/// TTFT over vLLM's bounds up to 2.5 s; the bucket at 0.1 s counts more than the one at
/// 0.25 s above it (as a torn scrape can), which the bracket's running maximum absorbs:
/// what it reads includes every bucket below where it stops.
fn torn(i: u32) -> Arc<Snapshot> {
    let mut snap = (*scrape(i)).clone();
    let n = f64::from(i) * 3.0;
    let bounds = [0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, f64::INFINITY];
    let buckets = bounds
        .iter()
        .enumerate()
        .map(|(j, &le)| {
            let share = if j == 1 { 3.0 } else { (j + 1) as f64 };
            let over = if j == 1 && i.is_multiple_of(5) { 1.0 } else { 0.0 };
            Bucket { le, count: (n * share / bounds.len() as f64).floor() + over }
        })
        .collect();
    let m = snap.models.get_mut("m").unwrap();
    m.histograms.insert(
        HistogramKind::Ttft,
        vec![Shard { key: String::new(), created: Some(1.7e9), value: Histogram { buckets, sum: 0.25 * n, count: n } }],
    );
    Arc::new(snap)
}

#[test]
fn beyond_the_configured_windows_only_the_buckets_the_brackets_read_are_kept() {
    // Alert-only 2m and 3m without a latency rule, a TTFT clause at 0.3 s (between bounds)
    // and one at 0.5 s (a bound): kept are the bounds up to 0.25 s, 0.5 s (where both
    // brackets stop) and +Inf; 0.75, 1 and 2.5 s are read by nothing.
    let mut cfg = cfg(true);
    cfg.alert_only = vec![
        AlertWindow { window: secs(120), quantiles: vec![] },
        AlertWindow { window: secs(180), quantiles: vec![] },
    ];
    let mut second = cfg.slos[0].clone();
    (second.name, second.ttft) = ("fast".into(), Some(Duration::from_millis(300)));
    cfg.slos.push(second);
    let kept = Thinning::of(&cfg).expect("thins").kept;
    assert_eq!(kept.buckets(HistogramKind::Ttft), Some(&crate::window::Buckets::Brackets(vec![0.3, 0.5])));
    let (mut store, mut whole) =
        (TargetWindows::new(Duration::from_secs(180)), TargetWindows::new(Duration::from_secs(180)));
    let mut inc = Incremental::new(&cfg);
    for i in 0..120u32 {
        let t = 1_000_000 + i64::from(i) * 5_000;
        store.push(t, torn(i));
        whole.push(t, torn(i));
        let want = evaluate_target(&whole, t, &cfg);
        super::incremental::tests::assert_same(&want, &inc.evaluate(&mut store, t, &cfg), &format!("tick {i}"));
        super::incremental::tests::assert_same(&want, &evaluate_target(&store, t, &cfg), &format!("reference {i}"));
    }
    // Both brackets were evaluated in the thin 3m window: at 0.5 s exact, at 0.3 s between
    // the bounds around it.
    let ttft = |s: &crate::report::SloReport| match &s.status {
        crate::report::SloStatus::Evaluated(v) => v.attainment[&crate::slo::Clause::Ttft],
        other => panic!("{}: {other:?}", s.slo),
    };
    let slos = &evaluate_target(&whole, 1_595_000, &cfg)[0].windows[2].slos;
    assert_eq!((slos[0].slo.as_str(), slos[1].slo.as_str()), ("chat", "fast"));
    let (at_bound, between) = (ttft(&slos[0]), ttft(&slos[1]));
    assert!(at_bound.lower == at_bound.upper && between.lower < between.upper, "{at_bound:?} {between:?}");
    let (_, thin, _) = store.stored_points().next().unwrap();
    let ttft: Vec<f64> = thin
        .keys
        .iter()
        .filter(|k| matches!(k.quantity, Quantity::Bucket(HistogramKind::Ttft, _)))
        .filter_map(|k| k.quantity.le())
        .collect();
    assert_eq!(ttft, [0.05, 0.1, 0.25, 0.5, f64::INFINITY]);
}
