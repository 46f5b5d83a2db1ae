//! SLO capacity from (request rate, attainment) history (docs/capacity.md#slo-capacity):
//! log-spaced rate bins, a Jeffreys posterior per bin, a weighted non-increasing isotonic
//! fit, the highest rate whose fitted attainment meets the objective, and its spread from
//! a seeded bootstrap.
//!
//! Each draw of the bootstrap moves three things the answer depends on: the attainment of
//! each bin (its posterior), which intervals were seen (a Bayesian block bootstrap: one
//! exponential weight per block of consecutive intervals, since neighbours share requests),
//! and where the bin edges fall (a random phase of the log grid). Posteriors alone are far
//! too sure once bins hold thousands of requests: the rate resolution of the bins, not the
//! count, then limits what is known.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Beta, Distribution, Exp1};

use super::stats::pava_non_increasing;

/// One interval's load and outcome: its request rate, and the requests it judged
/// (decay-weighted, so fractional) with how many met the SLO.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub rate: f64,
    pub total: f64,
    pub good: f64,
}

/// The estimator's knobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// Rate bins per factor of ten: 8 gives bins 33 % wide.
    pub bins_per_decade: f64,
    /// Posterior draws for the spread.
    pub draws: usize,
    pub seed: u64,
    /// Expected bad requests a bin needs at the objective to count: a bin holds at least
    /// `min_bad / (1 − objective)` requests (10 → 200 requests at 0.95).
    pub min_bad: f64,
    /// Consecutive points that share one bootstrap weight: a window of 1m over intervals
    /// 15 s apart counts each request in four of them.
    pub block: usize,
}

impl Default for Fit {
    fn default() -> Fit {
        Fit { bins_per_decade: 8.0, draws: 200, seed: 0x00ca_9ac1, min_bad: 10.0, block: 4 }
    }
}

/// One rate bin with enough requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bin {
    /// Request-weighted mean rate of the intervals in the bin.
    pub rate: f64,
    /// The bin's lower edge.
    pub low: f64,
    pub total: f64,
    pub good: f64,
}

/// The capacity estimate of one SLO from one attainment series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Quantiles 0.1, 0.5 and 0.9 of the highest rate meeting the objective, requests/s.
    pub p10: f64,
    pub p50: f64,
    pub p90: f64,
    /// No bin of the fit fails the objective: the quantiles are lower bounds (the highest
    /// passing rate seen), not a ceiling.
    pub censored: bool,
    /// Even the lowest binned rate fails: the quantiles are that bin's lower edge, an upper
    /// bound.
    pub below_data: bool,
    /// Bins that had enough requests.
    pub bins: usize,
}

/// Bins `points` by rate, leaving out bins with fewer than the minimum requests.
pub fn bins(points: &[Point], objective: f64, fit: &Fit) -> Vec<Bin> {
    binned(points.iter().map(|p| (p, 1.0)), objective, fit, 0.0)
}

/// [`bins`] with a weight per point and the grid shifted by `phase` of a bin.
fn binned<'a>(points: impl Iterator<Item = (&'a Point, f64)>, objective: f64, fit: &Fit, phase: f64) -> Vec<Bin> {
    let min_total = fit.min_bad / (1.0 - objective).max(1e-6);
    // Whether a bin has enough requests is a property of the data, not of a draw's
    // weights: the unweighted total decides.
    let mut acc: std::collections::BTreeMap<i64, (f64, f64, f64, f64)> = Default::default();
    for (p, w) in points.filter(|(p, _)| p.rate > 0.0 && p.rate.is_finite() && p.total > 0.0) {
        let k = (p.rate.log10() * fit.bins_per_decade + phase).floor() as i64;
        let e = acc.entry(k).or_default();
        e.0 += p.rate * p.total * w;
        e.1 += p.total * w;
        e.2 += p.good.clamp(0.0, p.total) * w;
        e.3 += p.total;
    }
    acc.into_iter()
        .filter(|(_, (_, total, _, raw))| *raw >= min_total && *total > 0.0)
        .map(|(k, (rt, total, good, _))| Bin {
            rate: rt / total,
            low: 10f64.powf((k as f64 - phase) / fit.bins_per_decade),
            total,
            good,
        })
        .collect()
}

/// The highest rate whose fitted attainment meets `objective`, from per-bin attainments
/// `a` (one per bin, rates ascending): interpolated between the last passing and the first
/// failing bin. The second value says the fit never fails (censored), the third that it
/// fails from the first bin.
fn crossing(bins: &[Bin], a: &[f64], objective: f64) -> (f64, bool, bool) {
    let w: Vec<f64> = bins.iter().map(|b| b.total).collect();
    let fitted = pava_non_increasing(a, &w);
    match fitted.iter().position(|&v| v < objective) {
        None => (bins.last().map_or(0.0, |b| b.rate), true, false),
        Some(0) => (bins[0].low, false, true),
        Some(i) => {
            let (l, r) = (&bins[i - 1], &bins[i]);
            let (al, ar) = (fitted[i - 1], fitted[i]);
            let f = if al > ar { ((al - objective) / (al - ar)).clamp(0.0, 1.0) } else { 0.0 };
            (l.rate + f * (r.rate - l.rate), false, false)
        }
    }
}

/// The estimate from `points`, or `None` when no bin has enough requests yet.
pub fn estimate(points: &[Point], objective: f64, fit: &Fit) -> Option<Estimate> {
    let bins = bins(points, objective, fit);
    if bins.is_empty() {
        return None;
    }
    // The point fit decides censoring: the posterior means of each bin.
    let means: Vec<f64> = bins.iter().map(|b| (b.good + 0.5) / (b.total + 1.0)).collect();
    let (_, censored, below_data) = crossing(&bins, &means, objective);
    let mut rng = ChaCha8Rng::seed_from_u64(fit.seed);
    let block = fit.block.max(1);
    let mut draws: Vec<f64> = (0..fit.draws.max(1))
        .filter_map(|_| {
            let weights: Vec<f64> = (0..points.len().div_ceil(block)).map(|_| rng.sample(Exp1)).collect();
            let phase: f64 = rng.random_range(0.0..1.0);
            let weighted = points.iter().enumerate().map(|(i, p)| (p, weights[i / block]));
            let bins = binned(weighted, objective, fit, phase);
            if bins.is_empty() {
                return None;
            }
            let a: Vec<f64> = bins
                .iter()
                .map(|b| {
                    Beta::new(b.good + 0.5, (b.total - b.good).max(0.0) + 0.5)
                        .expect("positive Jeffreys parameters")
                        .sample(&mut rng)
                })
                .collect();
            Some(crossing(&bins, &a, objective).0)
        })
        .collect();
    if draws.is_empty() {
        return None;
    }
    draws.sort_by(f64::total_cmp);
    let q = |p: f64| draws[((draws.len() - 1) as f64 * p).round() as usize];
    Some(Estimate { p10: q(0.1), p50: q(0.5), p90: q(0.9), censored, below_data, bins: bins.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attainment that falls from 0.99 to 0.5 as the rate passes `knee`.
    fn knee_points(knee: f64, per_interval: f64) -> Vec<Point> {
        let mut out = Vec::new();
        let mut rate: f64 = 0.5;
        while rate < 3.0 * knee {
            let a = if rate <= knee { 0.99 } else { (0.99 - 0.6 * (rate - knee) / knee).max(0.3) };
            for _ in 0..4 {
                out.push(Point { rate, total: per_interval * rate, good: a * per_interval * rate });
            }
            rate *= 1.05;
        }
        out
    }

    #[test]
    fn finds_the_knee_and_brackets_it() {
        let e = estimate(&knee_points(5.0, 60.0), 0.95, &Fit::default()).expect("enough data");
        assert!(!e.censored && !e.below_data);
        // Attainment reaches 0.95 at 5 + 5·0.04/0.6 = 5.33; bins blur it a little.
        assert!(e.p10 <= e.p50 && e.p50 <= e.p90, "{e:?}");
        assert!((4.5..6.2).contains(&e.p50), "{e:?}");
        assert!(e.p90 - e.p10 < 1.5, "plenty of data gives a narrow interval: {e:?}");
    }

    #[test]
    fn never_failing_data_is_a_censored_lower_bound() {
        let pts: Vec<Point> = (1..40).map(|i| Point { rate: i as f64 * 0.1, total: 500.0, good: 499.0 }).collect();
        let e = estimate(&pts, 0.95, &Fit::default()).expect("enough data");
        assert!(e.censored, "{e:?}");
        // The bound is the highest passing bin's rate, not an invented ceiling above the data.
        assert!(e.p90 <= 3.9 && e.p10 > 3.0, "{e:?}");
    }

    #[test]
    fn failing_from_the_lowest_rate_is_an_upper_bound() {
        let pts: Vec<Point> = (1..20).map(|i| Point { rate: i as f64, total: 500.0, good: 300.0 }).collect();
        let e = estimate(&pts, 0.95, &Fit::default()).expect("enough data");
        assert!(e.below_data && !e.censored && e.p90 <= 1.0, "{e:?}");
    }

    #[test]
    fn too_little_data_gives_nothing_and_thin_bins_are_left_out() {
        let thin = [Point { rate: 2.0, total: 50.0, good: 50.0 }];
        assert_eq!(estimate(&thin, 0.95, &Fit::default()), None);
        // 200 requests at 0.95 are the minimum (10 expected bad ones).
        let b = bins(&[Point { rate: 2.0, total: 199.0, good: 199.0 }], 0.95, &Fit::default());
        assert!(b.is_empty());
        let b = bins(&[Point { rate: 2.0, total: 200.0, good: 199.0 }], 0.95, &Fit::default());
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn a_noisy_rise_after_the_knee_does_not_move_it_up() {
        // A lucky high-rate bin that passes again must not push capacity past the failing one.
        let mut pts = knee_points(5.0, 60.0);
        pts.push(Point { rate: 14.0, total: 2000.0, good: 1990.0 });
        let e = estimate(&pts, 0.95, &Fit::default()).expect("enough data");
        assert!(!e.censored && e.p90 < 7.0, "{e:?}");
    }

    #[test]
    fn the_same_seed_gives_the_same_estimate() {
        let pts = knee_points(5.0, 20.0);
        assert_eq!(estimate(&pts, 0.95, &Fit::default()), estimate(&pts, 0.95, &Fit::default()));
        let other = Fit { seed: 99, ..Fit::default() };
        let (a, b) = (estimate(&pts, 0.95, &Fit::default()).unwrap(), estimate(&pts, 0.95, &other).unwrap());
        assert!((a.p50 - b.p50).abs() < 0.5, "{a:?} {b:?}");
    }
}
