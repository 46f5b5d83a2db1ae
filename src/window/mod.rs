//! Per-target window store: a bounded ring of scrapes, kept as compact number columns.
//!
//! Each scrape is reduced to the canonical numbers evaluation reads ([`STORED_HISTOGRAMS`]
//! buckets, [`STORED_COUNTERS`], [`STORED_GAUGES`]), one `f64` per source series. The
//! series identities (model, quantity, shard, `le`) and the restart markers (`_created`,
//! process start) live in a shared [`Layout`] that consecutive scrapes reuse through an
//! `Arc`, so a steady target costs 8 bytes per series per scrape plus a small header.
//!
//! Memory bound (see docs/memory.md): a vLLM V1 rank exposes ~85 latency buckets plus
//! ~6 counters and 1 gauge, ~0.75 KB per scrape; one hour at a 1 s interval is ~2.7 MB
//! per rank (measured by `window::tests::one_hour_at_one_second_stays_small`). Points older
//! than the longest window are dropped on every push, and the ring never holds more than
//! [`MAX_POINTS`] scrapes whatever the interval.

mod layout;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crate::canonical::{Engine, Snapshot};

pub use layout::{Layout, Quantity, STORED_COUNTERS, STORED_GAUGES, STORED_HISTOGRAMS, SeriesKey};

/// Hard cap on stored scrapes per target (e.g. 1 h at 100 ms). Beyond it the oldest go
/// first, so a very long window at a very short interval loses its oldest part rather
/// than growing without bound.
pub const MAX_POINTS: usize = 36_000;

/// One stored scrape: its time, its series layout and one value per series.
#[derive(Debug, Clone)]
pub struct Point {
    pub t_ms: i64,
    pub layout: Arc<Layout>,
    pub values: Box<[f64]>,
}

/// The scrapes of one target, oldest first, covering at least the longest window.
#[derive(Debug, Default)]
pub struct TargetWindows {
    max_window_ms: i64,
    points: VecDeque<Point>,
    engine: Option<Engine>,
}

impl TargetWindows {
    /// A store that keeps what the longest window (`max_window`) needs.
    pub fn new(max_window: Duration) -> Self {
        let max_window_ms = i64::try_from(max_window.as_millis()).unwrap_or(i64::MAX);
        TargetWindows { max_window_ms, points: VecDeque::new(), engine: None }
    }

    /// Adds one scrape taken at `t_ms` (Unix milliseconds). Scrapes not newer than the
    /// last one are ignored.
    pub fn push(&mut self, t_ms: i64, snapshot: Arc<Snapshot>) {
        if self.points.back().is_some_and(|p| p.t_ms >= t_ms) {
            return;
        }
        self.engine = Some(snapshot.engine);
        let (layout, values) = Layout::extract(&snapshot, self.points.back().map(|p| &p.layout));
        self.points.push_back(Point { t_ms, layout, values });
        // Ranges are left-open (t−w, t] and evaluation never runs before the newest
        // scrape, so a point at or before t_new − w can never be inside a range again.
        let horizon = t_ms.saturating_sub(self.max_window_ms);
        while self.points.front().is_some_and(|p| p.t_ms <= horizon) || self.points.len() > MAX_POINTS {
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

    /// The stored points inside the left-open range (now − range, now], oldest first.
    pub fn range(&self, now_ms: i64, range_ms: i64) -> impl Iterator<Item = &Point> {
        let start = now_ms.saturating_sub(range_ms);
        let first = self.points.partition_point(|p| p.t_ms <= start);
        self.points.range(first..).take_while(move |p| p.t_ms <= now_ms)
    }

    /// Bytes this store owns on the heap (ring slots, value columns, layouts counted once
    /// however many points share them). What the memory bound in docs/memory.md measures.
    pub fn heap_bytes(&self) -> usize {
        let mut total = self.points.capacity() * std::mem::size_of::<Point>();
        let mut last: Option<&Arc<Layout>> = None;
        for p in &self.points {
            total += p.values.len() * std::mem::size_of::<f64>();
            if !last.is_some_and(|l| Arc::ptr_eq(l, &p.layout)) {
                total += std::mem::size_of::<Layout>() + p.layout.heap_bytes();
                last = Some(&p.layout);
            }
        }
        total
    }
}
