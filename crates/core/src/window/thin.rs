//! The thin part of a window store: scrapes older than the longest configured window,
//! re-encoded with only the series some alert-only window reads
//! (docs/memory.md#thin-scrapes-beyond-the-configured-windows).
//!
//! The 6 h burn-rate window of the default alert rules reads a few dozen series per rank;
//! every configured window is an hour at most. So the evaluation that owns a store tells it,
//! at each tick, where the configured windows end ([`TargetWindows::thin_before`]), and the
//! store projects every older scrape onto the series that [`Kept`] names. The projection is
//! a pure function of the scrape and the kept set (the same full scrape always gives the
//! same thin scrape) and keeps what resets and coverage read: each kept series' `_created`,
//! the process start, and per model at least one column, so a model that only carried
//! series nobody keeps still counts in a window's span. A thin scrape is an ordinary point
//! with a smaller [`Layout`]: keyframes and deltas work as in the full part, and the oldest
//! full scrape is always a keyframe, so a decode never crosses from one part to the other.

use std::collections::HashSet;
use std::sync::Arc;

use super::{Column, KEYFRAME_EVERY, Layout, Quantity, TargetWindows};
use crate::canonical::{CounterKind, GaugeKind, HistogramKind};

/// The series the thin part of a store keeps: what the alert-only windows read, together.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Kept {
    /// Buckets, `_sum` and `_count` of these histograms.
    pub histograms: Vec<HistogramKind>,
    /// These counters, every finish reason.
    pub counters: Vec<CounterKind>,
    pub gauges: Vec<GaugeKind>,
    /// Spec-decode acceptances per draft position.
    pub spec_accepted: bool,
}

impl Kept {
    /// Whether a thin scrape keeps series of `q`.
    pub fn keeps(&self, q: Quantity) -> bool {
        match q {
            Quantity::Bucket(k, _) | Quantity::Sum(k) | Quantity::Count(k) => self.histograms.contains(&k),
            Quantity::Counter(k, _) => self.counters.contains(&k),
            Quantity::SpecAccepted(_) => self.spec_accepted,
            Quantity::Gauge(k) => self.gauges.contains(&k),
        }
    }

    /// The columns of `layout` a thin scrape keeps, in order: every kept series, and the
    /// first column of each model that has none.
    fn columns(&self, layout: &Layout) -> Vec<u32> {
        let mut cols: Vec<u32> =
            (0..layout.keys.len() as u32).filter(|&c| self.keeps(layout.keys[c as usize].quantity)).collect();
        let mut carried: HashSet<&str> = cols.iter().map(|&c| &*layout.keys[c as usize].model).collect();
        let lone: Vec<u32> =
            (0..layout.keys.len() as u32).filter(|&c| carried.insert(&*layout.keys[c as usize].model)).collect();
        if !lone.is_empty() {
            cols.extend(lone);
            cols.sort_unstable();
        }
        cols
    }
}

/// Where the thin part stands: the rule it follows, its newest point (the base of the next
/// delta) and the projection of the last full layout seen.
#[derive(Debug, Clone)]
pub(super) struct ThinTail {
    kept: Kept,
    /// The newest thin point's layout and values; `None` until one is made under `kept`.
    last: Option<(Arc<Layout>, Vec<f64>)>,
    since_keyframe: usize,
    /// A full layout, the columns it keeps and its thin layout: consecutive scrapes share one.
    projection: Option<(Arc<Layout>, Arc<[u32]>, Arc<Layout>)>,
}

impl ThinTail {
    fn new(kept: Kept) -> Self {
        ThinTail { kept, last: None, since_keyframe: 0, projection: None }
    }

    /// The thin layout of `layout` and the columns it keeps. A projection equal to the
    /// newest thin layout shares it, so thin scrapes of different full layouts (a series
    /// nobody keeps appeared) still encode as deltas.
    fn project(&mut self, layout: &Arc<Layout>) -> (Arc<[u32]>, Arc<Layout>) {
        if let Some((full, cols, thin)) = &self.projection
            && Arc::ptr_eq(full, layout)
        {
            return (cols.clone(), thin.clone());
        }
        let cols: Arc<[u32]> = self.kept.columns(layout).into();
        let fresh = Layout {
            keys: cols.iter().map(|&c| layout.keys[c as usize].clone()).collect(),
            created: cols.iter().map(|&c| layout.created[c as usize]).collect(),
            process_start: layout.process_start,
        };
        let thin = match &self.last {
            Some((l, _)) if **l == fresh => l.clone(),
            // Nothing to drop (it was thin already, e.g. restored from a snapshot).
            _ if cols.len() == layout.keys.len() => layout.clone(),
            _ => Arc::new(fresh),
        };
        self.projection = Some((layout.clone(), cols.clone(), thin.clone()));
        (cols, thin)
    }

    pub(super) fn heap_bytes(&self) -> usize {
        let last = self.last.as_ref().map_or(0, |(_, v)| v.capacity() * std::mem::size_of::<f64>());
        last + self.projection.as_ref().map_or(0, |(_, c, _)| c.len() * 4)
    }
}

impl TargetWindows {
    /// Re-encodes every full point at or before `horizon_ms` (but never the newest) into its
    /// thin form under `kept`. The evaluation calls this with `now − longest configured
    /// window` once its windows have taken out what left them: from then on no configured
    /// window can hold those points, and the alert-only windows read only kept series.
    ///
    /// A changed `kept` applies to the points thinned from then on; thin points stay as
    /// they are (their series cannot come back).
    pub fn thin_before(&mut self, horizon_ms: i64, kept: &Kept) {
        if self.thin.as_ref().is_none_or(|t| t.kept != *kept) {
            self.thin = Some(ThinTail::new(kept.clone()));
        }
        while self.thin_len + 1 < self.points.len() && self.points[self.thin_len].t_ms <= horizon_ms {
            if !self.thin_one() {
                break;
            }
        }
    }

    /// Scrapes in the thin part (the oldest ones).
    pub fn thin_points(&self) -> usize {
        self.thin_len
    }

    /// Thins the oldest full point (a keyframe); the full point after it becomes one.
    fn thin_one(&mut self) -> bool {
        let i = self.thin_len;
        let (Some(tail), Some(point)) = (self.thin.as_mut(), self.points.get(i)) else { return false };
        let mut full = Vec::new();
        if !point.column.decode_into(&mut full) || full.len() != point.layout.keys.len() {
            return false;
        }
        // Decode the next point before anything changes: it is a delta from these values.
        let next = match self.points.get(i + 1).map(|p| &p.column) {
            Some(c) if !c.is_raw() => {
                let mut cur = full.clone();
                if !c.decode_into(&mut cur) {
                    // Cannot happen with columns built by `Column::encode`; leave it full.
                    return false;
                }
                Some(cur)
            }
            _ => None,
        };
        let (cols, layout) = tail.project(&point.layout);
        let values: Vec<f64> = cols.iter().map(|&c| full[c as usize]).collect();
        // A delta only after a thin point of the same layout, made under the same rule.
        let base = match &tail.last {
            Some((l, v)) if i > 0 && Arc::ptr_eq(l, &layout) && tail.since_keyframe + 1 < KEYFRAME_EVERY => {
                Some(v.as_slice())
            }
            _ => None,
        };
        let column = Column::encode(&values, base);
        tail.since_keyframe = if column.is_raw() { 0 } else { tail.since_keyframe + 1 };
        tail.last = Some((layout.clone(), values));
        let point = &mut self.points[i];
        point.layout = layout;
        point.column = column;
        if let Some(cur) = next {
            self.points[i + 1].column = Column::Raw(cur.into());
        }
        self.thin_len += 1;
        true
    }
}
