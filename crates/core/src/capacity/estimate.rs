//! SLO capacity from (request rate, attainment) history (docs/capacity.md#slo-capacity):
//! log-spaced rate bins, a Jeffreys posterior per bin, a weighted non-increasing isotonic
//! fit, the highest rate whose fitted attainment meets the objective, and its spread from
//! a seeded bootstrap.
//!
//! Each draw of the bootstrap moves four things the answer depends on: the attainment of
//! each bin (its posterior), how much of the rate a passing interval had not yet held
//! counts as proven (settling: [`Point::held`]), which intervals were seen (a Bayesian
//! block bootstrap: one exponential weight per block of consecutive intervals, since
//! neighbours share requests), and where the bin edges fall (a random phase of the log
//! grid). Posteriors alone are far
//! too sure once bins hold thousands of requests: the rate resolution of the bins, not the
//! count, then limits what is known.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Beta, Distribution, Exp1};

use super::stats::pava_blocks;

/// One interval's load and outcome: its request rate, and the requests it judged
/// (decay-weighted, so fractional) with how many met the SLO.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub rate: f64,
    /// The lowest rate of the settling span that ends with this interval: the rate the
    /// engine had held at least for that long (docs/capacity.md#slo-capacity). On a ramp it
    /// lies below `rate`; at a steady load it is `rate`.
    pub held: f64,
    pub total: f64,
    pub good: f64,
}

impl Point {
    /// A point at a rate held for its whole settling span.
    pub fn new(rate: f64, total: f64, good: f64) -> Point {
        Point { rate, held: rate, total, good }
    }

    /// Where the point's evidence lies in a draw that counts a share `settle` of the
    /// unsettled part of a rate as unproven: a passing interval proves only the rate the
    /// engine held, a failing one fails at its own rate.
    fn rate_in_draw(&self, objective: f64, settle: f64) -> f64 {
        let passes = self.good >= objective * self.total;
        if passes && self.held.is_finite() && self.held > 0.0 && self.held < self.rate {
            self.rate - settle * (self.rate - self.held)
        } else {
            self.rate
        }
    }
}

/// The estimator's knobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// Rate bins per factor of ten: 32 gives bins 7.5 % wide, about the Poisson noise of a
    /// one-minute window's rate near a knee of a few requests/s (240 arrivals: ±6.5 %).
    /// Finer bins would resolve noise, not load; coarser ones misplace a cliff (below).
    pub bins_per_decade: f64,
    /// Posterior draws for the spread.
    pub draws: usize,
    pub seed: u64,
    /// Expected bad requests at the objective that an estimate, and a failing load, rest
    /// on: the history holds at least `min_bad / (1 − objective)` requests before there is
    /// an estimate, and the fit counts as failing only where that many requests lie under
    /// the objective (10 → 200 requests at 0.95).
    pub min_bad: f64,
    /// Consecutive points that share one bootstrap weight: a window of 1m over intervals
    /// 15 s apart counts each request in four of them.
    pub block: usize,
}

impl Default for Fit {
    fn default() -> Fit {
        Fit { bins_per_decade: 32.0, draws: 200, seed: 0x00ca_9ac1, min_bad: 10.0, block: 4 }
    }
}

/// One rate bin with requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bin {
    /// Request-weighted mean rate of the intervals in the bin.
    pub rate: f64,
    /// The bin's edges.
    pub low: f64,
    pub high: f64,
    /// Requests and good ones, weighted (decay, bootstrap).
    pub total: f64,
    pub good: f64,
    /// Requests, unweighted: how much evidence the bin is.
    pub raw: f64,
}

/// The capacity estimate of one SLO from one attainment series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Quantiles 0.1, 0.5 and 0.9 of the highest rate meeting the objective, requests/s.
    pub p10: f64,
    pub p50: f64,
    pub p90: f64,
    /// No failing load is proven (the fit falls under the objective for fewer than the
    /// minimum requests): the quantiles are lower bounds (the highest passing rate seen),
    /// not a ceiling.
    pub censored: bool,
    /// Even the lowest binned rate fails: the quantiles are that bin's lower edge, an upper
    /// bound.
    pub below_data: bool,
    /// Rate bins with requests.
    pub bins: usize,
}

/// The requests an estimate, and a failing load, rest on (see [`Fit::min_bad`]).
fn min_total(objective: f64, fit: &Fit) -> f64 {
    fit.min_bad / (1.0 - objective).max(1e-6)
}

/// Bins `points` by rate (see [`binned`]).
pub fn bins(points: &[Point], objective: f64, fit: &Fit) -> Vec<Bin> {
    let mut scratch = Scratch::default();
    binned(points.iter().map(|p| (p.rate, p, 1.0)), min_total(objective, fit), fit, 0.0, &mut scratch);
    scratch.bins
}

/// The widest a merged bin grows, in decades of rate (×1.78): chosen on seeds 1 and 2 of
/// the ground-truth check among an eighth, a quarter and no limit.
const MAX_MERGED_DECADES: f64 = 0.25;

/// One point's share of its grid bin.
#[derive(Debug, Clone, Copy)]
struct Cell {
    k: i64,
    /// The point's position, so that a bin sums its points in their order.
    at: u32,
    rate: f64,
    total: f64,
    good: f64,
    raw: f64,
}

/// The buffers an estimate's draws reuse: each of 200 draws bins and fits anew, and with
/// fresh vectors and a map each time the allocator took most of an estimate's time
/// (docs/footprint.md).
#[derive(Debug, Default)]
struct Scratch {
    cells: Vec<Cell>,
    bins: Vec<Bin>,
    weights: Vec<f64>,
    attainment: Vec<f64>,
    totals: Vec<f64>,
    blocks: Vec<(f64, f64, usize)>,
}

/// [`bins`] with a weight per point and the grid shifted by `phase` of a bin, into
/// `scratch.bins`.
///
/// Adjacent grid bins are merged, from the lowest rate up, until each holds `min_total`
/// requests (unweighted: how much evidence a bin is does not depend on a draw's weights),
/// so that each attainment rests on about ten expected bad requests; what is left at the
/// top stays a bin of its own, which alone cannot prove failing load ([`crossing`]). Bins
/// are thus as fine as the data allows, down to the grid: dropping every thin grid bin
/// instead lost the rates a ramp passes quickly, the knee among them. Only a bin still
/// thin across [`MAX_MERGED_DECADES`] is left out.
fn binned<'a>(
    points: impl Iterator<Item = (f64, &'a Point, f64)>,
    min_total: f64,
    fit: &Fit,
    phase: f64,
    scratch: &mut Scratch,
) {
    let (cells, out) = (&mut scratch.cells, &mut scratch.bins);
    cells.clear();
    out.clear();
    for (at, (rate, p, w)) in points.filter(|(r, p, _)| *r > 0.0 && r.is_finite() && p.total > 0.0).enumerate() {
        cells.push(Cell {
            k: (rate.log10() * fit.bins_per_decade + phase).floor() as i64,
            at: at as u32,
            rate: rate * p.total * w,
            total: p.total * w,
            good: p.good.clamp(0.0, p.total) * w,
            raw: p.total,
        });
    }
    cells.sort_unstable_by_key(|c| (c.k, c.at));
    let edge = |k: i64| 10f64.powf((k as f64 - phase) / fit.bins_per_decade);
    let mut open: Option<(i64, Bin)> = None;
    let max_merge = (fit.bins_per_decade * MAX_MERGED_DECADES).round() as i64;
    for group in cells.chunk_by(|a, b| a.k == b.k) {
        let k = group[0].k;
        let mut b = Bin { rate: 0.0, low: edge(k), high: edge(k + 1), total: 0.0, good: 0.0, raw: 0.0 };
        for c in group {
            b.rate += c.rate;
            b.total += c.total;
            b.good += c.good;
            b.raw += c.raw;
        }
        // A bin still thin across a quarter decade is left out rather than merged on: it
        // would mix loads the fit must tell apart. At the bottom of a ramp's data (its
        // first minutes, thin) it reached up to the knee, took in the failing intervals
        // of later cycles there, and failed from the lowest rate (docs/accuracy.md#capacity).
        if open.as_ref().is_some_and(|(k0, _)| k - k0 >= max_merge) {
            open = None;
        }
        let (k0, m) = match open.take() {
            None => (k, b),
            Some((k0, o)) => (
                k0,
                Bin {
                    rate: o.rate + b.rate,
                    low: o.low,
                    high: b.high,
                    total: o.total + b.total,
                    good: o.good + b.good,
                    raw: o.raw + b.raw,
                },
            ),
        };
        if m.raw >= min_total { out.push(m) } else { open = Some((k0, m)) }
    }
    out.extend(open.map(|(_, b)| b));
    out.retain(|b| b.total > 0.0);
    for b in out.iter_mut() {
        b.rate /= b.total;
    }
}

/// The highest rate whose fitted attainment meets `objective`, from per-bin attainments
/// `a` (one per bin, rates ascending): the edge between the last passing and the first
/// failing bin. The second value says no failing load is proven (censored: the fit never
/// fails, or fails for fewer than `min_total` requests), the third that it fails from the
/// first bin.
///
/// Attainment against rate is a cliff more than a slope: past the knee queues build and
/// attainment collapses. A bin that straddles the knee mixes requests that met the SLO
/// below it with requests that failed above it; its mean says how much of the bin lies
/// past the knee, not the attainment at its mean rate. With bins 33 % wide the crossing
/// then lay near the previous bin's mean, about 19 % under the knee whatever the data
/// (docs/accuracy.md#capacity); bins a few percent wide, pooled by the fit, keep that
/// error to a fraction of a bin.
fn crossing(
    bins: &[Bin],
    a: &[f64],
    objective: f64,
    min_total: f64,
    totals: &mut Vec<f64>,
    blocks: &mut Vec<(f64, f64, usize)>,
) -> (f64, bool, bool) {
    totals.clear();
    totals.extend(bins.iter().map(|b| b.total));
    pava_blocks(a, totals, blocks);
    // The first bin whose fitted attainment is under the objective.
    let first_failing = blocks
        .iter()
        .scan(0, |start, &(m, _, n)| {
            let at = *start;
            *start += n;
            Some((at, m))
        })
        .find_map(|(at, m)| (m < objective).then_some(at));
    let Some(i) = first_failing else {
        return (bins.last().map_or(0.0, |b| b.rate), true, false);
    };
    // A few failing requests at the top of the data (a thin bin, a ramp just reaching its
    // knee) do not prove failing load; the highest passing rate stays a lower bound.
    if i > 0 && bins[i..].iter().map(|b| b.raw).sum::<f64>() < min_total {
        return (bins[i - 1].rate, true, false);
    }
    if i == 0 {
        return (bins[0].low, false, true);
    }
    // The fit is a step function, one value per bin: it meets the objective up to the
    // edge between the last passing and the first failing bin (where rates between them
    // were never seen, the middle of that gap on the log grid).
    ((bins[i - 1].high * bins[i].low).sqrt(), false, false)
}

/// The estimate from `points`, or `None` while they hold fewer than the minimum requests.
pub fn estimate(points: &[Point], objective: f64, fit: &Fit) -> Option<Estimate> {
    let min_total = min_total(objective, fit);
    let mut scratch = Scratch::default();
    binned(points.iter().map(|p| (p.rate, p, 1.0)), min_total, fit, 0.0, &mut scratch);
    let bins = std::mem::take(&mut scratch.bins);
    if bins.iter().map(|b| b.raw).sum::<f64>() < min_total {
        return None;
    }
    // The point fit decides censoring: the posterior means of each bin.
    let means: Vec<f64> = bins.iter().map(|b| (b.good + 0.5) / (b.total + 1.0)).collect();
    let (_, censored, below_data) =
        crossing(&bins, &means, objective, min_total, &mut scratch.totals, &mut scratch.blocks);
    let mut rng = ChaCha8Rng::seed_from_u64(fit.seed);
    let block = fit.block.max(1);
    let mut draws: Vec<f64> = Vec::with_capacity(fit.draws.max(1));
    for _ in 0..fit.draws.max(1) {
        let s = &mut scratch;
        s.weights.clear();
        s.weights.extend((0..points.len().div_ceil(block)).map(|_| rng.sample::<f64, _>(Exp1)));
        let phase: f64 = rng.random_range(0.0..1.0);
        // How much of a passing interval's rate above the rate it had held counts as
        // unproven is not known: each draw takes a share, so the spread spans from
        // the ramp's own knee (none) to the held rates' (all).
        let settle: f64 = rng.random_range(0.0..1.0);
        let weights = std::mem::take(&mut s.weights);
        let weighted =
            points.iter().enumerate().map(|(i, p)| (p.rate_in_draw(objective, settle), p, weights[i / block]));
        binned(weighted, min_total, fit, phase, s);
        s.weights = weights;
        if s.bins.is_empty() {
            continue;
        }
        s.attainment.clear();
        s.attainment.extend(s.bins.iter().map(|b| {
            Beta::new(b.good + 0.5, (b.total - b.good).max(0.0) + 0.5)
                .expect("positive Jeffreys parameters")
                .sample(&mut rng)
        }));
        draws.push(crossing(&s.bins, &s.attainment, objective, min_total, &mut s.totals, &mut s.blocks).0);
    }
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
                out.push(Point::new(rate, per_interval * rate, a * per_interval * rate));
            }
            rate *= 1.05;
        }
        out
    }

    /// A slow ramp from 0.5 to 8 requests/s, one interval per 0.09 requests/s, past a
    /// cliff at `knee`: 98.5 % met below it, 40 % above, with binomial-sized noise.
    fn cliff_points(knee: f64) -> Vec<Point> {
        let mut rng = ChaCha8Rng::seed_from_u64(knee.to_bits());
        let mut pts = Vec::new();
        let mut rate: f64 = 0.5;
        while rate < 8.0 {
            let a: f64 = if rate <= knee { 0.985 } else { 0.4 };
            let n = 15.0 * rate;
            let noise = rng.random_range(-1.0..1.0) * (n * a * (1.0 - a)).sqrt();
            pts.push(Point::new(rate, n, (a * n + noise).clamp(0.0, n)));
            rate += 7.5 / 80.0;
        }
        pts
    }

    #[test]
    fn a_cliff_is_found_within_a_bin_not_a_bin_below() {
        // With the crossing interpolated between the means of bins 33 % wide, the p50 lay
        // 18–20 % under every one of these knees and the p90 under all of them.
        for knee in [3.0, 3.3, 3.6, 3.89, 4.1, 4.5, 5.0] {
            let e = estimate(&cliff_points(knee), 0.95, &Fit::default()).expect("enough data");
            // Now within one merged bin (about 10 % wide here), 2–11 % under.
            assert!(!e.censored && (0.88 * knee..1.03 * knee).contains(&e.p50), "knee {knee}: {e:?}");
            assert!(e.p90 >= 0.93 * knee, "knee {knee}: {e:?}");
        }
    }

    #[test]
    fn passing_while_the_rate_rose_proves_only_the_rate_held() {
        // A ramp that meets the objective up to 4.4 requests/s while rising, and had held
        // each rate only 0.8 requests/s lower: its own knee is 4.4; what it proved
        // sustainable lies between 3.6 and 4.4, and the interval must reach below the knee.
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut pts = Vec::new();
        for _ in 0..4 {
            let mut rate: f64 = 0.5;
            while rate < 8.0 {
                let a: f64 = if rate <= 4.4 { 0.99 } else { 0.3 };
                let n = 15.0 * rate;
                let good = (a * n + rng.random_range(-1.0..1.0)).clamp(0.0, n);
                pts.push(Point { rate, held: (rate - 0.8).max(0.5), total: n, good });
                rate += 0.1;
            }
        }
        let settled: Vec<Point> = pts.iter().map(|p| Point::new(p.rate, p.total, p.good)).collect();
        let (ramp, steady) = (
            estimate(&pts, 0.95, &Fit::default()).expect("enough data"),
            estimate(&settled, 0.95, &Fit::default()).expect("enough data"),
        );
        assert!(!ramp.censored && (4.0..4.6).contains(&steady.p50), "{steady:?}");
        // Held at most 0.8 lower, with no rate seen between 3.6 and 4.4 failing: the
        // interval reaches down toward the gap's middle (4.0) and still up to the knee.
        assert!(ramp.p10 < 4.15 && ramp.p10 < steady.p10 - 0.05, "{ramp:?} against {steady:?}");
        assert!(ramp.p50 < steady.p50 && ramp.p90 > 4.3, "{ramp:?} against {steady:?}");
        // A failing interval fails at its own rate: nothing moves the failing load down.
        let failing: Vec<Point> = pts.iter().map(|p| Point { held: 0.5, ..*p }).collect();
        let e = estimate(&failing, 0.95, &Fit::default()).expect("enough data");
        assert!(!e.censored && !e.below_data && e.p90 <= 4.6, "{e:?}");
    }

    #[test]
    fn thin_data_at_the_bottom_does_not_merge_up_to_the_failing_load() {
        // The first minute of a fast ramp from idle (few requests, all met), then cycles
        // that restart at 4.2 requests/s on a backlog and fail. Merged from the bottom up
        // without a limit, the thin minute reached 4.5 and took in the failing intervals:
        // capacity "below 0.1 requests/s".
        let mut pts: Vec<Point> =
            [(0.11, 3.0), (0.5, 6.5), (1.0, 13.0), (1.4, 18.0), (2.1, 28.0), (2.6, 33.0), (3.1, 38.0), (4.1, 47.0)]
                .iter()
                .map(|&(rate, n)| Point::new(rate, n, n))
                .collect();
        for _ in 0..3 {
            pts.extend([(4.3, 60.0), (4.9, 58.0), (5.7, 60.0)].iter().map(|&(rate, n)| Point::new(rate, n, 0.4 * n)));
        }
        let e = estimate(&pts, 0.95, &Fit::default()).expect("enough data");
        // Left out, the thin minute says nothing; what is left fails from about 3.9.
        assert!(e.p10 > 3.0, "{e:?}");
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
        let pts: Vec<Point> = (1..40).map(|i| Point::new(i as f64 * 0.1, 500.0, 499.0)).collect();
        let e = estimate(&pts, 0.95, &Fit::default()).expect("enough data");
        assert!(e.censored, "{e:?}");
        // The bound is the highest passing bin's rate, not an invented ceiling above the data.
        assert!(e.p90 <= 3.9 + 1e-9 && e.p10 > 3.0, "{e:?}");
    }

    #[test]
    fn failing_from_the_lowest_rate_is_an_upper_bound() {
        let pts: Vec<Point> = (1..20).map(|i| Point::new(i as f64, 500.0, 300.0)).collect();
        let e = estimate(&pts, 0.95, &Fit::default()).expect("enough data");
        assert!(e.below_data && !e.censored && e.p90 <= 1.0, "{e:?}");
    }

    #[test]
    fn too_little_data_gives_nothing_and_thin_bins_are_left_out() {
        let thin = [Point::new(2.0, 50.0, 50.0)];
        assert_eq!(estimate(&thin, 0.95, &Fit::default()), None);
        // 200 requests at 0.95 are the minimum (10 expected bad ones), in the history as a
        // whole, not per bin.
        let thin = |n: f64| [Point::new(2.0, n / 2.0, n / 2.0), Point::new(3.0, n / 2.0, n / 2.0)];
        assert_eq!(estimate(&thin(199.0), 0.95, &Fit::default()), None);
        assert!(estimate(&thin(200.0), 0.95, &Fit::default()).is_some_and(|e| e.censored && e.bins == 1));
    }

    #[test]
    fn a_few_failing_requests_at_the_top_do_not_prove_failing_load() {
        let mut pts: Vec<Point> = (1..40).map(|i| Point::new(i as f64 * 0.1, 500.0, 499.0)).collect();
        pts.push(Point::new(4.5, 150.0, 100.0));
        let e = estimate(&pts, 0.95, &Fit::default()).expect("enough data");
        assert!(e.censored && e.p90 <= 3.9 + 1e-9, "150 failing requests are not 200: {e:?}");
        pts.push(Point::new(4.6, 60.0, 40.0));
        let e = estimate(&pts, 0.95, &Fit::default()).expect("enough data");
        assert!(!e.censored && (3.9..4.6).contains(&e.p50), "{e:?}");
    }

    #[test]
    fn a_noisy_rise_after_the_knee_does_not_move_it_up() {
        // A lucky high-rate bin that passes again must not push capacity past the failing one.
        let mut pts = knee_points(5.0, 60.0);
        pts.push(Point::new(14.0, 2000.0, 1990.0));
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
