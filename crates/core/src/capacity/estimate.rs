//! SLO capacity from (request rate, attainment) history (docs/capacity.md#slo-capacity):
//! log-spaced rate bins, a Jeffreys posterior per bin, a weighted non-increasing isotonic
//! fit, the highest rate whose fitted attainment meets the objective, and its spread from
//! a seeded bootstrap.
//!
//! Each draw of the bootstrap moves four things the answer depends on: the attainment of
//! each bin (its posterior), how much of the rate a passing interval had not yet held
//! counts as proven (settling: [`Point::held`]), which intervals were seen (a Bayesian
//! block bootstrap), and where the bin edges fall (a random phase of the log grid).
//! Posteriors alone are far too sure once bins hold thousands of requests: the rate
//! resolution of the bins, not the count, then limits what is known.
//!
//! The estimate reads sums per fine rate cell ([`Tables`], `super::cells`), made from the
//! history's recent intervals and the sums of its older ones (`super::past`): its cost is
//! the cells times the grid phases and settling levels, plus the bins times the draws,
//! however long the history. The phases and settling levels are a few fixed steps (8 and
//! 32), so a cell is never split by a bin edge. The block
//! bootstrap weighs classes of blocks rather than blocks: blocks are dealt round
//! [`Fit::classes`] classes in turn, and a draw gives each class one exponential weight, in
//! every bin alike. Where a bin holds no more blocks than there are classes (thin data, the
//! knee of a ramp) each block is a class of its own and the draw is the block bootstrap's;
//! where it holds many, each class sums several, and the variance of the weighted attainment
//! is the block bootstrap's in expectation.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Beta, Distribution, Exp1};

use super::cells::{Share, Tables, class_of, shares};
pub use super::fit::{Fit, MAX_CLASSES};
use super::past::past_level;
use super::prefix::{Prefix, Row};
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
}

/// One rate bin with requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bin {
    /// The bin's edges.
    pub low: f64,
    pub high: f64,
    /// Requests and good ones, weighted by decay, in all and per bootstrap class.
    pub sums: Row,
}

impl Bin {
    /// Request-weighted mean rate of the intervals in the bin.
    pub fn rate(&self) -> f64 {
        self.sums.rate / self.sums.total
    }

    pub fn total(&self) -> f64 {
        self.sums.total
    }

    pub fn good(&self) -> f64 {
        self.sums.good
    }
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
pub fn min_total(objective: f64, fit: &Fit) -> f64 {
    fit.min_bad / (1.0 - objective).max(1e-6)
}

/// The tables of `points` (see `super::cells`).
pub fn tables(points: &[Point], objective: f64, fit: &Fit) -> Tables {
    let mut t = Tables::new(fit);
    let mut out: Vec<Share> = Vec::new();
    for (i, p) in points.iter().enumerate() {
        shares(p.rate, p.held, p.total, p.good, class_of(i as u64, fit), objective, fit, &mut out);
        t.apply(&out);
    }
    t.settle();
    t
}

/// Bins `points` by rate at their own rates (see [`binned`]).
pub fn bins(points: &[Point], objective: f64, fit: &Fit) -> Vec<Bin> {
    let p = Prefixes::new(&tables(points, objective, fit), 1.0, fit);
    let mut out = Vec::new();
    binned(&p.sources(0, fit), &p.edges, 0, min_total(objective, fit), fit, &mut out);
    out
}

/// The running sums of a history's tables, every count multiplied by `scale`.
struct Prefixes {
    /// At the intervals' own rates.
    still: Prefix,
    /// At each settling level (at least one, empty when the tables have none).
    moving: Vec<Prefix>,
    /// The older intervals' sums at their coarser settling levels (`super::past`).
    past: Vec<Prefix>,
    edges: Edges,
}

impl Prefixes {
    fn new(tables: &Tables, scale: f64, fit: &Fit) -> Prefixes {
        let build = |c: &super::cells::Cells| {
            let mut p = Prefix::default();
            p.build(c, scale);
            p
        };
        let still = build(&tables.still);
        let mut moving: Vec<Prefix> = tables.moving.iter().map(build).collect();
        if moving.is_empty() {
            moving.push(Prefix::default());
        }
        let past: Vec<Prefix> = tables.past.iter().map(build).collect();
        let cells = || std::iter::once(&still).chain(&moving).chain(&past).flat_map(|p| &p.cells);
        let edges = Edges::new(cells().min().copied(), cells().max().copied(), fit);
        Prefixes { still, moving, past, edges }
    }

    /// What a draw at settling level `level` bins.
    fn sources(&self, level: usize, fit: &Fit) -> Vec<&Prefix> {
        let mut out = vec![&self.still, &self.moving[level.min(self.moving.len() - 1)]];
        out.extend(self.past.get(past_level(level, fit)));
        out
    }
}

/// The edges of the grid's bins at every phase over the cells an estimate reads, computed
/// once per estimate rather than in each of its draws' binnings (a `powf` per bin edge
/// was a tenth of an estimate's time).
struct Edges {
    /// The lowest bin index held.
    first: i64,
    /// Per phase, the edge of bins `first..` (low edges, and the high edge of the last).
    per_phase: Vec<Vec<f64>>,
}

impl Edges {
    fn new(min_cell: Option<i32>, max_cell: Option<i32>, fit: &Fit) -> Edges {
        let p = fit.phases() as i64;
        let (Some(lo), Some(hi)) = (min_cell, max_cell) else { return Edges { first: 0, per_phase: Vec::new() } };
        // Bin `k` at phase `f` holds cells `[k p − f, (k + 1) p − f)`.
        let first = (lo as i64).div_euclid(p);
        let last = (hi as i64 + p - 1).div_euclid(p) + 1;
        let per_phase = (0..p)
            .map(|f| {
                (first..=last).map(|k| 10f64.powf((k as f64 - f as f64 / p as f64) / fit.bins_per_decade)).collect()
            })
            .collect();
        Edges { first, per_phase }
    }

    /// The low edge of bin `k` at `phase`.
    fn get(&self, phase: usize, k: i64) -> f64 {
        self.per_phase[phase][(k - self.first) as usize]
    }
}

/// The widest a merged bin grows, in decades of rate (×1.78): chosen on seeds 1 and 2 of
/// the ground-truth check among an eighth, a quarter and no limit.
const MAX_MERGED_DECADES: f64 = 0.25;

/// The bins of a table's running sums `sources` (at the intervals' own rates, at one
/// settling level, and the older intervals' at theirs), the grid at `phase` (in cells), into
/// `out`.
///
/// Adjacent grid bins are merged, from the lowest rate up, until each holds `min_total`
/// requests (decayed, not bootstrap-weighted: how much evidence a bin is does not depend
/// on a draw), so that each attainment rests on about ten expected bad requests; what is
/// left at the top stays a bin of its own, which alone cannot prove failing load
/// ([`crossing`]). Bins are thus as fine as the data allows, down to the grid: dropping
/// every thin grid bin instead lost the rates a ramp passes quickly, the knee among them.
/// Only a bin still thin across [`MAX_MERGED_DECADES`] is left out.
fn binned(sources: &[&Prefix], edges: &Edges, phase: usize, min_total: f64, fit: &Fit, out: &mut Vec<Bin>) {
    out.clear();
    let p = fit.phases() as i64;
    let edged = |b: &mut Bin, k0: i64, k: i64| {
        b.low = edges.get(phase, k0);
        b.high = edges.get(phase, k + 1);
    };
    let phase = phase as i64;
    let max_merge = (fit.bins_per_decade * MAX_MERGED_DECADES).round() as i64;
    // The first and last grid bin of the bin being merged, which is `out`'s last: merged
    // in place, as a copy of its sums per grid bin was a tenth of an estimate's time.
    let mut open: Option<(i64, i64)> = None;
    let mut at = [0usize; 4];
    let at = &mut at[..sources.len()];
    // Each grid bin that holds a cell, ascending: the lowest cell not yet binned names it.
    // Every cell below it is binned already, so each source's cells in the grid bin start
    // at its cursor.
    while let Some(&next) = sources.iter().zip(at.iter()).filter_map(|(s, &i)| s.cells.get(i)).min() {
        let next = next as i64;
        let k = (next + phase).div_euclid(p);
        let hi = (k + 1) * p - phase;
        let mut sums = Row::default();
        for (s, i) in sources.iter().zip(at.iter_mut()) {
            *i = s.add_from(*i, hi, &mut sums);
        }
        // A bin still thin across a quarter decade is left out rather than merged on: it
        // would mix loads the fit must tell apart. At the bottom of a ramp's data (its
        // first minutes, thin) it reached up to the knee, took in the failing intervals
        // of later cycles there, and failed from the lowest rate (docs/accuracy.md#capacity).
        if open.is_some_and(|(k0, _)| k - k0 >= max_merge) {
            out.pop();
            open = None;
        }
        let k0 = match open {
            None => {
                out.push(Bin { low: f64::NAN, high: f64::NAN, sums });
                k
            }
            Some((k0, _)) => {
                out.last_mut().expect("an open bin is the last").sums.add(&sums);
                k0
            }
        };
        let last = out.last_mut().expect("an open bin is the last");
        if last.sums.total >= min_total {
            edged(last, k0, k);
            open = None;
        } else {
            open = Some((k0, k));
        }
    }
    if let (Some((k0, k)), Some(last)) = (open, out.last_mut()) {
        edged(last, k0, k);
    }
    out.retain(|b| b.sums.total > 0.0);
}

/// The highest rate whose fitted attainment meets `objective`, from per-bin attainments
/// `a` and weights `w` (one per bin, rates ascending): the edge between the last passing
/// and the first failing bin. The second value says no failing load is proven (censored:
/// the fit never fails, or fails for fewer than `min_total` requests), the third that it
/// fails from the first bin.
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
    w: &[f64],
    objective: f64,
    min_total: f64,
    blocks: &mut Vec<(f64, f64, usize)>,
) -> (f64, bool, bool) {
    pava_blocks(a, w, blocks);
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
        return (bins.last().map_or(0.0, Bin::rate), true, false);
    };
    // A few failing requests at the top of the data (a thin bin, a ramp just reaching its
    // knee) do not prove failing load; the highest passing rate stays a lower bound.
    if i > 0 && bins[i..].iter().map(Bin::total).sum::<f64>() < min_total {
        return (bins[i - 1].rate(), true, false);
    }
    if i == 0 {
        return (bins[0].low, false, true);
    }
    // The fit is a step function, one value per bin: it meets the objective up to the
    // edge between the last passing and the first failing bin (where rates between them
    // were never seen, the middle of that gap on the log grid).
    ((bins[i - 1].high * bins[i].low).sqrt(), false, false)
}

/// A draw of one bin's attainment and weight: the Jeffreys posterior of its counts with
/// each bootstrap class weighted by `weights`.
fn draw_bin(b: &Bin, weights: &[f64], rng: &mut ChaCha8Rng) -> (f64, f64) {
    let (mut total, mut good) = (0.0, 0.0);
    for (c, w) in weights.iter().enumerate() {
        total += w * b.sums.class_total[c];
        good += w * b.sums.class_good[c];
    }
    let good = good.clamp(0.0, total);
    let a = Beta::new(good + 0.5, (total - good).max(0.0) + 0.5).map_or(0.5, |d| d.sample(rng));
    (a, total)
}

/// The estimate from `points`, or `None` while they hold fewer than the minimum requests.
pub fn estimate(points: &[Point], objective: f64, fit: &Fit) -> Option<Estimate> {
    estimate_tables(&tables(points, objective, fit), 1.0, objective, fit)
}

/// The estimate from a history's [`Tables`], every count multiplied by `scale` (the decay
/// to the estimate's instant), or `None` while they hold fewer than the minimum requests.
pub fn estimate_tables(tables: &Tables, scale: f64, objective: f64, fit: &Fit) -> Option<Estimate> {
    let min_total = min_total(objective, fit);
    let prefixes = Prefixes::new(tables, scale, fit);
    let mut bins = Vec::new();
    binned(&prefixes.sources(0, fit), &prefixes.edges, 0, min_total, fit, &mut bins);
    if bins.iter().map(Bin::total).sum::<f64>() < min_total {
        return None;
    }
    // The point fit decides censoring: the posterior means of each bin.
    let means: Vec<f64> = bins.iter().map(|b| (b.good() + 0.5) / (b.total() + 1.0)).collect();
    let totals: Vec<f64> = bins.iter().map(Bin::total).collect();
    let mut blocks = Vec::new();
    let (_, censored, below_data) = crossing(&bins, &means, &totals, objective, min_total, &mut blocks);
    // Each draw's phase and settling level first, so that each pair is binned once.
    let mut rng = ChaCha8Rng::seed_from_u64(fit.seed);
    let (phases, levels) = (fit.phases(), fit.settle_levels.max(1));
    let mut pairs: Vec<(usize, usize)> = (0..fit.draws.max(1))
        .map(|_| {
            let phase = rng.random_range(0..phases);
            // How much of a passing interval's rate above the rate it had held counts as
            // unproven is not known: each draw takes a share, so the spread spans from
            // the ramp's own knee (none) to the held rates' (all).
            let settle: f64 = rng.random_range(0.0..1.0);
            (phase, ((settle * levels as f64) as usize).min(levels - 1))
        })
        .collect();
    pairs.sort_unstable();
    let (mut a, mut w) = (Vec::new(), Vec::new());
    let mut weights = vec![0.0; fit.classes()];
    let mut draws: Vec<f64> = Vec::with_capacity(pairs.len());
    for group in pairs.chunk_by(|x, y| x == y) {
        let (phase, level) = group[0];
        binned(&prefixes.sources(level, fit), &prefixes.edges, phase, min_total, fit, &mut bins);
        if bins.is_empty() {
            continue;
        }
        for _ in group {
            a.clear();
            w.clear();
            weights.iter_mut().for_each(|w| *w = rng.sample::<f64, _>(Exp1));
            for b in &bins {
                let (x, weight) = draw_bin(b, &weights, &mut rng);
                a.push(x);
                w.push(weight);
            }
            draws.push(crossing(&bins, &a, &w, objective, min_total, &mut blocks).0);
        }
    }
    if draws.is_empty() {
        return None;
    }
    draws.sort_by(f64::total_cmp);
    let q = |p: f64| draws[((draws.len() - 1) as f64 * p).round() as usize];
    Some(Estimate { p10: q(0.1), p50: q(0.5), p90: q(0.9), censored, below_data, bins: means.len() })
}

#[cfg(test)]
#[path = "estimate_tests.rs"]
mod tests;
