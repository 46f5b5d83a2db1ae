//! Per-target window store: a bounded ring of scrapes, kept as compact number columns.
//!
//! Each scrape is reduced to the canonical numbers evaluation reads ([`STORED_HISTOGRAMS`]
//! buckets, [`STORED_COUNTERS`], [`STORED_GAUGES`]), one value per source series. The
//! series identities (model, quantity, shard, `le`) and the restart markers (`_created`,
//! process start) live in a shared [`Layout`] that consecutive scrapes reuse through an
//! `Arc`. Values are a [`Column`]: a raw keyframe at least every [`KEYFRAME_EVERY`]
//! scrapes, zigzag-varint integer deltas in between (bit-exact; non-integers stay raw).
//!
//! Memory bound (docs/memory.md): a vLLM V1 rank exposes ~85 latency buckets plus 5
//! counters and 1 gauge, ~156 bytes per scrape; one hour at a 1 s interval is ~0.56 MB
//! per rank (measured by `window::tests::one_hour_at_one_second_stays_small`). Points
//! older than the longest window are dropped on every push, and the ring never holds
//! more than [`MAX_POINTS`] scrapes whatever the interval.

mod column;
mod layout;
pub mod saved;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crate::canonical::{Engine, Snapshot};

pub use column::Column;
pub use layout::{
    LATENCY_HISTOGRAMS, Layout, Quantity, STORED_COUNTERS, STORED_GAUGES, STORED_HISTOGRAMS, SeriesKey, stored_series,
};

/// Hard cap on stored scrapes per target (e.g. 1 h at 100 ms). Beyond it the oldest go
/// first, so a very long window at a very short interval loses its oldest part rather
/// than growing without bound.
pub const MAX_POINTS: usize = 36_000;

/// A raw keyframe at least every this many scrapes, so a range starting anywhere decodes
/// at most this many extra scrapes.
pub const KEYFRAME_EVERY: usize = 64;

/// One stored scrape: its time, its series layout and one value per series.
#[derive(Debug, Clone)]
struct Point {
    t_ms: i64,
    layout: Arc<Layout>,
    column: Column,
}

/// The scrapes of one target, oldest first, covering at least the longest window.
///
/// Invariant: the oldest point is always a raw keyframe, and a delta point follows a
/// point with the same layout.
///
/// A clone shares every point's layout and values: it costs a few words per stored
/// scrape, so the daemon evaluates a clone and holds the target's lock only to take it.
#[derive(Debug, Default, Clone)]
pub struct TargetWindows {
    max_window_ms: i64,
    points: VecDeque<Point>,
    engine: Option<Engine>,
    /// The newest scrape's values, decoded: the base of the next delta.
    last_values: Vec<f64>,
    since_keyframe: usize,
}

impl TargetWindows {
    /// A store that keeps what the longest window (`max_window`) needs.
    pub fn new(max_window: Duration) -> Self {
        let max_window_ms = i64::try_from(max_window.as_millis()).unwrap_or(i64::MAX);
        TargetWindows { max_window_ms, ..TargetWindows::default() }
    }

    /// Adds one scrape taken at `t_ms` (Unix milliseconds). Scrapes not newer than the
    /// last one are ignored.
    pub fn push(&mut self, t_ms: i64, snapshot: Arc<Snapshot>) {
        if self.points.back().is_some_and(|p| p.t_ms >= t_ms) {
            return;
        }
        self.engine = Some(snapshot.engine);
        let (layout, values) = Layout::extract(&snapshot, self.points.back().map(|p| &p.layout));
        self.push_values(t_ms, layout, values);
    }

    /// Adds one scrape already split into its layout and values (`values[i]` belongs to
    /// `layout.keys[i]`): what [`TargetWindows::push`] stores, and what a restored snapshot
    /// replays. Scrapes not newer than the last one, or whose values do not match the
    /// layout, are ignored.
    pub fn push_values(&mut self, t_ms: i64, layout: Arc<Layout>, values: Box<[f64]>) {
        if self.points.back().is_some_and(|p| p.t_ms >= t_ms) || values.len() != layout.keys.len() {
            return;
        }
        let same_layout = self.points.back().is_some_and(|p| Arc::ptr_eq(&p.layout, &layout));
        let base = (same_layout && self.since_keyframe + 1 < KEYFRAME_EVERY).then_some(self.last_values.as_slice());
        let column = Column::encode(&values, base);
        self.since_keyframe = if column.is_raw() { 0 } else { self.since_keyframe + 1 };
        self.last_values = values.into_vec();
        self.points.push_back(Point { t_ms, layout, column });
        // Ranges are left-open (t−w, t] and evaluation never runs before the newest
        // scrape, so a point at or before t_new − w can never be inside a range again.
        let horizon = t_ms.saturating_sub(self.max_window_ms);
        while self.points.front().is_some_and(|p| p.t_ms <= horizon) || self.points.len() > MAX_POINTS {
            self.pop_oldest();
        }
    }

    /// Every stored scrape, oldest first, decoded: its time, layout (shared by consecutive
    /// scrapes with the same series) and values. What a snapshot saves.
    pub fn stored_points(&self) -> impl Iterator<Item = (i64, Arc<Layout>, Vec<f64>)> + '_ {
        let mut cur = Vec::new();
        self.points
            .iter()
            .map_while(move |p| p.column.decode_into(&mut cur).then(|| (p.t_ms, p.layout.clone(), cur.clone())))
    }

    /// Sets the engine of the newest scrape: a restored store has values but no snapshot.
    pub fn set_engine(&mut self, engine: Option<Engine>) {
        self.engine = engine;
    }

    /// Drops the oldest point; the next one becomes a keyframe if it was a delta.
    fn pop_oldest(&mut self) {
        let Some(old) = self.points.pop_front() else { return };
        if let Some(next) = self.points.front_mut()
            && !next.column.is_raw()
        {
            let mut cur = Vec::new();
            if old.column.decode_into(&mut cur) && next.column.decode_into(&mut cur) {
                next.column = Column::Raw(cur.into());
            } else {
                // Cannot happen with columns built by `Column::encode`; dropping the
                // undecodable point keeps the invariant rather than reading garbage.
                self.pop_keep_invariant();
            }
        }
    }

    fn pop_keep_invariant(&mut self) {
        while self.points.front().is_some_and(|p| !p.column.is_raw()) {
            self.points.pop_front();
        }
    }

    /// Engine of the newest scrape.
    pub fn engine(&self) -> Option<Engine> {
        self.engine
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Calls `f(t_ms, layout, values)` for each stored scrape inside the left-open range
    /// (now − range, now], oldest first. `values[i]` belongs to `layout.keys[i]`.
    pub fn for_each_in_range<'a>(
        &'a self,
        now_ms: i64,
        range_ms: i64,
        mut f: impl FnMut(i64, &'a Arc<Layout>, &[f64]),
    ) {
        let start = now_ms.saturating_sub(range_ms);
        let first = self.points.partition_point(|p| p.t_ms <= start);
        // Decode from the keyframe at or before the first point in range.
        if first >= self.points.len() {
            return;
        }
        let mut k = first;
        while k > 0 && !self.points[k].column.is_raw() {
            k -= 1;
        }
        let mut cur = Vec::new();
        for (i, p) in self.points.iter().enumerate().skip(k) {
            if p.t_ms > now_ms || !p.column.decode_into(&mut cur) {
                break;
            }
            if i >= first {
                f(p.t_ms, &p.layout, &cur);
            }
        }
    }

    /// Scrape times inside (now − range, now], oldest first.
    pub fn times_in_range(&self, now_ms: i64, range_ms: i64) -> Vec<i64> {
        let mut out = Vec::new();
        self.for_each_in_range(now_ms, range_ms, |t, _, _| out.push(t));
        out
    }

    /// Bytes this store owns on the heap (ring slots, value columns, layouts counted once
    /// however many points share them). What the memory bound in docs/memory.md measures.
    pub fn heap_bytes(&self) -> usize {
        let mut total = self.points.capacity() * std::mem::size_of::<Point>();
        let mut last: Option<&Arc<Layout>> = None;
        for p in &self.points {
            total += p.column.heap_bytes();
            if !last.is_some_and(|l| Arc::ptr_eq(l, &p.layout)) {
                total += std::mem::size_of::<Layout>() + p.layout.heap_bytes();
                last = Some(&p.layout);
            }
        }
        total + self.last_values.capacity() * std::mem::size_of::<f64>()
    }
}
