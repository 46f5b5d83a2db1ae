//! Evaluation of one target's windows at one instant: PromQL-exact quantiles and rates,
//! KV-cache statistics.
//!
//! Latency quantiles are `histogram_quantile(q, sum by (le) (rate(x_bucket[w])))` over
//! the series of one target and model; rates are `sum(rate(x[w]))` over its shards, added
//! as Prometheus adds them ([`crate::kahan`]). The math is in [`promql`], the range
//! selection in [`range`].

mod config;
pub mod extra;
pub mod incremental;
pub mod kv;
pub mod promql;
pub mod range;
pub mod ratios;
pub mod slo;
#[cfg(test)]
mod tests;
pub mod thin;
#[cfg(test)]
mod thin_tests;

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::canonical::{CounterKind, GaugeKind, HistogramKind};
use crate::duration::Window;
use crate::kahan::{self, KahanSum};
use crate::report::{LatencyMean, LatencyQuantile, ModelReport, WindowReport};
use crate::window::{LATENCY_HISTOGRAMS, Quantity, TargetWindows};

pub use config::{AlertWindow, EvalConfig};
pub use promql::RateMode;
use range::{ModelRange, RangeView};
pub use thin::{Thin, Thinning};

// The band limits live beside the bands they define, in the report, which every output
// reads; evaluation only applies them.
pub use crate::report::KvThresholds;

/// The quantiles exported when the config names none.
pub const DEFAULT_QUANTILES: [f64; 4] = [0.5, 0.9, 0.95, 0.99];

/// Evaluates every model of one target at `now_ms` over each configured window.
pub fn evaluate_target(store: &TargetWindows, now_ms: i64, cfg: &EvalConfig) -> Vec<ModelReport> {
    evaluate_target_with(store, now_ms, cfg, RateMode::Prometheus)
}

/// [`evaluate_target`] with a chosen rate flavour (the oracle test's negative control).
///
/// Linear in the target's series: each window's range is collected once, grouped by
/// model, and each model's report reads only its own group.
#[doc(hidden)]
pub fn evaluate_target_with(store: &TargetWindows, now_ms: i64, cfg: &EvalConfig, mode: RateMode) -> Vec<ModelReport> {
    let kv_band = |v| kv::band_index(kv::band(v, &cfg.kv));
    let views: Vec<(Window, RangeView)> =
        cfg.windows.iter().map(|&w| (w, RangeView::collect_with(store, now_ms, w.millis(), &kv_band))).collect();
    reports(&views, now_ms, cfg, mode)
}

/// Every model's report from each window's range.
pub(crate) fn reports(
    views: &[(Window, RangeView)],
    now_ms: i64,
    cfg: &EvalConfig,
    mode: RateMode,
) -> Vec<ModelReport> {
    let models: BTreeSet<Arc<str>> = views.iter().flat_map(|(_, v)| v.models().cloned()).collect();
    let absent = ModelRange::default();
    models
        .into_iter()
        .map(|model| ModelReport {
            model: model.to_string(),
            windows: views
                .iter()
                .map(|(w, v)| window_report(v.model(&model).unwrap_or(&absent), &model, *w, now_ms, cfg, mode))
                .collect(),
        })
        .collect()
}

fn window_report(
    m: &ModelRange,
    model: &str,
    window: Window,
    now_ms: i64,
    cfg: &EvalConfig,
    mode: RateMode,
) -> WindowReport {
    let range_ms = window.millis();
    // Each series' PromQL rate, once, in series order (the order sums add in).
    let rates: Vec<(Quantity, f64)> = m
        .series()
        .iter()
        .filter_map(|(k, acc)| promql::rate(acc, now_ms, range_ms, mode).map(|r| (k.quantity, r)))
        .collect();
    let alert = cfg.alert_window(window);
    let latency = match alert {
        None => latency(&rates, LATENCY_HISTOGRAMS, &cfg.quantiles),
        Some(a) => latency(&rates, thin::ALERT_LATENCY_HISTOGRAMS, &a.quantiles),
    };
    let counter_rate = |want: CounterKind| {
        kahan::sum(rates.iter().filter(|(q, _)| matches!(q, Quantity::Counter(k, _) if *k == want)).map(|&(_, r)| r))
    };
    let requests_per_second = counter_rate(CounterKind::RequestsFinished);
    let output_tokens_per_second = counter_rate(CounterKind::GenerationTokens);
    let slos = cfg
        .slos
        .iter()
        .filter(|s| s.scope.applies_to_model(model))
        .map(|s| slo::evaluate(s, m, requests_per_second, output_tokens_per_second))
        .collect();
    let coverage = m.span().map_or(0.0, |s| s.coverage(now_ms, range_ms));
    if alert.is_some() {
        // What the rules read of a window (alert::from_report), and nothing else.
        return WindowReport {
            alert_only: true,
            coverage,
            latency,
            output_tokens_per_second,
            requests_per_second,
            slos,
            waiting: extra::gauge_stats(m, GaugeKind::Waiting),
            preemptions_per_second: counter_rate(CounterKind::Preemptions),
            ..WindowReport::empty(window)
        };
    }
    WindowReport {
        window,
        alert_only: false,
        coverage,
        latency,
        input_tokens_per_second: counter_rate(CounterKind::PromptTokens),
        output_tokens_per_second,
        requests_per_second,
        finish_reasons: extra::finish_rates(&rates),
        kv_cache: m.gauge(GaugeKind::KvCacheUsage).and_then(|g| kv::from_range(g, &cfg.kv)),
        slos,
        running: extra::gauge_stats(m, GaugeKind::Running),
        waiting: extra::gauge_stats(m, GaugeKind::Waiting),
        kv_capacity_tokens: m.gauge(GaugeKind::KvCapacityTokens).map(|g| g.last),
        preemptions_per_second: counter_rate(CounterKind::Preemptions),
        ttft_breakdown: extra::ttft_breakdown(m),
        mean_prompt_tokens: ratios::mean(m, HistogramKind::RequestPromptTokens),
        mean_output_tokens: ratios::mean(m, HistogramKind::RequestGenerationTokens),
        prompt_length_mix: extra::length_mix(m, HistogramKind::RequestPromptTokens),
        generation_length_mix: extra::length_mix(m, HistogramKind::RequestGenerationTokens),
        latency_means: ratios::means(m, LATENCY_HISTOGRAMS)
            .into_iter()
            .map(|(metric, seconds)| LatencyMean { metric, seconds })
            .collect(),
        spec_decode: extra::spec_decode(m, cfg.spec_draft_cost_ratio),
        engine_flops_per_gpu_per_second: counter_rate(CounterKind::EstimatedFlopsPerGpu),
        engine_bytes_per_gpu_per_second: match (
            counter_rate(CounterKind::EstimatedReadBytesPerGpu),
            counter_rate(CounterKind::EstimatedWriteBytesPerGpu),
        ) {
            (None, None) => None,
            (r, w) => Some(r.unwrap_or(0.0) + w.unwrap_or(0.0)),
        },
        gpu: None,
        requests: Vec::new(),
        prefix_cache_hit_ratio: ratios::ratio(
            ratios::counter_all(m, CounterKind::PrefixCacheHits),
            ratios::counter_all(m, CounterKind::PrefixCacheQueries),
        ),
    }
}

/// `quantiles` of each of `kinds` from the window's per-series rates.
fn latency(rates: &[(Quantity, f64)], kinds: &[HistogramKind], quantiles: &[f64]) -> Vec<LatencyQuantile> {
    let mut latency = Vec::new();
    for &kind in kinds {
        // sum by (le): one group per bound, shards added in series order with Prometheus's
        // compensated sum (docs/architecture.md#summing-series).
        let mut groups: Vec<(f64, KahanSum)> = Vec::new();
        for &(q, r) in rates {
            let Quantity::Bucket(k, _) = q else { continue };
            if k != kind {
                continue;
            }
            let le = q.le().unwrap_or(f64::NAN);
            match groups.iter_mut().find(|b| b.0 == le) {
                Some(b) => b.1.add(r),
                None => groups.push((le, [r].into_iter().collect())),
            }
        }
        if groups.is_empty() {
            continue; // PromQL returns no series at all: nothing to export.
        }
        let buckets: Vec<(f64, f64)> = groups.iter().filter_map(|(le, s)| Some((*le, s.sum()?))).collect();
        for &q in quantiles {
            let got = promql::histogram_quantile(q, &buckets);
            latency.push(LatencyQuantile { metric: kind, quantile: q, value: got.value, bracket: got.bracket });
        }
    }
    latency
}
