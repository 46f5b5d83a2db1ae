//! The exported list for a hand-built report: families, labels, omissions.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::canonical::{HistogramKind, WarningReason};
use crate::duration::Window;
use crate::report::{
    GaugeStats, Health, KvBand, KvReport, LatencyQuantile, ModelReport, Report, RuleReadiness, SCRAPE_ERROR_REASONS,
    TargetReport, WindowReport,
};

fn report() -> Report {
    let w = Window::new(Duration::from_secs(300)).unwrap();
    let lq = |metric, quantile, value, bracket| LatencyQuantile { metric, quantile, value, bracket };
    let band_time = [(KvBand::Target, 0.75), (KvBand::High, 0.25)].into_iter().collect();
    Report {
        t_ms: 1_000,
        targets: vec![TargetReport {
            target: "a".into(),
            engine: None,
            health: Health {
                up: false,
                last_error: Some("timeout".into()),
                last_scrape_duration_seconds: Some(0.25),
                errors_total: BTreeMap::from([("timeout".to_string(), 3)]),
                warnings_total: BTreeMap::from([("duplicate_series".to_string(), 2)]),
                last_successful_scrape_ms: Some(1_700_000_000_250),
                last_evaluation_ms: Some(1_700_000_004_000),
                ..Health::default()
            },
            models: vec![ModelReport {
                model: "m".into(),
                windows: vec![WindowReport {
                    window: w,
                    latency: vec![
                        lq(HistogramKind::Ttft, 0.5, 0.3, Some((0.25, 0.5))),
                        lq(HistogramKind::Ttft, 0.99, 2.5, Some((2.5, f64::INFINITY))),
                        lq(HistogramKind::Tpot, 0.9, f64::NAN, None),
                    ],
                    input_tokens_per_second: Some(10.0),
                    output_tokens_per_second: None,
                    requests_per_second: Some(0.5),
                    kv_cache: Some(KvReport { last: 0.8, mean: 0.82, max: 0.88, band: KvBand::Target, band_time }),
                    coverage: 0.65,
                    ..WindowReport::empty(w)
                }],
            }]
            .into(),
        }],
        alert_readiness: vec![RuleReadiness {
            alertname: "LLMGoodputDivergence",
            target: "a".into(),
            model: "m".into(),
            window: w,
            coverage: 0.65,
            min_coverage: 0.9,
            ready: false,
            ready_in_seconds: 75.0,
        }],
        ..Report::default()
    }
}

/// The report's samples, each checked against its family's declaration: registered, and
/// carrying only labels the family declares (a closed set's only its values).
fn samples(r: &Report) -> Vec<ExportSample> {
    let s = super::samples(r);
    for x in &s {
        let family = report_registry().get(x.name).unwrap_or_else(|| panic!("{} is not registered", x.name));
        for (k, v) in &x.labels {
            let label = family.labels.iter().find(|l| l.name == *k);
            let label = label.unwrap_or_else(|| panic!("{} {k}: not among {:?}", x.name, family.labels));
            if let Some(values) = label.values() {
                assert!(values.contains(&v.as_str()), "{} {k}={v} not among {values:?}", x.name);
            }
        }
    }
    s
}

fn find<'a>(s: &'a [ExportSample], name: &str, extra: &[(&str, &str)]) -> Option<&'a ExportSample> {
    s.iter().find(|x| x.name == name && extra.iter().all(|(k, v)| x.labels.iter().any(|(a, b)| a == k && b == v)))
}

#[test]
fn every_value_lands_under_its_family_and_labels() {
    let s = samples(&report());
    let ttft = find(&s, TTFT, &[("q", "0.5"), ("window", "5m"), ("model", "m"), ("target", "a")]).unwrap();
    assert_eq!(ttft.value, 0.3);
    assert_eq!(ttft.labels.iter().map(|l| l.0).collect::<Vec<_>>(), ["target", "model", "window", "source", "q"]);
    assert_eq!(find(&s, BRACKET, &[("metric", "ttft"), ("q", "0.5"), ("side", "lower")]).unwrap().value, 0.25);
    assert_eq!(find(&s, BRACKET, &[("metric", "ttft"), ("q", "0.5"), ("side", "upper")]).unwrap().value, 0.5);
    assert_eq!(find(&s, TOKENS, &[("direction", "input")]).unwrap().value, 10.0);
    assert_eq!(find(&s, REQUESTS, &[]).unwrap().value, 0.5);
    assert_eq!(find(&s, KV_UTILIZATION, &[("stat", "max")]).unwrap().value, 0.88);
    assert_eq!(find(&s, KV_CURRENT_BAND, &[("band", "target")]).unwrap().value, 1.0);
    assert_eq!(find(&s, KV_CURRENT_BAND, &[("band", "high")]).unwrap().value, 0.0);
    assert_eq!(find(&s, KV_BAND_TIME, &[("band", "high")]).unwrap().value, 0.25);
    assert_eq!(find(&s, KV_BAND_TIME, &[("band", "critical")]).unwrap().value, 0.0);
    assert_eq!(find(&s, TARGET_UP, &[("target", "a")]).unwrap().value, 0.0);
    assert_eq!(find(&s, SCRAPE_DURATION, &[]).unwrap().value, 0.25);
    assert_eq!(find(&s, SCRAPE_ERRORS, &[("reason", "timeout")]).unwrap().value, 3.0);
    assert_eq!(find(&s, SCRAPE_WARNINGS, &[("target", "a"), ("reason", "duplicate_series")]).unwrap().value, 2.0);
    // Timestamps in seconds, as Prometheus's own `*_timestamp_seconds` are.
    assert_eq!(find(&s, LAST_SCRAPE_SUCCESS, &[("target", "a")]).unwrap().value, 1_700_000_000.25);
    assert_eq!(find(&s, LAST_EVALUATION, &[("target", "a")]).unwrap().value, 1_700_000_004.0);
    let cov = find(&s, WINDOW_COVERAGE, &[]).unwrap();
    assert_eq!(cov.value, 0.65);
    assert_eq!(cov.labels.iter().map(|l| l.0).collect::<Vec<_>>(), ["target", "model", "window"]);
    let ready = find(&s, alerts::READY_FAMILY, &[("alertname", "LLMGoodputDivergence")]).unwrap();
    assert_eq!(ready.value, 0.0);
    assert_eq!(
        ready.labels,
        [("alertname", "LLMGoodputDivergence"), ("target", "a"), ("model", "m"), ("window", "5m")]
            .map(|(k, v)| (k, v.to_string()))
    );
    assert_eq!(family_meta(alerts::READY_FAMILY).unwrap().1, "gauge");
}

#[test]
fn a_discovered_target_has_an_info_series_with_the_fixed_labels_only() {
    let mut r = report();
    assert!(samples(&r).iter().all(|x| x.name != TARGET_INFO), "a static target has no info series");
    let labels = [("discovery", "kubernetes"), ("pod", "vllm-0"), ("namespace", "llm"), ("team", "infer")];
    r.targets[0].health.labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let s = samples(&r);
    let info: Vec<_> = s.iter().filter(|x| x.name == TARGET_INFO).collect();
    assert_eq!(info.len(), 1);
    let got: Vec<(&str, &str)> = info[0].labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(got, [("target", "a"), ("discovery", "kubernetes"), ("namespace", "llm"), ("pod", "vllm-0")]);
    assert_eq!(info[0].value, 1.0);
}

#[test]
fn scrape_errors_exist_at_zero_for_every_known_reason() {
    let mut r = report();
    r.targets[0].health.errors_total.insert("something_new".into(), 2);
    let mut healthy = r.targets[0].clone();
    healthy.target = "b".into();
    healthy.health = Health { up: true, ..Health::default() };
    r.targets.push(healthy);
    let s = samples(&r);
    for target in ["a", "b"] {
        let reasons: Vec<(&str, f64)> = s
            .iter()
            .filter(|x| x.name == SCRAPE_ERRORS && x.labels[0].1 == target)
            .map(|x| (x.labels[1].1.as_str(), x.value))
            .collect();
        let known: Vec<&str> = reasons.iter().map(|r| r.0).take(SCRAPE_ERROR_REASONS.len()).collect();
        assert_eq!(known, SCRAPE_ERROR_REASONS, "{target}");
        let total: f64 = reasons.iter().map(|r| r.1).sum();
        let want = if target == "a" { 5.0 } else { 0.0 };
        assert_eq!(total, want, "{target}: {reasons:?}");
    }
    // A reason outside the list (a hand-made replay recording) still shows, after the known ones.
    assert_eq!(find(&s, SCRAPE_ERRORS, &[("target", "a"), ("reason", "something_new")]).unwrap().value, 2.0);
    assert_eq!(find(&s, SCRAPE_ERRORS, &[("target", "b"), ("reason", "connect")]).unwrap().value, 0.0);
    // Scrape warnings follow the same convention.
    for r in WarningReason::ALL {
        let want = if r.as_str() == "duplicate_series" { 2.0 } else { 0.0 };
        assert_eq!(find(&s, SCRAPE_WARNINGS, &[("target", "a"), ("reason", r.as_str())]).unwrap().value, want);
        assert_eq!(find(&s, SCRAPE_WARNINGS, &[("target", "b"), ("reason", r.as_str())]).unwrap().value, 0.0);
    }
}

#[test]
fn nan_and_infinite_values_are_absent() {
    let s = samples(&report());
    assert!(find(&s, TPOT, &[]).is_none(), "NaN quantile must be absent");
    assert!(find(&s, BRACKET, &[("metric", "tpot")]).is_none());
    assert!(find(&s, TOKENS, &[("direction", "output")]).is_none());
    assert!(find(&s, BRACKET, &[("q", "0.99"), ("side", "upper")]).is_none());
    assert_eq!(find(&s, BRACKET, &[("q", "0.99"), ("side", "lower")]).unwrap().value, 2.5);
    assert!(s.iter().all(|x| x.value.is_finite()));
}

#[test]
fn families_come_out_grouped_in_a_stable_order_with_meta() {
    let s = samples(&report());
    // The window families in table order; the alert families (not in the table) after them.
    let order: Vec<usize> =
        s.iter().map(|x| FAMILIES.iter().position(|f| f.name == x.name).unwrap_or(FAMILIES.len())).collect();
    assert!(order.windows(2).all(|p| p[0] <= p[1]), "{order:?}");
    assert!(s.iter().all(|x| family_meta(x.name).is_some()));
    for f in FAMILIES {
        assert_eq!(family_meta(f.name), Some(f.meta()));
    }
    assert_eq!(family_meta(SCRAPE_ERRORS).unwrap().1, "counter");
    assert!(family_meta("nope").is_none());
}

fn window_names(s: &[ExportSample], name: &str, extra: &[(&str, &str)]) -> Vec<Option<String>> {
    s.iter()
        .filter(|x| x.name == name && extra.iter().all(|(k, v)| x.labels.iter().any(|(a, b)| a == k && b == v)))
        .map(|x| x.labels.iter().find(|l| l.0 == "window").map(|l| l.1.clone()))
        .collect()
}

#[test]
fn last_scrape_series_come_once_without_a_window() {
    let mut r = report();
    let mut short = r.targets[0].models[0].windows[0].clone();
    short.window = Window::new(Duration::from_secs(60)).unwrap();
    let stats = |last, mean, max| Some(GaugeStats { first: 0.0, last, mean, max });
    let long = &mut r.targets[0].models_mut()[0].windows[0];
    long.running = stats(4.0, 3.0, 6.0);
    long.waiting = stats(1.0, 0.5, 2.0);
    long.kv_capacity_tokens = Some(1600.0);
    // The 1 m window saw no scrape: the last-scrape series come from the 5 m one.
    short.kv_cache = None;
    r.targets[0].models_mut()[0].windows.insert(0, WindowReport { kv_capacity_tokens: None, ..short });
    let s = samples(&r);
    assert_eq!(window_names(&s, KV_UTILIZATION, &[("stat", "last")]), [None]);
    assert_eq!(find(&s, KV_UTILIZATION, &[("stat", "last")]).unwrap().value, 0.8);
    assert_eq!(window_names(&s, KV_UTILIZATION, &[("stat", "mean")]), [Some("5m".to_string())]);
    assert_eq!(window_names(&s, KV_CURRENT_BAND, &[]), vec![None; KvBand::ALL.len()]);
    assert_eq!(window_names(&s, KV_BAND_TIME, &[("band", "target")]), [Some("5m".to_string())]);
    assert_eq!(window_names(&s, KV_CAPACITY, &[]), [None]);
    assert_eq!(find(&s, KV_CAPACITY, &[]).unwrap().value, 1600.0);
    for (family, last) in [(RUNNING, 4.0), (WAITING, 1.0)] {
        assert_eq!(window_names(&s, family, &[("stat", "last")]), [None], "{family}");
        assert_eq!(find(&s, family, &[("stat", "last")]).unwrap().value, last);
        assert_eq!(window_names(&s, family, &[("stat", "max")]), [Some("5m".to_string())], "{family}");
    }
    // No two samples share a family and label set.
    let mut keys: Vec<String> = s.iter().map(|x| format!("{}{:?}", x.name, x.labels)).collect();
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n);
}

#[test]
fn means_finish_reasons_and_generation_mix_land_in_their_families() {
    use crate::canonical::FinishReason;
    use crate::report::{FinishRate, LatencyMean};
    let mut r = report();
    let w = &mut r.targets[0].models_mut()[0].windows[0];
    w.latency_means = vec![
        LatencyMean { metric: HistogramKind::Ttft, seconds: 0.4 },
        LatencyMean { metric: HistogramKind::E2e, seconds: 7.5 },
    ];
    w.finish_reasons = vec![
        FinishRate { reason: FinishReason::Stop, per_second: 0.375 },
        FinishRate { reason: FinishReason::Abort, per_second: 0.125 },
    ];
    w.generation_length_mix = vec![(128.0, 0.25), (1024.0, 0.875)];
    let s = samples(&r);
    let mean = find(&s, LATENCY_MEAN, &[("metric", "e2e")]).unwrap();
    assert_eq!(mean.value, 7.5);
    assert_eq!(mean.labels.iter().map(|l| l.0).collect::<Vec<_>>(), ["target", "model", "window", "source", "metric"]);
    assert_eq!(find(&s, LATENCY_MEAN, &[("metric", "ttft"), ("source", "metrics")]).unwrap().value, 0.4);
    assert!(find(&s, LATENCY_MEAN, &[("metric", "tpot")]).is_none());
    assert_eq!(find(&s, FINISHED_BY_REASON, &[("finished_reason", "stop")]).unwrap().value, 0.375);
    assert_eq!(find(&s, FINISHED_BY_REASON, &[("finished_reason", "abort")]).unwrap().value, 0.125);
    assert_eq!(find(&s, GENERATION_LENGTH_SHARE, &[("generation_tokens_le", "1024")]).unwrap().value, 0.875);
    for name in [LATENCY_MEAN, FINISHED_BY_REASON, GENERATION_LENGTH_SHARE] {
        assert_eq!(family_meta(name).unwrap().1, "gauge");
    }
}

#[test]
fn limits_are_exported_once_from_the_config() {
    use crate::evaluate::KvThresholds;
    use crate::report::ConfiguredLimits;
    use crate::slo::{Objective, Scope, Slo};
    let ms = Duration::from_millis;
    let slo = |name: &str, ttft, tpot, e2e, objective| Slo {
        name: name.into(),
        ttft,
        tpot,
        e2e,
        objective: Objective::new(objective).unwrap(),
        scope: Scope { targets: vec!["a".into()], models: Vec::new() },
    };
    let mut r = report();
    // A second target: the limits still come once, not per target.
    let mut b = r.targets[0].clone();
    b.target = "b".into();
    r.targets.push(b);
    r.limits = ConfiguredLimits {
        slos: vec![
            slo("chat", Some(ms(500)), Some(ms(50)), None, 0.99),
            slo("batch", None, None, Some(ms(30_000)), 0.95),
        ],
        kv: KvThresholds { underloaded: 0.6, target_low: 0.7, target_high: 0.8, critical: 0.95 },
    };
    let s = samples(&r);
    let of = |name: &str| s.iter().filter(|x| x.name == name).map(|x| (x.labels.clone(), x.value)).collect::<Vec<_>>();
    let l = |pairs: &[(&'static str, &str)]| pairs.iter().map(|(k, v)| (*k, v.to_string())).collect::<Vec<_>>();
    assert_eq!(of(limits::OBJECTIVE), [(l(&[("slo", "chat")]), 0.99), (l(&[("slo", "batch")]), 0.95)]);
    assert_eq!(
        of(limits::THRESHOLD),
        [
            (l(&[("slo", "chat"), ("clause", "ttft")]), 0.5),
            (l(&[("slo", "chat"), ("clause", "tpot")]), 0.05),
            (l(&[("slo", "batch"), ("clause", "e2e")]), 30.0),
        ]
    );
    assert_eq!(
        of(limits::KV_BAND_LIMIT),
        [
            (l(&[("limit", "underloaded")]), 0.6),
            (l(&[("limit", "target_low")]), 0.7),
            (l(&[("limit", "target_high")]), 0.8),
            (l(&[("limit", "critical")]), 0.95),
        ]
    );
    for f in limits::FAMILIES {
        assert_eq!(family_meta(f.name).unwrap().1, f.kind.as_str());
    }
}

#[test]
fn targets_emitted_a_slice_at_a_time_give_the_reports_samples() {
    let mut r = report();
    let mut b = r.targets[0].clone();
    b.target = "b".into();
    b.health.up = true;
    r.targets.push(b);
    // What rendering a slice of targets at a time emits.
    let mut split = Collect::new(super::walk::sample_rank);
    emit_targets(&r.targets[..1], &mut split);
    emit_targets(&r.targets[1..], &mut split);
    emit_report_wide(&r, &mut split);
    let whole = samples(&r);
    assert!(whole.iter().any(|s| s.name == alerts::READY_FAMILY), "the fixture has report-wide samples");
    assert!(whole.iter().any(|s| s.name == TTFT && s.labels[0].1 == "b"), "the fixture has two targets");
    assert_eq!(split.finish(), whole);
}
