//! Applies one engine's mapping table to a parsed scrape.
//!
//! One pass over the samples files each recognised one under (mapping, model, shard);
//! then, per model, each canonical quantity takes the first mapping in table order that
//! has data, so a renamed family exposed twice is read once.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::table::{EngineTable, Slot, Target};
use crate::canonical::{
    Bucket, CounterValue, Engine, FinishReason, Histogram, ModelSnapshot, ScrapeWarning, Shard, ShardKey, Snapshot,
    WarningReason,
};
use crate::parse::{Exposition, Label, Sample, parse_f64, render_series};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Value,
    Bucket,
    Sum,
    Count,
    Created,
}

#[derive(Debug, Default)]
struct Acc {
    buckets: Vec<Bucket>,
    sum: Option<f64>,
    count: Option<f64>,
    value: Option<f64>,
    reason: Option<FinishReason>,
    position: Option<u32>,
}

type Key = (usize, String, ShardKey);

/// The snapshot, or, when the samples name more than `max_models` models, how many they
/// name (counted without filing any sample past the limit).
pub(super) fn build(
    exp: &Exposition<'_>,
    engine: Engine,
    table: &EngineTable,
    default_model: &str,
    max_models: usize,
) -> Result<Snapshot, usize> {
    let mut index: HashMap<&'static str, Vec<usize>> = HashMap::new();
    for (i, m) in table.mappings.iter().enumerate() {
        index.entry(m.source).or_default().push(i);
    }
    let mut warnings = Vec::new();
    let mut acc: BTreeMap<Key, Acc> = BTreeMap::new();
    let mut created: HashMap<(&'static str, String, ShardKey), f64> = HashMap::new();
    let mut process_start: Option<f64> = None;
    let mut models_seen: HashSet<String> = HashSet::new();

    for s in &exp.samples {
        if s.name == "process_start_time_seconds" {
            process_start = Some(process_start.map_or(s.value, |p: f64| p.max(s.value)));
            continue;
        }
        let Some((source, part)) = classify(s.name, &index) else { continue };
        let labels = exp.labels_of(s);
        let (model, model_label) = model_of(labels, table, default_model);
        if model != UNLABELLED && !models_seen.contains(&model) {
            models_seen.insert(model.clone());
        }
        if models_seen.len() > max_models {
            continue; // only counted from here on: the scrape is refused
        }
        if part == Part::Created {
            let shard = shard_key(labels, model_label, &["le", "position"]);
            created.insert((source, model, shard), s.value);
            continue;
        }
        for &i in &index[source] {
            file_sample(exp, s, labels, table, i, part, &model, model_label, &mut acc, &mut warnings);
        }
    }

    if models_seen.len() > max_models {
        return Err(models_seen.len());
    }
    let acc = attach_unlabelled(acc, default_model);
    let created = attach_unlabelled(created, default_model);
    let models = resolve(table, acc, &created, &mut warnings);
    if !exp.duplicates.is_empty() {
        let d = &exp.duplicates[0];
        warnings.push(ScrapeWarning::new(
            WarningReason::DuplicateSeries,
            format!(
                "{} duplicate series ignored (first: {} on line {}, already on line {})",
                exp.duplicates.len(),
                d.series,
                d.line,
                d.first_line
            ),
        ));
    }
    Ok(Snapshot { engine, models, process_start, families: exp.families.len(), samples: exp.samples.len(), warnings })
}

/// Finds the table source a sample name belongs to, and which part of it it is.
fn classify(name: &str, index: &HashMap<&'static str, Vec<usize>>) -> Option<(&'static str, Part)> {
    if let Some((&k, _)) = index.get_key_value(name) {
        return Some((k, Part::Value));
    }
    for (suffix, part) in [("_bucket", Part::Bucket), ("_sum", Part::Sum), ("_count", Part::Count)] {
        if let Some(base) = name.strip_suffix(suffix)
            && let Some((&k, _)) = index.get_key_value(base)
        {
            return Some((k, part));
        }
    }
    let base = name.strip_suffix("_created")?;
    if let Some((&k, _)) = index.get_key_value(base) {
        return Some((k, Part::Created));
    }
    let counter = format!("{base}_total");
    index.get_key_value(counter.as_str()).map(|(&k, _)| (k, Part::Created))
}

fn model_of(labels: &[Label<'_>], table: &EngineTable, default_model: &str) -> (String, Option<&'static str>) {
    for &name in table.model_labels {
        if let Some(l) = labels.iter().find(|l| l.name == name) {
            return (l.value.to_string(), Some(name));
        }
    }
    if table.model_labels.is_empty() { (default_model.to_string(), None) } else { (UNLABELLED.to_string(), None) }
}

/// Model key for series of a model-labelled engine that lack the label (vLLM's
/// `cache_config_info`, `process_*`). Resolved by [`attach_unlabelled`].
const UNLABELLED: &str = "\0unlabelled";

/// Series without a model label belong to the only model when there is exactly one
/// (a vLLM server serves one model); otherwise to the default model.
fn attach_unlabelled<
    M: Ord + Eq + std::hash::Hash,
    V,
    T: FromIterator<((M, String, ShardKey), V)> + IntoIterator<Item = ((M, String, ShardKey), V)>,
>(
    map: T,
    default_model: &str,
) -> T {
    let items: Vec<_> = map.into_iter().collect();
    let labelled: BTreeSet<&String> = items.iter().map(|((_, m, _), _)| m).filter(|m| *m != UNLABELLED).collect();
    let owner = match labelled.iter().next() {
        Some(only) if labelled.len() == 1 => (*only).clone(),
        _ => default_model.to_string(),
    };
    items
        .into_iter()
        .map(|((a, m, k), v)| if m == UNLABELLED { ((a, owner.clone(), k), v) } else { ((a, m, k), v) })
        .collect()
}

/// The labels that tell one source series from another within a model, rendered.
fn shard_key(labels: &[Label<'_>], model_label: Option<&str>, skip: &[&str]) -> ShardKey {
    let kept: Vec<Label<'_>> =
        labels.iter().filter(|l| Some(l.name) != model_label && !skip.contains(&l.name)).cloned().collect();
    let rendered = render_series("", &kept);
    rendered.strip_prefix('{').and_then(|r| r.strip_suffix('}')).unwrap_or("").to_string()
}

#[allow(clippy::too_many_arguments)]
fn file_sample(
    exp: &Exposition<'_>,
    s: &Sample<'_>,
    labels: &[Label<'_>],
    table: &EngineTable,
    mapping: usize,
    part: Part,
    model: &str,
    model_label: Option<&'static str>,
    acc: &mut BTreeMap<Key, Acc>,
    warnings: &mut Vec<ScrapeWarning>,
) {
    let target = table.mappings[mapping].target;
    let label = |name: &str| labels.iter().find(|l| l.name == name).map(|l| l.value.as_ref());
    let mut entry_value = None;
    match (target, part) {
        (Target::Histogram(_), Part::Bucket | Part::Sum | Part::Count) => {}
        (Target::HistogramSumAsCounter(_), Part::Sum) => entry_value = Some(s.value),
        (Target::HistogramSumAsCounter(_), _) => return,
        (Target::Gauge(_), Part::Value) => {
            if let Some(rank) = table.gauge_rank_label
                && label(rank).is_some_and(|r| r != "0")
            {
                return;
            }
            entry_value = Some(s.value);
        }
        (Target::KvCapacityInfo, Part::Value) => {
            let blocks = label("num_gpu_blocks").and_then(parse_f64);
            let size = label("block_size").and_then(parse_f64);
            match (blocks, size) {
                (Some(b), Some(z)) if b.is_finite() && z.is_finite() => entry_value = Some(b * z),
                _ => return,
            }
            // The info gauge's other labels are configuration, not series identity.
            let shard = label("engine").map(|e| format!("engine=\"{e}\"")).unwrap_or_default();
            let e = acc.entry((mapping, model.to_string(), shard)).or_default();
            e.value = entry_value;
            return;
        }
        (
            Target::Counter(_) | Target::Finished(_) | Target::FinishedByLabel(_) | Target::SpecAcceptedPerPosition,
            Part::Value,
        ) => entry_value = Some(s.value),
        _ => return,
    }
    let shard = shard_key(labels, model_label, &["le", "position"]);
    let e = acc.entry((mapping, model.to_string(), shard)).or_default();
    match target {
        Target::Histogram(_) => match part {
            Part::Bucket => match label("le").and_then(parse_f64) {
                Some(le) if !le.is_nan() => e.buckets.push(Bucket { le, count: s.value }),
                _ => warnings.push(ScrapeWarning::new(
                    WarningReason::BucketWithoutLe,
                    format!("line {}: bucket without a numeric le label ignored: {}", s.line, exp.series_string(s)),
                )),
            },
            Part::Sum => e.sum = Some(s.value),
            Part::Count => e.count = Some(s.value),
            _ => {}
        },
        Target::Finished(reason) => {
            e.value = entry_value;
            e.reason = Some(reason);
        }
        Target::FinishedByLabel(name) => {
            e.value = entry_value;
            e.reason = Some(label(name).map_or(FinishReason::Other, FinishReason::from_label));
        }
        Target::SpecAcceptedPerPosition => {
            e.value = entry_value;
            e.position = label("position").and_then(|p| p.parse().ok());
        }
        _ => e.value = entry_value,
    }
}

/// Per model, picks for each canonical quantity the first mapping (table order) with data.
fn resolve(
    table: &EngineTable,
    acc: BTreeMap<Key, Acc>,
    created: &HashMap<(&'static str, String, ShardKey), f64>,
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
            Target::Counter(kind) | Target::HistogramSumAsCounter(kind) => {
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
