//! One pass over a target's stored points inside (now − w, now]: per-series range
//! accumulators for rates, and per-model KV-usage samples.
//!
//! Public so that other evaluators (SLO attainment, goodput) read the same ranges with
//! the same reset rules, e.g. [`RangeAcc::raw_increase`] for ratio math.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::promql::RangeAcc;
use crate::canonical::GaugeKind;
use crate::kahan::KahanSum;
use crate::window::{Layout, Quantity, SeriesKey, TargetWindows};

/// Everything one range of one target holds.
#[derive(Debug, Default)]
pub struct RangeView {
    /// Every series seen in the range, in first-seen order, with its accumulator.
    pub series: Vec<(SeriesKey, RangeAcc)>,
    /// Each gauge per model at each point in the range, oldest first, combined over the
    /// shards present at that scrape: KV-cache usage is their mean (each data-parallel
    /// rank owns its own pool), the others (requests, capacity) their sum.
    pub gauges: BTreeMap<(Arc<str>, GaugeKind), Vec<f64>>,
    /// Per model, the scrapes in the range that carried any of its series.
    pub spans: Vec<(Arc<str>, Span)>,
}

/// Where a model's data inside a range begins and ends (docs/metrics.md#window-coverage).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// The oldest and newest scrape in the range that carried the model, Unix ms.
    pub first_ms: i64,
    pub last_ms: i64,
    /// How many scrapes in the range carried it.
    pub scrapes: usize,
}

impl Span {
    /// The share of the range (now − range, now] that the data covers, in [0, 1]: the time
    /// since the oldest scrape, plus one mean spacing between scrapes (the oldest scrape
    /// stands for the interval before it, as Prometheus's `rate` extrapolation assumes), over
    /// the range. A full window reads 1 whatever the scrape phase; a daemon that started 3
    /// minutes ago reads about 0.05 on a 1h window.
    ///
    /// Gaps inside the span (a target that was down for a while) do not lower it: counters
    /// carry what happened during a gap across it, so the window's rates and ratios still
    /// describe the whole span (docs/metrics.md#window-coverage).
    pub fn coverage(&self, now_ms: i64, range_ms: i64) -> f64 {
        if range_ms <= 0 {
            return 1.0;
        }
        let spacing =
            if self.scrapes >= 2 { (self.last_ms - self.first_ms) as f64 / (self.scrapes - 1) as f64 } else { 0.0 };
        (((now_ms - self.first_ms) as f64 + spacing) / range_ms as f64).clamp(0.0, 1.0)
    }
}

struct Slot<'a> {
    acc: Option<RangeAcc>,
    layout: &'a Arc<Layout>,
    col: usize,
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
        let mut gauges: BTreeMap<(Arc<str>, GaugeKind), Vec<f64>> = BTreeMap::new();
        let mut map: Vec<usize> = Vec::new();
        let mut current: Option<&Arc<Layout>> = None;
        let mut spans: Vec<(Arc<str>, Span)> = Vec::new();
        // Index into `spans` of each model the current layout carries.
        let mut layout_models: Vec<usize> = Vec::new();
        store.for_each_in_range(now_ms, range_ms, |t_ms, layout, values| {
            if !current.is_some_and(|l| Arc::ptr_eq(l, layout)) {
                // Column → slot, resolved once per run of points sharing a layout.
                map.clear();
                for (col, key) in layout.keys.iter().enumerate() {
                    let slot = *index.entry(key).or_insert_with(|| {
                        keys.push(key);
                        slots.push(Slot { acc: None, layout, col });
                        slots.len() - 1
                    });
                    map.push(slot);
                }
                layout_models.clear();
                for key in layout.keys.iter() {
                    let i = match spans.iter().position(|(m, _)| *m == key.model) {
                        Some(i) => i,
                        None => {
                            spans.push((key.model.clone(), Span { first_ms: t_ms, last_ms: t_ms, scrapes: 0 }));
                            spans.len() - 1
                        }
                    };
                    if !layout_models.contains(&i) {
                        layout_models.push(i);
                    }
                }
                current = Some(layout);
            }
            for &i in &layout_models {
                let span = &mut spans[i].1;
                span.last_ms = t_ms;
                span.scrapes += 1;
            }
            let mut point_gauges: Vec<(&Arc<str>, GaugeKind, KahanSum)> = Vec::new();
            for (col, &v) in values.iter().enumerate() {
                let key = &layout.keys[col];
                if let Quantity::Gauge(kind) = key.quantity {
                    match point_gauges.iter_mut().find(|e| Arc::ptr_eq(e.0, &key.model) && e.1 == kind) {
                        Some(e) => e.2.add(v),
                        None => point_gauges.push((&key.model, kind, [v].into_iter().collect())),
                    }
                    continue;
                }
                let s = &mut slots[map[col]];
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
            for (model, kind, total) in point_gauges {
                // `avg` for KV usage, `sum` for the rest, as PromQL computes them.
                let v = if kind == GaugeKind::KvCacheUsage { total.mean() } else { total.sum() };
                gauges.entry((model.clone(), kind)).or_default().push(v.unwrap_or(f64::NAN));
            }
        });
        let series = keys.into_iter().zip(slots).filter_map(|(k, s)| s.acc.map(|a| (k.clone(), a))).collect();
        RangeView { series, gauges, spans }
    }

    /// The span of `model`'s data in the range; `None` when no scrape in it carried the model.
    pub fn span(&self, model: &str) -> Option<Span> {
        self.spans.iter().find(|(m, _)| &**m == model).map(|(_, s)| *s)
    }

    /// Every model with any series or KV sample in the range.
    pub fn models(&self) -> impl Iterator<Item = &Arc<str>> {
        self.series.iter().map(|(k, _)| &k.model).chain(self.gauges.keys().map(|(m, _)| m))
    }

    /// One gauge of one model at each point of the range, oldest first.
    pub fn gauge(&self, model: &str, kind: GaugeKind) -> Option<&[f64]> {
        self.gauges.iter().find(|((m, k), _)| &**m == model && *k == kind).map(|(_, v)| v.as_slice())
    }
}
