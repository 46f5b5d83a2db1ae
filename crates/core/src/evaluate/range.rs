//! One pass over a target's stored points inside (now − w, now]: per-series range
//! accumulators for rates, and per-model gauge samples, grouped by model.
//!
//! Grouping once here is what keeps a target's evaluation linear in its series: each
//! model's evaluation reads only its own [`ModelRange`], however many models the target
//! serves (issue 12: a target with 20,000 models made a per-model re-scan quadratic).
//!
//! Public so that other evaluators (SLO attainment, goodput) read the same ranges with
//! the same reset rules, e.g. [`RangeAcc::raw_increase`] for ratio math.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::promql::RangeAcc;
use crate::canonical::GaugeKind;
use crate::window::{Layout, Quantity, SeriesKey, TargetWindows};

/// Everything one range of one target holds, by model.
#[derive(Debug, Default)]
pub struct RangeView {
    models: BTreeMap<Arc<str>, ModelRange>,
}

/// The series and gauges of one model in one range.
#[derive(Debug, Default)]
pub struct ModelRange {
    /// The model's series seen in the range, in first-seen order, with their accumulators.
    /// Sums over shards add in this order, as the target-wide scan did before grouping.
    series: Vec<(SeriesKey, RangeAcc)>,
    /// Each gauge at each point in the range, oldest first, combined over the shards
    /// present at that scrape: KV-cache usage is their mean (each data-parallel rank owns
    /// its own pool), the others (requests, capacity) their sum.
    gauges: BTreeMap<GaugeKind, Vec<f64>>,
}

impl ModelRange {
    /// The model's series with their accumulators.
    pub fn series(&self) -> &[(SeriesKey, RangeAcc)] {
        visits::add(self.series.len());
        &self.series
    }

    /// One gauge at each point of the range, oldest first.
    pub fn gauge(&self, kind: GaugeKind) -> Option<&[f64]> {
        self.gauges.get(&kind).map(Vec::as_slice)
    }
}

struct Slot<'a> {
    acc: Option<RangeAcc>,
    layout: &'a Arc<Layout>,
    col: usize,
}

/// What a column of the current layout feeds: a series slot, or a (model, gauge) group.
#[derive(Clone, Copy)]
enum Feed {
    Series(usize),
    Gauge(usize),
}

impl RangeView {
    /// Collects the left-open range (now − range, now].
    ///
    /// A reset is a decrease (as in Prometheus) *or* a changed `_created` / process start
    /// time between two consecutive samples of a series. The latter deliberately differs
    /// from Prometheus, which would count a restarted counter that already climbed back
    /// past its old value as a small increase; we count its full new value instead.
    pub fn collect(store: &TargetWindows, now_ms: i64, range_ms: i64) -> RangeView {
        let mut index: HashMap<&SeriesKey, usize> = HashMap::new();
        let mut keys: Vec<&SeriesKey> = Vec::new();
        let mut slots: Vec<Slot<'_>> = Vec::new();
        let mut models: BTreeMap<Arc<str>, ModelRange> = BTreeMap::new();
        // Per layout: each column's feed, and the gauge groups with their running sums.
        let mut feeds: Vec<Feed> = Vec::new();
        let mut groups: Vec<(&Arc<str>, GaugeKind)> = Vec::new();
        let mut sums: Vec<(f64, usize)> = Vec::new();
        let mut current: Option<&Arc<Layout>> = None;
        store.for_each_in_range(now_ms, range_ms, |t_ms, layout, values| {
            if !current.is_some_and(|l| Arc::ptr_eq(l, layout)) {
                // Column → feed, resolved once per run of points sharing a layout.
                feeds.clear();
                groups.clear();
                let mut group_of: HashMap<(&str, GaugeKind), usize> = HashMap::new();
                for (col, key) in layout.keys.iter().enumerate() {
                    if let Quantity::Gauge(kind) = key.quantity {
                        let g = *group_of.entry((&*key.model, kind)).or_insert_with(|| {
                            groups.push((&key.model, kind));
                            groups.len() - 1
                        });
                        feeds.push(Feed::Gauge(g));
                        continue;
                    }
                    let slot = *index.entry(key).or_insert_with(|| {
                        keys.push(key);
                        slots.push(Slot { acc: None, layout, col });
                        slots.len() - 1
                    });
                    feeds.push(Feed::Series(slot));
                }
                current = Some(layout);
            }
            sums.clear();
            sums.resize(groups.len(), (0.0, 0));
            for (col, &v) in values.iter().enumerate() {
                let slot = match feeds[col] {
                    Feed::Gauge(g) => {
                        // The first shard's value as is, then the others added in column
                        // order: bit for bit what a fold from the first value gives.
                        let (sum, n) = &mut sums[g];
                        *sum = if *n == 0 { v } else { *sum + v };
                        *n += 1;
                        continue;
                    }
                    Feed::Series(slot) => slot,
                };
                let s = &mut slots[slot];
                match &mut s.acc {
                    None => s.acc = Some(RangeAcc::new(t_ms, v)),
                    Some(acc) => {
                        let forced = !Arc::ptr_eq(s.layout, layout) && layout.restarted_since(col, s.layout, s.col);
                        acc.push(t_ms, v, forced);
                    }
                }
                s.layout = layout;
                s.col = col;
            }
            for (&(model, kind), &(sum, n)) in groups.iter().zip(&sums) {
                let v = if kind == GaugeKind::KvCacheUsage { sum / n as f64 } else { sum };
                model_entry(&mut models, model).gauges.entry(kind).or_default().push(v);
            }
        });
        for (key, slot) in keys.into_iter().zip(slots) {
            if let Some(acc) = slot.acc {
                model_entry(&mut models, &key.model).series.push((key.clone(), acc));
            }
        }
        RangeView { models }
    }

    /// Every model with any series or gauge sample in the range, by name.
    pub fn models(&self) -> impl Iterator<Item = &Arc<str>> {
        self.models.keys()
    }

    /// One model's part of the range; `None` when the model has nothing in it.
    pub fn model(&self, model: &str) -> Option<&ModelRange> {
        self.models.get(model)
    }
}

fn model_entry<'m>(models: &'m mut BTreeMap<Arc<str>, ModelRange>, model: &Arc<str>) -> &'m mut ModelRange {
    // Look up by name first: cloning the `Arc` on every gauge point would be wasted work.
    if !models.contains_key(&**model) {
        models.insert(model.clone(), ModelRange::default());
    }
    models.get_mut(&**model).expect("inserted above")
}

/// Series handed to per-model evaluation, counted in test builds: the linearity test
/// (`evaluate::tests::evaluation_visits_each_series_a_bounded_number_of_times`) reads it.
pub(crate) mod visits {
    #[cfg(test)]
    thread_local! {
        static SERIES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    #[inline]
    pub fn add(_n: usize) {
        #[cfg(test)]
        SERIES.with(|c| c.set(c.get() + _n));
    }

    /// Series handed out on this thread since the last call, and resets the count.
    #[cfg(test)]
    pub fn take() -> usize {
        SERIES.with(|c| c.replace(0))
    }
}
