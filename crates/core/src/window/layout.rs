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
        let mut keys = Vec::new();
        let mut created = Vec::new();
        let mut values = Vec::new();
        // The previous layout's model names, so an unchanged layout compares equal and is
        // shared. A map, not a search per model: that was quadratic in the model count.
        let mut known: HashMap<&str, &Arc<str>> = HashMap::new();
        for k in previous.map(|l| &l.keys[..]).unwrap_or_default() {
            known.entry(&*k.model).or_insert(&k.model);
        }
        for (name, m) in &snap.models {
            // One allocation per model name per layout; reused below when unchanged.
            let model: Arc<str> = match known.get(name.as_str()) {
                Some(&m) => m.clone(),
                None => Arc::from(name.as_str()),
            };
            for &kind in STORED_HISTOGRAMS {
                for shard in m.histograms.get(&kind).into_iter().flatten() {
                    for b in &shard.value.buckets {
                        keys.push(SeriesKey {
                            model: model.clone(),
                            quantity: Quantity::bucket(kind, b.le),
                            shard: shard.key.clone(),
                        });
                        created.push(shard.created);
                        values.push(b.count);
                    }
                }
            }
            for (&kind, shards) in &m.histograms {
                for shard in shards {
                    for (quantity, v) in
                        [(Quantity::Sum(kind), shard.value.sum), (Quantity::Count(kind), shard.value.count)]
                    {
                        keys.push(SeriesKey { model: model.clone(), quantity, shard: shard.key.clone() });
                        created.push(shard.created);
                        values.push(v);
                    }
                }
            }
            for (&pos, shards) in &m.spec_accepted_per_position {
                for shard in shards {
                    keys.push(SeriesKey {
                        model: model.clone(),
                        quantity: Quantity::SpecAccepted(pos),
                        shard: shard.key.clone(),
                    });
                    created.push(shard.created);
                    values.push(shard.value);
                }
            }
            for &kind in STORED_COUNTERS {
                for shard in m.counters.get(&kind).into_iter().flatten() {
                    keys.push(SeriesKey {
                        model: model.clone(),
                        quantity: Quantity::Counter(kind, shard.value.reason),
                        shard: shard.key.clone(),
                    });
                    created.push(shard.created);
                    values.push(shard.value.value);
                }
            }
            for &kind in STORED_GAUGES {
                for shard in m.gauges.get(&kind).into_iter().flatten() {
                    keys.push(SeriesKey {
                        model: model.clone(),
                        quantity: Quantity::Gauge(kind),
                        shard: shard.key.clone(),
                    });
                    created.push(None);
                    values.push(shard.value);
                }
            }
        }
        let fresh = Layout { keys: keys.into(), created: created.into(), process_start: snap.process_start };
        let layout = match previous {
            Some(p) if **p == fresh => p.clone(),
            _ => Arc::new(fresh),
        };
        (layout, values.into())
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
