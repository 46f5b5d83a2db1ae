//! One window's sums over the raw records it covers, kept as records enter and leave it, so
//! that a tick reads a window in work that does not grow with the records it holds
//! (docs/architecture.md#exact-attainment-from-requests).
//!
//! The sums are those a window evaluated from records reports: the [`Tally`] (counts and
//! per-SLO counts, exact), the arrival cells of each SLO, and the TTFT, TPOT and E2E values
//! as [`Ranked`] sets whose nearest-rank quantiles are cursors. A record counts while its
//! finish time is in `(lo, hi]`; a tick moves both edges forward, taking out the records the
//! lower edge passed and adding those the upper edge reached, each found by a binary search
//! of the records (sorted by finish time). A record that joins or leaves the raw records
//! inside the edges (a late record, one the cap pushes out) enters or leaves the sums at
//! once.

use std::collections::{BTreeMap, VecDeque};

use super::compact::Compact;
use super::judge::{Judgement, Verdict, judge};
use super::ranked::Ranked;
use super::tally::Tally;
use crate::report::request::{ARRIVAL_SLOT_MS, ArrivalCell, FINISH_SLOT_MS};
use crate::slo::Slo;

/// The work of the store's ticks, counted rather than timed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Records that entered or left the raw records or a window's sums.
    pub records: u64,
    /// Map steps: the quantile cursors' moves and the binary searches for the edges.
    pub steps: u64,
    /// Time slots added to or taken out of the windows' slot sums: at most each window's
    /// slot count per evaluation, the slots that entered or left it once its sum is kept.
    pub slots: u64,
    /// Latency sketches added or taken out with those slots: only those a window reports
    /// from its slots.
    pub sketches: u64,
    /// Arrival cells copied into the report: only the capacity book's window's.
    pub cells: u64,
}

#[derive(Debug, Clone)]
pub struct Running {
    /// The window's edges in Unix seconds: records with `lo < finished ≤ hi` are counted.
    pub lo: f64,
    pub hi: f64,
    pub tally: Tally,
    /// Per SLO of the series: the cells of arrival and finish slots; none (an empty list)
    /// in a window that does not keep them (`StoreConfig::arrival_window`).
    pub by_arrival: Vec<BTreeMap<(i64, i64), ArrivalCell>>,
    /// TTFT, TPOT and E2E of the records counted; `None` in a window that reports no
    /// latency quantile (`StoreConfig::alert_only`).
    pub values: Option<[Ranked; 3]>,
}

impl Running {
    /// The sums over `raw`'s records in `(lo, hi]`, with the arrival cells if `cells`; adds
    /// the records read to `work`.
    pub fn build(
        raw: &VecDeque<Compact>,
        (lo, hi): (f64, f64),
        slos: &[&Slo],
        quantiles: &[f64],
        cells: bool,
        work: &mut Work,
    ) -> Running {
        let mut r = Running {
            lo,
            hi,
            tally: Tally::new(slos.len()),
            by_arrival: if cells { vec![BTreeMap::new(); slos.len()] } else { Vec::new() },
            values: (!quantiles.is_empty())
                .then(|| [Ranked::new(quantiles), Ranked::new(quantiles), Ranked::new(quantiles)]),
        };
        let (start, end) = (raw.partition_point(|c| c.finished <= lo), raw.partition_point(|c| c.finished <= hi));
        for c in raw.range(start..end) {
            r.change(c, slos, true, work);
        }
        r
    }

    /// Moves the edges forward to `(lo, hi]`; `false` (nothing changed) when either edge
    /// would move back, which a rebuild must serve.
    pub fn slide(&mut self, raw: &VecDeque<Compact>, lo: f64, hi: f64, slos: &[&Slo], work: &mut Work) -> bool {
        if lo < self.lo || hi < self.hi {
            return false;
        }
        // Out: what the lower edge passed, among what was counted.
        let out_to = lo.min(self.hi);
        let (a, b) = (raw.partition_point(|c| c.finished <= self.lo), raw.partition_point(|c| c.finished <= out_to));
        work.steps += 2;
        for c in raw.range(a..b) {
            self.change(c, slos, false, work);
        }
        // In: what the upper edge reached, above the new lower edge.
        let in_from = self.hi.max(lo);
        let (a, b) = (raw.partition_point(|c| c.finished <= in_from), raw.partition_point(|c| c.finished <= hi));
        work.steps += 2;
        for c in raw.range(a..b) {
            self.change(c, slos, true, work);
        }
        (self.lo, self.hi) = (lo, hi);
        true
    }

    /// Whether the sums keep the arrival cells of each SLO.
    pub fn keeps_cells(&self) -> bool {
        !self.by_arrival.is_empty()
    }

    /// Whether a record finishing at `finished` is counted.
    pub fn covers(&self, finished: f64) -> bool {
        finished > self.lo && finished <= self.hi
    }

    /// Adds (`enter`) or takes out one record.
    pub fn change(&mut self, c: &Compact, slos: &[&Slo], enter: bool, work: &mut Work) {
        let js: Vec<Judgement> = slos.iter().map(|slo| judge(c, slo)).collect();
        if enter {
            self.tally.add(c, &js);
        } else {
            self.tally.remove(c, &js);
        }
        for (cells, j) in self.by_arrival.iter_mut().zip(&js) {
            count_arrival(cells, c, j.joint, enter);
        }
        work.records += 1;
        for (set, v) in self.values.iter_mut().flatten().zip([c.ttft(), c.tpot(), Some(c.e2e)]) {
            if let Some(v) = v {
                work.steps += if enter { set.insert(v) } else { set.remove(v) };
            }
        }
    }

    /// Bytes held beyond the struct, estimated.
    pub fn heap_bytes(&self) -> usize {
        let cells: usize = self.by_arrival.iter().map(|c| c.len() * (16 + std::mem::size_of::<ArrivalCell>())).sum();
        self.tally.heap_bytes() + cells + self.values.iter().flatten().map(Ranked::heap_bytes).sum::<usize>()
    }
}

/// Adds one request's joint verdict to (or takes it from) the cell of its arrival and
/// finish slots; a cell left with no request goes.
pub fn count_arrival(cells: &mut BTreeMap<(i64, i64), ArrivalCell>, c: &Compact, v: Verdict, enter: bool) {
    if v == Verdict::Unobservable {
        return;
    }
    let slot = |t: f64, width: i64| ((t * 1000.0).floor() as i64).div_euclid(width) * width;
    let (arrived_ms, finished_ms) = (slot(c.started(), ARRIVAL_SLOT_MS), slot(c.finished, FINISH_SLOT_MS));
    let (good, maybe) = (u32::from(v == Verdict::Good), u32::from(matches!(v, Verdict::Good | Verdict::Maybe)));
    if enter {
        let cell = cells.entry((arrived_ms, finished_ms)).or_insert(ArrivalCell {
            arrived_ms,
            finished_ms,
            ..Default::default()
        });
        cell.population += 1;
        cell.good_lower += good;
        cell.good_upper += maybe;
    } else if let Some(cell) = cells.get_mut(&(arrived_ms, finished_ms)) {
        cell.population -= 1;
        cell.good_lower -= good;
        cell.good_upper -= maybe;
        if cell.population == 0 {
            cells.remove(&(arrived_ms, finished_ms));
        }
    }
}
