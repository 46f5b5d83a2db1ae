//! Windows that cost O(1) per evaluation tick, with the results of [`RangeView::collect`]
//! bit for bit (docs/footprint.md#incremental-windows).
//!
//! A from-scratch evaluation reads and decodes every stored point of every window at every
//! tick; a 6 h window at 5 s is 4,320 scrapes of a few hundred series each. Rates only need,
//! per series in the range, the first and last sample, the sample count and the reset
//! correction ([`RangeAcc`]); spans need the first and last scrape; gauges need running
//! statistics. So each window keeps that state and a cursor on its oldest point, and a tick
//! only reads what changed: the points newer than the last tick (decoded once, shared by
//! every window) and, per window, the points that left it (each leaving point costs one
//! decode of the point after it, the window's new oldest). Resets are kept as a list (time,
//! value before the reset) and summed oldest first, exactly as [`RangeAcc::push`] adds them,
//! so rates, quantiles and SLO brackets are bit-identical to the reference. The gauge means
//! are running compensated sums, within (n + 1)·2⁻⁵³ relative of the reference's naive sum
//! (`gauge` explains the bound); everything else is exact.
//!
//! The state belongs to the evaluation, not to the store: [`Incremental::advance`] reads
//! the store (under the target's lock in the daemon: it touches only the new and the
//! leaving points, so a scrape waits at most that long) and [`Incremental::reports`]
//! computes every report from the state alone, with the lock released. Nothing per point
//! is copied. The state follows the store by sequence number ([`TargetWindows::seq_range`]);
//! when the store is not the one it followed (another epoch, time going backwards, points
//! dropped before they were read), or the ring dropped more than one point a window still
//! held (a window longer than `MAX_POINTS` scrapes), it starts over from the store: one
//! from-scratch pass, then incremental again.
//!
//! At the end of each advance the state has the store thin what no configured window can
//! hold any more ([`Thinning`]: everything at or before `now − longest configured window`).
//! Only the alert-only windows longer than that see thin points, and a thin point carries
//! every series they keep with the same values and restart markers, so a point entered
//! whole and taken out thin (or the other way) changes nothing they hold; its columns
//! map to the same series ids through the catalog. What a point's delta is based on may
//! have been thinned since it was decoded: [`TargetWindows::decode_next`] then decodes it
//! from its keyframe.

mod gauge;
mod last;
mod plan;
pub mod saved;
#[cfg(test)]
mod saved_tests;
#[cfg(test)]
pub(crate) mod tests;
mod window;

use std::sync::Arc;

use super::range::RangeView;
use super::{EvalConfig, KvThresholds, RateMode};
use super::{Thin, Thinning};
use crate::duration::Window;
use crate::report::ModelReport;
use crate::window::{Layout, TargetWindows};

#[cfg(doc)]
use super::promql::RangeAcc;

use last::Lasts;
use plan::Catalog;
use window::{Entering, WindowState};

/// The incremental state of every window of one target.
#[derive(Debug)]
pub struct Incremental {
    windows: Vec<(Window, WindowState)>,
    kv: KvThresholds,
    catalog: Catalog,
    /// Every series' newest sample, shared by the windows that hold it.
    lasts: Lasts,
    /// What the store may drop once the configured windows have let go of a point.
    thinning: Option<Thinning>,
    /// The store followed, and the next point to enter.
    epoch: u64,
    next_seq: u64,
    /// The time of point `next_seq − 1` and its decoded values (the base of the next delta).
    head_t: Option<i64>,
    head_values: Vec<f64>,
    /// The layout `head_values` were decoded with.
    head_layout: Option<Arc<Layout>>,
    now_ms: i64,
    /// Times the state (or one window) started over, and forward searches for a
    /// series' next sample: the tests check the incremental path is the one taken.
    #[cfg(test)]
    pub(crate) restarts: usize,
    #[cfg(test)]
    pub(crate) searches: usize,
}

impl Incremental {
    /// Empty state for the windows of `cfg` (one target's config: an alert-only window
    /// keeps the series of that target's SLOs), with its KV bands.
    pub fn new(cfg: &EvalConfig) -> Self {
        Incremental {
            windows: cfg.windows.iter().map(|&w| (w, WindowState::new(w.millis(), Thin::of(cfg, w)))).collect(),
            kv: cfg.kv,
            catalog: Catalog::default(),
            lasts: Lasts::default(),
            thinning: Thinning::of(cfg),
            epoch: 0,
            next_seq: 0,
            head_t: None,
            head_values: Vec::new(),
            head_layout: None,
            now_ms: i64::MIN,
            #[cfg(test)]
            restarts: 0,
            #[cfg(test)]
            searches: 0,
        }
    }

    /// Whether this state evaluates what `cfg` asks for (same windows, same KV bands, the
    /// same series kept by each alert-only window).
    pub fn matches(&self, cfg: &EvalConfig) -> bool {
        self.kv == cfg.kv
            && self.windows.len() == cfg.windows.len()
            && self.windows.iter().zip(&cfg.windows).all(|((w, s), c)| w == c && s.thin() == Thin::of(cfg, *c).as_ref())
    }

    fn reset(&mut self, store: &TargetWindows) {
        #[cfg(test)]
        {
            self.restarts += usize::from(self.head_t.is_some());
        }
        for (_, w) in &mut self.windows {
            w.clear();
        }
        self.catalog = Catalog::default();
        self.lasts = Lasts::default();
        self.epoch = store.epoch();
        self.next_seq = store.seq_range().start;
        self.head_t = None;
        self.head_values.clear();
        self.head_layout = None;
    }

    /// Whether the state still follows `store` at `now_ms`.
    fn follows(&self, store: &TargetWindows, now_ms: i64) -> bool {
        if self.epoch != store.epoch() || now_ms < self.now_ms || self.next_seq > store.seq_range().end {
            return false;
        }
        // The last point read is the one read (if the store still has it).
        match (self.next_seq.checked_sub(1).and_then(|s| store.point_at(s)), self.head_t) {
            (Some((t, _)), Some(h)) => t == h,
            (Some(_), None) => false,
            (None, _) => true,
        }
    }

    /// Brings every window to the range (now − w, now] of `store`.
    ///
    /// Asks the store to keep the points it drops until the next call
    /// ([`TargetWindows::keep_dropped`]): a window takes a point out with its values.
    pub fn advance(&mut self, store: &mut TargetWindows, now_ms: i64) {
        store.keep_dropped();
        if !self.follows(store, now_ms) || self.catalog.should_compact(self.head_values.len()) {
            self.reset(store);
        }
        self.now_ms = now_ms;
        let front = store.seq_range().start;
        let mut searches = 0;
        for (_, w) in &mut self.windows {
            let start = now_ms.saturating_sub(w.range_ms);
            while let Some((seq, t)) = w.oldest()
                && (t <= start || seq < front)
            {
                if !w.pop(store, &mut self.catalog, &self.kv, &mut searches) {
                    #[cfg(test)]
                    {
                        self.restarts += 1;
                    }
                    refill(w, store, now_ms, self.next_seq, &mut self.catalog, &self.kv);
                    break;
                }
            }
        }
        #[cfg(test)]
        {
            self.searches += searches;
        }
        // Points dropped before any tick read them were never in a window; the oldest
        // stored point is a keyframe, so reading resumes there without a base.
        self.next_seq = self.next_seq.max(front);
        let end = store.seq_range().end;
        let (mut gauges, mut resets) = (Vec::new(), Vec::new());
        while self.next_seq < end {
            let Some((t, layout)) = store.point_at(self.next_seq) else { break };
            if t > now_ms {
                break;
            }
            if !store.decode_next(self.next_seq, self.head_layout.as_ref(), &mut self.head_values) {
                // Cannot happen with columns the store built; start over rather than read garbage.
                self.reset(store);
                store.release_dropped();
                return;
            }
            let plan = self.catalog.plan(layout);
            plan.gauge_values(&self.catalog, &self.head_values, &mut gauges);
            self.lasts.step(t, layout, &plan, &self.head_values, &mut resets);
            let p = Entering {
                seq: self.next_seq,
                t_ms: t,
                layout,
                plan: &plan,
                values: &self.head_values,
                gauges: &gauges,
                resets: &resets,
            };
            for (_, w) in &mut self.windows {
                if t > now_ms.saturating_sub(w.range_ms) {
                    w.enter(&p, &self.catalog, &self.kv);
                }
            }
            self.head_t = Some(t);
            if !self.head_layout.as_ref().is_some_and(|l| Arc::ptr_eq(l, layout)) {
                self.head_layout = Some(layout.clone());
            }
            self.next_seq += 1;
        }
        // Every window has taken out the points older than the store's oldest.
        store.release_dropped();
        // No configured window reaches back to `now − its length` any more, nor will at a
        // later tick: beyond the longest, only the alert-only windows' series are read.
        if let Some(t) = &self.thinning {
            store.thin_before(now_ms.saturating_sub(t.full_ms), &t.kept);
        }
    }

    /// Heap bytes of the state, roughly (docs/memory.md): per window and series three
    /// words, per gauge group its max deque, per series its newest sample, and the catalog
    /// of series ids.
    pub fn heap_bytes(&self) -> usize {
        self.heap_parts().iter().map(|p| p.1).sum()
    }

    /// [`Incremental::heap_bytes`] by part, named: what `examples/steady_state` prints.
    pub fn heap_parts(&self) -> [(&'static str, usize); 6] {
        let mut w = window::HeapParts::default();
        for (_, s) in &self.windows {
            let p = s.heap_parts();
            (w.series, w.cursor, w.gauges) = (w.series + p.series, w.cursor + p.cursor, w.gauges + p.gauges);
        }
        [
            ("windows' series", w.series),
            ("windows' cursors", w.cursor),
            ("windows' gauges", w.gauges),
            ("newest samples", self.lasts.heap_bytes()),
            ("catalog", self.catalog.heap_bytes()),
            ("head", self.head_values.capacity() * std::mem::size_of::<f64>()),
        ]
    }

    /// Each window's range, grouped by model, as [`RangeView::collect`] gives it.
    pub fn views(&self) -> Vec<(Window, RangeView)> {
        self.windows.iter().map(|(w, s)| (*w, s.view(&self.catalog, &self.lasts))).collect()
    }

    /// Every model's report at the instant of the last [`Incremental::advance`].
    pub fn reports(&self, now_ms: i64, cfg: &EvalConfig, mode: RateMode) -> Vec<ModelReport> {
        super::reports(&self.views(), now_ms, cfg, mode)
    }

    /// [`Incremental::advance`] then [`Incremental::reports`], starting over if `cfg`
    /// changed its windows or bands: what `evaluate_target` gives, without re-reading.
    pub fn evaluate(&mut self, store: &mut TargetWindows, now_ms: i64, cfg: &EvalConfig) -> Vec<ModelReport> {
        if !self.matches(cfg) {
            *self = Incremental::new(cfg);
        }
        self.advance(store, now_ms);
        self.reports(now_ms, cfg, RateMode::Prometheus)
    }
}

/// Rebuilds one window from the store: the points already read that are in its range.
fn refill(
    w: &mut WindowState,
    store: &TargetWindows,
    now_ms: i64,
    next_seq: u64,
    catalog: &mut Catalog,
    kv: &KvThresholds,
) {
    w.clear();
    let first = store.seq_after(now_ms.saturating_sub(w.range_ms));
    let mut values = Vec::new();
    let mut prev: Option<Arc<Layout>> = None;
    // The window's own newest samples, to find its resets; they end as the shared ones.
    let (mut gauges, mut lasts, mut resets) = (Vec::new(), Lasts::default(), Vec::new());
    for seq in first..next_seq {
        let Some((t, layout)) = store.point_at(seq) else { break };
        let decoded = if seq == first {
            store.decode_at(seq, &mut values)
        } else {
            store.decode_next(seq, prev.as_ref(), &mut values)
        };
        prev = Some(layout.clone());
        if !decoded {
            w.clear();
            return;
        }
        let plan: Arc<_> = catalog.plan(layout);
        plan.gauge_values(catalog, &values, &mut gauges);
        lasts.step(t, layout, &plan, &values, &mut resets);
        let p = Entering { seq, t_ms: t, layout, plan: &plan, values: &values, gauges: &gauges, resets: &resets };
        w.enter(&p, catalog, kv);
    }
}
