//! After the pass over the samples: series without a model label find their model, and
//! per model each canonical quantity takes the first mapping in table order with data.

use std::collections::{BTreeMap, BTreeSet};

use super::table::{EngineTable, Slot, Target};
use crate::canonical::{
    Bucket, CounterValue, FinishReason, Histogram, ModelSnapshot, ScrapeWarning, Shard, ShardKey, WarningReason,
};

/// What the pass over the samples gathered for one (mapping, model, shard).
#[derive(Debug, Default)]
pub(super) struct Acc {
    pub buckets: Vec<Bucket>,
    pub sum: Option<f64>,
    pub count: Option<f64>,
    pub value: Option<f64>,
    pub reason: Option<FinishReason>,
    pub position: Option<u32>,
}

/// (mapping, model, shard).
pub(super) type Key = (usize, String, ShardKey);

/// `_created` timestamps by (table source, model, shard).
pub(super) type Created = BTreeMap<(&'static str, String, ShardKey), f64>;

/// Model key for series of a model-labelled engine that lack the label (vLLM's
/// `cache_config_info`, `process_*`). Resolved by [`attach_unlabelled`].
pub(super) const UNLABELLED: &str = "\0unlabelled";

/// Series without a model label belong to the only model when there is exactly one
/// (a vLLM server serves one model); otherwise to the default model. Where that gives a
/// series that the model also has with its label, the one whose key sorted last before
/// wins (the labelled one unless the model's name sorts before [`UNLABELLED`]).
pub(super) fn attach_unlabelled<M: Ord + Clone, V>(
    mut map: BTreeMap<(M, String, ShardKey), V>,
    default_model: &str,
) -> BTreeMap<(M, String, ShardKey), V> {
    let unlabelled: Vec<(M, String, ShardKey)> = map.keys().filter(|(_, m, _)| m == UNLABELLED).cloned().collect();
    if unlabelled.is_empty() {
        return map;
    }
    let mut labelled = map.keys().map(|(_, m, _)| m).filter(|m| *m != UNLABELLED);
    let owner = match labelled.next() {
        Some(only) if labelled.all(|m| m == only) => only.clone(),
        _ => default_model.to_string(),
    };
    let unlabelled_wins = owner.as_str() < UNLABELLED;
    for key in unlabelled {
        let Some(v) = map.remove(&key) else { continue };
        let key = (key.0, owner.clone(), key.2);
        if unlabelled_wins || !map.contains_key(&key) {
            map.insert(key, v);
        }
    }
    map
}

/// Per model, picks for each canonical quantity the first mapping (table order) with data.
pub(super) fn resolve(
    table: &EngineTable,
    acc: BTreeMap<Key, Acc>,
    created: &Created,
    warnings: &mut Vec<ScrapeWarning>,
) -> BTreeMap<String, ModelSnapshot> {
    let mut present: BTreeSet<(String, usize)> = BTreeSet::new();
    for (i, model, _) in acc.keys() {
        present.insert((model.clone(), *i));
    }
    let mut chosen: BTreeMap<(String, Slot), usize> = BTreeMap::new();
    for (model, i) in &present {
        let slot = table.mappings[*i].target.slot();
        chosen.entry((model.clone(), slot)).and_modify(|c| *c = (*c).min(*i)).or_insert(*i);
    }
    let mut models: BTreeMap<String, ModelSnapshot> = BTreeMap::new();
    for ((i, model, shard), a) in acc {
        let target = table.mappings[i].target;
        if chosen.get(&(model.clone(), target.slot())) != Some(&i) {
            continue;
        }
        let created = created.get(&(table.mappings[i].source, model.clone(), shard.clone())).copied();
        let m = models.entry(model.clone()).or_default();
        match target {
            Target::Histogram(kind) => {
                let Some(h) = finish_histogram(a, &model, table.mappings[i].source, warnings) else { continue };
                m.histograms.entry(kind).or_default().push(Shard { key: shard, created, value: h });
            }
            Target::Counter(kind) | Target::HistogramSumAsCounter(kind) | Target::CounterPart(kind, _) => {
                if let Some(v) = a.value {
                    let cv = CounterValue { value: v, reason: None };
                    m.counters.entry(kind).or_default().push(Shard { key: shard, created, value: cv });
                }
            }
            Target::Finished(_) | Target::FinishedByLabel(_) => {
                if let Some(v) = a.value {
                    let cv = CounterValue { value: v, reason: a.reason };
                    let kind = crate::canonical::CounterKind::RequestsFinished;
                    m.counters.entry(kind).or_default().push(Shard { key: shard, created, value: cv });
                }
            }
            Target::SpecAcceptedPerPosition => {
                if let (Some(v), Some(p)) = (a.value, a.position) {
                    m.spec_accepted_per_position.entry(p).or_default().push(Shard { key: shard, created, value: v });
                }
            }
            Target::Gauge(kind) => {
                if let Some(v) = a.value {
                    m.gauges.entry(kind).or_default().push(Shard { key: shard, created: None, value: v });
                }
            }
            Target::KvCapacityInfo => {
                if let Some(v) = a.value {
                    let kind = crate::canonical::GaugeKind::KvCapacityTokens;
                    m.gauges.entry(kind).or_default().push(Shard { key: shard, created: None, value: v });
                }
            }
        }
    }
    models.retain(|_, m| {
        !(m.histograms.is_empty()
            && m.counters.is_empty()
            && m.gauges.is_empty()
            && m.spec_accepted_per_position.is_empty())
    });
    models
}

/// The histogram, or `None` (with a warning) when it cannot be read honestly: without
/// buckets, without `+Inf` (PromQL's quantile is NaN, and the request count unknown), or
/// with a NaN count. Dropping it makes the SLO clauses that read it `not_evaluable`
/// rather than `no_traffic`.
fn finish_histogram(mut a: Acc, model: &str, source: &str, warnings: &mut Vec<ScrapeWarning>) -> Option<Histogram> {
    let ignored = "ignored, so its quantiles and SLO clauses are not evaluated";
    if a.buckets.is_empty() {
        if a.count.is_some() {
            warnings.push(ScrapeWarning::new(
                WarningReason::HistogramWithoutBuckets,
                format!("{source} for model {model:?} has _count but no buckets; ignored"),
            ));
        }
        return None;
    }
    a.buckets.sort_by(|x, y| x.le.total_cmp(&y.le));
    if let Some(b) = a.buckets.iter().find(|b| b.count.is_nan()) {
        warnings.push(ScrapeWarning::new(
            WarningReason::NanBucket,
            format!("{source} for model {model:?} has a NaN count in bucket le=\"{}\"; {ignored}", b.le),
        ));
        return None;
    }
    let Some(inf) = a.buckets.last().filter(|b| b.le == f64::INFINITY).map(|b| b.count) else {
        warnings.push(ScrapeWarning::new(
            WarningReason::HistogramWithoutInf,
            format!("{source} for model {model:?} has no le=\"+Inf\" bucket; {ignored}"),
        ));
        return None;
    };
    Some(Histogram { count: a.count.unwrap_or(inf), sum: a.sum.unwrap_or(f64::NAN), buckets: a.buckets })
}
