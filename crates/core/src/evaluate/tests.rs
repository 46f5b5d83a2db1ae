//! Evaluation on hand-built snapshots: shard sums, resets, absent shards, quantiles.
//! Expectations are worked out by hand from the extrapolatedRate rules.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::range::RangeView;
use super::*;
use crate::canonical::{
    Bucket, CounterValue, Engine, FinishReason, GaugeKind, Histogram, HistogramKind, ModelSnapshot, Shard, Snapshot,
};
use crate::report::KvBand;

/// One shard's numbers in one scrape.
#[derive(Clone, Copy)]
struct S {
    engine: u8,
    tokens: f64,
    /// Cumulative bucket counts for le 0.1, 0.2, +Inf.
    buckets: [f64; 3],
    created: f64,
    kv: f64,
}

fn snap(shards: &[S], process_start: f64) -> Arc<Snapshot> {
    let mut m = ModelSnapshot::default();
    for s in shards {
        let key = format!("engine=\"{}\"", s.engine);
        let buckets =
            [0.1, 0.2, f64::INFINITY].iter().zip(s.buckets).map(|(&le, count)| Bucket { le, count }).collect();
        // Every observation 0.125 s on average: the mean is exact in binary.
        let h = Histogram { buckets, sum: 0.125 * s.buckets[2], count: s.buckets[2] };
        m.histograms.entry(HistogramKind::Ttft).or_default().push(Shard {
            key: key.clone(),
            created: Some(s.created),
            value: h,
        });
        m.counters.entry(CounterKind::PromptTokens).or_default().push(Shard {
            key: key.clone(),
            created: Some(s.created),
            value: CounterValue { value: s.tokens, reason: None },
        });
        m.counters.entry(CounterKind::RequestsFinished).or_default().push(Shard {
            key: format!("{key},finished_reason=\"stop\""),
            created: Some(s.created),
            value: CounterValue { value: s.buckets[2], reason: Some(FinishReason::Stop) },
        });
        m.gauges.entry(GaugeKind::KvCacheUsage).or_default().push(Shard { key, created: None, value: s.kv });
    }
    Arc::new(Snapshot {
        engine: Engine::Vllm,
        models: BTreeMap::from([("m".to_string(), m)]),
        process_start: Some(process_start),
        families: 0,
        samples: 0,
        warnings: Vec::new(),
    })
}

fn cfg(secs: u64) -> EvalConfig {
    EvalConfig {
        windows: vec![Window::new(Duration::from_secs(secs)).unwrap()],
        quantiles: vec![0.5, 0.75, 0.99],
        kv: KvThresholds::default(),
        ..EvalConfig::default()
    }
}

fn shard(engine: u8, i: f64) -> S {
    // Engine 0 observes 10 requests per scrape in (0, 0.1], engine 1 in (0.1, 0.2].
    let b = if engine == 0 {
        [1000.0 + 10.0 * i, 1000.0 + 10.0 * i, 1000.0 + 10.0 * i]
    } else {
        [0.0, 1000.0 + 10.0 * i, 1000.0 + 10.0 * i]
    };
    S { engine, tokens: 1000.0 + 100.0 * i, buckets: b, created: 1.0, kv: if engine == 0 { 0.8 } else { 0.6 } }
}

/// Scrapes at 5, 15, …, 55 s; window (0, 60 s]. Each shard: 6 samples over 50 s, 5 s to
/// either edge (< 1.1 × 10 s), zero point far away: increase × 60/50, rate = increase/50.
fn steady() -> TargetWindows {
    let mut w = TargetWindows::new(Duration::from_secs(60));
    for i in 0..6 {
        w.push(5_000 + i * 10_000, snap(&[shard(0, i as f64), shard(1, i as f64)], 1.0));
    }
    w
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1.0)
}

#[test]
fn rates_sum_over_shards() {
    let r = evaluate_target(&steady(), 60_000, &cfg(60));
    let w = &r[0].windows[0];
    // Tokens: 500 per shard over 50 s, extrapolated to 60 s → 600 / 60 = 10 per shard.
    assert!(close(w.input_tokens_per_second.unwrap(), 20.0), "{:?}", w.input_tokens_per_second);
    // Requests: 50 per shard → 60 / 60 = 1 per shard.
    assert!(close(w.requests_per_second.unwrap(), 2.0));
    assert_eq!(w.output_tokens_per_second, None, "no generation counter at all");
    // The same rate by finish reason: both shards finish with `stop`.
    let reasons: Vec<_> = w.finish_reasons.iter().map(|f| (f.reason, f.per_second)).collect();
    assert_eq!(reasons.len(), 1);
    assert_eq!(reasons[0].0, FinishReason::Stop);
    assert!(close(reasons[0].1, 2.0), "{reasons:?}");
    // Means are Δsum / Δcount over both shards, for the histograms the engine has.
    let means: Vec<_> = w.latency_means.iter().map(|m| (m.metric, m.seconds)).collect();
    assert_eq!(means.len(), 1, "{means:?}");
    assert_eq!(means[0].0, HistogramKind::Ttft);
    assert!(close(means[0].1, 0.125), "{means:?}");
    assert!(w.generation_length_mix.is_empty(), "no generation-length histogram");
}

#[test]
fn shards_are_added_with_prometheus_compensated_sum() {
    // Three ranks whose token rates come out as 0.1, 0.2 and 0.3 (increases 5, 10, 15 over
    // 50 s, extrapolated to 60 s). Added naively in series order they give
    // 0.6000000000000001; Prometheus 3.x's Kahan–Neumaier sum gives 0.6.
    let mut w = TargetWindows::new(Duration::from_secs(60));
    for i in 0..6 {
        let shards: Vec<S> =
            (0..3).map(|e| S { tokens: 1000.0 + f64::from(e + 1) * i as f64, ..shard(e, i as f64) }).collect();
        w.push(5_000 + i * 10_000, snap(&shards, 1.0));
    }
    let view = RangeView::collect(&w, 60_000, 60_000);
    let rates: Vec<f64> = view
        .model("m")
        .unwrap()
        .series()
        .iter()
        .filter(|(k, _)| k.quantity == Quantity::Counter(CounterKind::PromptTokens, None))
        .map(|(_, acc)| promql::extrapolated_rate(acc, 60_000, 60_000).unwrap())
        .collect();
    assert_eq!(rates, [0.1, 0.2, 0.3]);
    assert_eq!(rates.iter().copied().reduce(|a, b| a + b), Some(0.6000000000000001), "naive differs");
    let r = evaluate_target(&w, 60_000, &cfg(60));
    assert_eq!(r[0].windows[0].input_tokens_per_second, Some(0.6));
}

#[test]
fn quantiles_sum_buckets_before_interpolating() {
    let r = evaluate_target(&steady(), 60_000, &cfg(60));
    let lat = &r[0].windows[0].latency;
    // Summed rates per le: 0.1 → 1, 0.2 → 2, +Inf → 2 (per s).
    // p50: rank 1 → first bucket, 0 + 0.1·1/1 = 0.1. p75: rank 1.5 → 0.1 + 0.1·0.5/1.
    // p99: rank 1.98 → (0.1, 0.2]: 0.1 + 0.1·0.98.
    let get = |q: f64| lat.iter().find(|l| l.metric == HistogramKind::Ttft && l.quantile == q).unwrap();
    assert!(close(get(0.5).value, 0.1));
    assert_eq!(get(0.5).bracket, Some((0.0, 0.1)));
    assert!(close(get(0.75).value, 0.15));
    assert_eq!(get(0.75).bracket, Some((0.1, 0.2)));
    assert!(close(get(0.99).value, 0.198));
    assert!(lat.iter().all(|l| l.metric == HistogramKind::Ttft), "only TTFT exists");
}

#[test]
fn kv_mean_is_over_ranks_then_scrapes() {
    let r = evaluate_target(&steady(), 60_000, &cfg(60));
    let kv = r[0].windows[0].kv_cache.as_ref().unwrap();
    // Each scrape: (0.8 + 0.6) / 2 = 0.7 → band low, every time.
    assert!(close(kv.last, 0.7) && close(kv.mean, 0.7) && close(kv.max, 0.7));
    assert_eq!(kv.band_time[&KvBand::Low], 1.0);
}

#[test]
fn last_scrape_values_are_the_same_in_every_window() {
    // What lets export show them once, without a window (docs/metrics.md).
    let mut c = cfg(60);
    c.windows.insert(0, Window::new(Duration::from_secs(20)).unwrap());
    let mut w = TargetWindows::new(Duration::from_secs(60));
    for i in 0..6 {
        let kv = 0.5 + 0.05 * i as f64;
        w.push(5_000 + i * 10_000, snap(&[S { kv, ..shard(0, i as f64) }, S { kv, ..shard(1, i as f64) }], 1.0));
    }
    let r = evaluate_target(&w, 60_000, &c);
    let [short, long] = &r[0].windows[..] else { panic!("two windows") };
    let (a, b) = (short.kv_cache.as_ref().unwrap(), long.kv_cache.as_ref().unwrap());
    assert_eq!((a.last, a.band), (b.last, b.band));
    assert_ne!(a.mean, b.mean, "the window-dependent stats do differ");
}

#[test]
fn a_decrease_is_a_reset() {
    let mut w = TargetWindows::new(Duration::from_secs(60));
    // Tokens 1000, 1100, 1200, then restart: 50, 150, 250. Raw increase 250 − 1000 + 1200 = 450.
    let values = [1000.0, 1100.0, 1200.0, 50.0, 150.0, 250.0];
    for (i, v) in values.iter().enumerate() {
        let s = S { tokens: *v, ..shard(0, i as f64) };
        w.push(5_000 + i as i64 * 10_000, snap(&[s], 1.0));
    }
    assert_eq!(prompt_tokens_raw_increase(&w), 450.0);
    // First value 1000 > 450: zero point far, so 450 × 60/50 / 60 s = 9.
    let r = evaluate_target(&w, 60_000, &cfg(60));
    assert!(close(r[0].windows[0].input_tokens_per_second.unwrap(), 9.0));
}

#[test]
fn a_changed_created_or_process_start_is_a_reset_even_without_a_decrease() {
    // Tokens 100, 110, 120 | restart | 125, 135, 145. Prometheus would see +45; the new
    // process counted 145 of its own, so the increase is 20 + 145 = 165.
    for by_created in [true, false] {
        let mut w = TargetWindows::new(Duration::from_secs(60));
        let values = [100.0, 110.0, 120.0, 125.0, 135.0, 145.0];
        for (i, v) in values.iter().enumerate() {
            let after = i >= 3;
            let created = if by_created && after { 2.0 } else { 1.0 };
            let start = if !by_created && after { 2.0 } else { 1.0 };
            let s = S { tokens: *v, created, ..shard(0, 0.0) };
            w.push(5_000 + i as i64 * 10_000, snap(&[s], start));
        }
        assert_eq!(prompt_tokens_raw_increase(&w), 165.0, "by_created={by_created}");
    }
}

#[test]
fn an_absent_shard_is_a_series_with_fewer_samples() {
    let mut w = TargetWindows::new(Duration::from_secs(60));
    for i in 0..6 {
        // Engine 1 misses the scrapes at 25 and 35 s.
        let shards =
            if i == 2 || i == 3 { vec![shard(0, i as f64)] } else { vec![shard(0, i as f64), shard(1, i as f64)] };
        w.push(5_000 + i * 10_000, snap(&shards, 1.0));
    }
    let r = evaluate_target(&w, 60_000, &cfg(60));
    // Engine 1: samples at 5, 15, 45, 55 s, increase 500 over 50 s, 4 samples → average
    // spacing 50/3 s, threshold 18.3 s; edges 5 s → extrapolate to 60 s: rate 10, as engine 0.
    assert!(close(r[0].windows[0].input_tokens_per_second.unwrap(), 20.0));
}

#[test]
fn nothing_in_the_window_gives_nothing() {
    let w = steady();
    assert!(evaluate_target(&w, 200_000, &cfg(60)).is_empty());
    // One sample per series: no rate, no quantile; KV still has its one sample.
    let r = evaluate_target(&w, 60_000, &cfg(6));
    let win = &r[0].windows[0];
    assert!(win.latency.is_empty() && win.input_tokens_per_second.is_none());
    assert!(win.kv_cache.is_some());
}

#[test]
fn a_window_with_no_observations_gives_nan_quantiles() {
    let mut w = TargetWindows::new(Duration::from_secs(60));
    for i in 0..3 {
        w.push(5_000 + i * 10_000, snap(&[shard(0, 0.0)], 1.0));
    }
    let r = evaluate_target(&w, 30_000, &cfg(60));
    assert!(r[0].windows[0].latency.iter().all(|l| l.value.is_nan() && l.bracket.is_none()));
}

#[test]
fn naive_mode_skips_extrapolation() {
    let r = evaluate_target_with(&steady(), 60_000, &cfg(60), RateMode::NaiveForTests);
    // 500 per shard / 60 s.
    assert!(close(r[0].windows[0].input_tokens_per_second.unwrap(), 2.0 * 500.0 / 60.0));
}

fn slo(name: &str, ttft: Option<f64>, tpot: Option<f64>) -> crate::slo::Slo {
    crate::slo::Slo {
        name: name.into(),
        ttft: ttft.map(Duration::from_secs_f64),
        tpot: tpot.map(Duration::from_secs_f64),
        e2e: None,
        objective: crate::slo::Objective::new(0.9).unwrap(),
        scope: crate::slo::Scope::all(),
    }
}

#[test]
fn slo_attainment_from_raw_increases() {
    let mut c = cfg(60);
    c.slos = vec![slo("edge", Some(0.1), None), slo("between", Some(0.15), None), slo("tpot", Some(0.1), Some(0.05))];
    let r = evaluate_target(&steady(), 60_000, &c);
    let w = &r[0].windows[0];
    let values = |name: &str| match &w.slos.iter().find(|s| s.slo == name).unwrap().status {
        crate::report::SloStatus::Evaluated(v) => v.clone(),
        other => panic!("{name}: {other:?}"),
    };
    // Raw increases over the 6 scrapes: 50 requests per shard, engine 0's all ≤ 0.1 s,
    // engine 1's all in (0.1, 0.2]. A threshold on a boundary is exact.
    let edge = values("edge");
    let ttft = edge.attainment[&crate::slo::Clause::Ttft];
    assert_eq!((ttft.lower, ttft.estimate, ttft.upper), (0.5, 0.5, 0.5));
    assert_eq!(edge.requests, 100.0);
    assert_eq!(edge.attainment[&crate::slo::Clause::Joint], ttft, "no failures: joint = marginal");
    // Goodput scales the PromQL rate of finished requests (2/s) by the attainment.
    let g = edge.goodput_requests_per_second.unwrap();
    assert!(close(g.estimate, 1.0));
    // Burn: (1 − 0.5) / (1 − 0.9).
    assert!(close(edge.burn_rate.estimate, 5.0));
    // Between boundaries: the bracket spans the bucket, the estimate interpolates.
    let between = values("between").attainment[&crate::slo::Clause::Ttft];
    assert_eq!((between.lower, between.upper), (0.5, 1.0));
    assert!(close(between.estimate, 0.75));
    // No per-request TPOT histogram: not evaluable, with the reason.
    match &w.slos.iter().find(|s| s.slo == "tpot").unwrap().status {
        crate::report::SloStatus::NotEvaluable { reason } => assert!(reason.starts_with("tpot:"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn evaluating_a_full_hour_reads_every_point_once_per_window() {
    let w = crate::window::tests::fill(2, 3600, 1000);
    let windows = [60, 300, 900, 3600].map(|s| crate::duration::Window::new(Duration::from_secs(s)).unwrap()).to_vec();
    let cfg = EvalConfig {
        windows,
        quantiles: vec![0.5, 0.9, 0.95, 0.99],
        kv: KvThresholds::default(),
        ..EvalConfig::default()
    };
    let started = std::time::Instant::now();
    let r = evaluate_target(&w, 3_599_007, &cfg);
    println!("evaluated 4 windows over 3600 points × 2 ranks in {:?} (debug build)", started.elapsed());
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].windows.len(), 4);
    // 4 latency histograms × 4 quantiles in every window.
    assert!(r[0].windows.iter().all(|w| w.latency.len() == 16));
}

/// `models` models, each with the two shards of [`shard`] at scrape `i`.
fn many_models(models: usize, i: f64) -> Arc<Snapshot> {
    let one = snap(&[shard(0, i), shard(1, i)], 1.0);
    let m = one.models["m"].clone();
    let models = (0..models).map(|n| (format!("model-{n:06}"), m.clone())).collect();
    Arc::new(Snapshot { models, ..(*one).clone() })
}

#[test]
fn evaluation_visits_each_series_a_bounded_number_of_times() {
    // With a per-model re-scan of the window's series, 10× the models would be 100× the
    // work. Each model must read only its own series: the count of series handed to
    // per-model evaluation grows exactly with the model count.
    let mut c = cfg(60);
    c.slos = vec![slo("edge", Some(0.1), None)];
    let visits = |models: usize| {
        let mut w = TargetWindows::new(Duration::from_secs(60));
        for i in 0..6 {
            w.push(5_000 + i * 10_000, many_models(models, i as f64));
        }
        range::visits::take();
        let r = evaluate_target(&w, 60_000, &c);
        assert_eq!(r.len(), models);
        assert!(r.iter().all(|m| m.windows[0].slos.len() == 1 && m.windows[0].requests_per_second.is_some()));
        range::visits::take()
    };
    let (ten, thousand) = (visits(10), visits(1_000));
    assert!(ten > 0, "the count is wired to evaluation");
    assert_eq!(thousand, 100 * ten, "series visits per model must not grow with the model count");
    // A bounded number per series: 2 shards × (3 buckets + 1 counter + 1 finish counter
    // + sum + count) = 14 series per model, read a handful of times each (18: the
    // quantiles, rates, SLO clauses, means and length mixes each take a pass).
    assert!(ten <= 10 * 14 * 18, "{ten} visits for 10 models");
}

#[test]
fn coverage_is_time_since_the_oldest_scrape_plus_one_spacing() {
    // Scrapes every 10 s from t = 5 s: the daemon started at 5 s.
    let mut w = TargetWindows::new(Duration::from_secs(3600));
    for i in 0..=40 {
        w.push(5_000 + i * 10_000, snap(&[shard(0, i as f64)], 1.0));
    }
    let cov = |now_ms: i64, secs: u64| evaluate_target(&w, now_ms, &cfg(secs))[0].windows[0].coverage;
    // At 185 s on a 1h window: (185 − 5 + 10) / 3600.
    assert!(close(cov(185_000, 3600), 190.0 / 3600.0), "{}", cov(185_000, 3600));
    // A 60 s window holding 6 scrapes (125…175 s, or 135…185 s) is full whatever the phase.
    assert_eq!(cov(185_000, 60), 1.0);
    assert_eq!(cov(180_000, 60), 1.0);
    // A 5m window, 4 minutes after start: (245 − 5 + 10) / 300.
    assert!(close(cov(245_000, 300), 250.0 / 300.0));
    // A gap (the target was down from 105 s to 345 s) does not lower it: counters carry
    // what happened in between.
    let mut gap = TargetWindows::new(Duration::from_secs(3600));
    for i in (0..=40).filter(|i| !(11..=33).contains(i)) {
        gap.push(5_000 + i * 10_000, snap(&[shard(0, i as f64)], 1.0));
    }
    let r = evaluate_target(&gap, 405_000, &cfg(3600));
    // The 1h window reaches back to the first scrape at 5 s: 18 scrapes over 400 s, so
    // the mean spacing is 400/17 s.
    assert!(close(r[0].windows[0].coverage, (400.0 + 400.0 / 17.0) / 3600.0), "{}", r[0].windows[0].coverage);
    // The 5m window (105, 405] begins inside the gap: its data starts at 345 s, as after a
    // fresh start.
    let r = evaluate_target(&gap, 405_000, &cfg(300));
    assert!(close(r[0].windows[0].coverage, 70.0 / 300.0), "{}", r[0].windows[0].coverage);
    // An empty window and a single scrape.
    let mut one = TargetWindows::new(Duration::from_secs(60));
    one.push(10_000, snap(&[shard(0, 0.0)], 1.0));
    assert!(close(evaluate_target(&one, 16_000, &cfg(60))[0].windows[0].coverage, 0.1));
}

/// The raw increase of model `m`'s prompt-token counter over the last minute at t = 60 s.
fn prompt_tokens_raw_increase(w: &TargetWindows) -> f64 {
    let view = RangeView::collect(w, 60_000, 60_000);
    let m = view.model("m").unwrap();
    let (_, acc) =
        m.series().iter().find(|(k, _)| k.quantity == Quantity::Counter(CounterKind::PromptTokens, None)).unwrap();
    acc.raw_increase()
}
