//! The rest of the seed's per-window quantities: queue and batch, TTFT
//! decomposition, request shape, speculative decoding and prefix caching.

use super::range::ModelRange;
use super::ratios::{self, ratio};
use std::collections::BTreeMap;

use crate::canonical::{CounterKind, FinishReason, GaugeKind, HistogramKind};
use crate::kahan::KahanSum;
use crate::report::{FinishRate, GaugeStats, SpecDecodeReport, TtftBreakdown};
use crate::window::Quantity;

pub fn gauge_stats(m: &ModelRange, kind: GaugeKind) -> Option<GaugeStats> {
    m.gauge(kind).map(|g| GaugeStats { first: g.first, last: g.last, mean: g.mean, max: g.max })
}

pub fn ttft_breakdown(m: &ModelRange) -> Option<TtftBreakdown> {
    let ttft = ratios::mean(m, HistogramKind::Ttft)?;
    let queue = ratios::mean(m, HistogramKind::QueueTime);
    let prefill = ratios::mean(m, HistogramKind::PrefillTime);
    let other = queue.zip(prefill).map(|(q, p)| ttft - q - p);
    Some(TtftBreakdown { ttft, queue, prefill, other })
}

/// Cumulative share of finished requests per bucket boundary of a token-count histogram
/// (prompt or generation length).
pub fn length_mix(m: &ModelRange, kind: HistogramKind) -> Vec<(f64, f64)> {
    let Some(h) = ratios::histogram(m, kind) else { return Vec::new() };
    let Some(total) = h.buckets.last().map(|b| b.count).filter(|&t| t > 0.0) else { return Vec::new() };
    h.buckets.iter().filter(|b| b.le.is_finite()).map(|b| (b.le, (b.count / total).min(1.0))).collect()
}

/// `sum by (finished_reason) (rate(requests_finished[w]))` from each series' rate, added
/// in series order as PromQL adds them; in [`FinishReason`] order.
pub fn finish_rates(rates: &[(Quantity, f64)]) -> Vec<FinishRate> {
    let mut by: BTreeMap<FinishReason, KahanSum> = BTreeMap::new();
    for &(q, r) in rates {
        if let Quantity::Counter(CounterKind::RequestsFinished, Some(reason)) = q {
            by.entry(reason).or_default().add(r);
        }
    }
    by.into_iter().filter_map(|(reason, s)| Some(FinishRate { reason, per_second: s.sum()? })).collect()
}

/// Spec-decode ratios, and `draft_cost_ratio` (draft step cost / target step cost) turned
/// into the standard expected speedup `(1 − αᵏ⁺¹) / ((1 − α)(c·k + 1))` (Leviathan et al.
/// 2023), with α the acceptance ratio and k the mean drafts per step. An estimate from a
/// model of independent acceptances; the measured tokens per step is `mean_accepted_length`.
pub fn spec_decode(m: &ModelRange, draft_cost_ratio: Option<f64>) -> Option<SpecDecodeReport> {
    let drafts = ratios::counter_all(m, CounterKind::SpecDrafts);
    let draft_tokens = ratios::counter_all(m, CounterKind::SpecDraftTokens);
    let accepted = ratios::counter_all(m, CounterKind::SpecAcceptedTokens);
    if draft_tokens.is_none() && accepted.is_none() {
        return None;
    }
    let acceptance_ratio = ratio(accepted, draft_tokens);
    let mean_accepted_length = ratio(accepted, drafts).map(|a| 1.0 + a);
    let mut per_position: Vec<(u32, KahanSum)> = Vec::new();
    for (k, acc) in m.series() {
        if let Quantity::SpecAccepted(pos) = k.quantity {
            match per_position.iter_mut().find(|(p, _)| *p == pos) {
                Some(e) => e.1.add(acc.raw_increase()),
                None => per_position.push((pos, [acc.raw_increase()].into_iter().collect())),
            }
        }
    }
    per_position.sort_by_key(|e| e.0);
    let per_position = match drafts.filter(|&d| d > 0.0) {
        Some(d) => per_position.into_iter().filter_map(|(p, a)| Some((p, a.sum()? / d))).collect(),
        None => Vec::new(),
    };
    let k = ratio(draft_tokens, drafts);
    let speedup_estimate = match (acceptance_ratio, k, draft_cost_ratio) {
        (Some(a), Some(k), Some(c)) => Some(expected_speedup(a, k, c)),
        _ => None,
    };
    Some(SpecDecodeReport { acceptance_ratio, mean_accepted_length, per_position, speedup_estimate })
}

fn expected_speedup(alpha: f64, k: f64, c: f64) -> f64 {
    let tokens_per_step =
        if (1.0 - alpha).abs() < 1e-12 { k + 1.0 } else { (1.0 - alpha.powf(k + 1.0)) / (1.0 - alpha) };
    tokens_per_step / (c * k + 1.0)
}

#[cfg(test)]
mod tests {
    use super::expected_speedup;

    #[test]
    fn speedup_matches_the_closed_form() {
        // α = 0.8, k = 4, c = 0.1: (1 − 0.8⁵)/0.2 = 3.3616 tokens per step, / 1.4.
        assert!((expected_speedup(0.8, 4.0, 0.1) - 3.3616 / 1.4).abs() < 1e-12);
        // Perfect acceptance gives k + 1 tokens per step.
        assert!((expected_speedup(1.0, 3.0, 0.0) - 4.0).abs() < 1e-12);
        // No acceptance with free drafts is no speedup.
        assert!((expected_speedup(0.0, 3.0, 0.0) - 1.0).abs() < 1e-12);
    }
}
