//! The newest sample of each series, kept once per target instead of once per window.
//!
//! A window that holds a series holds its newest sample: ranges end at the same instant
//! and a point enters every window its time falls in, so whatever window still has the
//! series has the sample every other one has last. The reset rule of [`RangeAcc::push`]
//! (with the forced reset of `RangeView::collect`) compares a sample with the one before
//! it, so it too is decided once per point here, and each window that already held the
//! series records the reset in its own list (docs/footprint.md#incremental-windows).

use std::sync::Arc;

use super::plan::{Catalog, Feed, Plan, slot_in};
use crate::window::{Layout, TargetWindows};

#[cfg(doc)]
use crate::evaluate::promql::RangeAcc;

/// One series' newest sample and the layout column it was read from (the restart markers
/// a later sample is compared with).
#[derive(Debug)]
pub(super) struct Last {
    pub t_ms: i64,
    pub v: f64,
    col: u32,
    layout: Arc<Layout>,
}

/// The newest sample of every series a target has shown, by catalog id.
#[derive(Debug, Default)]
pub(super) struct Lasts {
    by_id: Vec<Option<Last>>,
}

impl Lasts {
    /// Takes the samples of one point (`plan` resolves `layout`'s columns) as the newest.
    /// `resets[col]` is, per series column, the value before a reset between the series'
    /// previous sample and this one, if there was one; `None` for a first sample and for
    /// gauge columns.
    pub fn step(
        &mut self,
        t_ms: i64,
        layout: &Arc<Layout>,
        plan: &Plan,
        values: &[f64],
        resets: &mut Vec<Option<f64>>,
    ) {
        resets.clear();
        for (col, feed) in plan.feeds.iter().enumerate() {
            let Feed::Series(id) = *feed else {
                resets.push(None);
                continue;
            };
            let v = values[col];
            match slot_in(&mut self.by_id, id as usize, plan.ids(), || None) {
                Some(last) => {
                    let same = Arc::ptr_eq(&last.layout, layout);
                    let forced = !same && layout.restarted_since(col, &last.layout, last.col as usize);
                    resets.push((v < last.v || forced).then_some(last.v));
                    (last.t_ms, last.v, last.col) = (t_ms, v, col as u32);
                    if !same {
                        last.layout = layout.clone();
                    }
                }
                slot @ None => {
                    resets.push(None);
                    *slot = Some(Last { t_ms, v, col: col as u32, layout: layout.clone() });
                }
            }
        }
    }

    /// The newest sample of series `id`.
    pub fn get(&self, id: u32) -> Option<&Last> {
        self.by_id.get(id as usize).and_then(Option::as_ref)
    }

    /// Each series' newest sample (time, value) by catalog id, as a snapshot keeps it.
    pub fn saved(&self) -> Vec<Option<(i64, f64)>> {
        self.by_id.iter().map(|l| l.as_ref().map(|l| (l.t_ms, l.v))).collect()
    }

    /// The newest samples `saved` lists, each with the layout of `store`'s point at its
    /// time and its column there (the restart markers the next sample is compared with).
    /// A sample whose point the store no longer holds, or holds without the series (thin),
    /// is left out: no window holds it, so nothing compares with it or reads it.
    pub fn restored(saved: &[Option<(i64, f64)>], catalog: &mut Catalog, store: &TargetWindows) -> Lasts {
        let by_id = (0u32..)
            .zip(saved)
            .map(|(id, s)| {
                let (t_ms, v) = (*s)?;
                let (t, layout) = store.point_at(store.seq_after(t_ms.checked_sub(1)?))?;
                let col = catalog.plan(layout).column_of(id)?;
                (t == t_ms).then(|| Last { t_ms, v, col: col as u32, layout: layout.clone() })
            })
            .collect();
        Lasts { by_id }
    }

    /// Heap bytes (the layouts are the store's).
    pub fn heap_bytes(&self) -> usize {
        self.by_id.capacity() * std::mem::size_of::<Option<Last>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluate::incremental::plan::Catalog;
    use crate::window::{Quantity, SeriesKey};

    fn layout(created: f64) -> Arc<Layout> {
        let key = SeriesKey {
            model: "m".into(),
            quantity: Quantity::Counter(crate::canonical::CounterKind::PromptTokens, None),
            shard: String::new(),
        };
        Arc::new(Layout { keys: vec![key].into(), created: vec![Some(created)].into(), process_start: None })
    }

    #[test]
    fn a_reset_is_a_decrease_or_a_changed_restart_marker() {
        let (mut catalog, mut lasts, mut resets) = (Catalog::default(), Lasts::default(), Vec::new());
        let (a, b) = (layout(1.0), layout(2.0));
        let (plan_a, plan_b) = (catalog.plan(&a), catalog.plan(&b));
        lasts.step(1, &a, &plan_a, &[5.0], &mut resets);
        assert_eq!(resets, [None], "a first sample");
        lasts.step(2, &a, &plan_a, &[7.0], &mut resets);
        assert_eq!(resets, [None]);
        lasts.step(3, &a, &plan_a, &[3.0], &mut resets);
        assert_eq!(resets, [Some(7.0)], "a decrease");
        // Same value, but `_created` changed: a restart Prometheus would not see.
        lasts.step(4, &b, &plan_b, &[3.0], &mut resets);
        assert_eq!(resets, [Some(3.0)], "a changed _created");
        let last = lasts.get(0).unwrap();
        assert_eq!((last.t_ms, last.v), (4, 3.0));
        assert!(lasts.get(1).is_none());
    }
}
