//! Which series a stored scrape holds, in which column, and the restart markers they
//! carried. Shared by consecutive scrapes of a target whose series did not change.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::canonical::{CounterKind, FinishReason, GaugeKind, HistogramKind, ModelSnapshot, ShardKey, Snapshot};

/// Histograms with exported quantiles (docs/metrics.md#latency-promql-exact).
pub const LATENCY_HISTOGRAMS: &[HistogramKind] =
    &[HistogramKind::Ttft, HistogramKind::Tpot, HistogramKind::Itl, HistogramKind::E2e];
/// Histograms whose buckets are stored: the latency quantiles, and the prompt- and
/// generation-length mixes.
pub const STORED_HISTOGRAMS: &[HistogramKind] = &[
    HistogramKind::Ttft,
    HistogramKind::Tpot,
    HistogramKind::Itl,
    HistogramKind::E2e,
    HistogramKind::RequestPromptTokens,
    HistogramKind::RequestGenerationTokens,
];
/// Counters whose rates and ratios are exported: all of them.
pub const STORED_COUNTERS: &[CounterKind] = CounterKind::ALL;
/// Gauges whose window statistics are exported: all of them.
pub const STORED_GAUGES: &[GaugeKind] = GaugeKind::ALL;

/// What one column measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Quantity {
    /// A cumulative bucket; the bound is kept as `f64::to_bits` so the key hashes.
    Bucket(HistogramKind, u64),
    /// A histogram's `_sum` and `_count` (every kind: the means of docs/metrics.md need them).
    Sum(HistogramKind),
    Count(HistogramKind),
    Counter(CounterKind, Option<FinishReason>),
    /// Spec-decode tokens accepted at one draft position.
    SpecAccepted(u32),
    Gauge(GaugeKind),
}

impl Quantity {
    pub fn bucket(kind: HistogramKind, le: f64) -> Quantity {
        // "-0" and "0" are the same bound.
        Quantity::Bucket(kind, if le == 0.0 { 0.0f64.to_bits() } else { le.to_bits() })
    }

    /// The `le` of a bucket column.
    pub fn le(self) -> Option<f64> {
        match self {
            Quantity::Bucket(_, bits) => Some(f64::from_bits(bits)),
            _ => None,
        }
    }
}

/// One source series: PromQL computes rates per series before any sum.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SeriesKey {
    pub model: Arc<str>,
    pub quantity: Quantity,
    pub shard: ShardKey,
}

/// The columns of a stored scrape.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub keys: Box<[SeriesKey]>,
    /// The series' `_created` timestamp, when the engine exposes one.
    pub created: Box<[Option<f64>]>,
    pub process_start: Option<f64>,
}

/// How many series [`Layout::extract`] keeps of one model: what a stored scrape costs,
/// and what `scrape.max_series` limits, counted without building the layout.
pub fn stored_series(m: &ModelSnapshot) -> usize {
    let buckets: usize = STORED_HISTOGRAMS
        .iter()
        .flat_map(|k| m.histograms.get(k).into_iter().flatten())
        .map(|shard| shard.value.buckets.len())
        .sum();
    let sum_count: usize = m.histograms.values().map(|shards| 2 * shards.len()).sum();
    let spec: usize = m.spec_accepted_per_position.values().map(Vec::len).sum();
    let counters: usize = STORED_COUNTERS.iter().filter_map(|k| m.counters.get(k)).map(Vec::len).sum();
    let gauges: usize = STORED_GAUGES.iter().filter_map(|k| m.gauges.get(k)).map(Vec::len).sum();
    buckets + sum_count + spec + counters + gauges
}

impl Layout {
    /// Splits a snapshot into a layout (reusing `previous` when nothing changed) and its
    /// value column.
    pub(super) fn extract(snap: &Snapshot, previous: Option<&Arc<Layout>>) -> (Arc<Layout>, Box<[f64]>) {
        // Most scrapes repeat the previous one's series: compare in place and allocate
        // nothing but the values (a fresh layout is one shard string per bucket).
        if let Some(p) = previous
            && let Some(values) = p.values_if_same(snap)
        {
            return (p.clone(), values);
        }
        let mut keys = Vec::new();
        let mut created = Vec::new();
        let mut values = Vec::new();
        // The previous layout's model names, so an unchanged layout compares equal and is
        // shared. A map, not a search per model: that was quadratic in the model count.
        let mut known: HashMap<&str, &Arc<str>> = HashMap::new();
        for k in previous.map(|l| &l.keys[..]).unwrap_or_default() {
            known.entry(&*k.model).or_insert(&k.model);
        }
        // One allocation per model name per layout; reused below when unchanged.
        let models: Vec<Arc<str>> = snap
            .models
            .keys()
            .map(|name| match known.get(name.as_str()) {
                Some(&m) => m.clone(),
                None => Arc::from(name.as_str()),
            })
            .collect();
        for_each_series(snap, |m, _, quantity, shard, c, v| {
            keys.push(SeriesKey { model: models[m].clone(), quantity, shard: shard.clone() });
            created.push(c);
            values.push(v);
        });
        let fresh = Layout { keys: keys.into(), created: created.into(), process_start: snap.process_start };
        let layout = match previous {
            Some(p) if **p == fresh => p.clone(),
            _ => Arc::new(fresh),
        };
        (layout, values.into())
    }

    /// The snapshot's values when its series, in order, and their restart markers are
    /// exactly this layout's (what `==` on a freshly extracted layout would say).
    fn values_if_same(&self, snap: &Snapshot) -> Option<Box<[f64]>> {
        if self.process_start != snap.process_start {
            return None;
        }
        let mut values = Vec::with_capacity(self.keys.len());
        let mut same = true;
        for_each_series(snap, |_, model, quantity, shard, c, v| {
            let i = values.len();
            same = same
                && self.keys.get(i).is_some_and(|k| k.quantity == quantity && k.shard == *shard && *k.model == *model)
                && self.created[i] == c;
            values.push(v);
        });
        (same && values.len() == self.keys.len()).then(|| values.into())
    }

    /// Whether a series that was in column `i` of `prev` and is in column `j` here
    /// restarted in between for a reason other than its value: a changed `_created` or
    /// process start time.
    pub fn restarted_since(&self, j: usize, prev: &Layout, i: usize) -> bool {
        // A NaN marker says nothing; only two real, different timestamps mean a restart.
        let changed = |a: Option<f64>, b: Option<f64>| matches!((a, b), (Some(a), Some(b)) if a != b && !a.is_nan() && !b.is_nan());
        changed(prev.process_start, self.process_start) || changed(prev.created[i], self.created[j])
    }

    /// Heap bytes owned by this layout: keys, shard strings, model names (shared `Arc<str>`s,
    /// counted once with their 16-byte counts), created markers.
    pub fn heap_bytes(&self) -> usize {
        let keys: usize =
            self.keys.iter().map(|k| std::mem::size_of::<SeriesKey>() + k.shard.capacity()).sum::<usize>();
        let models: usize = {
            let mut seen: HashSet<*const u8> = HashSet::new();
            self.keys.iter().filter(|k| seen.insert(k.model.as_ptr())).map(|k| k.model.len() + 16).sum()
        };
        keys + models + self.created.len() * std::mem::size_of::<Option<f64>>()
    }
}

/// Calls `f(model index, model, quantity, shard, created, value)` for every stored series
/// of a snapshot, in column order.
fn for_each_series(snap: &Snapshot, mut f: impl FnMut(usize, &str, Quantity, &ShardKey, Option<f64>, f64)) {
    for (m, (name, model)) in snap.models.iter().enumerate() {
        let mut f = |q, shard, c, v| f(m, name, q, shard, c, v);
        for &kind in STORED_HISTOGRAMS {
            for shard in model.histograms.get(&kind).into_iter().flatten() {
                for b in &shard.value.buckets {
                    f(Quantity::bucket(kind, b.le), &shard.key, shard.created, b.count);
                }
            }
        }
        for (&kind, shards) in &model.histograms {
            for shard in shards {
                f(Quantity::Sum(kind), &shard.key, shard.created, shard.value.sum);
                f(Quantity::Count(kind), &shard.key, shard.created, shard.value.count);
            }
        }
        for (&pos, shards) in &model.spec_accepted_per_position {
            for shard in shards {
                f(Quantity::SpecAccepted(pos), &shard.key, shard.created, shard.value);
            }
        }
        for &kind in STORED_COUNTERS {
            for shard in model.counters.get(&kind).into_iter().flatten() {
                f(Quantity::Counter(kind, shard.value.reason), &shard.key, shard.created, shard.value.value);
            }
        }
        for &kind in STORED_GAUGES {
            for shard in model.gauges.get(&kind).into_iter().flatten() {
                f(Quantity::Gauge(kind), &shard.key, None, shard.value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::tests::vllm_like;

    /// Extracting against a previous layout gives what extracting afresh gives, and shares
    /// the previous layout exactly when that one is equal.
    #[test]
    fn extract_against_a_previous_layout_equals_a_fresh_extract() {
        let base = vllm_like(2, 3.0);
        let mut variants = vec![base.clone(), vllm_like(2, 5.0), vllm_like(3, 3.0)];
        let mut v = base.clone();
        v.process_start = Some(1.8e9);
        variants.push(v);
        let mut v = base.clone();
        v.models.values_mut().for_each(|m| m.histograms.get_mut(&HistogramKind::Ttft).unwrap()[1].created = None);
        variants.push(v);
        let mut v = base.clone();
        v.models.values_mut().for_each(|m| m.counters.get_mut(&CounterKind::PromptTokens).unwrap()[0].key.push('x'));
        variants.push(v);
        let mut v = base.clone();
        v.models.values_mut().for_each(|m| m.gauges.get_mut(&GaugeKind::Running).unwrap().clear());
        variants.push(v);
        let mut v = base.clone();
        let m = v.models.values().next().unwrap().clone();
        v.models.insert("another".into(), m);
        variants.push(v);
        let (prev, _) = Layout::extract(&base, None);
        for (i, snap) in variants.iter().enumerate() {
            let (fresh, fresh_values) = Layout::extract(snap, None);
            let (reused, values) = Layout::extract(snap, Some(&prev));
            assert_eq!(*reused, *fresh, "variant {i}");
            assert_eq!(values, fresh_values, "variant {i}");
            assert_eq!(Arc::ptr_eq(&reused, &prev), *fresh == *prev, "variant {i}");
        }
        assert!(Arc::ptr_eq(&Layout::extract(&variants[1], Some(&prev)).0, &prev), "same series, new values");
    }
}
