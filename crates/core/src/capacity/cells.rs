//! The capacity estimate's sufficient statistics (docs/capacity.md#slo-capacity): what an
//! estimate needs of a history, per fine rate cell, so that binning them at each of the
//! bootstrap's grid phases costs the cells, not the intervals times the draws.
//!
//! A cell is `1 / (bins_per_decade × phases)` of a decade of rate: each of the bootstrap's
//! grid phases ([`super::estimate::Fit::phases`]) puts a cell wholly in one bin, so binning
//! cells at a phase is the same as binning the points they hold. A passing interval that had
//! not held its rate is in the cell of each settling level ([`Fit::settle_levels`]) where it
//! lies at that level; the others are in one cell at their own rate. Within a cell the sums
//! are kept per bootstrap class: the intervals' blocks of [`Fit::block`], dealt round
//! [`Fit::classes`] classes, each of which a draw weighs as one (`super::estimate`).
//!
//! The tables are made for one estimate (`super::history::History::tables`) from the
//! history's recent intervals and the sums of its older ones (`super::past`), then dropped:
//! a history keeps no table between estimates.

use super::fit::Fit;

/// The sums of one cell over the points in it. Totals and good counts are weighted by the
/// decay relative to a reference instant ([`Decay`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stats {
    pub total: f64,
    pub good: f64,
    /// Σ rate × total, for the bin's request-weighted mean rate.
    pub rate_total: f64,
}

impl Stats {
    /// One point at `rate` with `total` requests of which `good` met the SLO.
    pub fn point(rate: f64, total: f64, good: f64) -> Stats {
        Stats { total, good, rate_total: rate * total }
    }

    pub fn add(&mut self, o: &Stats) {
        self.total += o.total;
        self.good += o.good;
        self.rate_total += o.rate_total;
    }
}

/// A cell and a bootstrap class in one ordered key: by cell, then class.
pub type Key = i64;

pub fn key(cell: i32, class: usize) -> Key {
    ((cell as i64) << 8) | (class & 0xff) as i64
}

pub fn cell(key: Key) -> i32 {
    (key >> 8) as i32
}

pub fn class(key: Key) -> usize {
    (key & 0xff) as usize
}

/// Cells with points, by key: pushed in any order, then [`Cells::settle`]d.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cells {
    cells: Vec<(Key, Stats)>,
}

impl Cells {
    /// Adds `s` to `key`; the cells are out of order until [`Cells::settle`].
    pub fn push(&mut self, key: Key, s: Stats) {
        self.cells.push((key, s));
    }

    /// Orders the cells by key and sums those of one key.
    pub fn settle(&mut self) {
        self.cells.sort_unstable_by_key(|c| c.0);
        self.cells.dedup_by(|next, kept| {
            let same = next.0 == kept.0;
            if same {
                kept.1.add(&next.1);
            }
            same
        });
    }

    /// The cells, ascending once settled.
    pub fn iter(&self) -> impl Iterator<Item = &(Key, Stats)> {
        self.cells.iter()
    }

    pub fn len(&self) -> usize {
        self.cells.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }
}

/// One attainment series' cells: points at their own rate, the passing points that had
/// not held their rate at each settling level (level 0 nearest their own rate, the last
/// nearest the rate held), and the older intervals' passing points at the coarser levels
/// their sums keep ([`super::past::PAST_LEVELS`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tables {
    pub still: Cells,
    pub moving: Vec<Cells>,
    pub past: Vec<Cells>,
}

/// Where one point's evidence lies: a table (0 for `still`, 1 + level for `moving`), a
/// cell and its sums.
pub type Share = (usize, Key, Stats);

impl Tables {
    pub fn new(fit: &Fit) -> Tables {
        Tables { still: Cells::default(), moving: vec![Cells::default(); fit.settle_levels.max(1)], past: Vec::new() }
    }

    /// Adds one point's shares.
    pub fn apply(&mut self, shares: &[Share]) {
        for &(table, key, s) in shares {
            match table {
                0 => self.still.push(key, s),
                l => self.moving[l - 1].push(key, s),
            }
        }
    }

    /// Settles every table ([`Cells::settle`]).
    pub fn settle(&mut self) {
        self.still.settle();
        self.moving.iter_mut().chain(&mut self.past).for_each(Cells::settle);
    }

    /// Cells held, over every table.
    pub fn cells(&self) -> usize {
        self.still.len() + self.moving.iter().chain(&self.past).map(Cells::len).sum::<usize>()
    }
}

/// The fine cell of `rate`; `None` for a rate that cannot be binned.
pub fn cell_of(rate: f64, fit: &Fit) -> Option<i32> {
    (rate > 0.0 && rate.is_finite()).then(|| (rate.log10() * fit.bins_per_decade * fit.phases() as f64).floor() as i32)
}

/// The settling share of level `l`: the middle of the `l`-th of [`Fit::settle_levels`]
/// equal parts of 0 (the point's own rate) to 1 (the rate it held). Each level stands for
/// its part of a uniform share, so a draw's share is as likely in each; levels at the ends
/// (0 and 1) instead put a tenth of the draws at each extreme, and the p10 and p90 at the
/// ramp's own knee and at the rate held.
pub fn settle_share(l: usize, fit: &Fit) -> f64 {
    (l as f64 + 0.5) / fit.settle_levels.max(1) as f64
}

/// The bootstrap class of the point at position `seq` of its history.
pub fn class_of(seq: u64, fit: &Fit) -> usize {
    ((seq / fit.block.max(1) as u64) % fit.classes() as u64) as usize
}

/// One point's shares: where it lies in each table. A point that met the objective at a
/// rate it had not held (`held` below `rate`) proves only part of that rate
/// (docs/capacity.md#slo-capacity): at settling level `l` it lies at `rate − share(l) ×
/// (rate − held)`. Any other point lies at its own rate. Nothing for a point without
/// requests or a rate.
#[allow(clippy::too_many_arguments)]
pub fn shares(
    rate: f64,
    held: f64,
    total: f64,
    good: f64,
    class: usize,
    objective: f64,
    fit: &Fit,
    out: &mut Vec<Share>,
) {
    out.clear();
    if total.is_nan() || total <= 0.0 || cell_of(rate, fit).is_none() {
        return;
    }
    let good = good.clamp(0.0, total);
    let passes = good >= objective * total;
    if passes && held.is_finite() && held > 0.0 && held < rate {
        for l in 0..fit.settle_levels.max(1) {
            let at = rate - settle_share(l, fit) * (rate - held);
            if let Some(c) = cell_of(at, fit) {
                out.push((1 + l, key(c, class), Stats::point(at, total, good)));
            }
        }
    } else if let Some(c) = cell_of(rate, fit) {
        out.push((0, key(c, class), Stats::point(rate, total, good)));
    }
}

/// The decay of older intervals (half per [`super::interval::HALF_LIFE`]) as one factor
/// common to every sum: a point at `t_ms` is counted with weight `2^((t_ms − ref) / half
/// life)`, and a read at `now` multiplies every count by `2^((ref − now) / half life)`.
/// The reference moves forward ([`Decay::due`]) before the weights grow past 2^24.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Decay {
    pub ref_ms: i64,
    half_life_ms: f64,
}

/// How far the newest point may lie past the reference before it moves: weights up to
/// 2^24, the `f32` sums of older intervals (`super::past`) kept far inside their range.
const REBASE_AFTER_HALF_LIVES: f64 = 24.0;

impl Decay {
    pub fn new(ref_ms: i64, half_life_ms: f64) -> Decay {
        Decay { ref_ms, half_life_ms }
    }

    /// The weight of a point at `t_ms`.
    pub fn weight(&self, t_ms: i64) -> f64 {
        ((t_ms - self.ref_ms) as f64 / self.half_life_ms).exp2()
    }

    /// The factor that turns the sums into counts decayed to `now_ms`.
    pub fn scale(&self, now_ms: i64) -> f64 {
        ((self.ref_ms - now_ms) as f64 / self.half_life_ms).exp2()
    }

    /// Whether a point at `t_ms` lies far enough past the reference that it must move.
    pub fn due(&self, t_ms: i64) -> bool {
        (t_ms - self.ref_ms) as f64 > REBASE_AFTER_HALF_LIVES * self.half_life_ms
    }
}
