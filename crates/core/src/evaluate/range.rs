//! One pass over a target's stored points inside (now − w, now]: per-series range
//! accumulators for rates, and per-model gauge statistics, grouped by model.
//!
//! [`RangeView::collect`] reads every point of the range: the from-scratch reference that
//! [`super::incremental`] must match bit for bit, and what one-off readers (the budget
//! ledger, replay) use.
//!
//! Grouping once here is what keeps a target's evaluation linear in its series: each
//! model's evaluation reads only its own [`ModelRange`], however many models the target
//! serves (a target with 20,000 models would make a per-model re-scan quadratic).
//!
//! Public so that other evaluators (SLO attainment, goodput) read the same ranges with
//! the same reset rules, e.g. [`RangeAcc::raw_increase`] for ratio math.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::promql::RangeAcc;
use crate::canonical::GaugeKind;
use crate::kahan::KahanSum;
use crate::window::{Layout, Quantity, SeriesKey, TargetWindows};

/// Everything one range of one target holds, by model.
#[derive(Debug, Default)]
pub struct RangeView {
    models: BTreeMap<Arc<str>, ModelRange>,
}

/// The series, gauges and span of one model in one range.
#[derive(Debug, Default)]
pub struct ModelRange {
    /// The model's series seen in the range, in first-seen order, with their accumulators.
    /// Sums over shards add in this order, as the target-wide scan did before grouping.
    pub(crate) series: Vec<(Arc<SeriesKey>, RangeAcc)>,
    /// Statistics of each gauge over the points in the range, each point's value combined
    /// over the shards present at that scrape: KV-cache usage is their mean (each
    /// data-parallel rank owns its own pool), the others (requests, capacity) their sum.
    pub(crate) gauges: BTreeMap<GaugeKind, GaugeRange>,
    /// The scrapes in the range that carried any of the model's series.
    pub(crate) span: Option<Span>,
}

impl ModelRange {
    /// The model's series with their accumulators.
    pub fn series(&self) -> &[(Arc<SeriesKey>, RangeAcc)] {
        visits::add(self.series.len());
        &self.series
    }

    /// One gauge over the points of the range.
    pub fn gauge(&self, kind: GaugeKind) -> Option<&GaugeRange> {
        self.gauges.get(&kind)
    }

    /// The span of the model's data in the range; `None` when no scrape in it carried it.
    pub fn span(&self) -> Option<Span> {
        self.span
    }
}

/// One gauge over a range, each point's value combined over the shards at that scrape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaugeRange {
    /// Over every sample, as `GaugeStats::of` reads them (the max skips NaN).
    pub first: f64,
    pub last: f64,
    pub mean: f64,
    pub max: f64,
    /// Over the finite samples, as `kv::report` reads them; only for KV-cache usage.
    pub finite: Option<FiniteRange>,
}

/// A gauge's finite samples over a range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FiniteRange {
    pub samples: usize,
    pub last: f64,
    pub mean: f64,
    pub max: f64,
    /// Samples in each band, by the index the caller's classifier gives (`KvBand::ALL` order).
    pub bands: [usize; 5],
}

impl GaugeRange {
    /// From the samples, oldest first, summed naively as the per-point scan always has
    /// (`band` classifies a finite sample; `None` keeps no finite statistics).
    fn of(samples: &[f64], band: Option<&dyn Fn(f64) -> usize>) -> Option<GaugeRange> {
        let (&first, &last) = (samples.first()?, samples.last()?);
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let finite = band.and_then(|band| {
            let finite: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
            let last = *finite.last()?;
            let mut bands = [0; 5];
            for &v in &finite {
                bands[band(v).min(4)] += 1;
            }
            Some(FiniteRange {
                samples: finite.len(),
                last,
                mean: finite.iter().sum::<f64>() / finite.len() as f64,
                max: finite.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                bands,
            })
        });
        Some(GaugeRange { first, last, mean, max, finite })
    }
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
        Self::collect_with(store, now_ms, range_ms, &|_| 0)
    }

    /// [`RangeView::collect`] with the classifier of KV-usage samples into bands (an index
    /// in `KvBand::ALL`), for the range's time-in-band counts.
    pub fn collect_with(
        store: &TargetWindows,
        now_ms: i64,
        range_ms: i64,
        kv_band: &dyn Fn(f64) -> usize,
    ) -> RangeView {
        let mut samples: BTreeMap<(Arc<str>, GaugeKind), Vec<f64>> = BTreeMap::new();
        let mut index: HashMap<&SeriesKey, usize> = HashMap::new();
        let mut keys: Vec<&SeriesKey> = Vec::new();
        let mut slots: Vec<Slot<'_>> = Vec::new();
        let mut models: BTreeMap<Arc<str>, ModelRange> = BTreeMap::new();
        // Per layout: each column's feed, and the gauge groups with their running sums.
        let mut feeds: Vec<Feed> = Vec::new();
        let mut groups: Vec<(&Arc<str>, GaugeKind)> = Vec::new();
        let mut sums: Vec<KahanSum> = Vec::new();
        let mut current: Option<&Arc<Layout>> = None;
        // Per model, in first-seen order, the scrapes that carried it; looked up by name so
        // that a layout change costs its columns, not columns × models.
        let mut spans: Vec<(&Arc<str>, Span)> = Vec::new();
        let mut span_of: HashMap<&str, usize> = HashMap::new();
        // Index into `spans` of each model the current layout carries.
        let mut layout_models: Vec<usize> = Vec::new();
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
                layout_models.clear();
                let mut carried: HashSet<usize> = HashSet::new();
                for key in layout.keys.iter() {
                    let i = *span_of.entry(&*key.model).or_insert_with(|| {
                        spans.push((&key.model, Span { first_ms: t_ms, last_ms: t_ms, scrapes: 0 }));
                        spans.len() - 1
                    });
                    if carried.insert(i) {
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
            sums.clear();
            sums.resize(groups.len(), KahanSum::default());
            for (col, &v) in values.iter().enumerate() {
                let slot = match feeds[col] {
                    Feed::Gauge(g) => {
                        // Shards add in column order, compensated as PromQL's `sum` does.
                        sums[g].add(v);
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
            for (&(model, kind), total) in groups.iter().zip(&sums) {
                // `avg` for KV usage, `sum` for the rest, as PromQL computes them.
                let v = if kind == GaugeKind::KvCacheUsage { total.mean() } else { total.sum() };
                gauge_samples(&mut samples, model, kind).push(v.unwrap_or(f64::NAN));
            }
        });
        for ((model, kind), samples) in samples {
            let band = (kind == GaugeKind::KvCacheUsage).then_some(kv_band);
            if let Some(g) = GaugeRange::of(&samples, band) {
                model_entry(&mut models, &model).gauges.insert(kind, g);
            }
        }
        for (key, slot) in keys.into_iter().zip(slots) {
            if let Some(acc) = slot.acc {
                model_entry(&mut models, &key.model).series.push((Arc::new(key.clone()), acc));
            }
        }
        for (model, span) in spans {
            model_entry(&mut models, model).span = Some(span);
        }
        RangeView { models }
    }

    /// A view of models grouped elsewhere (the incremental windows).
    pub(crate) fn from_models(models: BTreeMap<Arc<str>, ModelRange>) -> RangeView {
        RangeView { models }
    }

    /// The span of `model`'s data in the range; `None` when no scrape in it carried the model.
    pub fn span(&self, model: &str) -> Option<Span> {
        self.models.get(model).and_then(ModelRange::span)
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

fn gauge_samples<'m>(
    samples: &'m mut BTreeMap<(Arc<str>, GaugeKind), Vec<f64>>,
    model: &Arc<str>,
    kind: GaugeKind,
) -> &'m mut Vec<f64> {
    samples.entry((model.clone(), kind)).or_default()
}

pub(crate) fn model_entry<'m>(models: &'m mut BTreeMap<Arc<str>, ModelRange>, model: &Arc<str>) -> &'m mut ModelRange {
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
