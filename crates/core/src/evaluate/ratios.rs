//! Raw increases over a range, summed over a model's shards with Prometheus's compensated
//! `sum`: the inputs of every ratio (attainment, failure share, means, hit and acceptance
//! rates). Ratios of raw increases need no extrapolation, and extrapolation's zero floor
//! would bias them (docs/architecture.md#ratios-from-raw-increases).

use super::range::ModelRange;
use crate::canonical::{CounterKind, FinishReason, Histogram, HistogramKind, HistogramSum};
use crate::kahan::KahanSum;
use crate::window::Quantity;

/// The raw increase of a histogram over the range, buckets summed by `le` over shards.
/// `None` when the model has no bucket series of that kind in the range.
pub fn histogram(m: &ModelRange, kind: HistogramKind) -> Option<Histogram> {
    let mut h = HistogramSum::default();
    let mut any = false;
    for (k, acc) in m.series() {
        match k.quantity {
            Quantity::Bucket(kk, _) if kk == kind => {
                any = true;
                h.add_bucket(k.quantity.le().unwrap_or(f64::NAN), acc.raw_increase());
            }
            Quantity::Sum(kk) if kk == kind => h.add_sum(acc.raw_increase()),
            Quantity::Count(kk) if kk == kind => h.add_count(acc.raw_increase()),
            _ => {}
        }
    }
    any.then(|| h.finish())
}

/// Raw increases of a histogram's `_sum` and `_count` (for means), when both exist.
pub fn sum_count(m: &ModelRange, kind: HistogramKind) -> Option<(f64, f64)> {
    let (mut sum, mut count) = (KahanSum::default(), KahanSum::default());
    for (k, acc) in m.series() {
        match k.quantity {
            Quantity::Sum(kk) if kk == kind => sum.add(acc.raw_increase()),
            Quantity::Count(kk) if kk == kind => count.add(acc.raw_increase()),
            _ => {}
        }
    }
    sum.sum().zip(count.sum())
}

/// Mean observation over the range: Δsum / Δcount, `None` without observations.
pub fn mean(m: &ModelRange, kind: HistogramKind) -> Option<f64> {
    sum_count(m, kind).and_then(|(s, c)| (c > 0.0).then_some(s / c))
}

/// [`mean`] of each of `kinds` that has observations, from one pass over the series.
pub fn means(m: &ModelRange, kinds: &[HistogramKind]) -> Vec<(HistogramKind, f64)> {
    let mut acc: Vec<(KahanSum, KahanSum)> = vec![Default::default(); kinds.len()];
    for (k, a) in m.series() {
        let (kind, is_sum) = match k.quantity {
            Quantity::Sum(kk) => (kk, true),
            Quantity::Count(kk) => (kk, false),
            _ => continue,
        };
        if let Some(i) = kinds.iter().position(|&x| x == kind) {
            let slot = if is_sum { &mut acc[i].0 } else { &mut acc[i].1 };
            slot.add(a.raw_increase());
        }
    }
    kinds
        .iter()
        .zip(acc)
        .filter_map(|(&kind, (s, c))| {
            let (s, c) = (s.sum()?, c.sum()?);
            (c > 0.0).then_some((kind, s / c))
        })
        .collect()
}

/// Raw increase of a counter over the range, summed over shards whose finish reason
/// passes `keep`. `None` when the model has no such counter.
pub fn counter(m: &ModelRange, kind: CounterKind, keep: impl Fn(Option<FinishReason>) -> bool) -> Option<f64> {
    m.series()
        .iter()
        .filter_map(|(k, acc)| match k.quantity {
            Quantity::Counter(kk, reason) if kk == kind && keep(reason) => Some(acc.raw_increase()),
            _ => None,
        })
        .collect::<KahanSum>()
        .sum()
}

/// Raw increase of any counter of a kind, every reason.
pub fn counter_all(m: &ModelRange, kind: CounterKind) -> Option<f64> {
    counter(m, kind, |_| true)
}

/// `numerator / denominator` of two raw increases, when the denominator moved.
pub fn ratio(numerator: Option<f64>, denominator: Option<f64>) -> Option<f64> {
    match (numerator, denominator) {
        (Some(n), Some(d)) if d > 0.0 => Some(n / d),
        _ => None,
    }
}
